package io.tensorcast.dataplane.bench;

import static io.tensorcast.dataplane.bench.BenchSupport.loadAverage;
import static io.tensorcast.dataplane.bench.BenchSupport.log;
import static io.tensorcast.dataplane.bench.BenchSupport.machine;

import io.tensorcast.dataplane.bench.BenchSupport.LoaderRun;
import io.tensorcast.dataplane.bench.BenchSupport.RangeOpener;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.MemoryLockSupport;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.synthetic.SyntheticModel;
import io.tensorcast.dataplane.testing.S3Options;
import io.tensorcast.testing.HubStandIn;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Stream;
import software.amazon.awssdk.services.s3.S3Client;

/**
 * Sweep of the loader's two read settings, concurrency × range size, for {@code s3://} and {@code
 * hf://}, each point as a ratio to the same run's raw ceiling of that source (a benchmark, not a
 * test; run it with {@code bench/source-sweep.sh}).
 *
 * <ol>
 *   <li>Writes a Llama-shaped artifact with {@link SyntheticModel} (default: 18 layers, hidden
 *       1024, 4 shards, 512 MiB) and hashes every file.
 *   <li>For {@code s3}: starts a private S3Mock and uploads the files; for {@code hf}: starts a
 *       {@link HubStandIn} and commits the files to a repository ({@code *.safetensors} as LFS
 *       files served by its CDN listener, the rest as git blobs).
 *   <li>After one unmeasured warm-up pass, at every point of the sweep: (raw) parallel ranged GETs
 *       of every file into one reused direct buffer per worker, no store — S3: {@code GetObject}
 *       with {@code Range} (AWS SDK, Apache client); Hub: {@code GET /{repo}/resolve/{sha}/{path}}
 *       with {@code Range}, following the 302 to the CDN (JDK {@link HttpClient}, HTTP/1.1, the
 *       client and request path the Hub source uses); then (loader) {@link ArtifactLoader} from
 *       {@link Sources} into a {@link PinnedStore} under {@code /dev/shm} with that concurrency and
 *       range size (SHA-256 verified against the generated files), unloaded afterwards.
 *   <li>The ceiling of a source is its best raw point. Every loader point is printed in MB/s (10^6
 *       bytes per second, end to end: listing, allocation + {@code mlock}, reads, verification) and
 *       as a ratio to that ceiling, with the best point marked; then the current defaults ({@link
 *       ReadOptions#DEFAULTS}) are compared with the best point of each source and with the best
 *       point common to both.
 * </ol>
 */
public final class SourceSweepBench {
  private static final String BUCKET = "bench";
  private static final String PREFIX = "model/";
  private static final String REPO = "tensorcast/bench-model";
  private static final SyntheticModel.Config MODEL =
      new SyntheticModel.Config(32000, 1024, 2816, 18, 16, 4, 4);

  private SourceSweepBench() {}

  /** One point of the sweep for one source. */
  record Point(String source, int concurrency, int rangeMib, double rawMbps, LoaderRun loader) {
    double loaderMbps() {
      return loader.mbps();
    }
  }

  public static void main(String[] args) throws Exception {
    List<String> sources = List.of("s3", "hf");
    int[] concurrency = {1, 4, 16, 64};
    int[] rangeMib = {2, 8, 32};
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--sources" -> sources = List.of(args[++i].split(","));
        case "--concurrency" -> concurrency = ints(args[++i]);
        case "--range-mib" -> rangeMib = ints(args[++i]);
        default ->
            throw new IllegalArgumentException(
                "unknown argument "
                    + args[i]
                    + "; usage: [--sources s3,hf] [--concurrency 1,4,16,64] [--range-mib"
                    + " 2,8,32]");
      }
    }
    for (String s : sources) {
      if (!s.equals("s3") && !s.equals("hf")) {
        throw new IllegalArgumentException("--sources: unknown source '" + s + "'; use s3, hf");
      }
    }
    String started = Instant.now().toString();
    String loadAtStart = loadAverage();
    long t0 = System.nanoTime();
    Path work = Files.createTempDirectory("tensorcast-sweep-");
    Path shm = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-sweep-store-");
    try {
      log("writing the synthetic model %s to %s", MODEL, work);
      SyntheticModel.write(work, MODEL, 0x5EED_0F_5EEDL);
      Map<String, Path> files = new LinkedHashMap<>();
      try (Stream<Path> list = Files.list(work)) {
        list.sorted().forEach(p -> files.put(p.getFileName().toString(), p));
      }
      Map<String, Long> sizes = new LinkedHashMap<>();
      Map<String, String> sha256 = new LinkedHashMap<>();
      for (Map.Entry<String, Path> e : files.entrySet()) {
        sizes.put(e.getKey(), Files.size(e.getValue()));
        sha256.put(e.getKey(), BenchSupport.sha256(e.getValue()));
      }
      long total = sizes.values().stream().mapToLong(Long::longValue).sum();
      log("artifact: %d files, %d bytes", files.size(), total);
      boolean mayLock = MemoryLockSupport.facts().allows(total + (64L << 20));
      LockPolicy policy = mayLock ? LockPolicy.REQUIRED : LockPolicy.BEST_EFFORT;

      List<Point> points = new ArrayList<>();
      try (PinnedStore store = new PinnedStore(shm, 2 * total + (64L << 20), policy)) {
        for (String source : sources) {
          if (source.equals("s3")) {
            try (S3MockServer s3 = S3MockServer.start();
                S3Client client = BenchSupport.s3Client(s3)) {
              s3.createBucket(BUCKET);
              for (Map.Entry<String, Path> e : files.entrySet()) {
                s3.putFile(BUCKET, PREFIX + e.getKey(), e.getValue());
              }
              RangeOpener raw =
                  (key, off, len) ->
                      client.getObject(
                          b ->
                              b.bucket(BUCKET)
                                  .key(PREFIX + key)
                                  .range("bytes=" + off + "-" + (off + len - 1)));
              sweep(
                  "s3",
                  raw,
                  c ->
                      Sources.open(
                          "s3://" + BUCKET + "/" + PREFIX,
                          S3Options.direct(s3).maxConnections(c).build()),
                  store,
                  sizes,
                  sha256,
                  concurrency,
                  rangeMib,
                  points);
            }
          } else {
            try (HubStandIn hub = HubStandIn.start()) {
              hub.pageSize(1000);
              String sha = hub.repo(REPO).commit(files);
              HttpClient http =
                  HttpClient.newBuilder()
                      .version(HttpClient.Version.HTTP_1_1)
                      .followRedirects(HttpClient.Redirect.NORMAL)
                      .build();
              String base = hub.endpoint() + "/" + REPO + "/resolve/" + sha + "/";
              RangeOpener raw =
                  (key, off, len) -> {
                    HttpResponse<InputStream> r =
                        http.send(
                            HttpRequest.newBuilder(URI.create(base + key))
                                .header("Range", "bytes=" + off + "-" + (off + len - 1))
                                .build(),
                            HttpResponse.BodyHandlers.ofInputStream());
                    if (r.statusCode() != 206) {
                      r.body().close();
                      throw new IllegalStateException(
                          key + " @" + off + ": status " + r.statusCode() + " from " + r.uri());
                    }
                    return r.body();
                  };
              sweep(
                  "hf",
                  raw,
                  c ->
                      Sources.open(
                          "hf://" + REPO,
                          SourceOptions.builder()
                              .endpoint(hub.endpoint())
                              .maxConnections(c)
                              .build()),
                  store,
                  sizes,
                  sha256,
                  concurrency,
                  rangeMib,
                  points);
            }
          }
        }
      }
      report(started, loadAtStart, total, files.size(), points, (System.nanoTime() - t0) / 1e9);
    } finally {
      TestFiles.deleteTree(work);
      TestFiles.deleteTree(shm);
    }
  }

  @FunctionalInterface
  private interface SourceOpener {
    ArtifactSource open(int concurrency) throws Exception;
  }

  private static void sweep(
      String source,
      RangeOpener raw,
      SourceOpener opener,
      PinnedStore store,
      Map<String, Long> sizes,
      Map<String, String> sha256,
      int[] concurrency,
      int[] rangeMib,
      List<Point> points)
      throws Exception {
    long total = sizes.values().stream().mapToLong(Long::longValue).sum();
    log("%s: warm-up, one raw pass (8 x 8 MiB) and one load at the defaults, not measured", source);
    BenchSupport.parallelRangedGets(raw, sizes, 8, 8 << 20, null);
    try (ArtifactSource src = opener.open(ReadOptions.DEFAULTS.concurrency())) {
      BenchSupport.load(src, store, ReadOptions.DEFAULTS, sha256);
    }
    for (int c : concurrency) {
      for (int mib : rangeMib) {
        long rawNanos = BenchSupport.parallelRangedGets(raw, sizes, c, mib << 20, null);
        double rawMbps = total / (rawNanos / 1e9) / 1e6;
        ReadOptions read = ReadOptions.DEFAULTS.withConcurrency(c).withRangeSize(mib << 20);
        LoaderRun run;
        try (ArtifactSource src = opener.open(c)) {
          run = BenchSupport.load(src, store, read, sha256);
        }
        points.add(new Point(source, c, mib, rawMbps, run));
        log(
            "%s c=%d range=%d MiB: raw %.0f MB/s, loader %.0f MB/s (data phase %.0f MB/s)",
            source, c, mib, rawMbps, run.mbps(), run.loadingMbps());
      }
    }
  }

  private static void report(
      String started,
      String loadAtStart,
      long total,
      int fileCount,
      List<Point> points,
      double seconds)
      throws Exception {
    int defC = ReadOptions.DEFAULTS.concurrency();
    int defMib = ReadOptions.DEFAULTS.rangeSize() >> 20;
    StringBuilder out = new StringBuilder();
    out.append("\n## Tensorcast source sweep (bench/source-sweep.sh)\n\n");
    out.append("started ").append(started).append("; ").append(machine()).append('\n');
    out.append("load average at start: ").append(loadAtStart).append('\n');
    out.append(
        String.format(
            Locale.ROOT,
            "artifact: SyntheticModel %s = %d files, %d bytes (%.0f MiB); store: PinnedStore under"
                + " /dev/shm, lock: %s%n",
            MODEL,
            fileCount,
            total,
            total / (double) (1 << 20),
            points.isEmpty() ? "-" : points.get(0).loader().lock().reason()));
    out.append(
        "MB/s = 10^6 bytes/s; loader = end to end (listing, allocation + mlock, ranged reads,"
            + " SHA-256 verify); data = its ranged-read phase alone; ratio = loader / ceiling of"
            + " the source (its best raw point in this run)\n\n");
    out.append(
        "| source | concurrency | range | raw MB/s | loader MB/s | loader / ceiling | data MB/s |"
            + " data / ceiling |\n");
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    Map<String, Point> bestOf = new LinkedHashMap<>();
    Map<String, Double> ceilingOf = new LinkedHashMap<>();
    for (Point p : points) {
      ceilingOf.merge(p.source(), p.rawMbps(), Math::max);
      bestOf.merge(p.source(), p, (a, b) -> a.loaderMbps() >= b.loaderMbps() ? a : b);
    }
    for (Point p : points) {
      double ceiling = ceilingOf.get(p.source());
      boolean best = bestOf.get(p.source()) == p;
      boolean isCeiling = p.rawMbps() == ceiling;
      boolean isDefault = p.concurrency() == defC && p.rangeMib() == defMib;
      out.append(
          String.format(
              Locale.ROOT,
              "| %s | %d | %d MiB%s | %.0f%s | %.0f%s | %.2f | %.0f | %.2f |%n",
              p.source(),
              p.concurrency(),
              p.rangeMib(),
              isDefault ? " (default)" : "",
              p.rawMbps(),
              isCeiling ? " **ceiling**" : "",
              p.loaderMbps(),
              best ? " **best**" : "",
              p.loaderMbps() / ceiling,
              p.loader().loadingMbps(),
              p.loader().loadingMbps() / ceiling));
    }
    out.append('\n');
    for (Map.Entry<String, Point> e : bestOf.entrySet()) {
      Point b = e.getValue();
      double ceiling = ceilingOf.get(e.getKey());
      Point def = find(points, e.getKey(), defC, defMib);
      out.append(
          String.format(
              Locale.ROOT,
              "%s: ceiling %.0f MB/s; best loader point c=%d, %d MiB = %.0f MB/s (%.2f x ceiling)",
              e.getKey(),
              ceiling,
              b.concurrency(),
              b.rangeMib(),
              b.loaderMbps(),
              b.loaderMbps() / ceiling));
      if (def != null) {
        out.append(
            String.format(
                Locale.ROOT,
                "; defaults c=%d, %d MiB = %.0f MB/s (%.2f x ceiling, %.2f x best)",
                defC,
                defMib,
                def.loaderMbps(),
                def.loaderMbps() / ceiling,
                def.loaderMbps() / b.loaderMbps()));
      }
      out.append('\n');
    }
    // The point that is best for both sources: the highest worst-case ratio to each source's
    // loader at the defaults.
    List<String> srcs = List.copyOf(bestOf.keySet());
    Point common = null;
    double commonScore = 0;
    for (Point p : points) {
      if (!p.source().equals(srcs.get(0))) {
        continue;
      }
      double score = Double.MAX_VALUE;
      for (String s : srcs) {
        Point q = find(points, s, p.concurrency(), p.rangeMib());
        Point def = find(points, s, defC, defMib);
        if (q == null || def == null) {
          score = Double.NaN;
          break;
        }
        score = Math.min(score, q.loaderMbps() / def.loaderMbps());
      }
      if (!Double.isNaN(score) && (common == null || score > commonScore)) {
        common = p;
        commonScore = score;
      }
    }
    if (common != null) {
      out.append(
          String.format(
              Locale.ROOT,
              "best common point (highest min over %s of loader / loader at the defaults): c=%d,"
                  + " %d MiB = %.2f x the defaults on the worse of the sources%n",
              srcs,
              common.concurrency(),
              common.rangeMib(),
              commonScore));
    }
    out.append(String.format(Locale.ROOT, "run took %.0f s%n", seconds));
    System.out.print(out);
  }

  private static Point find(List<Point> points, String source, int c, int mib) {
    return points.stream()
        .filter(p -> p.source().equals(source) && p.concurrency() == c && p.rangeMib() == mib)
        .findFirst()
        .orElse(null);
  }

  private static int[] ints(String csv) {
    int[] out = Arrays.stream(csv.split(",")).mapToInt(Integer::parseInt).toArray();
    if (out.length == 0 || Arrays.stream(out).anyMatch(v -> v < 1 || v > 1024)) {
      throw new IllegalArgumentException("expected a list like 1,4,16 of values 1-1024: " + csv);
    }
    return out;
  }
}
