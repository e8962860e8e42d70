package io.tensorcast.dataplane.tensor;

import java.util.Objects;

/**
 * The design's {@code writer_partition}: a writer that holds the full tensor persists only the
 * shard it owns, named by the {@code tp} axis of {@code parallelism} (the optimisation for RL
 * weight sync). The scope axes ({@code dp}, {@code pp}, {@code ep}) become the stored object's
 * layout identity, as with a parallelism.
 *
 * <p>This differs from a plain TP parallelism on write: with {@code parallelisms=[tp]} the caller
 * passes the shard itself; with a writer partition the caller passes the full tensor.
 *
 * @param parallelism the writer's identity; must have a {@code tp} axis
 */
public record WriterPartition(TensorParallelism parallelism) {

  /**
   * @throws IllegalArgumentException if the parallelism has no tp axis
   */
  public WriterPartition {
    Objects.requireNonNull(parallelism, "parallelism");
    if (parallelism.tp().isEmpty()) {
      throw new IllegalArgumentException(
          "writer_partition "
              + parallelism
              + " has no tp axis: a writer partition names the shard to store, and only tp"
              + " defines one");
    }
  }

  /** The tp axis: which shard this writer stores. */
  public ParallelAxis tp() {
    return parallelism.tp().orElseThrow();
  }

  /** A TP-only writer partition: rank {@code rank} of {@code size} along {@code splitDim}. */
  public static WriterPartition tp(int rank, int size, int splitDim) {
    return new WriterPartition(TensorParallelism.tp(rank, size, splitDim));
  }
}
