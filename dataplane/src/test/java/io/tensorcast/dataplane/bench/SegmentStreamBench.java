package io.tensorcast.dataplane.bench;

import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.consumer.DefaultTensorReadPlanner;
import io.tensorcast.dataplane.consumer.TensorEndpoint;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.http.BodyStreaming;
import io.tensorcast.dataplane.http.ControlServer;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.LoadMetrics;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.tensor.ShardLayoutWriter;
import io.tensorcast.dataplane.tensor.ShardLayoutWriter.TensorBytes;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * Streaming a tensor body of many small segments over HTTP: every segment its own {@code sendfile}
 * ({@link BodyStreaming#ZERO_COPY_ONLY}, the behaviour before gathering) against small segments
 * gathered into pooled direct buffers ({@link BodyStreaming#DEFAULTS}), both served from the same
 * page-locked store in the same run, alternating, and printed as a ratio. A benchmark, not a test:
 * run it with {@code bench/segment-stream.sh [rounds]}.
 *
 * <p>The artifact is a TP=4 layout of one F16 [8192, 4096] tensor (64 MiB) split along dim 1, so
 * each rank file holds 8192 rows of 2 KiB. Reads: the exact shard {@code tp:1/4@1} (one segment of
 * 16 MiB: the zero-copy control), {@code tp:1/8@1} (8192 segments of 1 KiB), {@code full} (32,768
 * segments of 2 KiB) and {@code tp:1/4@0} (8192 segments of 2 KiB). The client is a plain socket on
 * loopback that reads and discards the body; the score is the median over the rounds of wall time
 * per body, and the process CPU time of the same round.
 */
public final class SegmentStreamBench {
  private static final String NAME = "lm_head.weight";
  private static final long ROWS = 8192;
  private static final long COLS = 4096;

  private SegmentStreamBench() {}

  public static void main(String[] args) throws Exception {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 7;
    Path src = Files.createTempDirectory("tensorcast-segment-bench-src-");
    Path shm = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-segment-bench-");
    try {
      byte[] full = new byte[(int) (ROWS * COLS * 2)];
      new Random(1).nextBytes(full);
      ShardLayoutWriter.save(
          src,
          4,
          List.of(),
          List.of(new TensorBytes(NAME, Dtype.F16, new long[] {ROWS, COLS}, ByteBuffer.wrap(full))),
          Map.of(NAME, 1));
      full = null;
      PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
      try (PinnedStore store = new PinnedStore(shm, 256L << 20, LockPolicy.BEST_EFFORT);
          ArtifactSource source = Sources.open("file://" + src, SourceOptions.builder().build())) {
        ArtifactLoader loader =
            new ArtifactLoader(
                source,
                store,
                new ArtifactLoader.Options("bench", 0, ReadOptions.DEFAULTS),
                new LoadMetrics(registry));
        if (loader.load().phase() != Phase.Ready) {
          throw new IllegalStateException("load failed: " + loader.status());
        }
        List<BodyStreaming> modes = List.of(BodyStreaming.ZERO_COPY_ONLY, BodyStreaming.DEFAULTS);
        List<ControlServer> servers = new ArrayList<>();
        try {
          for (BodyStreaming m : modes) {
            servers.add(
                ControlServer.start(
                    new InetSocketAddress("127.0.0.1", 0),
                    loader::status,
                    registry,
                    null,
                    new TensorEndpoint(
                        "bench",
                        () -> loader.status().phase(),
                        () -> store.get("bench"),
                        new DefaultTensorReadPlanner()),
                    null,
                    m));
          }
          run(servers, rounds);
        } finally {
          servers.forEach(ControlServer::close);
        }
      }
    } finally {
      TestFiles.deleteTree(src);
      TestFiles.deleteTree(shm);
    }
  }

  private static void run(List<ControlServer> servers, int rounds) throws IOException {
    String[][] reads = {
      {"target=shard&parallelism=tp:1/4@1", "1 x 16 MiB"},
      {"target=shard&parallelism=tp:1/8@1", "8192 x 1 KiB"},
      {"target=full", "32768 x 2 KiB"},
      {"target=shard&parallelism=tp:1/4@0", "8192 x 2 KiB"},
    };
    System.out.printf(
        "segment streaming over loopback, median of %d rounds (wall ms per body, MB/s, process"
            + " CPU ms per body)%n",
        rounds);
    System.out.printf(
        "%-38s %-14s %10s %9s %8s | %10s %9s %8s | %6s %6s%n",
        "read",
        "segments",
        "0copy ms",
        "MB/s",
        "CPU ms",
        "gather ms",
        "MB/s",
        "CPU ms",
        "wall x",
        "CPU x");
    var os =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    for (String[] read : reads) {
      String path = "/v1/tensors/" + NAME + "?" + read[0];
      long bytes = 0;
      for (int w = 0; w < 3; w++) { // warm-up, both modes
        for (ControlServer s : servers) {
          bytes = fetch(s, path);
        }
      }
      long[][] wall = new long[2][rounds];
      long[][] cpu = new long[2][rounds];
      for (int r = 0; r < rounds; r++) {
        for (int m = 0; m < 2; m++) {
          int mode = (r % 2 == 0) ? m : 1 - m; // alternate which goes first
          long c0 = os.getProcessCpuTime();
          long t0 = System.nanoTime();
          long got = fetch(servers.get(mode), path);
          wall[mode][r] = System.nanoTime() - t0;
          cpu[mode][r] = os.getProcessCpuTime() - c0;
          if (got != bytes) {
            throw new IllegalStateException(path + ": " + got + " bytes, expected " + bytes);
          }
        }
      }
      double[] ms = {median(wall[0]) / 1e6, median(wall[1]) / 1e6};
      double[] cms = {median(cpu[0]) / 1e6, median(cpu[1]) / 1e6};
      System.out.printf(
          "%-38s %-14s %10.2f %9.0f %8.2f | %10.2f %9.0f %8.2f | %6.2f %6.2f%n",
          read[0],
          read[1],
          ms[0],
          bytes / ms[0] / 1e3,
          cms[0],
          ms[1],
          bytes / ms[1] / 1e3,
          cms[1],
          ms[0] / ms[1],
          cms[0] / cms[1]);
    }
    System.out.println(
        "wall x / CPU x: zero-copy-only time divided by gathered time (>1 = faster)");
  }

  private static long median(long[] v) {
    long[] s = v.clone();
    Arrays.sort(s);
    return s[s.length / 2];
  }

  /** GET over a fresh connection; reads and discards the body; returns its length. */
  private static long fetch(ControlServer server, String path) throws IOException {
    try (Socket socket = new Socket("127.0.0.1", server.address().getPort())) {
      socket.setReceiveBufferSize(1 << 20);
      OutputStream out = socket.getOutputStream();
      out.write(
          ("GET " + path + " HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
              .getBytes(StandardCharsets.US_ASCII));
      out.flush();
      InputStream in = socket.getInputStream();
      StringBuilder head = new StringBuilder();
      while (!head.toString().endsWith("\r\n\r\n")) {
        int b = in.read();
        if (b < 0) {
          throw new IOException("connection closed in the response head: " + head);
        }
        head.append((char) b);
      }
      if (!head.toString().startsWith("HTTP/1.1 200")) {
        throw new IOException("not 200: " + head);
      }
      long length = -1;
      for (String line : head.toString().split("\r\n")) {
        if (line.toLowerCase(java.util.Locale.ROOT).startsWith("content-length:")) {
          length = Long.parseLong(line.substring(15).trim());
        }
      }
      byte[] buf = new byte[1 << 20];
      long got = 0;
      while (got < length) {
        int n = in.read(buf, 0, (int) Math.min(buf.length, length - got));
        if (n < 0) {
          break;
        }
        got += n;
      }
      return got;
    }
  }
}
