package io.tensorcast.dataplane.consumer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.testing.TestFiles;
import io.tensorcast.testing.TestPorts;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A multi-hundred-MiB tensor read over HTTP from {@code dataplane serve} running as the real jar in
 * a child JVM whose heap is 64 MiB and direct memory 16 MiB: the body can only get out if it is
 * streamed from the store file (sendfile), never gathered in a buffer. The bytes are checked by
 * SHA-256 against the source file.
 */
class BigTensorStreamIT {
  private static final String ID = "big";
  private static final long ROWS = 32_768;
  private static final long COLS = 4_096;

  private static Path work;
  private static Path shm;
  private static Path model;
  private static Path log;
  private static Process process;
  private static int port;
  private static TensorInfo big;
  private static long dataOffset;

  private final HttpClient http =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  @BeforeAll
  static void start() throws Exception {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    Path jar = Path.of("target", "tensorcast-dataplane.jar").toAbsolutePath();
    assertThat(jar)
        .as("the dataplane jar (built by `mvn -pl dataplane -am package` before the ITs)")
        .isRegularFile();
    work = Files.createTempDirectory("tensorcast-big-tensor-it-");
    shm = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-big-tensor-it-");
    model = work.resolve("model.safetensors");
    SafetensorsHeader h =
        SafetensorsWriter.write(
            model,
            List.of(
                new TensorDeclaration(
                    "model.embed_tokens.weight", Dtype.BF16, new long[] {ROWS, COLS}),
                new TensorDeclaration("model.norm.weight", Dtype.F32, new long[] {COLS})),
            Map.of(),
            (t, out) -> {
              ByteBuffer block = ByteBuffer.allocate(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
              long word = t.name().hashCode();
              for (long left = t.byteLength(); left > 0; ) {
                block.clear();
                while (block.hasRemaining()) {
                  block.putLong(mix(word++));
                }
                block.flip().limit((int) Math.min(block.capacity(), left));
                left -= block.remaining();
                while (block.hasRemaining()) {
                  out.write(block);
                }
              }
            });
    big = h.tensor("model.embed_tokens.weight").orElseThrow();
    dataOffset = h.dataOffset();
    assertThat(big.byteLength()).isEqualTo(256L << 20);

    port = TestPorts.freePort();
    log = work.resolve("serve.log");
    List<String> cmd =
        List.of(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-Xmx64m",
            "-XX:MaxDirectMemorySize=16m",
            "-jar",
            jar.toString(),
            "serve",
            "--uri",
            "file://" + work,
            "--include",
            "*.safetensors",
            "--store-root",
            shm.toString(),
            "--budget",
            "1Gi",
            "--artifact-id",
            ID,
            "--concurrency",
            "2",
            "--range-size",
            "4Mi",
            "--listen",
            "127.0.0.1:" + port,
            "--read-token-file",
            Files.writeString(work.resolve("read-token"), TensorReadIT.TOKEN).toString());
    process =
        new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    HttpClient probe = HttpClient.newHttpClient();
    await("/readyz 200")
        .atMost(Duration.ofSeconds(90))
        .pollInterval(Duration.ofMillis(100))
        .until(
            () -> {
              assertThat(process.isAlive()).as("dataplane serve runs; log: %s", log).isTrue();
              try {
                return probe
                        .send(
                            HttpRequest.newBuilder(url("/readyz")).build(),
                            HttpResponse.BodyHandlers.discarding())
                        .statusCode()
                    == 200;
              } catch (IOException notYet) {
                return false;
              }
            });
  }

  @AfterAll
  static void stop() throws Exception {
    if (process != null) {
      process.destroy();
      if (!process.waitFor(30, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
      System.out.println("---- dataplane serve log ----\n" + Files.readString(log));
    }
    TestFiles.deleteTree(shm);
    TestFiles.deleteTree(work);
  }

  @Test
  void aHugeRangeAndTheWholeTensorStreamWithA64MiBHeap() throws Exception {
    long n = big.byteLength();
    String path = "/v1/tensors/model.embed_tokens.weight";

    HttpResponse<InputStream> ranged = get(path, "bytes=1000-");
    assertThat(ranged.statusCode()).isEqualTo(206);
    assertThat(ranged.headers().firstValue("content-range"))
        .contains("bytes 1000-" + (n - 1) + "/" + n);
    assertThat(digest(ranged.body())).isEqualTo(sourceDigest(1000, n - 1000));

    HttpResponse<InputStream> whole = get(path, null);
    assertThat(whole.statusCode()).isEqualTo(200);
    assertThat(whole.headers().firstValue("x-tensor-shape")).contains(ROWS + "," + COLS);
    assertThat(whole.headers().firstValue("x-tensor-dtype")).contains("BF16");
    assertThat(digest(whole.body())).isEqualTo(sourceDigest(0, n));

    assertThat(process.isAlive()).isTrue();
    assertThat(Files.readString(log)).doesNotContain("OutOfMemoryError");
  }

  /**
   * A shard split along the last dim is 32,768 row segments of 2 KiB: gathered into pooled direct
   * buffers (at most 4 MiB in flight per connection), two bodies at once, under the child's 16 MiB
   * direct-memory limit.
   */
  @Test
  void aRowPerSegmentShardIsGatheredWithBoundedDirectMemory() throws Exception {
    long rowBytes = COLS * 2;
    long cut = rowBytes / 4;
    String path = "/v1/tensors/model.embed_tokens.weight?target=shard&parallelism=tp:";
    HttpResponse<InputStream> a = get(path + "1/4@1", null);
    HttpResponse<InputStream> b = get(path + "3/4@1", null);
    assertThat(a.statusCode()).isEqualTo(200);
    assertThat(b.statusCode()).isEqualTo(200);
    assertThat(a.headers().firstValue("x-tensor-shape")).contains(ROWS + "," + COLS / 4);
    java.util.concurrent.Future<String> second =
        java.util.concurrent.ForkJoinPool.commonPool().submit(() -> digest(b.body()));
    assertThat(digest(a.body())).isEqualTo(columnDigest(cut, cut));
    assertThat(second.get(120, TimeUnit.SECONDS)).isEqualTo(columnDigest(3 * cut, cut));
    assertThat(process.isAlive()).isTrue();
    assertThat(Files.readString(log)).doesNotContain("OutOfMemoryError");
  }

  // ------------------------------------------------------------------ helpers

  /** The digest of bytes [from, from + width) of every row of the source tensor, in row order. */
  private static String columnDigest(long from, long width) throws Exception {
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    ByteBuffer buf = ByteBuffer.allocate((int) width);
    long rowBytes = COLS * 2;
    try (FileChannel ch = FileChannel.open(model, StandardOpenOption.READ)) {
      for (long row = 0; row < ROWS; row++) {
        buf.clear();
        long pos = dataOffset + big.begin() + row * rowBytes + from;
        while (buf.hasRemaining()) {
          assertThat(ch.read(buf, pos + buf.position())).isPositive();
        }
        md.update(buf.flip());
      }
    }
    return ROWS * width + ":" + HexFormat.of().formatHex(md.digest());
  }

  private HttpResponse<InputStream> get(String path, String range) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(url(path))
            .header("Authorization", "Bearer " + TensorReadIT.TOKEN)
            .timeout(Duration.ofSeconds(120));
    if (range != null) {
      b.header("Range", range);
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofInputStream());
  }

  private static URI url(String path) {
    return URI.create("http://127.0.0.1:" + port + path);
  }

  /** SHA-256 (hex) and byte count of a stream: "count:hex". */
  private static String digest(InputStream in) throws Exception {
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    byte[] buf = new byte[1 << 16];
    long count = 0;
    try (in) {
      for (int r; (r = in.read(buf)) >= 0; ) {
        md.update(buf, 0, r);
        count += r;
      }
    }
    return count + ":" + HexFormat.of().formatHex(md.digest());
  }

  /** The same digest over tensor bytes [from, from + count) of the source file. */
  private static String sourceDigest(long from, long count) throws Exception {
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    ByteBuffer buf = ByteBuffer.allocate(1 << 20);
    try (FileChannel ch = FileChannel.open(model, StandardOpenOption.READ)) {
      long pos = dataOffset + big.begin() + from;
      long end = pos + count;
      while (pos < end) {
        buf.clear().limit((int) Math.min(buf.capacity(), end - pos));
        int r = ch.read(buf, pos);
        assertThat(r).isPositive();
        md.update(buf.flip());
        pos += r;
      }
    }
    return count + ":" + HexFormat.of().formatHex(md.digest());
  }

  private static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
