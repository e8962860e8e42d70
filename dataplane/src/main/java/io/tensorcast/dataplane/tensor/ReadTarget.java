package io.tensorcast.dataplane.tensor;

import java.util.Locale;
import java.util.Objects;

/**
 * What a reader wants materialised, the design's {@code ReadTarget(mode, parallelism)}. The mode is
 * explicit so that the same parallelism can mean different reads.
 *
 * <ul>
 *   <li>{@link Mode#AS_STORED}: exactly the stored object. On a TP shard layout with {@code tp_size
 *       > 1} the parallelism names which rank's object (its tp rank and size must equal the stored
 *       ones; its {@code split_dim} is not consulted); on plain files it may be omitted.
 *   <li>{@link Mode#SHARD}: the shard named by the parallelism's {@code tp} axis (required): rank
 *       {@code r} of a {@code T}-way split along {@code split_dim}. A direct single-range read when
 *       the store holds exactly that shard, otherwise reconstructed from byte ranges (heterogeneous
 *       TP).
 *   <li>{@link Mode#FULL}: the full (global) tensor, reconstructed from shards when needed. The
 *       parallelism is optional and only checked for identity.
 * </ul>
 *
 * <p>When a parallelism is given for a TP shard layout, its scope axes ({@code dp}, {@code pp},
 * {@code ep}) must equal the layout's {@code layout_axes} (exact-match identity, seed semantics).
 *
 * @param mode the read mode
 * @param parallelism the requested identity; required for {@code SHARD}, optional otherwise
 */
public record ReadTarget(Mode mode, TensorParallelism parallelism) {

  /** Read modes, spelled {@code as_stored}, {@code shard}, {@code full} in the design. */
  public enum Mode {
    /** Return exactly what was stored. */
    AS_STORED,
    /** Return a target shard. */
    SHARD,
    /** Return the full tensor. */
    FULL;

    /** The design's spelling: {@code "as_stored"}, {@code "shard"}, {@code "full"}. */
    public String label() {
      return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The mode spelled {@code label} (case-insensitive).
     *
     * @throws IllegalArgumentException naming the label and the accepted modes
     */
    public static Mode fromLabel(String label) {
      Objects.requireNonNull(label, "mode");
      for (Mode m : values()) {
        if (m.label().equalsIgnoreCase(label.trim())) {
          return m;
        }
      }
      throw new IllegalArgumentException(
          "unknown read mode \"" + label + "\": expected as_stored, shard or full");
    }
  }

  /**
   * @throws IllegalArgumentException if {@code SHARD} has no parallelism or one without a tp axis
   */
  public ReadTarget {
    Objects.requireNonNull(mode, "mode");
    if (mode == Mode.SHARD) {
      if (parallelism == null) {
        throw new IllegalArgumentException(
            "ReadTarget(mode=shard) needs a parallelism with a tp axis naming the shard");
      }
      if (parallelism.tp().isEmpty()) {
        throw new IllegalArgumentException(
            "ReadTarget(mode=shard, parallelism="
                + parallelism
                + "): no tp axis; only tp defines a shard (dp, pp, ep scope the object)");
      }
    }
  }

  /** Exactly the stored object of a plain file or a single-rank layout. */
  public static ReadTarget asStored() {
    return new ReadTarget(Mode.AS_STORED, null);
  }

  /** Exactly the stored object of the given identity. */
  public static ReadTarget asStored(TensorParallelism parallelism) {
    return new ReadTarget(Mode.AS_STORED, Objects.requireNonNull(parallelism, "parallelism"));
  }

  /** The shard named by the parallelism's tp axis. */
  public static ReadTarget shard(TensorParallelism parallelism) {
    return new ReadTarget(Mode.SHARD, parallelism);
  }

  /** The full tensor. */
  public static ReadTarget full() {
    return new ReadTarget(Mode.FULL, null);
  }

  /** The full tensor, checking the parallelism's scope axes against the layout's identity. */
  public static ReadTarget full(TensorParallelism parallelism) {
    return new ReadTarget(Mode.FULL, Objects.requireNonNull(parallelism, "parallelism"));
  }

  @Override
  public String toString() {
    return mode.label() + (parallelism == null ? "" : "(" + parallelism + ")");
  }
}
