package io.tensorcast.dataplane.bench;

import io.tensorcast.dataplane.http.ControlToken;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.write.WriteClient;
import io.tensorcast.dataplane.write.WriteServer;
import io.tensorcast.dataplane.write.WriteService;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The write-path benchmarks (plain {@code main}s, driven by {@code bench/write-paths.sh} and {@code
 * bench/write-netns.sh}; not tests).
 *
 * <ul>
 *   <li>{@code paths STORE_ROOT SIZE_MIB TENSORS ROUNDS}: puts one version of {@code SIZE_MIB} in
 *       {@code TENSORS} BF16 tensors into a write service on a unix socket, once through the HTTP
 *       body (the bytes cross the socket) and once zero-copy (reserve, fill the segment file
 *       through its path, commit without and with the tensors' SHA-256 for the data plane to
 *       check), then seals; {@code ROUNDS} times each, alternating; prints MB/s of put and of
 *       put+seal, and their ratio.
 *   <li>{@code write SOCKET TOKEN_FILE WRITES_DIR VERSION SIZE_MIB TENSORS}: one zero-copy version
 *       of a TP=2 layout (two rank files written by this one writer), sealed; prints the seal's
 *       wall-clock time in milliseconds ({@code sealed_at_ms=...}) for the netns benchmark.
 * </ul>
 */
public final class WriteBench {
  private WriteBench() {}

  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "paths" ->
          paths(
              Path.of(args[1]),
              Integer.parseInt(args[2]),
              Integer.parseInt(args[3]),
              Integer.parseInt(args[4]));
      case "write" ->
          write(
              Path.of(args[1]),
              Files.readString(Path.of(args[2])).strip(),
              Path.of(args[3]),
              args[4],
              Integer.parseInt(args[5]),
              Integer.parseInt(args[6]));
      default -> throw new IllegalArgumentException("paths | write");
    }
  }

  /** Deterministic filler (xorshift), so the two paths move the same bytes. */
  private static ByteBuffer tensor(long bytes, long seed) {
    ByteBuffer b = ByteBuffer.allocateDirect((int) bytes).order(ByteOrder.LITTLE_ENDIAN);
    long x = seed * 0x9E3779B97F4A7C15L + 1;
    while (b.remaining() >= 8) {
      x ^= x << 13;
      x ^= x >>> 7;
      x ^= x << 17;
      b.putLong(x);
    }
    return b.flip();
  }

  private static List<WriteClient.Tensor> tensors(int mib, int count, String partition, int seed) {
    long each = (long) mib * (1 << 20) / count;
    long cols = 2048;
    long rows = each / 2 / cols;
    List<WriteClient.Tensor> out = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      out.add(
          new WriteClient.Tensor(
              "layers." + i + ".weight",
              "BF16",
              new long[] {rows, cols},
              partition,
              null,
              tensor(rows * cols * 2, seed * 1000L + i)));
    }
    return out;
  }

  private static void paths(Path root, int mib, int count, int rounds) throws Exception {
    Files.createDirectories(root);
    String token = "bench-write-token-0123456789";
    Path tokenFile = Files.writeString(Files.createTempFile("write-token", ""), token);
    try (PinnedStore store = new PinnedStore(root, 4L << 30, LockPolicy.BEST_EFFORT);
        WriteService service =
            new WriteService(
                store, new WriteService.Settings("bench", 1 << 20, Duration.ofMinutes(5), 64));
        WriteServer server =
            WriteServer.start(
                service,
                new ControlToken(tokenFile),
                service.writesDirectory().resolve("write.sock"),
                null,
                null);
        WriteClient c = WriteClient.unix(server.socket(), token)) {
      List<WriteClient.Tensor> data = tensors(mib, count, null, 1);
      long bytes = (long) mib << 20;
      System.out.printf(
          "%d MiB in %d BF16 tensors; store %s (%s)%n", mib, count, root, store.policy());
      System.out.printf(
          "%-5s %-14s %10s %10s %12s %12s%n",
          "round", "path", "put s", "seal s", "put MB/s", "put+seal MB/s");
      double[] httpPut = new double[rounds];
      double[] zeroPut = new double[rounds];
      for (int r = 0; r < rounds; r++) {
        for (String path : List.of("http", "zero-copy", "zero-copy+sha")) {
          String v = path.equals("http") ? "h" + r : path.equals("zero-copy") ? "z" + r : "s" + r;
          c.create(v, null, Map.of()).ok();
          long t0 = System.nanoTime();
          if (path.equals("http")) {
            c.putBatch(v, data, false).ok();
          } else {
            c.putReserved(v, data, false, service.writesDirectory(), path.endsWith("sha")).ok();
          }
          long t1 = System.nanoTime();
          c.seal(v).ok();
          long t2 = System.nanoTime();
          double put = (t1 - t0) / 1e9;
          double seal = (t2 - t1) / 1e9;
          if (path.equals("http")) {
            httpPut[r] = put;
          } else if (path.equals("zero-copy")) {
            zeroPut[r] = put;
          }
          System.out.printf(
              Locale.ROOT,
              "%-5d %-14s %10.2f %10.2f %12.0f %12.0f%n",
              r + 1,
              path,
              put,
              seal,
              bytes / 1e6 / put,
              bytes / 1e6 / (put + seal));
          c.json("DELETE", "/v1/writes/" + v, null).ok();
        }
      }
      java.util.Arrays.sort(httpPut);
      java.util.Arrays.sort(zeroPut);
      System.out.printf(
          Locale.ROOT,
          "median put: http %.2f s, zero-copy %.2f s; zero-copy/http time = %.2f%n",
          httpPut[rounds / 2],
          zeroPut[rounds / 2],
          zeroPut[rounds / 2] / httpPut[rounds / 2]);
    } finally {
      Files.deleteIfExists(tokenFile);
    }
  }

  private static void write(
      Path socket, String token, Path writes, String version, int mib, int count) throws Exception {
    try (WriteClient c = WriteClient.unix(socket, token)) {
      c.create(version, "RLCheckpoint", Map.of("step", version)).ok();
      for (int r = 0; r < 2; r++) {
        c.putReserved(
                version, tensors(mib / 2, count / 2, "tp:" + r + "/2@0", r + 1), false, writes)
            .ok();
      }
      long t0 = System.currentTimeMillis();
      c.seal(version).ok();
      long sealed = System.currentTimeMillis();
      System.out.println("seal_ms=" + (sealed - t0));
      System.out.println("sealed_at_ms=" + sealed);
    }
  }
}
