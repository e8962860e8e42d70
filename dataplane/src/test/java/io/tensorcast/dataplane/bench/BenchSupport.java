package io.tensorcast.dataplane.bench;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.LoadMetrics;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.http.apache.ApacheHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;

/**
 * Helpers shared by the benchmarks ({@link LoadThroughputBench}, {@link SourceSweepBench}): raw
 * parallel ranged GETs, a timed loader run, hashing, machine description and clean-up.
 */
final class BenchSupport {
  private BenchSupport() {}

  /** Opens the body of bytes {@code [offset, offset + length)} of a file, the raw way. */
  @FunctionalInterface
  interface RangeOpener {
    InputStream open(String file, long offset, long length) throws Exception;
  }

  /** An S3 client for S3Mock: Apache HTTP client with 64 connections, path style. */
  static S3Client s3Client(S3MockServer s3) {
    return S3Client.builder()
        .httpClient(ApacheHttpClient.builder().maxConnections(64).build())
        .endpointOverride(s3.endpoint())
        .region(Region.of(S3MockServer.REGION))
        .forcePathStyle(true)
        .credentialsProvider(
            StaticCredentialsProvider.create(
                AwsBasicCredentials.create(S3MockServer.ACCESS_KEY, S3MockServer.SECRET_KEY)))
        .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
        .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED)
        .build();
  }

  /**
   * Every {@code rangeSize} range of every file ({@code sizes}: name → bytes), {@code concurrency}
   * at a time, into one reused direct buffer per worker (at most 8 MiB, refilled from its start
   * when full, so 64 workers of 64 MiB ranges do not need 4 GiB), or into the mappings of {@code
   * stored} when given. Checks every range's length.
   *
   * @return wall time in nanoseconds
   */
  static long parallelRangedGets(
      RangeOpener opener,
      Map<String, Long> sizes,
      int concurrency,
      int rangeSize,
      StoredArtifact stored)
      throws Exception {
    List<Object[]> ranges = new ArrayList<>();
    for (Map.Entry<String, Long> e : sizes.entrySet()) {
      for (long off = 0; off < e.getValue(); off += rangeSize) {
        ranges.add(new Object[] {e.getKey(), off, Math.min(rangeSize, e.getValue() - off)});
      }
    }
    long expected = sizes.values().stream().mapToLong(Long::longValue).sum();
    AtomicInteger next = new AtomicInteger();
    AtomicLong bytes = new AtomicLong();
    ExecutorService pool = Executors.newFixedThreadPool(concurrency);
    long start = System.nanoTime();
    try {
      List<Future<?>> workers = new ArrayList<>();
      for (int w = 0; w < concurrency; w++) {
        workers.add(
            pool.submit(
                () -> {
                  ByteBuffer own =
                      stored == null
                          ? ByteBuffer.allocateDirect(Math.min(rangeSize, 8 << 20))
                          : null;
                  byte[] staging = new byte[256 * 1024];
                  for (int i = next.getAndIncrement();
                      i < ranges.size();
                      i = next.getAndIncrement()) {
                    String key = (String) ranges.get(i)[0];
                    long off = (Long) ranges.get(i)[1];
                    long len = (Long) ranges.get(i)[2];
                    ByteBuffer target =
                        stored == null ? own.clear() : stored.writable(key, off, (int) len);
                    long received = 0;
                    try (InputStream in = opener.open(key, off, len)) {
                      for (int r = in.read(staging); r >= 0; r = in.read(staging)) {
                        if (stored == null && target.remaining() < r) {
                          target.clear();
                        }
                        target.put(staging, 0, r);
                        received += r;
                      }
                    }
                    check(received, len, key + " @" + off);
                    bytes.addAndGet(received);
                  }
                  return null;
                }));
      }
      for (Future<?> f : workers) {
        f.get();
      }
    } finally {
      pool.shutdownNow();
    }
    long nanos = System.nanoTime() - start;
    check(bytes.get(), expected, "all ranges");
    return nanos;
  }

  static void check(long got, long expected, String what) {
    if (got != expected) {
      throw new IllegalStateException(what + ": received " + got + " bytes, expected " + expected);
    }
  }

  /** Wall time of the whole load and of its phases, as observed by polling the status. */
  record LoaderRun(
      String config,
      long bytes,
      long totalNanos,
      long resolveNanos,
      long loadingNanos,
      long verifyNanos,
      DataPlaneStatus.LockInfo lock) {
    double mbps() {
      return bytes / (totalNanos / 1e9) / 1e6;
    }

    double loadingMbps() {
      return bytes / (loadingNanos / 1e9) / 1e6;
    }
  }

  /**
   * Loads {@code src} into {@code store} with {@link ArtifactLoader}, checks the SHA-256 the loader
   * records for every file against {@code sha256} (name → hex), unloads it again and returns the
   * timings.
   */
  static LoaderRun load(
      ArtifactSource src, PinnedStore store, ReadOptions read, Map<String, String> sha256)
      throws Exception {
    String id = "bench";
    ArtifactLoader loader =
        new ArtifactLoader(
            src,
            store,
            new ArtifactLoader.Options(id, 0, read),
            new LoadMetrics(new SimpleMeterRegistry()));
    Map<Phase, Long> firstSeen = new LinkedHashMap<>();
    Thread watcher =
        new Thread(
            () -> {
              while (!Thread.currentThread().isInterrupted()) {
                firstSeen.putIfAbsent(loader.status().phase(), System.nanoTime());
                try {
                  Thread.sleep(2);
                } catch (InterruptedException e) {
                  return;
                }
              }
            },
            "phase-watcher");
    long start = System.nanoTime();
    watcher.start();
    DataPlaneStatus s;
    try {
      s = loader.load();
    } finally {
      watcher.interrupt();
      watcher.join();
    }
    long end = System.nanoTime();
    try {
      // the load records the source's digest where it publishes one: hash the store's bytes
      StoredArtifact stored = store.get(id).orElseThrow();
      for (DataPlaneStatus.FileStatus f : s.fileStatuses()) {
        String held = stored.sha256(f.path());
        if (!held.equals(sha256.get(f.path()))) {
          throw new IllegalStateException(
              f.path()
                  + ": the store holds sha256 "
                  + held
                  + ", generated "
                  + sha256.get(f.path()));
        }
      }
      if (s.fileStatuses().size() != sha256.size()) {
        throw new IllegalStateException(
            "loaded " + s.fileStatuses().size() + " files, expected " + sha256.size());
      }
    } finally {
      store.unload(id);
    }
    long loading = firstSeen.getOrDefault(Phase.Loading, start);
    long verifying = firstSeen.getOrDefault(Phase.Verifying, end);
    return new LoaderRun(
        "c=" + read.concurrency() + ", " + (read.rangeSize() >> 20) + " MiB",
        s.bytesTotal(),
        end - start,
        loading - start,
        verifying - loading,
        end - verifying,
        s.lock());
  }

  static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  /** SHA-256 of a file, hex. */
  static String sha256(Path f) throws IOException {
    MessageDigest md = sha256();
    byte[] buf = new byte[1 << 20];
    try (InputStream in = Files.newInputStream(f)) {
      for (int r = in.read(buf); r >= 0; r = in.read(buf)) {
        md.update(buf, 0, r);
      }
    }
    return HexFormat.of().formatHex(md.digest());
  }

  static String machine() throws IOException {
    String cpu = "unknown CPU";
    for (String line : Files.readAllLines(Path.of("/proc/cpuinfo"))) {
      if (line.startsWith("model name")) {
        cpu = line.substring(line.indexOf(':') + 1).strip();
        break;
      }
    }
    long memKb = 0;
    for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
      if (line.startsWith("MemTotal:")) {
        memKb = Long.parseLong(line.replaceAll("\\D", ""));
      }
    }
    return String.format(
        Locale.ROOT,
        "%d CPUs (%s), %.1f GiB RAM, Linux %s, Java %s",
        Runtime.getRuntime().availableProcessors(),
        cpu,
        memKb / 1024.0 / 1024.0,
        System.getProperty("os.version"),
        System.getProperty("java.runtime.version"));
  }

  static String loadAverage() {
    try {
      return Files.readString(Path.of("/proc/loadavg")).strip();
    } catch (IOException e) {
      return "unknown";
    }
  }

  static void log(String format, Object... args) {
    System.out.printf(Locale.ROOT, "[bench] " + format + "%n", args);
  }
}
