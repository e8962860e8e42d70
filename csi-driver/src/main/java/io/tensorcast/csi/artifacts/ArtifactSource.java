package io.tensorcast.csi.artifacts;

import io.tensorcast.api.v1alpha1.ModelArtifact;
import java.time.Duration;
import java.util.Optional;

/**
 * The ModelArtifacts the driver may read: their metadata and status, nothing else. Implementations
 * tell waiters when anything changed, so a mount waiting for a copy wakes up when the status does.
 */
public interface ArtifactSource {

  /** The artifact as last seen, if it exists. */
  Optional<ModelArtifact> get(String namespace, String name);

  /** The TensorShardSet as last seen, if it exists (sources without sets: always empty). */
  default Optional<io.tensorcast.api.v1alpha1.TensorShardSet> getShardSet(
      String namespace, String name) {
    return Optional.empty();
  }

  /** Whether the source has seen the full list at least once (the driver is ready to serve). */
  boolean synced();

  /** A counter that grows with every change seen; pass it to {@link #awaitChange}. */
  long version();

  /**
   * Waits until {@link #version()} differs from {@code seen}, {@link #wake()} is called, or {@code
   * max} has passed, whichever comes first.
   *
   * @throws InterruptedException when the waiting thread is interrupted
   */
  void awaitChange(long seen, Duration max) throws InterruptedException;

  /** Wakes every thread in {@link #awaitChange} (e.g. when a waiting call was cancelled). */
  void wake();
}
