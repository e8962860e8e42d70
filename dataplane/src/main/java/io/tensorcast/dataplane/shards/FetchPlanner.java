package io.tensorcast.dataplane.shards;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * Chooses the ranged requests that fill a node's rank files from the source: a cost model over the
 * byte ranges the ranks need ({@link ShardSetPlan.Need}).
 *
 * <p>Cost of a plan = {@code requests × latency + bytes / bandwidth}. Sorted by offset, the needed
 * ranges of one source file are separated by gaps; reading across a gap costs {@code gap /
 * bandwidth} and saves one request, so the cost is minimal when exactly the gaps shorter than
 * {@code latency × bandwidth} are read across ({@link Costs#gapThreshold()}), within the largest
 * request ({@link Costs#maxRequestBytes()}). Gaps are read across only inside one tensor (adjacent
 * ranges of different tensors, gap 0, are always joined): the tensors of a file are usually far
 * apart for one rank, and a slice along dimension 0 is one range per tensor, so such slices read
 * exactly their bytes whatever the model's size, and the model spends extra bytes only on the rows
 * of slices along later dimensions, where it saves a request per row. The three strategies for a
 * slice along a later dimension (one row segment per row) fall out of the one rule: threshold 0 is
 * one ranged read per row (amplification 1, a request per row), a threshold above the row gap
 * coalesces rows, a threshold above the tensor reads the whole tensor and slices it (amplification
 * {@code tp / ranks on the node}, one request per {@code maxRequestBytes}). Slices along dimension
 * 0 need one range per tensor, so they read nothing extra whatever the threshold. Overlapping needs
 * (a replicated tensor held by two ranks of the node) are read once.
 */
public final class FetchPlanner {

  private FetchPlanner() {}

  /**
   * The cost model's parameters.
   *
   * @param requestLatency time one request costs besides its bytes (time to first byte)
   * @param bytesPerSecond throughput of one request
   * @param maxRequestBytes the longest request (also the staging buffer one request may need)
   */
  public record Costs(Duration requestLatency, long bytesPerSecond, int maxRequestBytes) {

    /** 20 ms to first byte, 200 MB/s per request, 8 MiB requests: an object store over a LAN. */
    public static final Costs DEFAULTS = new Costs(Duration.ofMillis(20), 200_000_000L, 8 << 20);

    public Costs {
      Objects.requireNonNull(requestLatency, "requestLatency");
      if (requestLatency.isNegative() || bytesPerSecond < 1 || maxRequestBytes < 1) {
        throw new IllegalArgumentException(
            "latency must be >= 0, bandwidth and request size >= 1: " + this);
      }
    }

    /** Gaps up to this many bytes are read across: {@code latency × bandwidth}. */
    public long gapThreshold() {
      return (long) (requestLatency.toNanos() / 1e9 * bytesPerSecond);
    }

    /** The modelled time of {@code requests} requests moving {@code bytes}, in seconds. */
    public double seconds(long requests, long bytes) {
      return requests * requestLatency.toNanos() / 1e9 + (double) bytes / bytesPerSecond;
    }
  }

  /**
   * One ranged request and the needs it fills.
   *
   * @param sourceFile source file
   * @param offset first byte
   * @param length bytes
   * @param needs the needs inside {@code [offset, offset + length)}, whole
   */
  public record Request(String sourceFile, long offset, int length, List<ShardSetPlan.Need> needs) {

    /** Whether the request is exactly one need, so its bytes can go straight to their place. */
    public boolean direct() {
      return needs.size() == 1 && needs.get(0).length() == length;
    }
  }

  /**
   * The chosen requests and what they cost.
   *
   * @param requests requests, by source file then offset
   * @param bytesNeeded bytes of every need (shared needs counted per rank)
   * @param bytesFetched bytes the requests read
   * @param perRankBytes bytes fetched attributed to each rank (a request's bytes split in
   *     proportion to the bytes of its needs each rank gets)
   * @param perRankRequests requests attributed to each rank, likewise
   * @param seconds the modelled time of the plan
   */
  public record Plan(
      List<Request> requests,
      long bytesNeeded,
      long bytesFetched,
      Map<Integer, Double> perRankBytes,
      Map<Integer, Double> perRankRequests,
      double seconds) {

    /** {@code bytesFetched / bytesNeeded}, 1 when nothing is needed. */
    public double amplification() {
      return bytesNeeded == 0 ? 1 : (double) bytesFetched / bytesNeeded;
    }
  }

  /** Plans {@code needs} under {@code costs}. */
  public static Plan plan(List<ShardSetPlan.Need> needs, Costs costs) {
    Map<String, List<ShardSetPlan.Need>> byFile = new TreeMap<>();
    long needed = 0;
    for (ShardSetPlan.Need n : needs) {
      needed += n.length();
      for (ShardSetPlan.Need part : cut(n, costs.maxRequestBytes())) {
        byFile.computeIfAbsent(part.sourceFile(), k -> new ArrayList<>()).add(part);
      }
    }
    long gap = costs.gapThreshold();
    List<Request> requests = new ArrayList<>();
    long fetched = 0;
    Map<Integer, Double> rankBytes = new LinkedHashMap<>();
    Map<Integer, Double> rankRequests = new LinkedHashMap<>();
    for (Map.Entry<String, List<ShardSetPlan.Need>> e : byFile.entrySet()) {
      List<ShardSetPlan.Need> sorted = new ArrayList<>(e.getValue());
      sorted.sort(
          Comparator.comparingLong(ShardSetPlan.Need::sourceOffset)
              .thenComparing(Comparator.comparingLong(ShardSetPlan.Need::length).reversed()));
      long start = -1;
      long end = -1;
      List<ShardSetPlan.Need> current = new ArrayList<>();
      for (ShardSetPlan.Need n : sorted) {
        long nEnd = n.sourceOffset() + n.length();
        ShardSetPlan.Need last = current.isEmpty() ? null : current.get(current.size() - 1);
        long between = n.sourceOffset() - end;
        boolean across =
            between <= 0 || (between <= gap && last != null && last.tensor().equals(n.tensor()));
        if (last != null && across && Math.max(end, nEnd) - start <= costs.maxRequestBytes()) {
          current.add(n);
          end = Math.max(end, nEnd);
          continue;
        }
        if (!current.isEmpty()) {
          fetched += close(e.getKey(), start, end, current, requests, rankBytes, rankRequests);
        }
        current = new ArrayList<>();
        current.add(n);
        start = n.sourceOffset();
        end = nEnd;
      }
      if (!current.isEmpty()) {
        fetched += close(e.getKey(), start, end, current, requests, rankBytes, rankRequests);
      }
    }
    return new Plan(
        List.copyOf(requests),
        needed,
        fetched,
        rankBytes,
        rankRequests,
        costs.seconds(requests.size(), fetched));
  }

  private static long close(
      String file,
      long start,
      long end,
      List<ShardSetPlan.Need> needs,
      List<Request> requests,
      Map<Integer, Double> rankBytes,
      Map<Integer, Double> rankRequests) {
    long length = end - start;
    requests.add(new Request(file, start, (int) length, List.copyOf(needs)));
    long total = needs.stream().mapToLong(ShardSetPlan.Need::length).sum();
    for (ShardSetPlan.Need n : needs) {
      double share = (double) n.length() / total;
      rankBytes.merge(n.rank(), share * length, Double::sum);
      rankRequests.merge(n.rank(), share, Double::sum);
    }
    return length;
  }

  /** {@code n} cut into parts of at most {@code max} bytes. */
  private static List<ShardSetPlan.Need> cut(ShardSetPlan.Need n, int max) {
    if (n.length() <= max) {
      return List.of(n);
    }
    List<ShardSetPlan.Need> parts = new ArrayList<>();
    for (long done = 0; done < n.length(); done += max) {
      long len = Math.min(max, n.length() - done);
      parts.add(
          new ShardSetPlan.Need(
              n.rank(),
              n.sourceFile(),
              n.sourceOffset() + done,
              len,
              n.file(),
              n.fileOffset() + done,
              n.tensor()));
    }
    return parts;
  }
}
