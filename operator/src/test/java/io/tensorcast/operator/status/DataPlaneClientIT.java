package io.tensorcast.operator.status;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpServer;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.tensorcast.api.wire.DataPlaneStatus;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@link DataPlaneClient} against real HTTP servers on loopback addresses, one per "pod", all on
 * the same port as in a cluster: a good pod, one answering 503, one answering garbage, one that
 * never answers, one that wants a token.
 */
class DataPlaneClientIT {
  private static final String GOOD =
      """
      {"artifactId":"ns-m-g1","phase":"Loading","source":"s3://b/m/","resolvedRevision":"r1",
       "files":2,"filesComplete":1,"tensors":5,"bytesTotal":100,"bytesLoaded":40,
       "bytesFromSource":40,"bytesFromPeers":0,"storeDirectory":"/dev/shm/x","someNewField":1,
       "peerEpoch":"e3b0c442","peers":2}
      """;

  private final List<HttpServer> servers = new java.util.ArrayList<>();
  private final CountDownLatch release = new CountDownLatch(1);

  @AfterEach
  void stop() {
    release.countDown();
    servers.forEach(s -> s.stop(0));
  }

  private int serve(String ip, int port, int code, String body, String token, boolean hang)
      throws IOException {
    HttpServer s = HttpServer.create(new InetSocketAddress(InetAddress.getByName(ip), port), 0);
    s.setExecutor(Executors.newCachedThreadPool());
    s.createContext(
        "/status",
        ex -> {
          if (hang) {
            try {
              release.await();
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
          int status = code;
          if (token != null
              && !("Bearer " + token).equals(ex.getRequestHeaders().getFirst("Authorization"))) {
            status = 401;
          }
          byte[] b = body.getBytes(StandardCharsets.UTF_8);
          ex.sendResponseHeaders(status, b.length);
          try (OutputStream o = ex.getResponseBody()) {
            o.write(b);
          }
        });
    s.start();
    servers.add(s);
    return s.getAddress().getPort();
  }

  private static Pod pod(String name, String ip) {
    return new PodBuilder()
        .withNewMetadata()
        .withName(name)
        .endMetadata()
        .withNewStatus()
        .withPodIP(ip)
        .endStatus()
        .build();
  }

  @Test
  void readsGoodPodsAndLeavesOutTheRestWithinTheTimeout() throws IOException {
    int port = serve("127.0.44.1", 0, 200, GOOD, null, false);
    serve("127.0.44.2", port, 503, "not ready", null, false);
    serve("127.0.44.3", port, 200, "{not json", null, false);
    serve("127.0.44.4", port, 200, GOOD, null, true);
    DataPlaneClient client = new DataPlaneClient(port, Duration.ofMillis(800));

    long start = System.nanoTime();
    Map<String, DataPlaneStatus> out =
        client.poll(
            List.of(
                pod("good", "127.0.44.1"),
                pod("unready", "127.0.44.2"),
                pod("garbage", "127.0.44.3"),
                pod("hangs", "127.0.44.4"),
                pod("nobody-listens", "127.0.44.5"),
                pod("no-ip", null)),
            "admin-token-0123456789abcdef0123456789");
    Duration took = Duration.ofNanos(System.nanoTime() - start);

    assertThat(out).containsOnlyKeys("good");
    DataPlaneStatus s = out.get("good");
    assertThat(s.phase()).isEqualTo(DataPlaneStatus.Phase.Loading);
    assertThat(s.bytesTotal()).isEqualTo(100);
    assertThat(s.bytesLoaded()).isEqualTo(40);
    assertThat(s.files()).isEqualTo(2);
    assertThat(s.resolvedRevision()).isEqualTo("r1");
    assertThat(s.peerEpoch()).isEqualTo("e3b0c442");
    assertThat(s.peers()).isEqualTo(2);
    // One round is bounded by about one timeout, not one per pod.
    assertThat(took).isLessThan(Duration.ofMillis(3000));
  }

  @Test
  void presentsTheArtifactsAdminToken() throws IOException {
    int port = serve("127.0.45.1", 0, 200, GOOD, "admin-token-of-m-0123456789abcdef012", false);
    DataPlaneClient client = new DataPlaneClient(port, Duration.ofSeconds(2));
    List<Pod> pods = List.of(pod("p", "127.0.45.1"));

    Map<String, DataPlaneStatus> refused =
        client.poll(pods, "admin-token-of-other-0123456789abcdef");
    Map<String, DataPlaneStatus> accepted =
        client.poll(pods, "admin-token-of-m-0123456789abcdef012");

    assertThat(refused).isEmpty();
    assertThat(accepted).containsOnlyKeys("p");
  }
}
