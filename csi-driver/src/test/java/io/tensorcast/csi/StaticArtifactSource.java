package io.tensorcast.csi;

import io.fabric8.kubernetes.client.utils.Serialization;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.csi.artifacts.ArtifactSource;
import io.tensorcast.csi.artifacts.ChangeSignal;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * ModelArtifacts held in memory; {@link #put} and {@link #remove} wake waiters like an informer.
 */
public final class StaticArtifactSource implements ArtifactSource {
  private final Map<String, ModelArtifact> byKey = new ConcurrentHashMap<>();
  private final ChangeSignal signal = new ChangeSignal();

  public void put(ModelArtifact a) {
    byKey.put(
        a.getMetadata().getNamespace() + "/" + a.getMetadata().getName(), Serialization.clone(a));
    signal.changed();
  }

  private final Map<String, io.tensorcast.api.v1alpha1.TensorShardSet> sets =
      new ConcurrentHashMap<>();

  public void putShardSet(io.tensorcast.api.v1alpha1.TensorShardSet s) {
    sets.put(
        s.getMetadata().getNamespace() + "/" + s.getMetadata().getName(), Serialization.clone(s));
    signal.changed();
  }

  @Override
  public Optional<io.tensorcast.api.v1alpha1.TensorShardSet> getShardSet(
      String namespace, String name) {
    return Optional.ofNullable(sets.get(namespace + "/" + name));
  }

  public void remove(String namespace, String name) {
    byKey.remove(namespace + "/" + name);
    signal.changed();
  }

  @Override
  public Optional<ModelArtifact> get(String namespace, String name) {
    return Optional.ofNullable(byKey.get(namespace + "/" + name)).map(Serialization::clone);
  }

  @Override
  public boolean synced() {
    return true;
  }

  @Override
  public long version() {
    return signal.version();
  }

  @Override
  public void awaitChange(long seen, Duration max) throws InterruptedException {
    signal.await(seen, max);
  }

  @Override
  public void wake() {
    signal.wake();
  }
}
