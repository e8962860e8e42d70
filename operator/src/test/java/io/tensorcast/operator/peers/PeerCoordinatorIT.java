package io.tensorcast.operator.peers;

import static io.tensorcast.operator.peers.PeerMembersTest.pod;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpServer;
import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.operator.status.DataPlaneClient;
import io.tensorcast.testing.TestPorts;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@link PeerCoordinator} and {@link DataPlaneClient#putPeers} against real HTTP servers standing
 * in for data-plane pods, each on its own loopback address and all on the same control port, as in
 * a cluster: what goes on the wire, when it is sent again, and that failures are retried.
 */
class PeerCoordinatorIT {
  private static final String TOKEN = "admin-token-0123456789abcdef0123456789";
  private static final ObjectMapper JSON = new ObjectMapper();

  private final List<HttpServer> servers = new ArrayList<>();
  private final CountDownLatch release = new CountDownLatch(1);

  /** A request a stand-in pod received. */
  record Received(String method, String path, String contentType, String auth, String body) {}

  /** A stand-in pod: answers PUT /v1/peers with the next queued code (204 when none is queued). */
  final class StandIn {
    final List<Received> received = new CopyOnWriteArrayList<>();
    final Deque<Integer> codes = new ConcurrentLinkedDeque<>();
    volatile boolean hang;

    StandIn(String ip, int port) throws IOException {
      HttpServer s = HttpServer.create(new InetSocketAddress(InetAddress.getByName(ip), port), 0);
      s.setExecutor(Executors.newCachedThreadPool());
      s.createContext(
          "/",
          ex -> {
            received.add(
                new Received(
                    ex.getRequestMethod(),
                    ex.getRequestURI().getPath(),
                    ex.getRequestHeaders().getFirst("Content-Type"),
                    ex.getRequestHeaders().getFirst("Authorization"),
                    new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8)));
            if (hang) {
              try {
                release.await();
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
            }
            Integer code = codes.poll();
            int status = code == null ? 204 : code;
            if (status == 204) {
              ex.sendResponseHeaders(204, -1);
            } else {
              byte[] b = "epoch: must be a string\n".getBytes(StandardCharsets.UTF_8);
              ex.sendResponseHeaders(status, b.length);
              try (OutputStream o = ex.getResponseBody()) {
                o.write(b);
              }
            }
            ex.close();
          });
      s.start();
      servers.add(s);
    }
  }

  @AfterEach
  void stop() {
    release.countDown();
    servers.forEach(s -> s.stop(0));
  }

  private static int freePort(String ip) throws IOException {
    return TestPorts.freePort(InetAddress.getByName(ip));
  }

  private static DataPlaneStatus report(String peerEpoch) {
    return DataPlaneStatus.builder("ns-m-g1", DataPlaneStatus.Phase.Loading)
        .source("s3://b/m/")
        .resolvedRevision("r")
        .files(1)
        .tensors(1)
        .bytesTotal(100)
        .bytesLoaded(10)
        .bytesFromSource(10)
        .storeDirectory("/dev/shm/x")
        .fileStatuses(List.of())
        .peerEpoch(peerEpoch)
        .peers(2)
        .build();
  }

  @Test
  void sendsTheContractBodyWithTheTokenToEveryMemberOnceAndAgainOnlyWhenNeeded() throws Exception {
    int port = freePort("127.0.46.1");
    StandIn a = new StandIn("127.0.46.1", port);
    StandIn b = new StandIn("127.0.46.2", port);
    StandIn c = new StandIn("127.0.46.3", port);
    PeerCoordinator coordinator =
        new PeerCoordinator(new DataPlaneClient(port, Duration.ofSeconds(2)), 8472);
    Pod pa = pod("m-a", "Running", "127.0.46.1", false);
    Pod pb = pod("m-b", "Running", "127.0.46.2", false);
    Pod pc = pod("m-c", "Running", "127.0.46.3", false);

    // Round 1: two members (b not yet running) get the membership.
    Pod pbPending = pod("m-b", "Pending", null, false);
    PeerCoordinator.Outcome first =
        coordinator.coordinate("ns/m", List.of(pc, pbPending, pa), answered("m-a", "m-c"), TOKEN);

    assertThat(first.sentTo()).containsExactlyInAnyOrder("m-a", "m-c");
    assertThat(first.settled()).isTrue();
    Received got = a.received.get(0);
    assertThat(got.method()).isEqualTo("PUT");
    assertThat(got.path()).isEqualTo("/v1/peers");
    assertThat(got.contentType()).isEqualTo("application/json");
    assertThat(got.auth()).isEqualTo("Bearer " + TOKEN);
    JsonNode body = JSON.readTree(got.body());
    assertThat(body.fieldNames()).toIterable().containsExactly("epoch", "members");
    assertThat(body.get("epoch").asText()).isEqualTo(first.membership().epoch());
    assertThat(body.get("members").toString())
        .isEqualTo(
            "[{\"id\":\"m-a\",\"address\":\"127.0.46.1:8472\"},"
                + "{\"id\":\"m-c\",\"address\":\"127.0.46.3:8472\"}]");
    assertThat(c.received).hasSize(1);
    assertThat(c.received.get(0).body()).isEqualTo(got.body());
    assertThat(b.received).isEmpty();

    // Round 2: same members, pods report the epoch: nothing is sent.
    String e1 = first.membership().epoch();
    PeerCoordinator.Outcome quiet =
        coordinator.coordinate(
            "ns/m",
            List.of(pa, pbPending, pc),
            Map.of("m-a", report(e1), "m-c", report(e1)),
            TOKEN);
    assertThat(quiet.sentTo()).isEmpty();
    assertThat(a.received).hasSize(1);

    // Round 3: b runs and answers: a new epoch goes to all three.
    PeerCoordinator.Outcome grown =
        coordinator.coordinate(
            "ns/m",
            List.of(pa, pb, pc),
            Map.of("m-a", report(e1), "m-b", report(null), "m-c", report(e1)),
            TOKEN);
    assertThat(grown.membership().epoch()).isNotEqualTo(e1);
    assertThat(grown.sentTo()).containsExactlyInAnyOrder("m-a", "m-b", "m-c");
    assertThat(JSON.readTree(b.received.get(0).body()).get("members")).hasSize(3);
    String e2 = grown.membership().epoch();

    // Round 4: c restarted and reports no epoch (or another): only c gets it again.
    PeerCoordinator.Outcome resend =
        coordinator.coordinate(
            "ns/m",
            List.of(pa, pb, pc),
            Map.of("m-a", report(e2), "m-b", report(e2), "m-c", report(null)),
            TOKEN);
    assertThat(resend.sentTo()).containsExactly("m-c");
    assertThat(a.received).hasSize(2);
    assertThat(b.received).hasSize(1);
    assertThat(c.received).hasSize(3);
    assertThat(JSON.readTree(c.received.get(2).body()).get("epoch").asText()).isEqualTo(e2);

    // A pod that is not reached this round but applied the epoch is left alone.
    PeerCoordinator.Outcome unreached =
        coordinator.coordinate("ns/m", List.of(pa, pb, pc), Map.of("m-a", report(e2)), TOKEN);
    assertThat(unreached.sentTo()).isEmpty();
  }

  @Test
  void aMemberWhoseLoadFailedForGoodLeavesTheMembershipTheOthersAreTold() throws Exception {
    int port = freePort("127.0.46.11");
    StandIn a = new StandIn("127.0.46.11", port);
    StandIn b = new StandIn("127.0.46.12", port);
    StandIn c = new StandIn("127.0.46.13", port);
    PeerCoordinator coordinator =
        new PeerCoordinator(new DataPlaneClient(port, Duration.ofSeconds(2)), 8472);
    Pod pa = pod("m-a", "Running", "127.0.46.11", false);
    Pod pb = pod("m-b", "Running", "127.0.46.12", false);
    Pod pc = pod("m-c", "Running", "127.0.46.13", false);
    String e1 =
        coordinator
            .coordinate("ns/m", List.of(pa, pb, pc), answered("m-a", "m-b", "m-c"), TOKEN)
            .membership()
            .epoch();

    // c's source reads were refused for good: it reports Failed (and closed its peer port).
    DataPlaneStatus failed =
        report(e1).toBuilder()
            .phase(DataPlaneStatus.Phase.Failed)
            .reason("AccessDenied")
            .message("403 reading c/x")
            .build();
    PeerCoordinator.Outcome without =
        coordinator.coordinate(
            "ns/m",
            List.of(pa, pb, pc),
            Map.of("m-a", report(e1), "m-b", report(e1), "m-c", failed),
            TOKEN);
    assertThat(without.membership().ids()).containsExactly("m-a", "m-b");
    assertThat(without.sentTo()).containsExactly("m-a", "m-b");
    assertThat(JSON.readTree(a.received.get(1).body()).get("members").toString())
        .isEqualTo(
            "[{\"id\":\"m-a\",\"address\":\"127.0.46.11:8472\"},"
                + "{\"id\":\"m-b\",\"address\":\"127.0.46.12:8472\"}]");
    assertThat(c.received).as("c is not told any more").hasSize(1);
    assertThat(b.received).hasSize(2);
  }

  @Test
  void aMemberThatRefusesOrDoesNotAnswerIsRetriedNextRoundWithinBoundedTime() throws Exception {
    int port = freePort("127.0.47.1");
    StandIn a = new StandIn("127.0.47.1", port);
    StandIn b = new StandIn("127.0.47.2", port);
    StandIn c = new StandIn("127.0.47.3", port);
    b.codes.add(503);
    c.hang = true;
    PeerCoordinator coordinator =
        new PeerCoordinator(new DataPlaneClient(port, Duration.ofMillis(1500)), 8472);
    List<Pod> pods =
        List.of(
            pod("m-a", "Running", "127.0.47.1", false),
            pod("m-b", "Running", "127.0.47.2", false),
            pod("m-c", "Running", "127.0.47.3", false),
            pod("m-d", "Running", "127.0.47.4", false)); // nobody listens

    long start = System.nanoTime();
    PeerCoordinator.Outcome first =
        coordinator.coordinate("ns/m", pods, answered("m-a", "m-b", "m-c", "m-d"), TOKEN);
    Duration took = Duration.ofNanos(System.nanoTime() - start);

    assertThat(first.settled()).isFalse();
    assertThat(first.failed()).containsExactly("m-b", "m-c", "m-d");
    // Bounded by about one timeout (1.5 s + 0.5 s grace) however many members hang.
    assertThat(took).isLessThan(Duration.ofMillis(4000));
    assertThat(a.received.get(0).auth()).isEqualTo("Bearer " + TOKEN);

    c.hang = false;
    b.codes.add(400);
    PeerCoordinator.Outcome second = coordinator.coordinate("ns/m", pods, Map.of(), TOKEN);
    assertThat(second.sentTo()).containsExactly("m-b", "m-c", "m-d");
    assertThat(second.failed()).containsExactly("m-b", "m-d");

    PeerCoordinator.Outcome third =
        coordinator.coordinate("ns/m", pods.subList(0, 3), Map.of(), TOKEN);
    // m-d left: a new epoch for the three; b now applies (204).
    assertThat(third.membership().epoch()).isNotEqualTo(first.membership().epoch());
    assertThat(third.sentTo()).containsExactly("m-a", "m-b", "m-c");
    assertThat(third.settled()).isTrue();
    assertThat(a.received).hasSize(2);
    assertThat(b.received).hasSize(3);
  }

  @Test
  void anOperatorRestartReannouncesOnceWithTheSameEpoch() throws Exception {
    int port = freePort("127.0.48.1");
    StandIn a = new StandIn("127.0.48.1", port);
    a.codes.add(204);
    a.codes.add(200); // already its epoch: applied
    List<Pod> pods = List.of(pod("m-a", "Running", "127.0.48.1", false));
    DataPlaneClient client = new DataPlaneClient(port, Duration.ofSeconds(2));

    PeerCoordinator.Outcome before =
        new PeerCoordinator(client, 8472).coordinate("ns/m", pods, answered("m-a"), TOKEN);
    PeerCoordinator restarted = new PeerCoordinator(client, 8472);
    // The pod reports the epoch it applied before the restart; the operator cannot know it had.
    PeerCoordinator.Outcome after =
        restarted.coordinate(
            "ns/m", pods, Map.of("m-a", report(before.membership().epoch())), TOKEN);
    PeerCoordinator.Outcome steady =
        restarted.coordinate(
            "ns/m", pods, Map.of("m-a", report(after.membership().epoch())), TOKEN);

    assertThat(after.membership().epoch()).isEqualTo(before.membership().epoch());
    assertThat(after.sentTo()).containsExactly("m-a");
    assertThat(after.settled()).isTrue();
    assertThat(steady.sentTo()).isEmpty();
    assertThat(a.received).hasSize(2);
  }

  /**
   * A pod is a member from its data plane's first answer, not from its container's start: the
   * others would give a member that never connects one peer timeout and then read its share
   * themselves, so a member whose process starts late (a slow JVM start on a busy node) would read
   * that share once more. Once it answered it keeps its place when a round does not reach it; a new
   * pod of the same name (recreated) must answer again.
   */
  @Test
  void aRunningPodBecomesAMemberOnlyOnceItsDataPlaneAnswered() throws Exception {
    int port = freePort("127.0.49.1");
    StandIn a = new StandIn("127.0.49.1", port);
    StandIn b = new StandIn("127.0.49.2", port);
    PeerCoordinator coordinator =
        new PeerCoordinator(new DataPlaneClient(port, Duration.ofSeconds(2)), 8472);
    Pod pa = pod("m-a", "Running", "127.0.49.1", false);
    Pod pb = pod("m-b", "Running", "127.0.49.2", false);
    pa.getMetadata().setUid("uid-a");
    pb.getMetadata().setUid("uid-b1");

    // b runs but its process has not answered /status yet: not a member, not told.
    PeerCoordinator.Outcome early =
        coordinator.coordinate("ns/m", List.of(pa, pb), answered("m-a"), TOKEN);
    assertThat(early.membership().ids()).containsExactly("m-a");
    assertThat(b.received).isEmpty();

    // b answers: both are members.
    String e1 = early.membership().epoch();
    PeerCoordinator.Outcome both =
        coordinator.coordinate(
            "ns/m", List.of(pa, pb), Map.of("m-a", report(e1), "m-b", report(null)), TOKEN);
    assertThat(both.membership().ids()).containsExactly("m-a", "m-b");
    assertThat(b.received).hasSize(1);

    // A round that reaches neither keeps both.
    PeerCoordinator.Outcome unreached =
        coordinator.coordinate("ns/m", List.of(pa, pb), Map.of(), TOKEN);
    assertThat(unreached.membership().epoch()).isEqualTo(both.membership().epoch());
    assertThat(unreached.sentTo()).isEmpty();

    // b is recreated (same name, new uid): out until the new process answers.
    Pod pb2 = pod("m-b", "Running", "127.0.49.2", false);
    pb2.getMetadata().setUid("uid-b2");
    PeerCoordinator.Outcome recreated =
        coordinator.coordinate(
            "ns/m", List.of(pa, pb2), Map.of("m-a", report(both.membership().epoch())), TOKEN);
    assertThat(recreated.membership().ids()).containsExactly("m-a");
  }

  /** Reports of pods whose data plane answered {@code /status} and applied no membership yet. */
  private static Map<String, DataPlaneStatus> answered(String... pods) {
    Map<String, DataPlaneStatus> out = new java.util.HashMap<>();
    for (String p : pods) {
      out.put(p, report(null));
    }
    return out;
  }
}
