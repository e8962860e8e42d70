package io.tensorcast.dataplane.load;

import io.tensorcast.api.wire.DataPlaneStatus;

/**
 * One load of a data-plane pod: a ModelArtifact's copy ({@link ArtifactLoader}) or a
 * TensorShardSet's rank files ({@code io.tensorcast.dataplane.shards.ShardSetLoader}). One instance
 * loads once; {@link #status()} may be called from any thread at any time.
 */
public interface Loader {

  /** A consistent snapshot of where the load is. */
  DataPlaneStatus status();

  /**
   * Runs the load to completion on the calling thread.
   *
   * @return the final status (Ready)
   * @throws LoadFailure with a reason and a message, after the store's memory was released
   */
  DataPlaneStatus load() throws LoadFailure;
}
