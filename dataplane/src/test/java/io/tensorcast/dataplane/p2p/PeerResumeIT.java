package io.tensorcast.dataplane.p2p;

import static io.tensorcast.dataplane.p2p.ServeMembers.addresses;
import static io.tensorcast.dataplane.p2p.ServeMembers.freePort;
import static io.tensorcast.dataplane.p2p.ServeMembers.peersSpec;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.testing.PrometheusText;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
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
 * A peer-to-peer load resumes instead of restarting, on loopback with real members: three {@code
 * serve} members on 127.0.0.x load a corpus artifact from S3Mock, one of them through a proxy of
 * its own that goes down (or as a {@code dataplane serve} JVM that is SIGKILLed) half-way through
 * its load. When it loads again — a retry in the same process, or a new process on the same store
 * root — it keeps every piece it held (confirmed against its reader's hash or its own), announces
 * them, and receives only the missing bytes from peers and the source; the swarm reads the artifact
 * about once from the source.
 */
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class PeerResumeIT {
  private static final String BUCKET = "p2p-resume-it";
  private static final String PREFIX = "model/";
  private static final String ID = "resume";
  private static final Duration READY = Duration.ofSeconds(120);
  private static final byte[] SECRET = new SecureRandom().generateSeed(32);

  private static S3MockServer s3;
  private static final Map<String, Path> files = new TreeMap<>();
  private static long total;
  private static ServeMembers.Swarm swarm;

  private final ObjectMapper json = new ObjectMapper();
  private final ServeMembers members = new ServeMembers("resume-it", files, READY);
  private final List<DataPlaneServer> servers = members.servers;
  private final List<AutoCloseable> closeables = members.closeables;
  private FaultInjectingProxy proxy;

  @BeforeAll
  static void seed() throws Exception {
    swarm = ServeMembers.Swarm.write("resume-it", ID, "s3://" + BUCKET + "/" + PREFIX, SECRET);
    files.putAll(SwarmArtifacts.smallHeaders());
    s3 = S3MockServer.shared();
    total = SwarmArtifacts.upload(s3, BUCKET, PREFIX, files, null);
  }

  @BeforeEach
  void setUp() throws Exception {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    proxy = new FaultInjectingProxy(s3.endpoint()).throttleTotal(2_000_000);
  }

  @AfterEach
  void tearDown() throws Exception {
    members.close();
    proxy.close();
  }

  /**
   * m2's source goes down while it holds about half the artifact: its source reads fail, its load
   * fails on {@code SourceUnavailable} and is retried (same process, a new swarm). The retry keeps
   * every piece the failed load stored, and m2 receives only what it was missing.
   */
  @Test
  void aMemberWhoseSourceGoesDownMidLoadKeepsItsPiecesAndReceivesOnlyTheMissingOnes()
      throws Exception {
    List<String> ids = List.of("m0", "m1", "m2");
    Map<String, InetSocketAddress> addresses = addresses(ids, 201);
    String peers = peersSpec(addresses);
    FaultInjectingProxy own = new FaultInjectingProxy(s3.endpoint()).throttleTotal(300_000);
    closeables.add(own);
    for (String id : ids.subList(0, 2)) {
      servers.add(startInProcess(id, addresses.get(id), peers, proxy.endpoint()));
    }
    Path m2Root = members.newRoot();
    DataPlaneServer m2 =
        ServeMembers.startInProcess(
            withRetry(args(m2Root, "m2", addresses.get("m2"), peers, own.endpoint())));
    servers.add(m2);

    await("m2 holds 40 % of the artifact")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(10))
        .until(m2::status, s -> s.phase() == Phase.Loading && s.bytesLoaded() >= total * 2 / 5);
    own.down(true);
    await("m2's load failed on its source and waits to load again")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(20))
        .until(m2::status, s -> s.phase() == Phase.Pending && s.reason() != null);
    long held = storedBytes(m2Root);
    long sourceBefore = own.getBodyBytes();
    own.down(false);

    members.awaitReady(servers);
    for (DataPlaneServer s : servers) {
      members.assertByteIdentical(s.status());
    }
    DataPlaneStatus st = m2.status();
    long afterResume = st.bytesFromPeers() + (own.getBodyBytes() - sourceBefore);
    double peerBytes =
        sample(
            members.get(m2.address().getPort(), "/metrics").body(),
            "tensorcast_dataplane_peer_bytes_received_total");
    long swarmSource = proxy.getBodyBytes() + own.getBodyBytes();
    System.out.printf(
        "artifact %d; m2 held %d when its load failed; received %d after (limit %d); over both"
            + " loads %.0f from peers + %d from the source; swarm source %d = %.3f x%n",
        total,
        held,
        afterResume,
        (long) (1.05 * (total - held)),
        peerBytes,
        own.getBodyBytes(),
        swarmSource,
        (double) swarmSource / total);
    assertThat(held)
        .as("bytes of verified pieces m2's failed load left in its store (.stored)")
        .isGreaterThanOrEqualTo(total / 5);
    assertThat(afterResume)
        .as("bytes m2 received from peers and the source after it loaded again; it held %d", held)
        .isLessThanOrEqualTo((long) (1.05 * (total - held)));
    assertThat((long) peerBytes + own.getBodyBytes())
        .as("bytes m2 received over both loads")
        .isLessThanOrEqualTo((long) (1.05 * total));
    assertThat(swarmSource)
        .as("bytes the swarm read from S3 (headers included)")
        .isLessThanOrEqualTo((long) (1.05 * total));
  }

  /**
   * m2 is a {@code dataplane serve} JVM, SIGKILLed while it holds about a third of the artifact and
   * started again on the same store root: the store adopts the incomplete copy with its recorded
   * pieces, and the new process's {@code /status} shows it received only the rest.
   */
  @Test
  void aMemberKilledMidLoadAndStartedAgainOnItsStoreKeepsItsVerifiedPieces() throws Exception {
    List<String> ids = List.of("m0", "m1", "m2");
    Map<String, InetSocketAddress> addresses = addresses(ids, 211);
    String peers = peersSpec(addresses);
    FaultInjectingProxy own = new FaultInjectingProxy(s3.endpoint()).throttleTotal(300_000);
    closeables.add(own);
    for (String id : ids.subList(0, 2)) {
      servers.add(startInProcess(id, addresses.get(id), peers, proxy.endpoint()));
    }
    Path m2Root = members.newRoot();
    List<String> m2Args = args(m2Root, "m2", addresses.get("m2"), peers, own.endpoint());
    int first = freePort(InetAddress.getLoopbackAddress());
    Process p = startProcess("m2-first", m2Args, first);
    DataPlaneStatus before =
        await("m2 holds a third of the artifact")
            .atMost(READY)
            .pollInterval(Duration.ofMillis(10))
            .ignoreExceptions()
            .until(
                () -> members.statusOf(first),
                s -> s.phase() == Phase.Loading && s.bytesLoaded() >= total / 3);
    p.destroyForcibly(); // SIGKILL: no shutdown hook, the store keeps what it holds
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as("exit status after SIGKILL").isEqualTo(137);
    long held = storedBytes(m2Root);
    long firstOwnBytes = own.getBodyBytes();

    int second = freePort(InetAddress.getLoopbackAddress());
    startProcess("m2-second", m2Args, second);
    DataPlaneStatus ready =
        await("m2 Ready after the restart")
            .atMost(READY)
            .pollInterval(Duration.ofMillis(50))
            .ignoreExceptions()
            .until(() -> members.statusOf(second), s -> s.phase() == Phase.Ready);
    members.awaitReady(servers);
    for (DataPlaneServer s : servers) {
      members.assertByteIdentical(s.status());
    }
    members.assertByteIdentical(ready);
    long received = ready.bytesFromPeers() + ready.bytesFromSourceOnWire();
    System.out.printf(
        "artifact %d; m2 had loaded %d when killed, %d recorded; the new process received %d"
            + " (%d from peers, %d from the source; limit %d); source bytes: m0 and m1 %d, the"
            + " first m2 process %d, the second %d%n",
        total,
        before.bytesLoaded(),
        held,
        received,
        ready.bytesFromPeers(),
        ready.bytesFromSourceOnWire(),
        (long) (1.05 * (total - held)),
        proxy.getBodyBytes(),
        firstOwnBytes,
        own.getBodyBytes() - firstOwnBytes);
    assertThat(held)
        .as("bytes of verified pieces recorded in m2's store when it was killed (.stored)")
        .isGreaterThanOrEqualTo(total / 5);
    assertThat(ready.bytesLoaded()).isEqualTo(total);
    assertThat(received)
        .as("bytes the new m2 process received from peers and the source; %d were kept", held)
        .isLessThanOrEqualTo((long) (1.05 * (total - held)));
    // The first process rewrites its .stored file at most every 20 ms: a kill may lose the pieces
    // it stored since the last rewrite (a few).
    assertThat(received)
        .as("bytes the new m2 process received; the first had loaded %d", before.bytesLoaded())
        .isLessThanOrEqualTo((long) (1.05 * (total - before.bytesLoaded())) + 4 * 65536);
    assertThat(proxy.getBodyBytes() + own.getBodyBytes())
        .as("bytes the swarm read from S3 (headers included)")
        .isLessThanOrEqualTo((long) (1.05 * total));
  }

  // ------------------------------------------------------------------ helpers

  /** Bytes the store's {@code .tensorcast/<id>.stored} file lists (the pieces a load recorded). */
  private long storedBytes(Path root) throws IOException {
    Path f = root.resolve(".tensorcast").resolve(ID + ".stored");
    if (!Files.isRegularFile(f)) {
      return 0;
    }
    long n = 0;
    for (JsonNode file : json.readTree(f.toFile()).path("files")) {
      for (JsonNode r : file.path("ranges")) {
        n += r.get(1).asLong() - r.get(0).asLong();
      }
    }
    return n;
  }

  private DataPlaneServer startInProcess(
      String id, InetSocketAddress peerListen, String peers, URI endpoint) throws Exception {
    return ServeMembers.startInProcess(args(members.newRoot(), id, peerListen, peers, endpoint));
  }

  /** Source reads give up after two attempts; the load is retried after 1-2 s. */
  private static List<String> withRetry(List<String> args) {
    List<String> out = new ArrayList<>(args);
    out.addAll(
        List.of(
            "--max-attempts", "2", "--load-retry-backoff", "1s", "--load-retry-max-backoff", "2s"));
    return out;
  }

  /**
   * A member's arguments. The peer timeout (15 s) outlasts m2's outage, so the others wait for m2
   * to announce its pieces again rather than read its share from the source.
   */
  private static List<String> args(
      Path root, String id, InetSocketAddress peerListen, String peers, URI endpoint) {
    return new ArrayList<>(
        swarm
            .member(endpoint, root, id, peerListen)
            .option("--peer-timeout", "15s")
            .option("--peers", peers)
            .args());
  }

  private Process startProcess(String name, List<String> args, int control) throws IOException {
    List<String> all = new ArrayList<>(args);
    all.addAll(List.of("--listen", "127.0.0.1:" + control));
    return members.startProcess(name, all);
  }

  private static double sample(String exposition, String metric) {
    return PrometheusText.sample(exposition, metric);
  }
}
