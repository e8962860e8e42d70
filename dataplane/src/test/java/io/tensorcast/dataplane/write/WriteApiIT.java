package io.tensorcast.dataplane.write;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.http.ControlToken;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.tensor.FileByteSource;
import io.tensorcast.dataplane.tensor.NaiveSlicer;
import io.tensorcast.dataplane.tensor.ReadTarget;
import io.tensorcast.dataplane.tensor.Reconstructor;
import io.tensorcast.dataplane.tensor.ShardManifest;
import io.tensorcast.dataplane.tensor.StoredLayout;
import io.tensorcast.dataplane.tensor.TensorParallelism;
import io.tensorcast.dataplane.tensor.TensorReadPlanner;
import io.tensorcast.dataplane.write.WriteClient.Tensor;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The put API over its real unix socket into a real page-locked store under /dev/shm: HTTP puts
 * (single, batch, writer partitions), the zero-copy reservation path, seal, and every kind of bad
 * input refused with its reason while nothing already written is lost. Every stored byte is checked
 * against slices computed element by element ({@link NaiveSlicer}).
 */
@Timeout(120)
class WriteApiIT {
  private static final String TOKEN = "write-token-0123456789";

  private Path root;
  private PinnedStore store;
  private WriteService service;
  private WriteServer server;
  private WriteClient client;

  @BeforeEach
  void start() throws Exception {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    root = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-write-it-");
    store = new PinnedStore(root, 1L << 30, LockPolicy.BEST_EFFORT);
    service =
        new WriteService(
            store, new WriteService.Settings("writer-a", 64 * 1024, Duration.ofMinutes(5), 8));
    Path tokenFile = Files.writeString(root.resolveSibling(root.getFileName() + ".token"), TOKEN);
    server =
        WriteServer.start(
            service,
            new ControlToken(tokenFile),
            service.writesDirectory().resolve("write.sock"),
            null,
            null);
    client = WriteClient.unix(server.socket(), TOKEN);
  }

  @AfterEach
  void stop() throws Exception {
    if (client != null) {
      client.close();
    }
    if (server != null) {
      server.close();
    }
    if (service != null) {
      service.close();
    }
    if (store != null) {
      store.close();
    }
    if (root != null) {
      try (Stream<Path> s = Files.walk(root)) {
        s.sorted((a, b) -> b.compareTo(a)).forEach(p -> p.toFile().delete());
      }
      Files.deleteIfExists(root.resolveSibling(root.getFileName() + ".token"));
    }
  }

  private static Tensor tensor(String name, Dtype dtype, long[] shape, byte[] data) {
    return new Tensor(name, dtype.name(), shape, null, null, ByteBuffer.wrap(data));
  }

  private static Tensor partition(String name, long[] shape, byte[] full, String wp) {
    return new Tensor(name, "BF16", shape, null, wp, ByteBuffer.wrap(full));
  }

  private byte[] read(String version, String name, ReadTarget target) throws Exception {
    Path dir = root.resolve(version);
    StoredLayout layout = StoredLayout.open(dir);
    try (FileByteSource src = FileByteSource.channels(dir)) {
      ByteBuffer b = Reconstructor.read(TensorReadPlanner.plan(layout, name, target), src);
      byte[] out = new byte[b.remaining()];
      b.get(out);
      return out;
    }
  }

  @Test
  void plainPutsAndBatchSealIntoOneSafetensorsFileWhoseBytesAreThePuts() throws Exception {
    byte[] a = NaiveSlicer.data(Dtype.F32, new long[] {64, 33}, 1);
    byte[] b = NaiveSlicer.data(Dtype.BF16, new long[] {7, 5, 3}, 2);
    byte[] c = NaiveSlicer.data(Dtype.I8, new long[] {1000}, 3);
    byte[] scalar = NaiveSlicer.data(Dtype.F64, new long[] {}, 4);
    assertThat(client.create("step-1", "RLCheckpoint", Map.of("step", "1")).ok().status())
        .isEqualTo(201);
    assertThat(client.create("step-1", "RLCheckpoint", Map.of("step", "1")).status())
        .as("a repeated create is idempotent")
        .isEqualTo(200);
    client
        .putTensor("step-1", tensor("embed/weight", Dtype.F32, new long[] {64, 33}, a), false)
        .ok();
    JsonNode batch =
        client
            .putBatch(
                "step-1",
                List.of(
                    tensor("layers.0.b", Dtype.BF16, new long[] {7, 5, 3}, b),
                    tensor("layers.0.c", Dtype.I8, new long[] {1000}, c),
                    tensor("scale", Dtype.F64, new long[] {}, scalar)),
                false)
            .ok()
            .json();
    assertThat(batch.get("tensors").asInt()).isEqualTo(3);
    assertThat(batch.get("bytesReceived").asLong()).isEqualTo(b.length + c.length + 8);

    JsonNode seal = client.seal("step-1").ok().json();
    assertThat(seal.get("layout").asText()).isEqualTo("plain");
    assertThat(seal.get("files")).hasSize(1);
    assertThat(seal.get("files").get(0).get("path").asText()).isEqualTo("model.safetensors");

    Path file = root.resolve("step-1/model.safetensors");
    SafetensorsHeader h = SafetensorsHeader.read(file);
    assertThat(h.metadata()).containsEntry("step", "1");
    assertThat(h.tensors().stream().map(t -> t.name()).toList())
        .containsExactly("embed/weight", "layers.0.b", "layers.0.c", "scale");
    assertThat(read("step-1", "embed/weight", ReadTarget.full())).isEqualTo(a);
    assertThat(read("step-1", "layers.0.b", ReadTarget.full())).isEqualTo(b);
    assertThat(read("step-1", "layers.0.c", ReadTarget.full())).isEqualTo(c);
    assertThat(read("step-1", "scale", ReadTarget.full())).isEqualTo(scalar);
    assertThat(seal.get("files").get(0).get("sha256").asText())
        .isEqualTo(WriteClient.sha256(ByteBuffer.wrap(Files.readAllBytes(file))));
    assertThat(store.get("step-1").orElseThrow().isComplete()).isTrue();
    SealRecord record =
        SealRecord.parse(
            client
                .get("step-1")
                .ok()
                .json()
                .get("seal")
                .toString()
                .getBytes(StandardCharsets.UTF_8));
    byte[] all = Files.readAllBytes(file);
    for (var p : record.pieceMap().pieces()) {
      assertThat(record.pieces().get(p.index()))
          .isEqualTo(WriteClient.sha256(ByteBuffer.wrap(all, (int) p.offset(), p.length())));
    }
    assertThat(Files.list(service.writesDirectory().resolve("step-1")).count())
        .as("no segment left after the seal")
        .isZero();
  }

  @Test
  void writerPartitionsSealIntoTheShardLayoutReadableInAnotherTpSize() throws Exception {
    long[] q = {8, 12};
    long[] o = {6, 16};
    long[] norm = {12};
    byte[] qFull = NaiveSlicer.data(Dtype.BF16, q, 11);
    byte[] oFull = NaiveSlicer.data(Dtype.BF16, o, 12);
    byte[] normFull = NaiveSlicer.data(Dtype.BF16, norm, 13);
    // Two versions hold ranks {0, 1} and {2, 3} of one TP=4 layout, as two writer nodes would.
    for (int half = 0; half < 2; half++) {
      String v = "rl-7-" + half;
      client.create(v, "RLCheckpoint", Map.of("step", "7")).ok();
      for (int r = 2 * half; r < 2 * half + 2; r++) {
        // Each rank writer holds every full tensor and stores only its shard; the norm, which
        // every rank holds whole, goes without a partition and is replicated.
        client
            .putBatch(
                v,
                List.of(
                    partition("q", q, qFull, "tp:" + r + "/4@0"),
                    partition("o", o, oFull, "tp:" + r + "/4@1"),
                    tensor("norm", Dtype.BF16, norm, normFull)),
                false)
            .ok();
      }
      JsonNode rec = client.seal(v).ok().json();
      assertThat(rec.get("layout").asText()).isEqualTo("shards");
      assertThat(rec.get("tpSize").asInt()).isEqualTo(4);
      assertThat(rec.get("ranks").toString())
          .isEqualTo("[" + 2 * half + "," + (2 * half + 1) + "]");
    }
    Path whole = Files.createDirectory(root.resolve("whole"));
    Files.copy(root.resolve("rl-7-0/manifest.json"), whole.resolve("manifest.json"));
    assertThat(Files.readAllBytes(root.resolve("rl-7-1/manifest.json")))
        .as("both writers write the same manifest")
        .isEqualTo(Files.readAllBytes(whole.resolve("manifest.json")));
    for (int r = 0; r < 4; r++) {
      Files.copy(
          root.resolve("rl-7-" + r / 2).resolve(ShardManifest.rankFileName(r)),
          whole.resolve(ShardManifest.rankFileName(r)));
      SafetensorsHeader h = SafetensorsHeader.read(whole.resolve(ShardManifest.rankFileName(r)));
      assertThat(h.metadata())
          .containsEntry("tp_rank", "" + r)
          .containsEntry("tp_size", "4")
          .containsEntry("step", "7");
    }
    ShardManifest m = ShardManifest.read(whole.resolve("manifest.json"));
    assertThat(m.entry("q").splitDim()).isEqualTo(0);
    assertThat(m.entry("o").splitDim()).isEqualTo(1);
    assertThat(m.entry("norm").splitDim()).isNull();
    for (int r = 0; r < 4; r++) {
      assertThat(read("whole", "q", ReadTarget.shard(TensorParallelism.tp(r, 4, 0))))
          .isEqualTo(NaiveSlicer.shard(qFull, q, 2, 0, r, 4));
    }
    for (int r = 0; r < 2; r++) {
      assertThat(read("whole", "q", ReadTarget.shard(TensorParallelism.tp(r, 2, 0))))
          .isEqualTo(NaiveSlicer.shard(qFull, q, 2, 0, r, 2));
      assertThat(read("whole", "o", ReadTarget.shard(TensorParallelism.tp(r, 2, 1))))
          .isEqualTo(NaiveSlicer.shard(oFull, o, 2, 1, r, 2));
    }
    assertThat(read("whole", "o", ReadTarget.full())).isEqualTo(oFull);
    assertThat(read("whole", "norm", ReadTarget.full())).isEqualTo(normFull);
  }

  @Test
  void aReservationFilledThroughTheSharedDirectoryIsMovedIntoTheArtifactWithoutACopy()
      throws Exception {
    byte[] w0 = NaiveSlicer.data(Dtype.F16, new long[] {256, 64}, 21);
    byte[] w1 = NaiveSlicer.data(Dtype.F16, new long[] {256, 64}, 22);
    client.create("kv-3fa9c2d1", "KVCache", Map.of("prefix_sha256", "3fa9c2d1")).ok();
    JsonNode res =
        client
            .json(
                "POST",
                "/v1/writes/kv-3fa9c2d1/reservations",
                WriteJson.JSON.readTree(
                    "{\"tensors\":[{\"name\":\"k\",\"dtype\":\"F16\",\"shape\":[256,64]},"
                        + "{\"name\":\"v\",\"dtype\":\"F16\",\"shape\":[256,64]}]}"))
            .ok()
            .json();
    Path segment = service.writesDirectory().resolve(res.get("file").asText());
    assertThat(segment).isRegularFile();
    Object inode = Files.getAttribute(segment, "unix:ino");
    // A commit whose declared sha256 does not match what was written is refused and drops it.
    try (var ch =
        java.nio.channels.FileChannel.open(segment, java.nio.file.StandardOpenOption.WRITE)) {
      ch.write(ByteBuffer.wrap(w0), res.get("tensors").get(0).get("offset").asLong());
      ch.write(ByteBuffer.wrap(w1), res.get("tensors").get(1).get("offset").asLong());
    }
    String good = WriteClient.sha256(ByteBuffer.wrap(w0));
    String bad = WriteClient.sha256(ByteBuffer.wrap(w1));
    WriteClient.Response refused =
        client.json(
            "POST",
            "/v1/writes/kv-3fa9c2d1/reservations/" + res.get("id").asInt() + "/commit",
            WriteJson.JSON.readTree("{\"sha256\":{\"k\":\"" + bad + "\"}}"));
    assertThat(refused.status()).isEqualTo(400);
    assertThat(refused.reason()).isEqualTo("DigestMismatch");
    assertThat(refused.text()).contains("tensor \\\"k\\\"").contains(good);
    assertThat(segment).doesNotExist();

    JsonNode ok =
        client
            .putReserved(
                "kv-3fa9c2d1",
                List.of(
                    tensor("k", Dtype.F16, new long[] {256, 64}, w0),
                    tensor("v", Dtype.F16, new long[] {256, 64}, w1)),
                false,
                service.writesDirectory())
            .ok()
            .json();
    assertThat(ok.get("bytesStored").asLong()).isEqualTo(w0.length + w1.length);
    String segName =
        Files.list(service.writesDirectory().resolve("kv-3fa9c2d1"))
            .findFirst()
            .orElseThrow()
            .getFileName()
            .toString();
    Object segInode =
        Files.getAttribute(
            service.writesDirectory().resolve("kv-3fa9c2d1").resolve(segName), "unix:ino");
    client.seal("kv-3fa9c2d1").ok();
    Path sealed = root.resolve("kv-3fa9c2d1/model.safetensors");
    assertThat(Files.getAttribute(sealed, "unix:ino"))
        .as("the filled segment became the artifact's file by a rename")
        .isEqualTo(segInode);
    assertThat(inode).isNotNull();
    assertThat(read("kv-3fa9c2d1", "k", ReadTarget.full())).isEqualTo(w0);
    assertThat(read("kv-3fa9c2d1", "v", ReadTarget.full())).isEqualTo(w1);
    assertThat(SafetensorsHeader.read(sealed).metadata())
        .containsEntry("prefix_sha256", "3fa9c2d1");
  }

  @Test
  void badInputIsRefusedWithItsReasonAndNothingAlreadyWrittenIsLost() throws Exception {
    byte[] a = NaiveSlicer.data(Dtype.F32, new long[] {16, 16}, 31);
    byte[] b = NaiveSlicer.data(Dtype.F32, new long[] {16, 16}, 32);
    client.create("v1", null, null).ok();
    client.putTensor("v1", tensor("a", Dtype.F32, new long[] {16, 16}, a), false).ok();

    // bytes that do not match dtype × shape: refused before staging (Content-Length) ...
    WriteClient.Response r =
        client.putTensor(
            "v1",
            new Tensor(
                "b", "F32", new long[] {16, 16}, null, null, ByteBuffer.wrap(new byte[1000])),
            false);
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.reason()).isEqualTo("SizeMismatch");
    assertThat(r.text()).contains("Content-Length is 1000").contains("takes 1024 bytes");
    // ... and a batch whose body ends short (the writer gone mid-batch) keeps nothing of it.
    sendTruncatedBatch("v1", "b", b, 500);
    assertThat(client.get("v1").ok().json().get("tensors").asInt()).isEqualTo(1);

    // colliding names: twice in one batch, and a put of a name that is written
    r =
        client.putBatch(
            "v1",
            List.of(
                tensor("c", Dtype.F32, new long[] {16, 16}, b),
                tensor("c", Dtype.F32, new long[] {16, 16}, b)),
            false);
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.reason()).isEqualTo("DuplicateTensor");
    r = client.putTensor("v1", tensor("a", Dtype.F32, new long[] {16, 16}, b), false);
    assertThat(r.status()).isEqualTo(409);
    assertThat(r.reason()).isEqualTo("TensorExists");
    assertThat(r.text()).contains("upsert replaces it");

    // a shard that does not fit its declared parallelism
    r =
        client.putTensor(
            "v1",
            new Tensor("d", "F32", new long[] {16, 16}, null, "tp:1/3@0", ByteBuffer.wrap(b)),
            false);
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.reason()).isEqualTo("InvalidParallelism");
    assertThat(r.text()).contains("16 = 3 × 5 + 1");
    // a parallelism where the version is plain
    r =
        client.putTensor(
            "v1",
            new Tensor("d", "F32", new long[] {16, 16}, "tp:0/2@0", null, ByteBuffer.wrap(b)),
            false);
    assertThat(r.status()).isEqualTo(409);
    assertThat(r.reason()).isEqualTo("LayoutConflict");
    // parallelisms and writer partitions mixed in one batch
    r =
        client.putBatch(
            "v2-missing", List.of(tensor("x", Dtype.F32, new long[] {16, 16}, b)), false);
    assertThat(r.status()).isEqualTo(404);
    assertThat(r.reason()).isEqualTo("NoSuchVersion");
    client.create("v2", null, null).ok();
    r =
        client.putBatch(
            "v2",
            List.of(
                new Tensor("x", "F32", new long[] {16, 16}, "tp:0/2@0", null, ByteBuffer.wrap(b)),
                new Tensor("y", "F32", new long[] {16, 16}, null, "tp:0/2@0", ByteBuffer.wrap(b))),
            false);
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.reason()).isEqualTo("MixedBatch");
    assertThat(r.text()).contains("ambiguous");

    // upsert replaces; a wrong token changes nothing
    client.putTensor("v1", tensor("a", Dtype.F32, new long[] {16, 16}, b), true).ok();
    try (WriteClient stranger = WriteClient.unix(server.socket(), "not-the-write-token-000")) {
      WriteClient.Response denied =
          stranger.putTensor("v1", tensor("a", Dtype.F32, new long[] {16, 16}, a), true);
      assertThat(denied.status()).isEqualTo(401);
    }
    client.seal("v1").ok();
    assertThat(read("v1", "a", ReadTarget.full())).isEqualTo(b);

    // put after seal
    r = client.putTensor("v1", tensor("z", Dtype.F32, new long[] {16, 16}, a), false);
    assertThat(r.status()).isEqualTo(409);
    assertThat(r.reason()).isEqualTo("Sealed");
    assertThat(r.text()).contains("immutable");
    assertThat(read("v1", "a", ReadTarget.full())).isEqualTo(b);
    assertThat(StoredLayout.open(root.resolve("v1")).tensorNames()).containsExactly("a");
  }

  /** Sends a batch's head and only {@code sent} bytes of its body, then closes the socket. */
  private void sendTruncatedBatch(String version, String name, byte[] data, int sent)
      throws Exception {
    byte[] json =
        ("{\"tensors\":[{\"name\":\"" + name + "\",\"dtype\":\"F32\",\"shape\":[16,16]}]}")
            .getBytes(StandardCharsets.UTF_8);
    long total = 4 + json.length + data.length;
    try (SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX)) {
      ch.connect(UnixDomainSocketAddress.of(server.socket()));
      OutputStream out = Channels.newOutputStream(ch);
      out.write(
          ("POST /v1/writes/"
                  + version
                  + "/batches HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                  + TOKEN
                  + "\r\nContent-Length: "
                  + total
                  + "\r\n\r\n")
              .getBytes(StandardCharsets.ISO_8859_1));
      out.write(
          ByteBuffer.allocate(4)
              .order(java.nio.ByteOrder.LITTLE_ENDIAN)
              .putInt(json.length)
              .array());
      out.write(json);
      out.write(data, 0, sent);
      out.flush();
    }
    // The data plane notices the close and drops the batch; wait until nothing is in flight.
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> client.get(version).ok().json().get("inFlight").asInt() == 0);
    List<Path> left = new ArrayList<>();
    try (Stream<Path> s = Files.list(service.writesDirectory().resolve(version))) {
      s.forEach(left::add);
    }
    assertThat(left).as("the dropped batch's segment is freed").hasSize(1);
  }
}
