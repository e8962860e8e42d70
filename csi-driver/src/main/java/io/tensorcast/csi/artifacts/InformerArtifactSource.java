package io.tensorcast.csi.artifacts;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.informers.ResourceEventHandler;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import java.time.Duration;
import java.util.Optional;

/**
 * ModelArtifacts of every namespace through one fabric8 informer (list + watch; RBAC {@code get,
 * list, watch} on {@code modelartifacts}). Any add, update or delete bumps the version.
 */
public final class InformerArtifactSource implements ArtifactSource, AutoCloseable {

  private final ChangeSignal signal = new ChangeSignal();
  private final SharedIndexInformer<ModelArtifact> informer;

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
  }

  @Override
  public Optional<ModelArtifact> get(String namespace, String name) {
    return Optional.ofNullable(informer.getStore().getByKey(namespace + "/" + name));
  }

  @Override
  public boolean synced() {
    return informer.hasSynced();
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
  }
}
