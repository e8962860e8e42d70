package io.tensorcast.dataplane.write;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpServer;
import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.http.ControlAuth;
import io.tensorcast.dataplane.http.ControlToken;
import io.tensorcast.dataplane.p2p.OriginSwarm;
import io.tensorcast.dataplane.p2p.PeerSecret;
import io.tensorcast.dataplane.p2p.PeerSettings;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.tensor.NaiveSlicer;
import io.tensorcast.dataplane.write.WriteClient.Tensor;
import io.tensorcast.testing.TestPorts;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Written versions distributed peer to peer between {@link WriteNode}s in one JVM (real stores
 * under /dev/shm, real sockets on loopback): two writer nodes of a TP=4 layout, a reader keeping a
 * full copy and a reader keeping tp rank 1 of 2; a second version replacing the first on the
 * readers; a reader's reads checked against slices computed element by element.
 */
@Timeout(180)
class WrittenDistributionIT {
  private static final String WRITE_TOKEN = "write-token-0123456789";
  private static final String ADMIN_TOKEN = "admin-token-0123456789";
  private static final String READ_TOKEN = "read-token-0123456789";

  private final List<WriteNode> nodes = new ArrayList<>();
  private final List<Path> roots = new ArrayList<>();
  private final HttpClient http = HttpClient.newHttpClient();
  private Path tokens;

  @BeforeEach
  void tokens() throws Exception {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    tokens = Files.createTempDirectory("tensorcast-written-");
    Files.writeString(tokens.resolve("write"), WRITE_TOKEN);
    Files.writeString(tokens.resolve("admin"), ADMIN_TOKEN);
    Files.writeString(tokens.resolve("read"), READ_TOKEN);
    Files.writeString(
        tokens.resolve("peer-secret"),
        Base64.getEncoder().encodeToString("the artifact's peer secret, 32+ bytes".getBytes()));
    Files.writeString(
        tokens.resolve("other-secret"),
        Base64.getEncoder().encodeToString("another artifact's secret, 32+ bytes".getBytes()));
  }

  /**
   * Starts a node: {@code w*} ids are writers (keep their own part), others keep {@code want}.
   *
   * @param writers writer id → its control endpoint {@code host:port}
   * @param secret the peer secret file's name under the tokens directory
   */
  private WriteNode node(
      String id,
      int control,
      int peer,
      String peers,
      Map<String, String> writers,
      String want,
      String secret)
      throws Exception {
    Path root = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-written-" + id + "-");
    roots.add(root);
    boolean w = id.startsWith("w");
    WriteNodeSettings s =
        new WriteNodeSettings(
            "written-" + id,
            new InetSocketAddress("127.0.0.1", control),
            new ControlAuth(
                new ControlToken(tokens.resolve("read")),
                new ControlToken(tokens.resolve("admin"))),
            root,
            1L << 30,
            LockPolicy.BEST_EFFORT,
            w,
            w ? tokens.resolve("write") : null,
            null,
            new PeerSettings(
                id,
                new InetSocketAddress("127.0.0.1", peer),
                16 * 1024,
                Membership.parseStatic(peers),
                Duration.ZERO,
                Duration.ofSeconds(5),
                PeerSettings.DEFAULT_MAX_IN_FLIGHT,
                PeerSecret.fromFile(tokens.resolve(secret))),
            writers,
            8471,
            WriteNodeSettings.Want.parse(w ? "own" : want),
            Duration.ofMillis(100),
            2,
            8,
            Duration.ofMinutes(5),
            null,
            k -> null);
    WriteNode n = WriteNode.start(s);
    nodes.add(n);
    return n;
  }

  @AfterEach
  void stop() throws Exception {
    for (WriteNode n : nodes) {
      n.close();
    }
    for (Path r : roots) {
      try (Stream<Path> s = Files.walk(r)) {
        s.sorted((a, b) -> b.compareTo(a)).forEach(p -> p.toFile().delete());
      }
    }
  }

  private static int freePort() throws Exception {
    return TestPorts.freePort();
  }

  private JsonNode get(WriteNode n, String path) throws Exception {
    HttpResponse<String> r =
        http.send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + n.address().getPort() + path))
                .header("Authorization", "Bearer " + READ_TOKEN)
                .build(),
            HttpResponse.BodyHandlers.ofString());
    return WriteJson.JSON.readTree(r.body());
  }

  private byte[] tensor(WriteNode n, String name, String query) throws Exception {
    HttpResponse<byte[]> r =
        http.send(
            HttpRequest.newBuilder(
                    URI.create(
                        "http://127.0.0.1:"
                            + n.address().getPort()
                            + "/v1/tensors/"
                            + name
                            + (query == null ? "" : "?" + query)))
                .header("Authorization", "Bearer " + READ_TOKEN)
                .build(),
            HttpResponse.BodyHandlers.ofByteArray());
    assertThat(r.statusCode()).as(new String(r.body())).isEqualTo(200);
    return r.body();
  }

  @Test
  void tpFourWritersOnTwoNodesReachAFullReaderAndATpTwoReaderPeerToPeer() throws Exception {
    String[] ids = {"wa", "wb", "rc", "rd"};
    Map<String, Integer> control = new LinkedHashMap<>();
    Map<String, Integer> peer = new LinkedHashMap<>();
    for (String id : ids) {
      control.put(id, freePort());
      peer.put(id, freePort());
    }
    StringBuilder peers = new StringBuilder();
    for (String id : ids) {
      peers
          .append(peers.length() == 0 ? "" : ",")
          .append(id)
          .append("=127.0.0.1:")
          .append(peer.get(id));
    }
    Map<String, String> writers =
        Map.of("wa", "127.0.0.1:" + control.get("wa"), "wb", "127.0.0.1:" + control.get("wb"));
    Map<String, WriteNode> byId = new LinkedHashMap<>();
    for (String id : ids) {
      byId.put(
          id,
          node(
              id,
              control.get(id),
              peer.get(id),
              peers.toString(),
              writers,
              id.equals("rc") ? "tp:1/2" : "all",
              "peer-secret"));
    }
    long[] q = {64, 48};
    long[] o = {32, 128};
    long[] norm = {48};
    for (int step = 1; step <= 2; step++) {
      byte[] qFull = NaiveSlicer.data(Dtype.BF16, q, 100 + step);
      byte[] oFull = NaiveSlicer.data(Dtype.F32, o, 200 + step);
      byte[] normFull = NaiveSlicer.data(Dtype.BF16, norm, 300 + step);
      String v = "step-" + step;
      for (int r = 0; r < 4; r++) {
        WriteNode writer = byId.get(r < 2 ? "wa" : "wb");
        try (WriteClient c = WriteClient.unix(writer.writeServer().socket(), WRITE_TOKEN)) {
          c.create(v, "RLCheckpoint", Map.of("step", "" + step));
          c.putBatch(
                  v,
                  List.of(
                      new Tensor("q", "BF16", q, null, "tp:" + r + "/4@0", ByteBuffer.wrap(qFull)),
                      new Tensor("o", "F32", o, null, "tp:" + r + "/4@1", ByteBuffer.wrap(oFull)),
                      new Tensor("norm", "BF16", norm, null, null, ByteBuffer.wrap(normFull))),
                  false)
              .ok();
        }
      }
      for (String w : List.of("wa", "wb")) {
        try (WriteClient c = WriteClient.unix(byId.get(w).writeServer().socket(), WRITE_TOKEN)) {
          c.seal(v).ok();
        }
      }
      await()
          .atMost(Duration.ofSeconds(60))
          .until(
              () ->
                  v.equals(get(byId.get("rc"), "/v1/versions").path("current").asText())
                      && v.equals(get(byId.get("rd"), "/v1/versions").path("current").asText()));
      // The full reader holds the TP=4 layout and answers every target.
      WriteNode rd = byId.get("rd");
      assertThat(tensor(rd, "o", "target=full")).isEqualTo(oFull);
      assertThat(tensor(rd, "q", "target=shard&parallelism=tp:1/2"))
          .isEqualTo(NaiveSlicer.shard(qFull, q, 2, 0, 1, 2));
      assertThat(tensor(rd, "o", "target=shard&parallelism=tp:3/4@1"))
          .isEqualTo(NaiveSlicer.shard(oFull, o, 4, 1, 3, 4));
      // The TP=2 rank 1 reader holds its own layout: its shards exactly, nothing of rank 0.
      WriteNode rc = byId.get("rc");
      assertThat(tensor(rc, "q", "target=shard&parallelism=tp:1/2"))
          .isEqualTo(NaiveSlicer.shard(qFull, q, 2, 0, 1, 2));
      assertThat(tensor(rc, "o", "target=shard&parallelism=tp:1/2"))
          .isEqualTo(NaiveSlicer.shard(oFull, o, 4, 1, 1, 2));
      assertThat(tensor(rc, "norm", "target=full")).isEqualTo(normFull);
      HttpResponse<String> notHeld =
          http.send(
              HttpRequest.newBuilder(
                      URI.create(
                          "http://127.0.0.1:"
                              + rc.address().getPort()
                              + "/v1/tensors/q?target=shard&parallelism=tp:0/2"))
                  .header("Authorization", "Bearer " + READ_TOKEN)
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(notHeld.statusCode()).isEqualTo(409);
      assertThat(notHeld.body()).contains("NotHeldHere");
      JsonNode rcv = get(rc, "/v1/versions");
      JsonNode cur = null;
      for (JsonNode x : rcv.path("versions")) {
        if (x.path("name").asText().equals(v)) {
          cur = x;
        }
      }
      assertThat(cur).isNotNull();
      // TP=4 ranks 2 and 3 make TP=2 rank 1: the reader fetched about half the data, not all.
      long all =
          get(rd, "/v1/versions").path("versions").findValues("bytes").stream()
              .mapToLong(JsonNode::asLong)
              .max()
              .orElseThrow();
      assertThat(cur.path("bytes").asLong()).isLessThan(all * 3 / 4);
    }
  }

  private HttpResponse<String> call(WriteNode n, String method, String path, String token)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + n.address().getPort() + path))
            .method(
                method,
                method.equals("GET")
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofString("{\"uri\":\"file:///tmp/nowhere/\"}"));
    if (token != null) {
      b.header("Authorization", "Bearer " + token);
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  /**
   * The trust rules hold for a written version: a seal record is used only with a valid tag of the
   * artifact's peer secret (a front that alters one piece hash on the way gets the version
   * refused), a member without the secret gets no piece (its handshake is refused and counted), and
   * the control endpoint asks the admin token for a save while reads take the read token.
   */
  @Test
  void aForgedSealRecordAndAMemberWithoutTheSecretGetNothingAndSavesNeedTheAdminToken()
      throws Exception {
    String[] ids = {"wa", "rc", "rf", "rx"};
    Map<String, Integer> control = new LinkedHashMap<>();
    Map<String, Integer> peer = new LinkedHashMap<>();
    StringBuilder peers = new StringBuilder();
    for (String id : ids) {
      control.put(id, freePort());
      peer.put(id, freePort());
      peers.append(peers.length() == 0 ? "" : ",").append(id).append("=127.0.0.1:");
      peers.append(peer.get(id));
    }
    String wa = "127.0.0.1:" + control.get("wa");
    // A front at another address that forwards to the writer and changes the first piece hash of
    // every seal record it passes on (the writer's tag header passes unchanged).
    HttpServer front = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    front.createContext(
        "/",
        ex -> {
          try {
            HttpResponse<byte[]> r =
                http.send(
                    HttpRequest.newBuilder(URI.create("http://" + wa + ex.getRequestURI()))
                        .header("Authorization", ex.getRequestHeaders().getFirst("Authorization"))
                        .build(),
                    HttpResponse.BodyHandlers.ofByteArray());
            String body = new String(r.body(), StandardCharsets.UTF_8);
            int at = body.indexOf("\"pieces\":[\"");
            if (at >= 0) {
              at += "\"pieces\":[\"".length();
              body = body.substring(0, at) + "0".repeat(64) + body.substring(at + 64);
            }
            r.headers()
                .firstValue(WriteNode.RECORD_TAG_HEADER)
                .ifPresent(t -> ex.getResponseHeaders().set(WriteNode.RECORD_TAG_HEADER, t));
            byte[] out = body.getBytes(StandardCharsets.UTF_8);
            ex.sendResponseHeaders(r.statusCode(), out.length);
            ex.getResponseBody().write(out);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            ex.sendResponseHeaders(500, -1);
          } finally {
            ex.close();
          }
        });
    front.start();
    try {
      WriteNode writer =
          node(
              "wa",
              control.get("wa"),
              peer.get("wa"),
              peers.toString(),
              Map.of("wa", wa),
              "own",
              "peer-secret");
      WriteNode rc =
          node(
              "rc",
              control.get("rc"),
              peer.get("rc"),
              peers.toString(),
              Map.of("wa", wa),
              "all",
              "peer-secret");
      WriteNode rf =
          node(
              "rf",
              control.get("rf"),
              peer.get("rf"),
              peers.toString(),
              Map.of("wa", "127.0.0.1:" + front.getAddress().getPort()),
              "all",
              "peer-secret");
      long[] shape = {96, 64};
      byte[] full = NaiveSlicer.data(Dtype.BF16, shape, 7);
      try (WriteClient c = WriteClient.unix(writer.writeServer().socket(), WRITE_TOKEN)) {
        c.create("step-1", "RLCheckpoint", Map.of()).ok();
        c.putTensor(
                "step-1", new Tensor("w", "BF16", shape, null, null, ByteBuffer.wrap(full)), false)
            .ok();
        c.seal("step-1").ok();
      }
      await()
          .atMost(Duration.ofSeconds(60))
          .until(() -> "step-1".equals(get(rc, "/v1/versions").path("current").asText()));
      assertThat(tensor(rc, "w", "target=full")).isEqualTo(full);

      // The reader behind the front refuses the altered record: no version, the reason named.
      await()
          .atMost(Duration.ofSeconds(30))
          .untilAsserted(
              () ->
                  assertThat(get(rf, "/status").path("message").asText())
                      .contains(WriteNode.RECORD_TAG_HEADER)
                      .contains("writer wa"));
      assertThat(get(rf, "/v1/versions").path("versions")).isEmpty();

      // A member with the record but another secret: its handshakes are refused, no piece moves.
      HttpResponse<byte[]> rec =
          http.send(
              HttpRequest.newBuilder(URI.create("http://" + wa + "/v1/writes/step-1"))
                  .header("Authorization", "Bearer " + READ_TOKEN)
                  .build(),
              HttpResponse.BodyHandlers.ofByteArray());
      SealRecord r = SealRecord.parse(rec.body());
      Path strangerFiles = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-stranger-");
      roots.add(strangerFiles);
      java.util.BitSet all = new java.util.BitSet();
      all.set(0, r.pieceMap().size());
      java.util.concurrent.atomic.AtomicInteger got =
          new java.util.concurrent.atomic.AtomicInteger();
      try (OriginSwarm stranger =
          new OriginSwarm(
              "step-1",
              r.pieceMap(),
              r.pieceHashes(),
              r.digest(),
              java.util.Set.of("wa"),
              new OriginSwarm.Holdings(strangerFiles, new java.util.BitSet(), all, false),
              (piece, bytes) -> {
                got.incrementAndGet();
                return false;
              },
              new PeerSettings(
                  "rx",
                  new InetSocketAddress("127.0.0.1", peer.get("rx")),
                  16 * 1024,
                  Membership.parseStatic(peers.toString()),
                  Duration.ZERO,
                  Duration.ofSeconds(5),
                  PeerSettings.DEFAULT_MAX_IN_FLIGHT,
                  PeerSecret.fromFile(tokens.resolve("other-secret"))),
              new io.micrometer.core.instrument.simple.SimpleMeterRegistry(),
              "stranger")) {
        stranger.start();
        await()
            .atMost(Duration.ofSeconds(30))
            .untilAsserted(
                () ->
                    assertThat(refusedHandshakes(writer))
                        .as("the writer refused the stranger's handshakes")
                        .isPositive());
        assertThat(stranger.connectedPeers()).isZero();
        assertThat(got.get()).as("pieces the stranger received").isZero();
      }

      // Control scopes: reads with the read token, a save only with the admin token.
      assertThat(call(writer, "GET", "/v1/versions", READ_TOKEN).statusCode()).isEqualTo(200);
      HttpResponse<String> readSave = call(writer, "POST", "/v1/versions/step-1/save", READ_TOKEN);
      assertThat(readSave.statusCode()).isEqualTo(403);
      assertThat(readSave.body()).contains("needs the admin token");
      assertThat(call(writer, "POST", "/v1/versions/step-1/save", null).statusCode())
          .isEqualTo(401);
      assertThat(call(writer, "GET", "/v1/writes/step-1", null).statusCode()).isEqualTo(401);
    } finally {
      front.stop(0);
    }
  }

  /** The writer's count of refused peer connections, from its {@code /metrics}. */
  private long refusedHandshakes(WriteNode n) throws Exception {
    String text =
        http.send(
                HttpRequest.newBuilder(
                        URI.create("http://127.0.0.1:" + n.address().getPort() + "/metrics"))
                    .build(),
                HttpResponse.BodyHandlers.ofString())
            .body();
    return text.lines()
        .filter(l -> l.startsWith("tensorcast_dataplane_peer_connections_refused_total{"))
        .mapToLong(l -> (long) Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1)))
        .sum();
  }
}
