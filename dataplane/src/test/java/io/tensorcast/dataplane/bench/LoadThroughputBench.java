package io.tensorcast.dataplane.bench;

import static io.tensorcast.dataplane.bench.BenchSupport.check;
import static io.tensorcast.dataplane.bench.BenchSupport.deleteTree;
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
import io.tensorcast.dataplane.testing.S3MockServer;
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
 *       xorshift PRNG) plus a {@code config.json}, uploads it and deletes the local copy after
 *       hashing it.
 *   <li>Warms up with one unmeasured parallel pass.
 *   <li>(a) single-stream sequential GET of every file, whole objects, no ranges (AWS SDK, Apache
 *       client), {@code --reps} times.
 *   <li>(b) raw parallel ranged GETs into per-worker direct buffers for each concurrency × range
 *       size of the sweep, once each; the best is the reference. Then once more at the best
 *       configuration into the mappings of a freshly allocated {@link PinnedStore} artifact, to
 *       show what landing in new page-locked tmpfs pages costs by itself.
 *   <li>(c) the full loader ({@link ArtifactLoader}: listing, header reads, allocation and {@code
 *       mlock} in a {@link PinnedStore} under {@code /dev/shm}, parallel ranged reads into the
 *       mappings, SHA-256 verification) with the CLI's defaults, {@code --reps} times, and once
 *       with the best raw configuration; the artifact is unloaded between runs so each starts cold.
 *       The SHA-256 the loader records for every file is checked against the generated files.
 * </ol>
 *
 * <p>Prints rates in MB/s (10^6 bytes per second) and the ratios loader/(a) and loader/(b best).
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
    int reps = 2;
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

      List<Pass> passes = new ArrayList<>();
      try (S3Client client = s3Client(s3)) {
        log("warm-up: one parallel pass (8 x 8 MiB), not measured");
        parallelRangedGets(client, sizes, 8, 8 << 20, null);

        for (int r = 0; r < reps; r++) {
          passes.add(sequential(client, sizes));
          log("%s", describe(passes.get(passes.size() - 1)));
        }
        for (int c : SWEEP_CONCURRENCY) {
          for (int mib : SWEEP_RANGE_MIB) {
            passes.add(parallelRangedGets(client, sizes, c, mib << 20, null));
            log("%s", describe(passes.get(passes.size() - 1)));
          }
        }
      }
      Pass bestRaw = best(passes, "b");
      int bestC = Integer.parseInt(bestRaw.config().replaceAll("c=(\\d+),.*", "$1"));
      int bestRange = Integer.parseInt(bestRaw.config().replaceAll(".*, (\\d+) MiB", "$1"));

      long allocateNanos;
      boolean mayLock = MemoryLockSupport.facts().allows(total + (64L << 20));
      LockPolicy policy = mayLock ? LockPolicy.REQUIRED : LockPolicy.BEST_EFFORT;
      List<LoaderRun> loaderRuns = new ArrayList<>();
      try (PinnedStore store = new PinnedStore(shm, 2 * total + (64L << 20), policy);
          S3Client client = s3Client(s3)) {
        // (b) at its best configuration, but into the store's mappings: what the bytes cost once
        // they land in fresh page-locked tmpfs pages, without the loader's other steps.
        long a0 = System.nanoTime();
        StoredArtifact raw =
            store.allocate(
                "raw",
                sizes.entrySet().stream()
                    .map(e -> new StoreFile(e.getKey(), e.getValue()))
                    .toList());
        allocateNanos = System.nanoTime() - a0;
        passes.add(parallelRangedGets(client, sizes, bestC, bestRange << 20, raw));
        log(
            "%s (after %.2f s fallocate + mlock)",
            describe(passes.get(passes.size() - 1)), allocateNanos / 1e9);
        store.unload("raw");
        ReadOptions defaults = ReadOptions.DEFAULTS;
        for (int r = 0; r < reps; r++) {
          loaderRuns.add(loader(s3, store, defaults, sha256));
        }
        ReadOptions atBest = defaults.withConcurrency(bestC).withRangeSize(bestRange << 20);
        if (!atBest.equals(defaults)) {
          loaderRuns.add(loader(s3, store, atBest, sha256));
        }
      }
      long done = System.nanoTime();

      report(
          started,
          loadAtStart,
          shards,
          tensorsPerShard,
          total,
          passes,
          allocateNanos,
          loaderRuns,
          reps,
          (seeded - t0) / 1e9,
          (done - t0) / 1e9);
    } finally {
      deleteTree(work);
      deleteTree(shm);
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

  /** (b): see {@link BenchSupport#parallelRangedGets}. */
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
            s3.sourceOptions().maxConnections(read.concurrency()).build())) {
      LoaderRun run = BenchSupport.load(src, store, read, sha256);
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

  private static Pass best(List<Pass> passes, String what) {
    return passes.stream()
        .filter(p -> p.what().equals(what))
        .max(Comparator.comparingDouble(Pass::mbps))
        .orElseThrow();
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

  private static void report(
      String started,
      String loadAtStart,
      int shards,
      long tensorsPerShard,
      long total,
      List<Pass> passes,
      long allocateNanos,
      List<LoaderRun> loaderRuns,
      int reps,
      double seedSeconds,
      double totalSeconds)
      throws IOException {
    Pass a = best(passes, "a");
    Pass b = best(passes, "b");
    List<LoaderRun> defaultRuns = loaderRuns.subList(0, reps);
    LoaderRun c = defaultRuns.stream().max(Comparator.comparingDouble(LoaderRun::mbps)).get();
    LoaderRun atBest = loaderRuns.size() > reps ? loaderRuns.get(reps) : null;
    StringBuilder out = new StringBuilder();
    out.append("\n## Tensorcast loader throughput (bench/load-throughput.sh)\n\n");
    out.append("started ").append(started).append("; ").append(machine()).append('\n');
    out.append("load average at start: ").append(loadAtStart).append('\n');
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
        .append(c.lock().reason())
        .append(" (")
        .append(c.lock().message())
        .append(")\n\n");
    out.append("| measurement | configuration | MB/s | seconds |\n");
    out.append("|---|---|---:|---:|\n");
    for (Pass p : passes) {
      String label =
          switch (p.what()) {
            case "a" -> "(a) single-stream sequential GET";
            case "b" -> "(b) raw parallel ranged GETs" + (p == b ? " **best**" : "");
            default ->
                String.format(
                    Locale.ROOT,
                    "(b) same, into PinnedStore mappings (after %.2f s fallocate + mlock)",
                    allocateNanos / 1e9);
          };
      out.append(
          String.format(
              Locale.ROOT,
              "| %s | %s | %.0f | %.2f |%n",
              label,
              p.config(),
              p.mbps(),
              p.nanos() / 1e9));
    }
    for (LoaderRun r : loaderRuns) {
      String label =
          r == atBest
              ? "(c) loader at the best raw configuration"
              : "(c) loader, CLI defaults" + (r == c ? " **best**" : "");
      out.append(
          String.format(
              Locale.ROOT,
              "| %s | %s | %.0f | %.2f |%n",
              label,
              r.config(),
              r.mbps(),
              r.totalNanos() / 1e9));
      out.append(
          String.format(
              Locale.ROOT,
              "| &nbsp;&nbsp;of which: resolve + allocate/mlock %.2f s, ranged reads into the"
                  + " store %.2f s (%.0f MB/s), SHA-256 verify %.2f s | | | |%n",
              r.resolveNanos() / 1e9,
              r.loadingNanos() / 1e9,
              r.loadingMbps(),
              r.verifyNanos() / 1e9));
    }
    out.append('\n');
    out.append(
        String.format(
            Locale.ROOT,
            "loader (CLI defaults, best of %d) = %.0f MB/s: %.2f x (a) single stream (%.0f MB/s),"
                + " %.2f x (b) best raw parallel (%.0f MB/s, %s)%n",
            reps,
            c.mbps(),
            c.mbps() / a.mbps(),
            a.mbps(),
            c.mbps() / b.mbps(),
            b.mbps(),
            b.config()));
    Pass intoStore = best(passes, "s");
    out.append(
        String.format(
            Locale.ROOT,
            "its ranged-read phase alone: %.0f MB/s = %.2f x (b best); raw GETs at %s into fresh"
                + " PinnedStore mappings: %.0f MB/s = %.2f x (b best)%n",
            c.loadingMbps(),
            c.loadingMbps() / b.mbps(),
            intoStore.config(),
            intoStore.mbps(),
            intoStore.mbps() / b.mbps()));
    if (atBest != null) {
      out.append(
          String.format(
              Locale.ROOT,
              "loader at %s = %.0f MB/s: %.2f x (a), %.2f x (b best)%n",
              atBest.config(),
              atBest.mbps(),
              atBest.mbps() / a.mbps(),
              atBest.mbps() / b.mbps()));
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
