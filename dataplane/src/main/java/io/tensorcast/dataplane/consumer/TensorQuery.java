package io.tensorcast.dataplane.consumer;

import io.tensorcast.dataplane.tensor.ParallelAxis;
import io.tensorcast.dataplane.tensor.ParallelAxis.Kind;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.Set;

/**
 * The query of {@code GET /v1/tensors/{name}}: which view of the tensor to read.
 *
 * <ul>
 *   <li>{@code target=as_stored} (the default): the bytes exactly as one stored file holds them.
 *   <li>{@code target=shard&parallelism=tp:RANK/SIZE@DIM,dp:RANK/SIZE,...}: the shard a rank needs
 *       under a parallelism ({@code TensorParallelism} of {@code ParallelAxis}).
 *   <li>{@code target=full}: the whole tensor, reconstructed from stored TP shards ({@code
 *       manifest.json} + {@code rank_NNNNN.safetensors}).
 * </ul>
 *
 * <p>Parallelism syntax: comma-separated axes {@code KIND:RANK/SIZE}, {@code KIND} one of {@code
 * tp}, {@code dp}, {@code pp}, {@code ep}, each at most once; {@code 0 <= RANK < SIZE}; {@code tp}
 * may carry {@code @DIM}, the split dimension (0-based; absent = as the stored layout says). Axes
 * are canonicalised to {@link io.tensorcast.dataplane.tensor.TensorParallelism}'s order ({@code
 * dp}, {@code pp}, {@code ep}, {@code tp}), so {@code dp:0/2,tp:1/4} and {@code tp:1/4,dp:0/2} are
 * the same query. The axis kinds are {@link ParallelAxis.Kind}; only the wire syntax (strict
 * digits, optional {@code @DIM}) is this class's own.
 *
 * @param target which view
 * @param parallelism the axes of a {@code shard} read in canonical order; empty otherwise
 */
public record TensorQuery(Target target, List<Axis> parallelism) {

  /** Largest accepted SIZE of an axis (and so RANK + 1); larger is certainly a typo. */
  public static final int MAX_AXIS_SIZE = 1 << 20;

  /** The view a read targets, spelled on the wire as {@link #wireName()}. */
  public enum Target {
    AS_STORED("as_stored"),
    SHARD("shard"),
    FULL("full");

    private final String wire;

    Target(String wire) {
      this.wire = wire;
    }

    /** How the query spells it: {@code as_stored}, {@code shard}, {@code full}. */
    public String wireName() {
      return wire;
    }
  }

  /**
   * One axis of a parallelism.
   *
   * @param kind the axis kind
   * @param rank this consumer's rank on the axis, {@code 0 <= rank < size}
   * @param size number of ranks on the axis, {@code >= 1}
   * @param splitDim for {@code tp}: the dimension the tensor is split along, if given
   */
  public record Axis(Kind kind, int rank, int size, OptionalInt splitDim) {
    public Axis {
      Objects.requireNonNull(kind, "kind");
      Objects.requireNonNull(splitDim, "splitDim");
      if (size < 1 || rank < 0 || rank >= size) {
        throw new IllegalArgumentException(
            kind.label() + " axis: rank " + rank + " / size " + size + " needs 0 <= rank < size");
      }
      if (splitDim.isPresent() && (kind != Kind.TP || splitDim.getAsInt() < 0)) {
        throw new IllegalArgumentException(
            kind.label() + " axis: a split dimension is for tp only and must be >= 0");
      }
    }

    /**
     * This axis as the tensor package's {@link ParallelAxis}.
     *
     * @param defaultSplitDim the split dimension a {@code tp} axis without {@code @DIM} takes;
     *     ignored for other kinds and when {@code @DIM} is given
     */
    public ParallelAxis toParallelAxis(int defaultSplitDim) {
      Integer dim =
          kind != Kind.TP ? null : splitDim.isPresent() ? splitDim.getAsInt() : defaultSplitDim;
      return new ParallelAxis(kind, rank, size, dim);
    }

    /** The wire form, e.g. {@code tp:1/4@0}. */
    @Override
    public String toString() {
      return kind.label()
          + ":"
          + rank
          + "/"
          + size
          + (splitDim.isPresent() ? "@" + splitDim.getAsInt() : "");
    }
  }

  /** The default query: the tensor as stored. */
  public static final TensorQuery AS_STORED = new TensorQuery(Target.AS_STORED, List.of());

  public TensorQuery {
    Objects.requireNonNull(target, "target");
    parallelism = parallelism.stream().sorted(Comparator.comparing(Axis::kind)).toList();
    if (target == Target.SHARD && parallelism.isEmpty()) {
      throw new IllegalArgumentException("target=shard needs a parallelism");
    }
    if (target != Target.SHARD && !parallelism.isEmpty()) {
      throw new IllegalArgumentException("parallelism applies to target=shard only");
    }
  }

  /**
   * The canonical query string, e.g. {@code target=shard&parallelism=dp:0/2,tp:1/4@0}: equal for
   * equal queries (it enters the ETag).
   */
  public String canonical() {
    if (parallelism.isEmpty()) {
      return "target=" + target.wireName();
    }
    StringBuilder b =
        new StringBuilder("target=").append(target.wireName()).append("&parallelism=");
    for (int i = 0; i < parallelism.size(); i++) {
      b.append(i == 0 ? "" : ",").append(parallelism.get(i));
    }
    return b.toString();
  }

  /**
   * Parses decoded query parameters.
   *
   * @param params parameter name → values, as {@code QueryStringDecoder.parameters()} gives them
   * @throws TensorReadException 400 {@code BadParameter} naming the parameter, its value and the
   *     rule broken: an unknown or repeated parameter, an unknown target, a missing or malformed
   *     parallelism, a repeated axis kind, a rank outside {@code [0, size)}
   */
  public static TensorQuery parse(Map<String, List<String>> params) throws TensorReadException {
    for (Map.Entry<String, List<String>> e : params.entrySet()) {
      if (!e.getKey().equals("target") && !e.getKey().equals("parallelism")) {
        throw bad(
            "unknown query parameter '"
                + e.getKey()
                + "'; GET /v1/tensors/{name} takes target=as_stored|shard|full and, for"
                + " target=shard, parallelism=tp:RANK/SIZE@DIM,dp:RANK/SIZE,...");
      }
      if (e.getValue().size() > 1) {
        throw bad(
            "query parameter '" + e.getKey() + "' is given " + e.getValue().size() + " times");
      }
    }
    String targetText = single(params, "target");
    Target target = Target.AS_STORED;
    if (targetText != null) {
      target = null;
      for (Target t : Target.values()) {
        if (t.wireName().equals(targetText)) {
          target = t;
        }
      }
      if (target == null) {
        throw bad("target='" + targetText + "' is not one of as_stored, shard, full");
      }
    }
    String parallelismText = single(params, "parallelism");
    if (target != Target.SHARD) {
      if (parallelismText != null) {
        throw bad(
            "parallelism='"
                + parallelismText
                + "' applies to target=shard only, not target="
                + target.wireName());
      }
      return new TensorQuery(target, List.of());
    }
    if (parallelismText == null || parallelismText.isEmpty()) {
      throw bad(
          "target=shard needs parallelism=KIND:RANK/SIZE[,...], e.g. parallelism=tp:0/4@0,dp:1/2");
    }
    return new TensorQuery(target, parseParallelism(parallelismText));
  }

  /**
   * Parses {@code tp:RANK/SIZE@DIM,dp:RANK/SIZE,...}.
   *
   * @throws TensorReadException 400 {@code BadParameter} naming the axis and the rule broken
   */
  public static List<Axis> parseParallelism(String text) throws TensorReadException {
    List<Axis> axes = new ArrayList<>();
    Set<Kind> seen = EnumSet.noneOf(Kind.class);
    for (String part : text.split(",", -1)) {
      String where = "parallelism='" + text + "': axis '" + part + "'";
      int colon = part.indexOf(':');
      int slash = part.indexOf('/');
      if (colon < 0 || slash < colon) {
        throw bad(where + " is not KIND:RANK/SIZE (e.g. tp:0/4@1 or dp:1/2)");
      }
      Kind kind = null;
      for (Kind k : Kind.values()) {
        if (k.label().equals(part.substring(0, colon))) {
          kind = k;
        }
      }
      if (kind == null) {
        throw bad(where + " has kind '" + part.substring(0, colon) + "', not tp, dp, pp or ep");
      }
      if (!seen.add(kind)) {
        throw bad(where + " repeats the kind " + kind.label() + "; each kind may appear once");
      }
      int at = part.indexOf('@', slash);
      int rank = number(part.substring(colon + 1, slash), where, "RANK");
      int size = number(part.substring(slash + 1, at < 0 ? part.length() : at), where, "SIZE");
      OptionalInt dim = OptionalInt.empty();
      if (at >= 0) {
        if (kind != Kind.TP) {
          throw bad(where + " has a split dimension '@...'; only tp is split along a dimension");
        }
        dim = OptionalInt.of(number(part.substring(at + 1), where, "DIM"));
      }
      if (size < 1 || rank >= size) {
        throw bad(where + ": rank " + rank + " / size " + size + " needs 0 <= RANK < SIZE");
      }
      axes.add(new Axis(kind, rank, size, dim));
    }
    return axes;
  }

  private static int number(String s, String where, String what) throws TensorReadException {
    if (s.isEmpty() || s.length() > 9 || !s.chars().allMatch(c -> c >= '0' && c <= '9')) {
      throw bad(where + " has " + what + " '" + s + "', not a non-negative decimal integer");
    }
    int v = Integer.parseInt(s);
    if (v > MAX_AXIS_SIZE) {
      throw bad(where + " has " + what + " " + v + ", above the limit of " + MAX_AXIS_SIZE);
    }
    return v;
  }

  private static String single(Map<String, List<String>> params, String key) {
    List<String> v = params.get(key);
    return v == null || v.isEmpty() ? null : v.get(0);
  }

  private static TensorReadException bad(String message) {
    return new TensorReadException(400, "BadParameter", message);
  }
}
