package io.tensorcast.dataplane.tensor;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.stream.Collectors;

/**
 * Where a tensor object belongs in a parallel layout: the design's {@code
 * TensorParallelism([axes])}.
 *
 * <p>Canonical: the axes are kept sorted by {@link ParallelAxis.Kind} order ({@code dp}, {@code
 * pp}, {@code ep}, {@code tp}), so {@code [pp, tp]} and {@code [tp, pp]} are the same identity
 * ({@code equals}, {@code hashCode}, {@code toString}). The design fixed exactly this mismatch
 * ("canonicalizing the requested parallelism before comparison"). At most one axis per kind; at
 * least one axis.
 *
 * @param axes the axes in canonical order (unmodifiable)
 */
public record TensorParallelism(List<ParallelAxis> axes) {

  /**
   * @throws IllegalArgumentException if {@code axes} is empty or names a kind twice
   */
  public TensorParallelism {
    Objects.requireNonNull(axes, "axes");
    if (axes.isEmpty()) {
      throw new IllegalArgumentException(
          "a TensorParallelism needs at least one axis (tp, dp, pp or ep)");
    }
    Map<ParallelAxis.Kind, ParallelAxis> seen = new EnumMap<>(ParallelAxis.Kind.class);
    for (ParallelAxis a : axes) {
      Objects.requireNonNull(a, "axis");
      ParallelAxis before = seen.put(a.kind(), a);
      if (before != null) {
        throw new IllegalArgumentException(
            "TensorParallelism "
                + axes
                + ": axis kind "
                + a.kind().label()
                + " appears twice ("
                + before
                + " and "
                + a
                + "); at most one axis per kind");
      }
    }
    List<ParallelAxis> sorted = new ArrayList<>(axes);
    sorted.sort(Comparator.comparing(ParallelAxis::kind));
    axes = List.copyOf(sorted);
  }

  /** The parallelism of these axes, in any order. */
  public static TensorParallelism of(ParallelAxis... axes) {
    return new TensorParallelism(List.of(axes));
  }

  /** A TP-only parallelism: rank {@code rank} of {@code size} along {@code splitDim}. */
  public static TensorParallelism tp(int rank, int size, int splitDim) {
    return of(ParallelAxis.tp(rank, size, splitDim));
  }

  /** The axis of this kind, if present. */
  public Optional<ParallelAxis> axis(ParallelAxis.Kind kind) {
    return axes.stream().filter(a -> a.kind() == kind).findFirst();
  }

  /** The {@code tp} axis, if present: the only axis that splits bytes. */
  public Optional<ParallelAxis> tp() {
    return axis(ParallelAxis.Kind.TP);
  }

  /** The scope axes ({@code dp}, {@code pp}, {@code ep}) in canonical order; may be empty. */
  public List<ParallelAxis> scopeAxes() {
    return axes.stream().filter(a -> !a.splitsBytes()).toList();
  }

  /**
   * Parses the compact form: axes separated by commas, each as {@link ParallelAxis#parse}, e.g.
   * {@code "dp:0/2,tp:1/4@0"} (any order).
   *
   * @throws IllegalArgumentException naming the text and the rule broken
   */
  public static TensorParallelism parse(String text) {
    Objects.requireNonNull(text, "parallelism");
    List<ParallelAxis> axes = new ArrayList<>();
    for (String part : text.split(",")) {
      if (!part.isBlank()) {
        axes.add(ParallelAxis.parse(part));
      }
    }
    return new TensorParallelism(axes);
  }

  /** The canonical compact form, e.g. {@code "dp:0/2,tp:1/4@0"}; {@link #parse} reads it back. */
  @Override
  public String toString() {
    return axes.stream().map(ParallelAxis::toString).collect(Collectors.joining(","));
  }
}
