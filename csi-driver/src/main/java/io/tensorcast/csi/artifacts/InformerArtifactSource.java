package io.tensorcast.csi.artifacts;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.informers.ResourceEventHandler;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import java.time.Duration;
import java.util.Optional;

/**
 * ModelArtifacts and TensorShardSets of every namespace through two fabric8 informers (list +
 * watch; RBAC {@code get, list, watch} on {@code modelartifacts} and {@code tensorshardsets}). Any
 * add, update or delete bumps the version.
 */
public final class InformerArtifactSource implements ArtifactSource, AutoCloseable {

  private final ChangeSignal signal = new ChangeSignal();
  private final SharedIndexInformer<ModelArtifact> informer;
  private final SharedIndexInformer<io.tensorcast.api.v1alpha1.TensorShardSet> sets;

  /** Starts the informer; it lists in the background (see {@link #synced()}). */
  public InformerArtifactSource(KubernetesClient client) {
    this.informer =
        client
            .resources(ModelArtifact.class)
            .inAnyNamespace()
            .inform(
                new ResourceEventHandler<>() {
                  @Override
                  public void onAdd(ModelArtifact a) {
                    signal.changed();
                  }

                  @Override
                  public void onUpdate(ModelArtifact older, ModelArtifact newer) {
                    signal.changed();
                  }

                  @Override
                  public void onDelete(ModelArtifact a, boolean deletedFinalStateUnknown) {
                    signal.changed();
                  }
                },
                0);
    this.sets =
        client
            .resources(io.tensorcast.api.v1alpha1.TensorShardSet.class)
            .inAnyNamespace()
            .inform(
                new ResourceEventHandler<>() {
                  @Override
                  public void onAdd(io.tensorcast.api.v1alpha1.TensorShardSet a) {
                    signal.changed();
                  }

                  @Override
                  public void onUpdate(
                      io.tensorcast.api.v1alpha1.TensorShardSet older,
                      io.tensorcast.api.v1alpha1.TensorShardSet newer) {
                    signal.changed();
                  }

                  @Override
                  public void onDelete(
                      io.tensorcast.api.v1alpha1.TensorShardSet a, boolean unknown) {
                    signal.changed();
                  }
                },
                0);
  }

  @Override
  public Optional<io.tensorcast.api.v1alpha1.TensorShardSet> getShardSet(
      String namespace, String name) {
    return Optional.ofNullable(sets.getStore().getByKey(namespace + "/" + name));
  }

  @Override
  public Optional<ModelArtifact> get(String namespace, String name) {
    return Optional.ofNullable(informer.getStore().getByKey(namespace + "/" + name));
  }

  @Override
  public boolean synced() {
    return informer.hasSynced() && sets.hasSynced();
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

  @Override
  public void close() {
    informer.close();
    sets.close();
  }
}
