package io.tensorcast.dataplane.p2p.sim;

import io.tensorcast.dataplane.p2p.sim.SwarmSim.NodeResult;
import io.tensorcast.dataplane.p2p.sim.SwarmSim.NodeSpec;
import io.tensorcast.dataplane.p2p.sim.SwarmSim.Result;
import io.tensorcast.dataplane.p2p.sim.SwarmSim.Scenario;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * The swarm simulator's scenarios (not a test; run by {@code bench/swarm-sim.sh}). First the
 * calibration against the netns bench at 100 Mbit/s, N = 2 and 4, then the swarm at scale. Prints
 * one table; every time is a ratio to the bound S/B + (N−1)·piece/B of the node's own link.
 *
 * <pre>
 *   SwarmSimBench [--nodes "8 64 256 1000"] [--scenarios "uniform hetero slow churn"]
 *                 [--size BYTES] [--seed N] [--threads N] [--calibrate-only] [--skip-calibration]
 *                 [--no-source-digests]
 * </pre>
 *
 * <p>The origin publishes a digest of every file (an S3 checksum, a single-part ETag, the Hub's
 * sha256: {@link SwarmSim#sourceDigests}) unless {@code --no-source-digests} (multipart ETags
 * without a checksum, SSE-KMS): a member may then fetch a piece on its peers' claims and check it
 * with its file.
 */
public final class SwarmSimBench {
  /** The netns bench's artifact: medium-llama, 4 shards. */
  static final long ARTIFACT = 1_164_024_015L;

  static final int PIECE = 1024 * 1024;

  /** 100 Mbit/s, bytes per second. */
  static final double B = 100e6 / 8;

  /**
   * The share of a tbf-shaped link one TCP flow carries as payload, measured on the netns bench's
   * shaper (headers and acknowledgements take the rest).
   */
  static final double GOODPUT = 0.954;

  /**
   * Hashing rate of a node's digests (SHA-256 and the source's digest, following the files'
   * prefixes): ~2 s for the 1.1 GiB artifact on the bench's VM.
   */
  static final double VERIFY_BPS = 580e6;

  /**
   * The netns bench's swarm window / bound and origin bytes / S, the mean of two runs each
   * (bench/README.md, 2026-12-04, twentieth run).
   */
  static final double[][] NETNS = {{2, 1.076, 1.000}, {4, 1.084, 1.000}};

  /** {@code --no-source-digests} clears it: the origin publishes no file digest. */
  private static volatile boolean sourceDigests = true;

  private SwarmSimBench() {}

  public static void main(String[] args) {
    List<Integer> sizes = List.of(8, 64, 256, 1000);
    List<String> scenarios = List.of("uniform", "hetero", "slow", "churn");
    long size = 0; // 0: sizeFor(N)
    long seed = 1;
    int threads = Runtime.getRuntime().availableProcessors();
    boolean calibrate = true;
    boolean scale = true;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--nodes" ->
            sizes = Arrays.stream(args[++i].trim().split("\\s+")).map(Integer::valueOf).toList();
        case "--scenarios" -> scenarios = List.of(args[++i].trim().split("\\s+"));
        case "--size" -> size = Long.parseLong(args[++i]);
        case "--seed" -> seed = Long.parseLong(args[++i]);
        case "--threads" -> threads = Math.max(1, Integer.parseInt(args[++i]));
        case "--calibrate-only" -> scale = false;
        case "--skip-calibration" -> calibrate = false;
        case "--no-source-digests" -> sourceDigests = false;
        default -> {
          System.err.println("swarm-sim: unknown option " + args[i]);
          System.exit(2);
        }
      }
    }
    System.out.printf(
        Locale.ROOT,
        "swarm simulator: real SwarmPolicy per node; links %.0f Mbit/s x %.3f goodput, latency 1 ms,"
            + " piece %d B, verification %.0f MB/s; file digests from the source: %s; seed %d%n",
        B * 8 / 1e6,
        GOODPUT,
        PIECE,
        VERIFY_BPS / 1e6,
        sourceDigests ? "yes" : "no",
        seed);
    if (calibrate) {
      System.out.println();
      System.out.println(
          "Calibration against bench/p2p-netns.sh at 100 Mbit/s (swarm window: every node starts"
              + " at once, start to last Ready)");
      System.out.println(
          "| N | sim swarm / bound | netns swarm / bound | diff | sim origin / S | netns origin / S | within 10 % |");
      System.out.println("|---:|---:|---:|---:|---:|---:|---|");
      for (double[] row : NETNS) {
        int n = (int) row[0];
        long t0 = System.nanoTime();
        Result r =
            new SwarmSim(scenario(n, "uniform", ARTIFACT, seed)).sourceDigests(sourceDigests).run();
        Stats s = stats(r, n, ARTIFACT);
        double diff = s.last / row[1] - 1;
        double odiff = s.origin / row[2] - 1;
        System.out.printf(
            Locale.ROOT,
            "| %d | %.3f | %.3f | %+.1f %% | %.4f | %.3f | %s |  (%.1f s)%n",
            n,
            s.last,
            row[1],
            diff * 100,
            s.origin,
            row[2],
            Math.abs(diff) <= 0.10 && Math.abs(odiff) <= 0.10 ? "yes" : "NO",
            (System.nanoTime() - t0) / 1e9);
      }
    }
    if (!scale) {
      return;
    }
    System.out.println();
    System.out.printf(
        Locale.ROOT,
        "At scale: S = %s, origin uplink = B; goal p50 <= 1.10, last <= 1.30, origin <= 1.02;"
            + " %d rows at once%n",
        size > 0 ? size + " B" : "1.1 GB (the netns artifact) for N < 64, 128 MiB from N = 64",
        threads);
    System.out.println(
        "| N | S | scenario | p50 / bound | last / bound | last / (S/b) | origin / S | origin GETs"
            + " | goal | virtual s | rounds | wall s | CPU s | µs / round |");
    System.out.println("|---:|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|");
    // Each row is one independent single-threaded run: rows run on `threads` threads and print in
    // order as they finish.
    java.util.concurrent.ExecutorService pool =
        java.util.concurrent.Executors.newFixedThreadPool(threads);
    List<java.util.concurrent.Future<String>> rows = new ArrayList<>();
    for (int n : sizes) {
      long s = size > 0 ? size : sizeFor(n);
      for (String name : scenarios) {
        long sd = seed;
        rows.add(pool.submit(() -> row(n, name, s, sd)));
      }
    }
    pool.shutdown();
    try {
      for (java.util.concurrent.Future<String> row : rows) {
        System.out.println(row.get());
        System.out.flush();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (java.util.concurrent.ExecutionException e) {
      throw new IllegalStateException(e.getCause());
    }
  }

  /**
   * The artifact of a row at N nodes: the netns bench's 1.1 GB below 64 nodes, 128 MiB from 64 (the
   * pipeline term (N−1)·piece/b is then S/b or more, and a run costs O(N²) frames per piece).
   */
  static long sizeFor(int n) {
    return n < 64 ? ARTIFACT : 128L * 1024 * 1024;
  }

  /** One row of the at-scale table, with the wall and CPU time of its run. */
  static String row(int n, String name, long size, long seed) {
    java.lang.management.ThreadMXBean threads =
        java.lang.management.ManagementFactory.getThreadMXBean();
    long t0 = System.nanoTime();
    long c0 = threads.getCurrentThreadCpuTime();
    Result r = new SwarmSim(scenario(n, name, size, seed)).sourceDigests(sourceDigests).run();
    double cpu = (threads.getCurrentThreadCpuTime() - c0) / 1e9;
    Stats s = stats(r, n, size);
    boolean goal = r.finished() && s.p50 <= 1.10 && s.last <= 1.30 && s.origin <= 1.02;
    // -Dsim.exact=true: the row's ratios unrounded, to stderr (the table rounds p50 1.0997 to
    // 1.100, which the goal counts as met).
    if (Boolean.getBoolean("sim.exact")) {
      System.err.printf(
          Locale.ROOT,
          "N = %d %s: p50 %.5f, last %.5f, origin %.5f%n",
          n,
          name,
          s.p50,
          s.last,
          s.origin);
    }
    return String.format(
        Locale.ROOT,
        "| %d | %s | %s | %.3f | %.3f | %.3f | %.4f | %d | %s | %.1f | %d | %.1f | %.1f | %.0f |",
        n,
        size == ARTIFACT
            ? "1.1 GB"
            : size % (1024 * 1024) == 0 ? size / (1024 * 1024) + " MiB" : size + " B",
        name,
        s.p50,
        s.last,
        s.lastFlat,
        s.origin,
        r.originRequests(),
        !r.finished() ? "unfinished" : goal ? "met" : "missed",
        r.end() / 1e9,
        r.rounds(),
        (System.nanoTime() - t0) / 1e9,
        cpu,
        r.roundNanos() / 1e3 / Math.max(1, r.rounds()));
  }

  /**
   * p50 and last node's time / own bound, the last node's time / S/b of its own link (the bound
   * without the pipeline term, which at large N exceeds S/b itself), and origin bytes / S.
   */
  record Stats(double p50, double last, double lastFlat, double origin) {}

  static Stats stats(Result r, int n, long size) {
    List<Double> ratios = new ArrayList<>();
    double lastFlat = 0;
    for (NodeResult nr : r.nodes()) {
      if (nr.left()) {
        continue;
      }
      double bps = Math.min(nr.downBps() / GOODPUT, B);
      double bound = bound(size, n, bps);
      double t = nr.time() < 0 ? Double.POSITIVE_INFINITY : nr.time() / 1e9;
      ratios.add(t / bound);
      lastFlat = Math.max(lastFlat, t / (size / bps));
    }
    ratios.sort(null);
    double p50 = ratios.get((ratios.size() - 1) / 2);
    double last = ratios.get(ratios.size() - 1);
    return new Stats(p50, last, lastFlat, r.originBytes() / size);
  }

  /** S/b + (N−1)·piece/b, seconds, for a node link of {@code bps} bytes per second (nominal). */
  static double bound(long size, int n, double bps) {
    return (size + (double) (n - 1) * PIECE) / bps;
  }

  /** Four files of about equal size, as the generated artifact's shards. */
  static long[] files(long size) {
    long[] f = new long[4];
    for (int i = 0; i < 4; i++) {
      f[i] = size / 4 + (i < size % 4 ? 1 : 0);
    }
    return f;
  }

  /**
   * The scenario {@code name} with {@code n} nodes: {@code uniform} (every link B), {@code hetero}
   * (a tenth of the nodes, at least one, at B/2), {@code slow} (one node at B/10), {@code churn} (a
   * tenth join at a quarter of the bound, a tenth leave at half of it; at least one each).
   */
  static Scenario scenario(int n, String name, long size, long seed) {
    Random rnd = new Random(seed * 1_000_003L + n * 31L + name.hashCode());
    double link = B * GOODPUT;
    double[] down = new double[n];
    Arrays.fill(down, link);
    long[] join = new long[n];
    long[] leave = new long[n];
    Arrays.fill(leave, -1);
    int tenth = Math.max(1, n / 10);
    long boundNs = (long) (bound(size, n, B) * 1e9);
    List<Integer> ids = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      ids.add(i);
    }
    java.util.Collections.shuffle(ids, rnd);
    switch (name) {
      case "uniform" -> {}
      case "hetero" -> {
        for (int i = 0; i < tenth; i++) {
          down[ids.get(i)] = link / 2;
        }
      }
      case "slow" -> down[ids.get(0)] = link / 10;
      case "churn" -> {
        if (n < 3) {
          throw new IllegalArgumentException("churn needs at least 3 nodes");
        }
        for (int i = 0; i < tenth; i++) {
          join[ids.get(i)] = boundNs / 4;
          leave[ids.get(tenth + i)] = boundNs / 2;
        }
      }
      default ->
          throw new IllegalArgumentException(
              "unknown scenario '" + name + "'; use uniform, hetero, slow or churn");
    }
    List<NodeSpec> nodes = new ArrayList<>();
    int width = String.valueOf(n).length();
    for (int i = 0; i < n; i++) {
      nodes.add(
          new NodeSpec(
              String.format(Locale.ROOT, "n%0" + width + "d", i + 1),
              down[i],
              down[i],
              join[i],
              leave[i]));
    }
    long ms = Duration.ofMillis(1).toNanos();
    // Larger swarms: coarser rate recomputation and scheduling rounds, so 1,000 nodes run in
    // minutes; each may delay a piece by that much (< 1 % of a piece's 84 ms at B).
    long step = Long.getLong("sim.stepMs", n <= 64 ? 20 : 50) * ms;
    return new Scenario(
        files(size),
        PIECE,
        nodes,
        link,
        3500,
        ms,
        16,
        8L * 1024 * 1024,
        4,
        Duration.ofSeconds(10),
        step,
        step,
        VERIFY_BPS,
        Duration.ofSeconds(1).toNanos(),
        Duration.ofMillis(500).toNanos(),
        Duration.ofSeconds(3600).toNanos());
  }
}
