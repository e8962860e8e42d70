package io.tensorcast.dataplane.p2p;

import static io.tensorcast.dataplane.p2p.ServeMembers.addresses;
import static io.tensorcast.dataplane.p2p.ServeMembers.peersSpec;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.testing.PrometheusText;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.FaultInjectingProxy.RecordedRequest;
import io.tensorcast.testing.FaultInjectingProxy.Stall;
import io.tensorcast.testing.S3MockServer;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A source that stops feeding one response and leaves its connection open (S3Mock does so when a
 * request outlives its async timeout; proxies and overloaded origins do it too): two {@code serve}
 * members on loopback load a corpus artifact from S3Mock, each through a proxy of its own; the
 * first piece read of one member stalls after {@value #STALL_AFTER} bytes. Its member cuts that
 * response after half the peer timeout (at least 5 s) without a byte and resumes the run at its
 * first missing byte, instead of holding the pieces both members wait for until the source's 30 s
 * read timeout (which the proxy's own 30 s socket timeout matches).
 */
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class StalledSourceIT {
  private static final String BUCKET = "p2p-stalled-it";
  private static final String PREFIX = "model/";
  private static final String ID = "stalled";
  private static final Duration READY = Duration.ofSeconds(120);
  private static final Duration PEER_TIMEOUT = Duration.ofSeconds(10);

  /** Half the peer timeout (and the floor). */
  private static final Duration STALL = PeerSwarm.MIN_STALL_TIMEOUT;

  /** Well under the 30 s after which the member's read timeout or the proxy would end it. */
  private static final Duration HELD_AT_MOST = Duration.ofSeconds(15);

  private static final long STALL_AFTER = 100_000;
  private static final byte[] SECRET = new SecureRandom().generateSeed(32);

  private static S3MockServer s3;
  private static final Map<String, Path> files = new TreeMap<>();
  private static ServeMembers.Swarm swarm;

  private final ServeMembers members = new ServeMembers("stalled-it", files, READY);
  private final List<DataPlaneServer> servers = members.servers;

  @BeforeAll
  static void seed() throws Exception {
    swarm = ServeMembers.Swarm.write("stalled-it", ID, "s3://" + BUCKET + "/" + PREFIX, SECRET);
    files.putAll(SwarmArtifacts.twoMnist());
    s3 = S3MockServer.shared();
    SwarmArtifacts.upload(s3, BUCKET, PREFIX, files, null);
  }

  @BeforeEach
  void setUp() {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
  }

  @AfterEach
  void tearDown() throws Exception {
    members.close();
  }

  @Test
  void aSourceResponseThatStopsMidBodyIsCutAfterTheStallTimeoutAndResumedWhereItStopped()
      throws Exception {
    List<String> ids = List.of("m0", "m1");
    Map<String, InetSocketAddress> addresses = addresses(ids, 241);
    String peers = peersSpec(addresses);
    FaultInjectingProxy stalling =
        new FaultInjectingProxy(s3.endpoint())
            .stallBodyAfterWhere(STALL_AFTER, 1, StalledSourceIT::isPieceReadLongerThanTheStall);
    FaultInjectingProxy plain = new FaultInjectingProxy(s3.endpoint());
    members.closeables.add(stalling);
    members.closeables.add(plain);
    List<FaultInjectingProxy> proxies = List.of(stalling, plain);
    for (int m = 0; m < ids.size(); m++) {
      String id = ids.get(m);
      servers.add(
          ServeMembers.startInProcess(
              swarm
                  .member(proxies.get(m).endpoint(), members.newRoot(), id, addresses.get(id))
                  .option("--peers", peers)
                  .option("--peer-timeout", PEER_TIMEOUT.toSeconds() + "s")
                  .option("--range-size", "256Ki")
                  .args()));
    }

    members.awaitReady(servers);
    for (DataPlaneServer s : servers) {
      DataPlaneStatus st = s.status();
      members.assertByteIdentical(st);
    }

    List<Stall> stalls = stalling.stalls();
    assertThat(stalls).as("responses that stalled").hasSize(1);
    Stall stall = stalls.get(0);
    assertThat(stall.closedByClient()).as("the member closed the stalled response").isTrue();
    long heldMillis = TimeUnit.NANOSECONDS.toMillis(stall.endedNanos() - stall.stalledNanos());
    assertThat(heldMillis)
        .as("how long the stalled response was held open (stall timeout %s)", STALL)
        .isBetween(STALL.toMillis() - 200, HELD_AT_MOST.toMillis());

    RecordedRequest stalled = stall.request();
    long resumeAt = stalled.rangeStart().orElseThrow() + STALL_AFTER;
    long end = stalled.rangeStart().orElseThrow() + stalled.rangeLength().orElseThrow();
    List<RecordedRequest> resumed =
        stalling.gets(stalled.path()).stream()
            .filter(r -> r.receivedNanos() > stall.stalledNanos())
            .filter(r -> r.rangeStart().orElse(-1L) == resumeAt)
            .toList();
    assertThat(resumed)
        .as("the run resumed at its first missing byte %d (stalled request %s)", resumeAt, stalled)
        .hasSize(1);
    assertThat(resumed.get(0).rangeStart().orElseThrow() + resumed.get(0).rangeLength().get())
        .as("the resumed request ends where the stalled run ends")
        .isEqualTo(end);

    double cut =
        PrometheusText.sample(
            members.get(servers.get(0).address().getPort(), "/metrics").body(),
            "tensorcast_dataplane_source_stalls_total");
    // At least the one: a GC pause on a loaded machine may stall another response of m0.
    assertThat(cut).as("tensorcast_dataplane_source_stalls_total of m0").isGreaterThanOrEqualTo(1);
  }

  /** A ranged GET of pieces (not a header read) longer than the bytes sent before the stall. */
  private static boolean isPieceReadLongerThanTheStall(RecordedRequest r) {
    if (!r.method().equals("GET") || r.rangeStart().isEmpty() || r.rangeLength().isEmpty()) {
      return false;
    }
    long start = r.rangeStart().get();
    boolean header = (start == 0 && r.rangeLength().get() == 8) || start == 8;
    return !header && r.rangeLength().get() > STALL_AFTER;
  }
}
