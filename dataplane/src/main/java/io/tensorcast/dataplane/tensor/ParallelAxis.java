package io.tensorcast.dataplane.tensor;

import java.util.Locale;
import java.util.Objects;

/**
 * One axis of a parallel layout, as in the design's {@code ParallelAxis(kind, rank, size,
 * split_dim)}.
 *
 * <p>Only {@link Kind#TP} affects the tensor's bytes: a TP axis stores rank {@code rank} of a
 * {@code size}-way uniform split along dimension {@code splitDim} ({@code shard_extent =
 * global_shape[split_dim] / size}, {@code shard_start = rank × shard_extent}). {@link Kind#DP},
 * {@link Kind#PP} and {@link Kind#EP} are scope axes: they identify the replica, pipeline stage or
 * expert that owns the object and never imply a split, so they carry no {@code splitDim}.
 *
 * @param kind the axis kind
 * @param rank this object's rank along the axis, {@code 0 <= rank < size}
 * @param size number of ranks along the axis, {@code >= 1}
 * @param splitDim for {@code tp} only: the dimension the tensor is split along ({@code >= 0});
 *     {@code null} for every other kind
 */
public record ParallelAxis(Kind kind, int rank, int size, Integer splitDim) {

  /**
   * Axis kinds, declared in canonical order: the scope axes {@code dp}, {@code pp}, {@code ep}
   * first, then the layout axis {@code tp}. {@link TensorParallelism} sorts its axes in this order.
   */
  public enum Kind {
    /** Data-parallel replica: scope only. */
    DP,
    /** Pipeline stage: scope only. */
    PP,
    /** Expert identity: scope only. */
    EP,
    /** Tensor-parallel shard: splits the tensor along {@code split_dim}. */
    TP;

    /** The design's spelling: {@code "tp"}, {@code "dp"}, {@code "pp"}, {@code "ep"}. */
    public String label() {
      return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The kind spelled {@code label} ({@code tp|dp|pp|ep}, case-insensitive).
     *
     * @throws IllegalArgumentException naming the label and the accepted kinds
     */
    public static Kind fromLabel(String label) {
      Objects.requireNonNull(label, "kind");
      for (Kind k : values()) {
        if (k.label().equalsIgnoreCase(label.trim())) {
          return k;
        }
      }
      throw new IllegalArgumentException(
          "unknown parallel axis kind \"" + label + "\": expected one of tp, dp, pp, ep");
    }
  }

  /**
   * @throws IllegalArgumentException if {@code size < 1}, {@code rank} is outside {@code [0,
   *     size)}, a {@code tp} axis has no or a negative {@code splitDim}, or another kind has one
   */
  public ParallelAxis {
    Objects.requireNonNull(kind, "kind");
    String k = kind.label();
    if (size < 1) {
      throw new IllegalArgumentException(k + " axis: size " + size + " must be >= 1");
    }
    if (rank < 0 || rank >= size) {
      throw new IllegalArgumentException(
          k + " axis: rank " + rank + " is outside [0, " + size + ") for size " + size);
    }
    if (kind == Kind.TP) {
      if (splitDim == null) {
        throw new IllegalArgumentException(
            "tp axis (rank " + rank + ", size " + size + "): split_dim is required");
      }
      if (splitDim < 0) {
        throw new IllegalArgumentException(
            "tp axis (rank " + rank + ", size " + size + "): split_dim " + splitDim + " < 0");
      }
    } else if (splitDim != null) {
      throw new IllegalArgumentException(
          k
              + " axis (rank "
              + rank
              + ", size "
              + size
              + "): split_dim "
              + splitDim
              + " is only allowed on a tp axis; "
              + k
              + " scopes the object and does not split it");
    }
  }

  /** A {@code tp} axis: rank {@code rank} of a {@code size}-way split along {@code splitDim}. */
  public static ParallelAxis tp(int rank, int size, int splitDim) {
    return new ParallelAxis(Kind.TP, rank, size, splitDim);
  }

  /** A {@code dp} (data-parallel replica) scope axis. */
  public static ParallelAxis dp(int rank, int size) {
    return new ParallelAxis(Kind.DP, rank, size, null);
  }

  /** A {@code pp} (pipeline stage) scope axis. */
  public static ParallelAxis pp(int rank, int size) {
    return new ParallelAxis(Kind.PP, rank, size, null);
  }

  /** An {@code ep} (expert) scope axis. */
  public static ParallelAxis ep(int rank, int size) {
    return new ParallelAxis(Kind.EP, rank, size, null);
  }

  /** Whether this axis splits bytes (only {@code tp} does). */
  public boolean splitsBytes() {
    return kind == Kind.TP;
  }

  /**
   * Parses the compact form {@code kind:rank/size}, with {@code @split_dim} for tp: {@code
   * "dp:0/2"}, {@code "tp:1/4@0"}.
   *
   * @throws IllegalArgumentException naming the text and the expected form
   */
  public static ParallelAxis parse(String text) {
    Objects.requireNonNull(text, "axis");
    String s = text.trim();
    int colon = s.indexOf(':');
    int slash = s.indexOf('/');
    if (colon < 0 || slash < colon) {
      throw new IllegalArgumentException(
          "parallel axis \"" + text + "\": expected kind:rank/size, e.g. dp:0/2 or tp:1/4@0");
    }
    Kind kind = Kind.fromLabel(s.substring(0, colon));
    int at = s.indexOf('@', slash);
    try {
      int rank = Integer.parseInt(s.substring(colon + 1, slash).trim());
      int size = Integer.parseInt(s.substring(slash + 1, at < 0 ? s.length() : at).trim());
      Integer dim = at < 0 ? null : Integer.valueOf(s.substring(at + 1).trim());
      return new ParallelAxis(kind, rank, size, dim);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(
          "parallel axis \""
              + text
              + "\": rank, size and split_dim must be integers (kind:rank/size[@split_dim])",
          e);
    }
  }

  /** The compact form accepted by {@link #parse}: {@code "dp:0/2"}, {@code "tp:1/4@0"}. */
  @Override
  public String toString() {
    return kind.label() + ":" + rank + "/" + size + (splitDim == null ? "" : "@" + splitDim);
  }
}
