package io.tensorcast.dataplane.bench;

import static io.tensorcast.dataplane.bench.BenchSupport.check;
import static io.tensorcast.dataplane.bench.BenchSupport.load;
import static io.tensorcast.dataplane.bench.BenchSupport.loadAverage;
import static io.tensorcast.dataplane.bench.BenchSupport.log;
import static io.tensorcast.dataplane.bench.BenchSupport.machine;
import static io.tensorcast.dataplane.bench.BenchSupport.s3Client;
import static io.tensorcast.dataplane.bench.BenchSupport.sha256;

import io.tensorcast.dataplane.bench.BenchSupport.LoaderRun;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.MemoryLockSupport;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.dataplane.testing.S3Options;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import software.amazon.awssdk.core.ResponseInputStream;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;

/**
 * Throughput of the loader against the raw rates of the same S3-compatible server, measured in one
 * run (a benchmark, not a test; run it with {@code bench/load-throughput.sh}).
 *
 * <ol>
 *   <li>Starts a private S3Mock, writes an artifact of {@code --gib} GiB as {@code --shards}
 *       safetensors shards ({@link SafetensorsWriter}, BF16 tensors of 16 MiB filled from a
 *       xorshift PRNG, hashed as written) plus a {@code config.json}, uploads it and deletes the
 *       local copy.
 *   <li>Warms up with one unmeasured parallel pass.
 *   <li>Sweep: (b) raw parallel ranged GETs (AWS SDK, Apache client) into per-worker direct buffers
 *       for concurrency 4/8/16 × range size 8/32 MiB, once each; the fastest is "(b best)". Then
 *       once more at that configuration into the mappings of a freshly allocated {@link
 *       PinnedStore} artifact, to show what landing in new page-locked tmpfs pages costs.
 *   <li>{@code --reps} rounds (default 3), each back to back, so that a change in the machine's
 *       load between measurements distorts the ratios less: (a) single-stream sequential GET of
 *       every file, whole objects, no ranges; (b) raw parallel ranged GETs at the best
 *       configuration; (c) the full loader ({@link ArtifactLoader}: listing, header reads,
 *       allocation and {@code mlock} in a {@link PinnedStore} under {@code /dev/shm}, parallel
 *       ranged reads into the mappings, SHA-256 verification) with the CLI's defaults, cold (the
 *       artifact is unloaded after each run). The SHA-256 the loader records for every file is
 *       checked against the generated files.
 *   <li>Once more, the loader at the best raw configuration, for information.
 * </ol>
 *
 * <p>Prints rates in MB/s (10^6 bytes per second), per-round ratios loader/(a) and loader/(b) and
 * their medians.
 */
public final class LoadThroughputBench {
  private static final String BUCKET = "bench";
  private static final String PREFIX = "model/";
  private static final int TENSOR_COLS = 4096;
  private static final int TENSOR_ROWS = 2048; // BF16 [2048, 4096] = 16 MiB per tensor
  private static final long TENSOR_BYTES = 2L * TENSOR_ROWS * TENSOR_COLS;
  private static final int[] SWEEP_CONCURRENCY = {4, 8, 16};
  private static final int[] SWEEP_RANGE_MIB = {8, 32};

  private LoadThroughputBench() {}

  /** One measured pass. */
  record Pass(String what, String config, long bytes, long nanos) {
    double mbps() {
      return bytes / (nanos / 1e9) / 1e6;
    }
  }

  public static void main(String[] args) throws Exception {
    double gib = 1.0;
    int shards = 8;
    int reps = 3;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--gib" -> gib = Double.parseDouble(args[++i]);
        case "--shards" -> shards = Integer.parseInt(args[++i]);
        case "--reps" -> reps = Integer.parseInt(args[++i]);
        default ->
            throw new IllegalArgumentException(
                "unknown argument " + args[i] + "; usage: [--gib N] [--shards N] [--reps N]");
      }
    }
    long tensorsPerShard = Math.max(1, Math.round(gib * (1L << 30) / TENSOR_BYTES / shards));
    String started = Instant.now().toString();
    String loadAtStart = loadAverage();
    long t0 = System.nanoTime();

    Path work = Files.createTempDirectory("tensorcast-bench-");
    Path shm = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-bench-store-");
    try (S3MockServer s3 = S3MockServer.start()) {
      s3.createBucket(BUCKET);
      Map<String, String> sha256 = new LinkedHashMap<>();
      Map<String, Long> sizes = new LinkedHashMap<>();
      log("writing %d shards of %d x 16 MiB tensors to %s", shards, tensorsPerShard, work);
      long seed = 0x7E15_0CA5_7L;
      for (int s = 0; s < shards; s++) {
        String name = String.format(Locale.ROOT, "model-%05d-of-%05d.safetensors", s + 1, shards);
        Path f = work.resolve(name);
        sha256.put(name, writeShard(f, s, tensorsPerShard, seed + s));
        sizes.put(name, Files.size(f));
        s3.putFile(BUCKET, PREFIX + name, f);
        Files.delete(f);
        log("uploaded %s (%d bytes)", name, sizes.get(name));
      }
      byte[] config =
          ("{\"model_type\":\"tensorcast-bench\",\"num_hidden_layers\":" + shards + "}\n")
              .getBytes(StandardCharsets.UTF_8);
      s3.putBytes(BUCKET, PREFIX + "config.json", config);
      sha256.put("config.json", HexFormat.of().formatHex(sha256().digest(config)));
      sizes.put("config.json", (long) config.length);
      long total = sizes.values().stream().mapToLong(Long::longValue).sum();
      long seeded = System.nanoTime();

      // Measurements run one after another; the machine's load may change meanwhile. So the
      // sweep only picks the best raw configuration, and the figures that are compared come from
      // rounds of (a), (b) at that configuration and (c), back to back.
      List<Pass> sweep = new ArrayList<>();
      List<Round> rounds = new ArrayList<>();
      Pass intoStore;
      long allocateNanos;
      LoaderRun atBestRun = null;
      boolean mayLock = MemoryLockSupport.facts().allows(total + (64L << 20));
      LockPolicy policy = mayLock ? LockPolicy.REQUIRED : LockPolicy.BEST_EFFORT;
      try (S3Client client = s3Client(s3);
          PinnedStore store = new PinnedStore(shm, 2 * total + (64L << 20), policy)) {
        log("warm-up: one parallel pass (8 x 8 MiB), not measured");
        parallelRangedGets(client, sizes, 8, 8 << 20, null);
        for (int c : SWEEP_CONCURRENCY) {
          for (int mib : SWEEP_RANGE_MIB) {
            sweep.add(parallelRangedGets(client, sizes, c, mib << 20, null));
            log("%s", describe(sweep.get(sweep.size() - 1)));
          }
        }
        Pass bestRaw = sweep.stream().max(Comparator.comparingDouble(Pass::mbps)).orElseThrow();
        int bestC = Integer.parseInt(bestRaw.config().replaceAll("c=(\\d+),.*", "$1"));
        int bestRange = Integer.parseInt(bestRaw.config().replaceAll(".*, (\\d+) MiB", "$1"));

        // (b) at its best configuration, but into the store's mappings: what the bytes cost once
        // they land in fresh page-locked tmpfs pages, without the loader's other steps.
        long a0 = System.nanoTime();
        store.allocate(
            "raw",
            sizes.entrySet().stream().map(e -> new StoreFile(e.getKey(), e.getValue())).toList());
        allocateNanos = System.nanoTime() - a0;
        intoStore =
            parallelRangedGets(
                client, sizes, bestC, bestRange << 20, store.get("raw").orElseThrow());
        log("%s (after %.2f s fallocate + mlock)", describe(intoStore), allocateNanos / 1e9);
        store.unload("raw");

        for (int r = 1; r <= reps; r++) {
          Pass a = sequential(client, sizes);
          log("round %d: %s", r, describe(a));
          Pass b = parallelRangedGets(client, sizes, bestC, bestRange << 20, null);
          log("round %d: %s", r, describe(b));
          LoaderRun c = loader(s3, store, ReadOptions.DEFAULTS, sha256);
          rounds.add(new Round(r, a, b, c));
        }
        ReadOptions atBest =
            ReadOptions.DEFAULTS.withConcurrency(bestC).withRangeSize(bestRange << 20);
        if (!atBest.equals(ReadOptions.DEFAULTS)) {
          atBestRun = loader(s3, store, atBest, sha256);
        }
      }
      long done = System.nanoTime();

      report(
          started,
          loadAtStart,
          shards,
          tensorsPerShard,
          total,
          sweep,
          intoStore,
          allocateNanos,
          rounds,
          atBestRun,
          (seeded - t0) / 1e9,
          (done - t0) / 1e9);
    } finally {
      TestFiles.deleteTree(work);
      TestFiles.deleteTree(shm);
    }
  }

  // ------------------------------------------------------------------ the artifact

  /** Writes one shard; returns its SHA-256 (hashed as written). */
  private static String writeShard(Path f, int shard, long tensors, long seed) throws IOException {
    List<TensorDeclaration> decls = new ArrayList<>();
    for (int t = 0; t < tensors; t++) {
      decls.add(
          new TensorDeclaration(
              "model.layers." + shard + ".w" + t,
              Dtype.BF16,
              new long[] {TENSOR_ROWS, TENSOR_COLS}));
    }
    Map<String, String> metadata =
        Map.of("format", "pt", "generator", "tensorcast LoadThroughputBench");
    MessageDigest md = sha256();
    md.update(SafetensorsWriter.headerBytes(decls, metadata));
    ByteBuffer chunk = ByteBuffer.allocateDirect(4 << 20).order(ByteOrder.LITTLE_ENDIAN);
    long[] state = {seed | 1};
    SafetensorsWriter.write(
        f,
        decls,
        metadata,
        (tensor, out) -> {
          long left = tensor.byteLength();
          while (left > 0) {
            chunk.clear();
            LongBuffer longs = chunk.asLongBuffer();
            long x = state[0];
            while (longs.hasRemaining()) {
              x ^= x << 13; // xorshift64
              x ^= x >>> 7;
              x ^= x << 17;
              longs.put(x);
            }
            state[0] = x;
            chunk.limit((int) Math.min(chunk.capacity(), left));
            md.update(chunk.duplicate());
            while (chunk.hasRemaining()) {
              left -= out.write(chunk);
            }
          }
        });
    return HexFormat.of().formatHex(md.digest());
  }

  // ------------------------------------------------------------------ (a) and (b)

  private static Pass sequential(S3Client client, Map<String, Long> sizes) throws IOException {
    byte[] buf = new byte[1 << 20];
    long bytes = 0;
    long start = System.nanoTime();
    for (Map.Entry<String, Long> e : sizes.entrySet()) {
      long n = 0;
      try (ResponseInputStream<GetObjectResponse> in =
          client.getObject(b -> b.bucket(BUCKET).key(PREFIX + e.getKey()))) {
        for (int r = in.read(buf); r >= 0; r = in.read(buf)) {
          n += r;
        }
      }
      check(n, e.getValue(), e.getKey());
      bytes += n;
    }
    return new Pass("a", "1 stream, whole objects", bytes, System.nanoTime() - start);
  }

  /** {@link BenchSupport#parallelRangedGets} with S3 ranged GETs, as a {@link Pass}. */
  private static Pass parallelRangedGets(
      S3Client client,
      Map<String, Long> sizes,
      int concurrency,
      int rangeSize,
      StoredArtifact stored)
      throws Exception {
    long nanos =
        BenchSupport.parallelRangedGets(
            (key, off, len) ->
                client.getObject(
                    b ->
                        b.bucket(BUCKET)
                            .key(PREFIX + key)
                            .range("bytes=" + off + "-" + (off + len - 1))),
            sizes,
            concurrency,
            rangeSize,
            stored);
    long bytes = sizes.values().stream().mapToLong(Long::longValue).sum();
    return new Pass(
        stored == null ? "b" : "s",
        "c=" + concurrency + ", " + (rangeSize >> 20) + " MiB",
        bytes,
        nanos);
  }

  // ------------------------------------------------------------------ (c) the loader

  private static LoaderRun loader(
      S3MockServer s3, PinnedStore store, ReadOptions read, Map<String, String> sha256)
      throws Exception {
    try (ArtifactSource src =
        Sources.open(
            "s3://" + BUCKET + "/" + PREFIX,
            S3Options.direct(s3).maxConnections(read.concurrency()).build())) {
      LoaderRun run = load(src, store, read, sha256);
      log(
          "(c) loader %s: %.0f MB/s end to end (resolve+allocate %.2f s, data %.2f s = %.0f MB/s,"
              + " verify %.2f s); %s",
          run.config(),
          run.mbps(),
          run.resolveNanos() / 1e9,
          run.loadingNanos() / 1e9,
          run.loadingMbps(),
          run.verifyNanos() / 1e9,
          run.lock().reason());
      return run;
    }
  }

  // ------------------------------------------------------------------ report

  /** One round of back-to-back measurements: (a), (b) at the best configuration, (c). */
  record Round(int number, Pass a, Pass b, LoaderRun c) {
    double loaderOverA() {
      return c.mbps() / a.mbps();
    }

    double loaderOverB() {
      return c.mbps() / b.mbps();
    }
  }

  private static String describe(Pass p) {
    return String.format(
        Locale.ROOT,
        "(%s) %s: %.0f MB/s (%.2f s)",
        p.what(),
        p.config(),
        p.mbps(),
        p.nanos() / 1e9);
  }

  private static double median(List<Double> values) {
    List<Double> sorted = values.stream().sorted().toList();
    int n = sorted.size();
    return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
  }

  private static void report(
      String started,
      String loadAtStart,
      int shards,
      long tensorsPerShard,
      long total,
      List<Pass> sweep,
      Pass intoStore,
      long allocateNanos,
      List<Round> rounds,
      LoaderRun atBestRun,
      double seedSeconds,
      double totalSeconds)
      throws IOException {
    Pass best = sweep.stream().max(Comparator.comparingDouble(Pass::mbps)).orElseThrow();
    LoaderRun first = rounds.get(0).c();
    StringBuilder out = new StringBuilder();
    out.append("\n## Tensorcast loader throughput (bench/load-throughput.sh)\n\n");
    out.append("started ").append(started).append("; ").append(machine()).append('\n');
    out.append("load average at start: ")
        .append(loadAtStart)
        .append("; at end: ")
        .append(loadAverage())
        .append('\n');
    out.append(
        String.format(
            Locale.ROOT,
            "artifact: %d safetensors shards x %d BF16 tensors of 16 MiB (xorshift data) +"
                + " config.json = %d bytes (%.2f GiB), on S3Mock 5.2.0 (own JVM, objects on the"
                + " file system of %s)%n",
            shards,
            tensorsPerShard,
            total,
            total / (double) (1L << 30),
            System.getProperty("java.io.tmpdir")));
    out.append("store: PinnedStore under /dev/shm (tmpfs), lock: ")
        .append(first.lock().reason())
        .append(" (")
        .append(first.lock().message())
        .append(")\n\n");

    out.append(
        "Raw parallel ranged GETs (b), sweep (each once, into per-worker direct buffers):\n\n");
    out.append("| concurrency, range size | MB/s | seconds |\n|---|---:|---:|\n");
    for (Pass p : sweep) {
      out.append(
          String.format(
              Locale.ROOT,
              "| %s%s | %.0f | %.2f |%n",
              p.config(),
              p == best ? " **best**" : "",
              p.mbps(),
              p.nanos() / 1e9));
    }
    out.append(
        String.format(
            Locale.ROOT,
            "| %s, into fresh PinnedStore mappings (after %.2f s fallocate + mlock) | %.0f |"
                + " %.2f |%n%n",
            intoStore.config(),
            allocateNanos / 1e9,
            intoStore.mbps(),
            intoStore.nanos() / 1e9));

    out.append(
        "Rounds, back to back: (a) single-stream sequential GET of every file; (b) raw parallel"
            + " ranged GETs at "
            + best.config()
            + "; (c) the loader with the CLI defaults (c=16, 8 MiB) into the store, cold each"
            + " time (MB/s):\n\n");
    out.append(
        "| round | (a) | (b) | (c) loader | loader/(a) | loader/(b) | loader: resolve +"
            + " allocate, ranged reads (MB/s), verify |\n");
    out.append("|---:|---:|---:|---:|---:|---:|---|\n");
    for (Round r : rounds) {
      out.append(
          String.format(
              Locale.ROOT,
              "| %d | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f s, %.2f s (%.0f), %.2f s |%n",
              r.number(),
              r.a().mbps(),
              r.b().mbps(),
              r.c().mbps(),
              r.loaderOverA(),
              r.loaderOverB(),
              r.c().resolveNanos() / 1e9,
              r.c().loadingNanos() / 1e9,
              r.c().loadingMbps(),
              r.c().verifyNanos() / 1e9));
    }
    out.append('\n');
    out.append(
        String.format(
            Locale.ROOT,
            "median over %d rounds: loader/(a) = %.2f, loader/(b best) = %.2f; loader's"
                + " ranged-read phase/(b best) = %.2f%n",
            rounds.size(),
            median(rounds.stream().map(Round::loaderOverA).toList()),
            median(rounds.stream().map(Round::loaderOverB).toList()),
            median(rounds.stream().map(r -> r.c().loadingMbps() / r.b().mbps()).toList())));
    if (atBestRun != null) {
      out.append(
          String.format(
              Locale.ROOT,
              "loader at %s (once, after the rounds): %.0f MB/s (ranged reads %.0f MB/s)%n",
              atBestRun.config(),
              atBestRun.mbps(),
              atBestRun.loadingMbps()));
    }
    out.append(
        String.format(
            Locale.ROOT,
            "run took %.0f s (%.0f s generating and uploading)%n",
            totalSeconds,
            seedSeconds));
    System.out.print(out);
  }
}
