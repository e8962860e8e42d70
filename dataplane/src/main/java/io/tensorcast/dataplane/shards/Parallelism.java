package io.tensorcast.dataplane.shards;

import io.tensorcast.dataplane.tensor.ParallelAxis;
import java.util.ArrayList;
import java.util.List;

/**
 * The sizes of a layout's axes, and how a global rank maps to its position on each: canonical axis
 * order {@code dp, pp, ep, tp} (as {@link io.tensorcast.dataplane.tensor.TensorParallelism} sorts
 * them) with {@code tp} varying fastest, {@code rank = ((dp × pp_size + pp) × ep_size + ep) ×
 * tp_size + tp}.
 *
 * @param dp data-parallel size
 * @param pp pipeline-parallel size
 * @param ep expert-parallel size
 * @param tp tensor-parallel size
 */
public record Parallelism(int dp, int pp, int ep, int tp) {

  /** Largest world accepted. */
  public static final int MAX_WORLD = 4096;

  /**
   * @throws IllegalArgumentException if a size is below 1 or the world exceeds {@link #MAX_WORLD}
   */
  public Parallelism {
    for (int s : new int[] {dp, pp, ep, tp}) {
      if (s < 1) {
        throw new IllegalArgumentException("every axis size must be >= 1: " + this);
      }
    }
    if ((long) dp * pp * ep * tp > MAX_WORLD) {
      throw new IllegalArgumentException(
          "world size dp × pp × ep × tp = " + (long) dp * pp * ep * tp + " exceeds " + MAX_WORLD);
    }
  }

  /** A rank's position on each axis. */
  public record Coordinates(int dp, int pp, int ep, int tp) {}

  /** Number of ranks. */
  public int worldSize() {
    return dp * pp * ep * tp;
  }

  /** The position of global rank {@code rank}. */
  public Coordinates coordinates(int rank) {
    if (rank < 0 || rank >= worldSize()) {
      throw new IllegalArgumentException("rank " + rank + " outside [0, " + worldSize() + ")");
    }
    int t = rank % tp;
    int rest = rank / tp;
    int e = rest % ep;
    rest /= ep;
    int p = rest % pp;
    int d = rest / pp;
    return new Coordinates(d, p, e, t);
  }

  /** {@code dp:0/1,pp:0/1,ep:1/2,tp:3/4}: every axis of a rank, canonical order. */
  public String describe(Coordinates c) {
    return "dp:" + c.dp() + "/" + dp + ",pp:" + c.pp() + "/" + pp + ",ep:" + c.ep() + "/" + ep
        + ",tp:" + c.tp() + "/" + tp;
  }

  /** The scope axes ({@code dp}, {@code pp}, {@code ep}) of size above 1 at {@code c}. */
  public List<ParallelAxis> scopeAxes(Coordinates c) {
    List<ParallelAxis> out = new ArrayList<>();
    if (dp > 1) {
      out.add(ParallelAxis.dp(c.dp(), dp));
    }
    if (pp > 1) {
      out.add(ParallelAxis.pp(c.pp(), pp));
    }
    if (ep > 1) {
      out.add(ParallelAxis.ep(c.ep(), ep));
    }
    return out;
  }

  /**
   * The directory of {@code c}'s layout inside the set's store directory: empty when every scope
   * axis has size 1, else e.g. {@code dp1-ep0/} (axes of size 1 left out).
   */
  public String layoutDirectory(Coordinates c) {
    StringBuilder b = new StringBuilder();
    for (ParallelAxis a : scopeAxes(c)) {
      if (b.length() > 0) {
        b.append('-');
      }
      b.append(a.kind().label()).append(a.rank());
    }
    return b.length() == 0 ? "" : b.append('/').toString();
  }

  /** Sizes, canonical order, sizes of 1 left out: {@code "ep:2,tp:4"}; {@code "tp:1"} if none. */
  public String describe() {
    List<String> parts = new ArrayList<>();
    if (dp > 1) {
      parts.add("dp:" + dp);
    }
    if (pp > 1) {
      parts.add("pp:" + pp);
    }
    if (ep > 1) {
      parts.add("ep:" + ep);
    }
    if (tp > 1) {
      parts.add("tp:" + tp);
    }
    return parts.isEmpty() ? "tp:1" : String.join(",", parts);
  }

  /**
   * Parses {@link #describe()}'s form (any order; absent axes are 1), e.g. {@code "ep:2,tp:4"}.
   *
   * @throws IllegalArgumentException naming the text and the expected form
   */
  public static Parallelism parse(String text) {
    int[] sizes = {1, 1, 1, 1};
    boolean[] seen = new boolean[4];
    for (String part : text.split(",")) {
      String p = part.strip();
      if (p.isEmpty()) {
        continue;
      }
      int colon = p.indexOf(':');
      if (colon < 0) {
        throw new IllegalArgumentException(
            "parallelism '" + text + "': expected kind:size,... e.g. ep:2,tp:4");
      }
      int i =
          switch (p.substring(0, colon).strip()) {
            case "dp" -> 0;
            case "pp" -> 1;
            case "ep" -> 2;
            case "tp" -> 3;
            default ->
                throw new IllegalArgumentException(
                    "parallelism '" + text + "': unknown axis '" + p.substring(0, colon) + "'");
          };
      if (seen[i]) {
        throw new IllegalArgumentException("parallelism '" + text + "': an axis appears twice");
      }
      seen[i] = true;
      try {
        sizes[i] = Integer.parseInt(p.substring(colon + 1).strip());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(
            "parallelism '" + text + "': size of '" + p + "' is not an integer");
      }
    }
    return new Parallelism(sizes[0], sizes[1], sizes[2], sizes[3]);
  }
}
