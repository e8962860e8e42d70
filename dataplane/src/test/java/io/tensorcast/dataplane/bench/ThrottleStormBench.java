package io.tensorcast.dataplane.bench;

import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.pod.ServeSettings;
import io.tensorcast.dataplane.testing.ServeCommandLine;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * Time to Ready of one {@code dataplane serve} load from the source alone under a sustained 429
 * storm that lets some requests through, against the same load unthrottled (not a test; nothing
 * asserts on time). S3Mock behind a {@link FaultInjectingProxy}; the storm admits 1 request in N
 * and answers the others {@code 429} with {@code Retry-After: 1}. Every round starts a fresh server
 * on an empty store in {@code /dev/shm}; the artifact is the corpus's sharded tiny safetensors
 * checkpoint and the MNIST model (about 1.5 MB), loaded with 512 KiB ranges, concurrency 2 and 6
 * attempts per request, as in {@code LoadRetryIT}.
 *
 * <p>Prints, per storm: the wall time from start to {@code Ready} (seconds, median of the rounds),
 * its ratio to the unthrottled median, the source bytes received on the wire per artifact byte
 * ({@code bytesFromSourceOnWire / bytesTotal}), the requests refused and the loads needed.
 *
 * <pre>
 *   ThrottleStormBench [--storms 2,4,8] [--reps 3] [--retry-after-s 1] [--limit-s 120]
 * </pre>
 */
public final class ThrottleStormBench {
  private static final String BUCKET = "throttle-storm-bench";
  private static final String PREFIX = "model/";
  private static final java.util.regex.Pattern ATTEMPT =
      java.util.regex.Pattern.compile("\\(attempt ([0-9]+)\\)$");

  private ThrottleStormBench() {}

  public static void main(String[] argv) throws Exception {
    List<Integer> storms = List.of(2, 4, 8);
    int reps = 3;
    int retryAfterSeconds = 1;
    Duration limit = Duration.ofSeconds(120);
    for (int i = 0; i < argv.length; i++) {
      switch (argv[i]) {
        case "--storms" -> {
          List<Integer> l = new ArrayList<>();
          for (String n : argv[++i].split(",")) {
            l.add(Integer.parseInt(n.trim()));
          }
          storms = l;
        }
        case "--reps" -> reps = Integer.parseInt(argv[++i]);
        case "--retry-after-s" -> retryAfterSeconds = Integer.parseInt(argv[++i]);
        case "--limit-s" -> limit = Duration.ofSeconds(Long.parseLong(argv[++i]));
        default ->
            throw new IllegalArgumentException(
                "unknown argument "
                    + argv[i]
                    + " (--storms 2,4,8 | --reps N | --retry-after-s S | --limit-s S)");
      }
    }
    Path shm = Path.of("/dev/shm");
    if (!Files.isDirectory(shm)) {
      throw new IllegalStateException("/dev/shm (tmpfs) is needed for the page-locked store");
    }
    Map<String, Path> files = new TreeMap<>();
    Path corpus = Corpus.dir();
    try (Stream<Path> shards = Files.list(corpus.resolve("index/safetensorsjl-tiny-sharded"))) {
      shards.forEach(p -> files.put(p.getFileName().toString(), p));
    }
    files.put(
        "extra/mnist.safetensors",
        corpus.resolve("safetensors/burn__examples_import-model-weights_mnist.safetensors"));

    List<Integer> ns = new ArrayList<>();
    ns.add(0);
    ns.addAll(storms);
    Map<Integer, List<Run>> runs = new TreeMap<>();
    long size = 0;
    for (Path f : files.values()) {
      size += Files.size(f);
    }
    long s = size;
    Path secrets = Files.createTempDirectory("throttle-storm-bench-");
    try (S3MockServer s3 = S3MockServer.start();
        FaultInjectingProxy proxy = new FaultInjectingProxy(s3.endpoint())) {
      s3.createBucket(BUCKET);
      for (Map.Entry<String, Path> e : files.entrySet()) {
        s3.putFile(BUCKET, PREFIX + e.getKey(), e.getValue());
      }
      Files.writeString(secrets.resolve("read"), "throttle-storm-bench-read-token-0123");
      Files.writeString(secrets.resolve("admin"), "throttle-storm-bench-admin-token-0123");
      int seq = 0;
      for (int rep = 1; rep <= reps; rep++) {
        // Interleaved rounds: the machine's load drifts; each storm sees the same drift.
        for (int n : ns) {
          proxy.reset();
          if (n > 0) {
            proxy.admitOneIn(n, Duration.ofSeconds(retryAfterSeconds));
          }
          Run r = load(proxy, secrets, "storm-" + n + "-" + seq++, limit);
          runs.computeIfAbsent(n, k -> new ArrayList<>()).add(r);
          System.out.printf(
              "[bench] round %d %s: %s%.2f s, wire/S %.3f, %d refused, load %d%n",
              rep,
              label(n),
              r.ready ? "" : "NOT Ready after ",
              r.seconds,
              r.wireRatio(s),
              r.refused,
              r.loads);
        }
      }
    } finally {
      TestFiles.deleteTree(secrets);
    }

    double base = median(runs.get(0), Run::seconds);
    System.out.printf(
        "%nTime to Ready under a 429 storm (Retry-After: %d s) vs. unthrottled, %d rounds,"
            + " medians; S = %d bytes in %d files%n%n",
        retryAfterSeconds, reps, s, files.size());
    System.out.println(
        "| source | Ready | time to Ready (s) | × unthrottled | wire bytes / S | 429s | loads |");
    System.out.println("|---|---:|---:|---:|---:|---:|---:|");
    for (Map.Entry<Integer, List<Run>> e : runs.entrySet()) {
      List<Run> l = e.getValue();
      double t = median(l, Run::seconds);
      System.out.printf(
          "| %s | %d/%d | %s%.2f | %s%.1f | %.3f | %.0f | %.0f |%n",
          label(e.getKey()),
          l.stream().filter(Run::ready).count(),
          l.size(),
          l.stream().allMatch(Run::ready) ? "" : "≥ ",
          t,
          l.stream().allMatch(Run::ready) ? "" : "≥ ",
          t / base,
          median(l, r -> r.wireRatio(s)),
          median(l, r -> r.refused),
          median(l, r -> r.loads));
    }
  }

  private static String label(int n) {
    return n == 0 ? "unthrottled" : "admits 1 in " + n;
  }

  /** One load: Ready (or not, at the limit) after {@code seconds}; bytes as {@code /status}. */
  private record Run(boolean ready, double seconds, long total, long wire, int refused, int loads) {
    /** Source bytes received on the wire per artifact byte ({@code s}: the artifact's size). */
    double wireRatio(long s) {
      return (double) wire / s;
    }
  }

  private static Run load(FaultInjectingProxy proxy, Path secrets, String id, Duration limit)
      throws Exception {
    Path root = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-throttle-storm-");
    ServeSettings settings =
        ServeCommandLine.serve(id, "s3://" + BUCKET + "/" + PREFIX)
            .s3(proxy.endpoint())
            .store(root, "64Mi")
            .listen("127.0.0.1:0")
            .option("--max-attempts", "6")
            .option("--range-size", "512Ki")
            .option("--concurrency", "2")
            .loadRetryBackoff("100ms", "400ms")
            .distribution("source-only")
            .flag("--allow-insecure-endpoint")
            .tokenFiles(secrets.resolve("read"), secrets.resolve("admin"))
            .parse();
    long started = System.nanoTime();
    DataPlaneServer server = DataPlaneServer.start(settings);
    try {
      long deadline = started + limit.toNanos();
      DataPlaneStatus s = server.status();
      int loads = 1;
      while (s.phase() != Phase.Ready) {
        if (s.phase() == Phase.Failed) {
          throw new IllegalStateException(id + " Failed: " + s.reason() + ": " + s.message());
        }
        if (System.nanoTime() > deadline) {
          return new Run(
              false,
              (System.nanoTime() - started) / 1e9,
              s.bytesTotal(),
              s.bytesFromSourceOnWire(),
              proxy.throttled().size(),
              loads);
        }
        java.util.regex.Matcher m = ATTEMPT.matcher(s.message() == null ? "" : s.message());
        if (m.find()) {
          loads = Math.max(loads, Integer.parseInt(m.group(1)));
        }
        Thread.sleep(10); // polling the in-process status; 10 ms is the resolution of the table
        s = server.status();
      }
      double seconds = (System.nanoTime() - started) / 1e9;
      return new Run(
          true,
          seconds,
          s.bytesTotal(),
          s.bytesFromSourceOnWire(),
          proxy.throttled().size(),
          loads);
    } finally {
      server.close();
      TestFiles.deleteTree(root);
    }
  }

  private static double median(List<Run> l, java.util.function.ToDoubleFunction<Run> f) {
    double[] v = l.stream().mapToDouble(f).sorted().toArray();
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  }
}
