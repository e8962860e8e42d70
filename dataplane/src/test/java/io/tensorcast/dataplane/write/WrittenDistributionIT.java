package io.tensorcast.dataplane.write;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.p2p.Membership;
import io.tensorcast.dataplane.p2p.PeerSettings;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.tensor.NaiveSlicer;
import io.tensorcast.dataplane.write.WriteClient.Tensor;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
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
  private static final String CONTROL_TOKEN = "control-token-0123456789";

  private final List<WriteNode> nodes = new ArrayList<>();
  private final List<Path> roots = new ArrayList<>();
  private final HttpClient http = HttpClient.newHttpClient();
  private Path tokens;

  @BeforeEach
  void tokens() throws Exception {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    tokens = Files.createTempDirectory("tensorcast-written-");
    Files.writeString(tokens.resolve("write"), WRITE_TOKEN);
    Files.writeString(tokens.resolve("control"), CONTROL_TOKEN);
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
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  private JsonNode get(WriteNode n, String path) throws Exception {
    HttpResponse<String> r =
        http.send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + n.address().getPort() + path))
                .header("Authorization", "Bearer " + CONTROL_TOKEN)
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
                .header("Authorization", "Bearer " + CONTROL_TOKEN)
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
      Path root = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-written-" + id + "-");
      roots.add(root);
      boolean w = id.startsWith("w");
      WriteNodeSettings s =
          new WriteNodeSettings(
              "written-" + id,
              new InetSocketAddress("127.0.0.1", control.get(id)),
              tokens.resolve("control"),
              root,
              1L << 30,
              LockPolicy.BEST_EFFORT,
              w,
              w ? tokens.resolve("write") : null,
              null,
              new PeerSettings(
                  id,
                  new InetSocketAddress("127.0.0.1", peer.get(id)),
                  16 * 1024,
                  Membership.parseStatic(peers.toString()),
                  Duration.ZERO,
                  Duration.ofSeconds(5),
                  PeerSettings.DEFAULT_MAX_IN_FLIGHT),
              writers,
              8471,
              WriteNodeSettings.Want.parse(w ? "own" : id.equals("rc") ? "tp:1/2" : "all"),
              Duration.ofMillis(100),
              2,
              8,
              Duration.ofMinutes(5),
              k -> null);
      WriteNode n = WriteNode.start(s);
      nodes.add(n);
      byId.put(id, n);
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
                  .header("Authorization", "Bearer " + CONTROL_TOKEN)
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
}
