package io.tensorcast.dataplane.p2p;

import static io.tensorcast.dataplane.p2p.ServeMembers.addresses;
import static io.tensorcast.dataplane.p2p.ServeMembers.freePort;
import static io.tensorcast.dataplane.p2p.ServeMembers.hostPort;
import static io.tensorcast.dataplane.p2p.ServeMembers.peersSpec;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.testing.PrometheusText;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.LoggerFactory;

/**
 * The peer port against an attacker on the pod network, on loopback: real data-plane members on
 * 127.0.0.x (in-process {@link DataPlaneServer}s, a {@code dataplane serve} JVM for the flood) load
 * a corpus artifact from S3Mock through a byte-counting proxy while test-side peers ({@link
 * BlockingPeer}, {@link RogueServingPeer}) pose as members without the secret, from the wrong
 * address, announce forged hashes, serve forged pieces, ask for pieces or open connections and
 * never finish the handshake. In every test the honest members end Ready with stores byte-identical
 * to the corpus, having read at most 1.02 × the artifact from the source.
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class PeerTrustIT {
  private static final String BUCKET = "p2p-trust-it";
  private static final String PREFIX = "model/";
  private static final String ID = "trust";
  private static final int PIECE = 64 * 1024;
  private static final Duration READY = Duration.ofSeconds(90);
  private static final byte[] SECRET = new SecureRandom().generateSeed(32);
  private static final byte[] WRONG_SECRET = new SecureRandom().generateSeed(32);

  private static S3MockServer s3;
  private static final Map<String, Path> files = new TreeMap<>();
  private static final Map<String, String> etags = new TreeMap<>();
  private static long total;
  private static Path secrets;
  private static ServeMembers.Swarm swarm;

  private final ServeMembers members = new ServeMembers("trust-it", files, READY);
  private final List<DataPlaneServer> servers = members.servers;
  private final List<AutoCloseable> closeables = members.closeables;
  private final ListAppender<ILoggingEvent> logged = new ListAppender<>();
  private FaultInjectingProxy proxy;

  @BeforeAll
  static void seed() throws Exception {
    secrets = Files.createTempDirectory("tensorcast-trust-it-");
    swarm = ServeMembers.Swarm.write("trust-it", ID, "s3://" + BUCKET + "/" + PREFIX, SECRET);
    files.putAll(SwarmArtifacts.smallHeaders());
    s3 = S3MockServer.shared();
    total = SwarmArtifacts.upload(s3, BUCKET, PREFIX, files, etags);
  }

  private static Path write(String name, String content) throws IOException {
    Path f = Files.writeString(secrets.resolve(name), content);
    f.toFile().deleteOnExit();
    return f;
  }

  @BeforeEach
  void setUp() throws Exception {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    proxy = new FaultInjectingProxy(s3.endpoint());
    logged.start();
    ((Logger) LoggerFactory.getLogger("io.tensorcast.dataplane.p2p")).addAppender(logged);
  }

  @AfterEach
  void tearDown() throws Exception {
    ((Logger) LoggerFactory.getLogger("io.tensorcast.dataplane.p2p")).detachAppender(logged);
    members.close();
    System.out.printf(
        "source bytes (proxy): %d = %.3f x the artifact's %d%n",
        proxy.getBodyBytes(), (double) proxy.getBodyBytes() / total, total);
    proxy.close();
  }

  @Test
  void anImpostorWithAMembersIdIsRefusedWithoutTheSecretAndFromAnotherAddress() throws Exception {
    List<String> ids = List.of("m0", "m1", "m2");
    Map<String, InetSocketAddress> addresses = addresses(ids, 101);
    Membership membership = Membership.parseStatic(peersSpec(addresses));
    proxy.delay(Duration.ofMillis(20)); // the impostor acts while the members load
    for (String id : ids) {
      servers.add(startInProcess(id, addresses.get(id), peersSpec(addresses)));
    }
    InetAddress m0 = addresses.get("m0").getAddress();
    InetAddress m1 = addresses.get("m1").getAddress();
    await("m2's peer port open")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(10))
        .until(() -> servers.get(2).swarm().listenAddress() != null);

    // m1's id from m1's own address, without the secret: the AUTH does not verify.
    try (BlockingPeer imp = impostor(m1, addresses.get("m2"))) {
      imp.hello(hello("m1", membership), WRONG_SECRET, true, membership);
      assertThat(imp.finishHandshake()).isNotEqualTo("ok");
      try {
        imp.send(new Frame.Request(0));
      } catch (IOException closedAlready) {
        // the member closed first
      }
      assertThat(imp.closedWithin(5_000)).as("m2 closed the impostor's connection").isTrue();
    }
    // m1's id with the right secret, from m0's address: refused at HELLO, before any AUTH.
    try (BlockingPeer imp = impostor(m0, addresses.get("m2"))) {
      imp.hello(hello("m1", membership), SECRET, true, membership);
      assertThat(imp.finishHandshake())
          .isEqualTo(
              "rejected: peer 'm1' connects from "
                  + m0.getHostAddress()
                  + " but the membership publishes "
                  + hostPort(addresses.get("m1"))
                  + " for it");
    }

    loadsHonestly();
    String metrics = members.get(servers.get(2).address().getPort(), "/metrics").body();
    assertThat(refused(metrics, "auth")).as("handshakes that failed the AUTH at m2").isPositive();
    assertThat(refused(metrics, "hello")).as("HELLOs m2 refused").isPositive();
    assertThat(messages())
        .anyMatch(
            m ->
                m.contains("peer 'm1' at /" + m1.getHostAddress())
                    && m.contains("failed authentication: its AUTH does not match this member's"))
        .anyMatch(
            m ->
                m.contains("refusing the peer at /" + m0.getHostAddress())
                    && m.contains("peer 'm1' connects from " + m0.getHostAddress()));
  }

  @Test
  void aStrangerAtAMembersAddressWithForgedPiecesAndHashesIsNeverBelieved() throws Exception {
    // zz-stranger sits at an address the membership lists (a pod gone, its IP taken) and holds
    // everything, announced with forged hashes, served with matching forged bytes; it does not
    // hold the artifact's secret. Before authentication the first announcement of a hash won.
    List<String> ids = List.of("m0", "m1", "m2", "zz-stranger");
    Map<String, InetSocketAddress> addresses = addresses(ids, 111);
    String peers = peersSpec(addresses);
    PieceMap map = pieceMap();
    RogueServingPeer stranger =
        new RogueServingPeer(
            addresses.get("zz-stranger"),
            "zz-stranger",
            ID,
            map,
            helloDigest(),
            SwarmArtifacts.pieceHashes(files, map, i -> true),
            RogueServingPeer.Mode.SERVE,
            i -> SwarmArtifacts.forgedPiece(files, map, i),
            Duration.ZERO,
            new java.util.concurrent.atomic.AtomicInteger(),
            new java.util.concurrent.atomic.AtomicInteger(),
            WRONG_SECRET,
            Membership.parseStatic(peers));
    closeables.add(stranger);
    for (String id : ids.subList(0, 3)) {
      servers.add(startInProcess(id, addresses.get(id), peers, "--peer-timeout", "2s"));
    }
    loadsHonestly();
    assertThat(stranger.connections.get()).as("handshakes the stranger passed").isZero();
    assertThat(stranger.served.get()).as("pieces the stranger got to send").isZero();
    for (DataPlaneServer s : servers) {
      assertThat(refused(members.get(s.address().getPort(), "/metrics").body(), "auth"))
          .as("failed handshakes with the stranger at %s", s.status().artifactId())
          .isPositive();
    }
  }

  @Test
  void aMemberThatAnnouncesForgedHashesForPiecesItDoesNotReadIsDroppedAndReported()
      throws Exception {
    // zz-liar holds the secret (a compromised member): for its own block it announces and serves
    // the true pieces, for everyone else's it announces forged hashes and serves matching forged
    // bytes, from its first BITFIELD on, before anybody else has read a thing.
    List<String> ids = List.of("m0", "m1", "m2", "zz-liar");
    Map<String, InetSocketAddress> addresses = addresses(ids, 121);
    String peers = peersSpec(addresses);
    PieceMap map = pieceMap();
    BitSet own = block(ids, "zz-liar");
    RogueServingPeer liar =
        new RogueServingPeer(
            addresses.get("zz-liar"),
            "zz-liar",
            ID,
            map,
            helloDigest(),
            SwarmArtifacts.pieceHashes(files, map, i -> !own.get(i)),
            RogueServingPeer.Mode.SERVE,
            i ->
                own.get(i)
                    ? SwarmArtifacts.truePiece(files, map, i)
                    : SwarmArtifacts.forgedPiece(files, map, i),
            Duration.ZERO,
            new java.util.concurrent.atomic.AtomicInteger(),
            new java.util.concurrent.atomic.AtomicInteger(),
            SECRET,
            Membership.parseStatic(peers));
    closeables.add(liar);
    for (String id : ids.subList(0, 3)) {
      servers.add(startInProcess(id, addresses.get(id), peers, "--peer-timeout", "2s"));
    }
    loadsHonestly();
    assertThat(liar.connections.get()).as("the liar passed the handshake").isPositive();
    for (DataPlaneServer s : servers) {
      DataPlaneStatus st = s.status();
      assertThat(st.droppedPeers()).as("dropped by %s", st.artifactId()).isNotNull();
      assertThat(st.droppedPeers())
          .singleElement()
          .satisfies(
              d -> {
                assertThat(d.id()).isEqualTo("zz-liar");
                assertThat(d.reason())
                    .matches(
                        "announced piece [0-9]+ with sha256 [0-9a-f]{64} but (its reader m[0-2]"
                            + " announced|this member read) [0-9a-f]{64}( from the source)?");
              });
      assertThat(
              sample(
                  members.get(s.address().getPort(), "/metrics").body(),
                  "tensorcast_dataplane_peers_dropped_total"))
          .isEqualTo(1.0);
    }
    assertThat(messages()).anyMatch(m -> m.startsWith("dropping peer zz-liar: announced piece"));
  }

  @Test
  void aMemberWhoseSourceReadsAreDeniedLeavesTheSwarmAndTheOthersLoadItsShare() throws Exception {
    // m2's credentials list the bucket and read the safetensors headers, but every ranged read of
    // pieces is refused with 403 AccessDenied: its load fails for good.
    List<String> ids = List.of("m0", "m1", "m2");
    Map<String, InetSocketAddress> addresses = addresses(ids, 131);
    String peers = peersSpec(addresses);
    FaultInjectingProxy denying = new FaultInjectingProxy(s3.endpoint());
    closeables.add(denying);
    denying.failRequestsWhere(
        r ->
            r.range().isPresent()
                && (r.rangeStart().orElse(0L) > 8 || r.rangeLength().orElse(0L) >= PIECE),
        403,
        Integer.MAX_VALUE);
    for (String id : ids.subList(0, 2)) {
      servers.add(startInProcess(id, addresses.get(id), peers, "--peer-timeout", "2s"));
    }
    DataPlaneServer denied =
        startInProcess(
            "m2",
            addresses.get("m2"),
            peers,
            "--peer-timeout",
            "2s",
            "--endpoint",
            denying.endpoint().toString());
    closeables.add(denied::close);

    loadsWithin(1.05);
    DataPlaneStatus st = denied.status();
    assertThat(st.phase()).isEqualTo(Phase.Failed);
    assertThat(st.reason()).isEqualTo(io.tensorcast.api.Reason.AccessDenied.name());
    assertThat(denied.swarm().connectedPeers()).isZero();
    try (Socket s = new Socket()) {
      org.assertj.core.api.Assertions.assertThatThrownBy(
              () -> s.connect(addresses.get("m2"), 2_000))
          .as("m2's peer port is closed")
          .isInstanceOf(java.net.ConnectException.class);
    }
    for (DataPlaneServer s : servers) {
      assertThat(s.swarm().handedOver())
          .as("hand-overs at %s", s.status().artifactId())
          .containsOnlyKeys("m2");
      assertThat(s.swarm().handedOver().get("m2")).startsWith("its load failed for good: ");
      DataPlaneStatus honest = s.status();
      assertThat(honest.handedOverPeers())
          .as("/status handedOverPeers at %s", honest.artifactId())
          .containsOnlyKeys("m2");
      assertThat(honest.handedOverPeers().get("m2"))
          .startsWith("its load failed for good: ")
          .contains("AccessDenied");
    }
    assertThat(denying.requests()).as("m2 was refused a piece read").isNotEmpty();
  }

  @Test
  void aMemberThatStaysConnectedButNeverReadsItsShareLosesItToTheOthers() throws Exception {
    // zz-idle holds the secret, passes the handshake and keeps its connections alive, but never
    // announces or serves a piece: its block would be nobody else's to read.
    List<String> ids = List.of("m0", "m1", "zz-idle");
    Map<String, InetSocketAddress> addresses = addresses(ids, 141);
    String peers = peersSpec(addresses);
    PieceMap map = pieceMap();
    RogueServingPeer idle =
        new RogueServingPeer(
            addresses.get("zz-idle"),
            "zz-idle",
            ID,
            map,
            helloDigest(),
            new byte[map.size()][],
            RogueServingPeer.Mode.IDLE,
            SECRET,
            Membership.parseStatic(peers));
    closeables.add(idle);
    for (String id : ids.subList(0, 2)) {
      servers.add(startInProcess(id, addresses.get(id), peers, "--peer-timeout", "1s"));
    }
    loadsWithin(1.05);
    assertThat(idle.connections.get()).as("zz-idle passed the handshake").isPositive();
    for (DataPlaneServer s : servers) {
      assertThat(s.swarm().handedOver())
          .as("hand-overs at %s", s.status().artifactId())
          .containsOnlyKeys("zz-idle");
      DataPlaneStatus honest = s.status();
      assertThat(honest.handedOverPeers())
          .as("/status handedOverPeers at %s", honest.artifactId())
          .containsOnlyKeys("zz-idle");
      assertThat(honest.handedOverPeers().get("zz-idle"))
          .matches("announced none of the [0-9]+ pieces it reads from the source within PT3S");
    }
    assertThat(messages())
        .anyMatch(
            m ->
                m.startsWith("member zz-idle's share of the source reads is handed over")
                    && m.contains("within PT3S"));
  }

  @Test
  void aReaderThatAnnouncesHashesItCannotBackIsDroppedAndItsBlockIsReadFromTheSourceOnce()
      throws Exception {
    // zz-liar holds the secret and is the reader of its block: it announces forged hashes for it
    // but serves the true bytes, which cannot match them; everything else it announces and serves
    // truly.
    List<String> ids = List.of("m0", "m1", "m2", "zz-liar");
    Map<String, InetSocketAddress> addresses = addresses(ids, 151);
    String peers = peersSpec(addresses);
    PieceMap map = pieceMap();
    BitSet own = block(ids, "zz-liar");
    RogueServingPeer liar =
        new RogueServingPeer(
            addresses.get("zz-liar"),
            "zz-liar",
            ID,
            map,
            helloDigest(),
            SwarmArtifacts.pieceHashes(files, map, own::get),
            RogueServingPeer.Mode.SERVE,
            i -> SwarmArtifacts.truePiece(files, map, i),
            Duration.ZERO,
            new java.util.concurrent.atomic.AtomicInteger(),
            new java.util.concurrent.atomic.AtomicInteger(),
            SECRET,
            Membership.parseStatic(peers));
    closeables.add(liar);
    for (String id : ids.subList(0, 3)) {
      servers.add(startInProcess(id, addresses.get(id), peers, "--peer-timeout", "2s"));
    }
    loadsWithin(1.05);
    for (DataPlaneServer s : servers) {
      DataPlaneStatus st = s.status();
      assertThat(st.droppedPeers())
          .as("dropped by %s", st.artifactId())
          .singleElement()
          .satisfies(
              d -> {
                assertThat(d.id()).isEqualTo("zz-liar");
                assertThat(d.reason())
                    .matches("announced piece [0-9]+ with sha256 [0-9a-f]{64} but .*");
              });
    }
  }

  @Test
  void aStrangerThatAsksForPiecesGetsNoByteOfThem() throws Exception {
    List<String> ids = List.of("m0", "m1");
    Map<String, InetSocketAddress> addresses = addresses(ids, 131);
    Membership membership = Membership.parseStatic(peersSpec(addresses));
    for (String id : ids) {
      servers.add(startInProcess(id, addresses.get(id), peersSpec(addresses)));
    }
    loadsHonestly();
    PieceMap map = pieceMap();
    byte[] helloAndRequests;
    {
      java.io.ByteArrayOutputStream b = new java.io.ByteArrayOutputStream();
      b.write(BlockingPeer.encode(hello("m0", membership).withNonce(new byte[32])));
      for (int i = 0; i < map.size(); i++) {
        b.write(BlockingPeer.encode(new Frame.Request(i)));
      }
      helloAndRequests = b.toByteArray();
    }
    // From an address no member is published at: closed before a byte is sent back.
    try (Socket s = new Socket()) {
      s.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.250"), 0));
      s.connect(addresses.get("m1"), 5_000);
      s.setSoTimeout(5_000);
      write(s, helloAndRequests);
      assertThat(readAll(s)).as("bytes m1 sent to a stranger's address").isZero();
    }
    // From a member's address, a HELLO and then requests without authenticating: only m1's own
    // HELLO comes back (and its AUTH), then the connection closes.
    try (BlockingPeer s =
        BlockingPeer.dial(
            new InetSocketAddress(addresses.get("m0").getAddress(), 0),
            addresses.get("m1"),
            FrameCodec.maxFrameLength(map.pieceSize(), map.size()),
            map.size())) {
      s.writeRaw(helloAndRequests);
      List<String> got = new ArrayList<>();
      try {
        for (Frame f; (f = s.read()) != null; ) {
          got.add(FrameCodec.typeName(f.type()));
        }
      } catch (IOException | RuntimeException closed) {
        // reset by m1
      }
      assertThat(got).as("frames m1 sent").doesNotContain("PIECE", "BITFIELD", "HAVE");
    }
    String metrics = members.get(servers.get(1).address().getPort(), "/metrics").body();
    assertThat(refused(metrics, "not-a-member-address")).isPositive();
    assertThat(refused(metrics, "handshake")).isPositive();
    assertThat(sample(metrics, "tensorcast_dataplane_peer_bytes_sent_total"))
        .as("piece bytes m1 sent: to m0 only")
        .isEqualTo((double) servers.get(0).status().bytesFromPeers());
  }

  @Test
  void aMemberWithAStaleSecretReconnectsOnceItIsRotatedAndKeepsEveryPieceItHolds()
      throws Exception {
    // m2 starts with the secret before a rotation (the kubelet has not updated its volume yet):
    // its handshakes fail and it loads alone from the source. Once its file holds the new
    // secret it connects, and takes the rest from its peers without dropping anything it holds.
    // One piece per request, 150 ms each, m2 one request at a time: alone it needs ~10 s.
    proxy.delay(Duration.ofMillis(150));
    List<String> ids = List.of("m0", "m1", "m2");
    Map<String, InetSocketAddress> addresses = addresses(ids, 141);
    String peers = peersSpec(addresses);
    Path stale = write("stale-peer-secret", Base64.getEncoder().encodeToString(WRONG_SECRET));
    String onePiece = String.valueOf(PIECE);
    servers.add(
        startInProcess(
            "m0", addresses.get("m0"), peers, "--peer-timeout", "1s", "--range-size", onePiece));
    servers.add(
        startInProcess(
            "m1", addresses.get("m1"), peers, "--peer-timeout", "1s", "--range-size", onePiece));
    DataPlaneServer m2 =
        startInProcess(
            "m2",
            addresses.get("m2"),
            peers,
            "--peer-timeout",
            "1s",
            "--range-size",
            onePiece,
            "--concurrency",
            "1",
            "--peer-secret-file",
            stale.toString());
    servers.add(m2);
    await("m2 has read pieces alone")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(20))
        .until(() -> m2.status().bytesFromSource() >= 4L * PIECE);
    assertThat(m2.status().peers()).as("m2's connections before the rotation").isZero();
    long heldBefore = m2.status().bytesLoaded();
    Path next = write("next-peer-secret", Base64.getEncoder().encodeToString(SECRET));
    Files.move(next, stale, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);

    members.awaitReady(servers);
    for (DataPlaneServer s : servers) {
      members.assertByteIdentical(s.status());
    }
    DataPlaneStatus st = m2.status();
    assertThat(st.bytesFromSource() + st.bytesFromPeers())
        .as("m2's bytes from the source and from peers: each piece once, nothing dropped")
        .isEqualTo(total);
    assertThat(st.bytesFromSource()).isGreaterThanOrEqualTo(heldBefore);
    assertThat(st.bytesFromPeers())
        .as("m2 took pieces from its peers after the rotation")
        .isPositive();
    assertThat(refused(members.get(m2.address().getPort(), "/metrics").body(), "auth"))
        .isPositive();
    assertThat(messages())
        .anyMatch(m -> m.contains("peer secret in " + stale + " changed (fingerprint"));
  }

  @Test
  void aThousandConnectionsThatNeverFinishAHandshakeLeaveTheMembersRssInItsHeadroom()
      throws Exception {
    // p0 is a dataplane serve JVM with 1 MiB pieces: before authentication existed a connection
    // could make it buffer a whole piece-sized frame, 1000 of them up to its direct memory. The
    // flood comes from 10 addresses no member is published at and from p1's address (p1 starts
    // afterwards), and stays open while p0 and p1 load.
    List<String> ids = List.of("p0", "p1");
    Map<String, InetSocketAddress> addresses = addresses(ids, 151);
    String peers = peersSpec(addresses);
    int control = freePort(InetAddress.getLoopbackAddress());
    Process p0 = startProcess("p0", control, addresses.get("p0"), peers);
    await("p0's control endpoint")
        .atMost(READY)
        .ignoreExceptions()
        .until(() -> members.get(control, "/healthz").statusCode() == 200);
    await("p0 resolved and waits for p1")
        .atMost(READY)
        .ignoreExceptions()
        .until(() -> members.statusOf(control).phase() == Phase.Loading);
    // Loading begins once the listing, digests and allocation are done; the peer transport starts
    // listening just after. A flood sent before it listens is refused by the kernel, not by p0,
    // and p0's metrics would not count it: wait until the port takes a connection (this probe,
    // from an address no member is published at, is refused by p0 and counted with the flood).
    await("p0's peer port listening")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> {
              try (Socket s = new Socket()) {
                s.bind(new InetSocketAddress(InetAddress.getByName("127.0.1.250"), 0));
                s.connect(addresses.get("p0"), 1_000);
                return true;
              } catch (IOException notYet) {
                return false;
              }
            });
    long before = rssAnon(p0.pid());

    List<Socket> flood = new ArrayList<>();
    closeables.add(
        () -> {
          for (Socket s : flood) {
            s.close();
          }
        });
    byte[] partial = partialPieceFrame(1 << 20, 256 * 1024);
    InetAddress p1 = addresses.get("p1").getAddress();
    for (int i = 0; i < 1000; i++) {
      InetAddress from = i % 10 == 0 ? p1 : InetAddress.getByName("127.0.1." + (1 + i % 10));
      Socket s = new Socket();
      flood.add(s);
      try {
        s.bind(new InetSocketAddress(from, 0));
        s.connect(addresses.get("p0"), 5_000);
        s.getOutputStream().write(partial);
      } catch (IOException refusedOrReset) {
        // closed by p0 at once: what a refused connection looks like from outside
      }
    }
    // Measured once p0 has taken the flood in: every connection that reached it accepted and
    // refused, or admitted and holding its partial frame (a fixed pause measured less of it the
    // busier the machine). Connections beyond the listen backlog are accepted (and refused) only
    // as the backlog drains: wait for the count rather than read it once.
    await("p0 refused at least 900 of the flood's connections")
        .atMost(READY)
        .untilAsserted(
            () -> {
              String metrics = members.get(control, "/metrics").body();
              assertThat(
                      refused(metrics, "not-a-member-address")
                          + refused(metrics, "too-many-handshakes")
                          + refused(metrics, "handshake"))
                  .as("flood connections p0 refused")
                  .isGreaterThanOrEqualTo(900);
            });
    long after = rssAnon(p0.pid());
    System.out.printf(
        "p0 anonymous RSS: %d MiB before the flood, %d MiB after%n", before >> 20, after >> 20);
    assertThat(after - before)
        .as("growth of p0's anonymous RSS (bytes) under 1000 half-open connections")
        .isLessThan(48L << 20);
    assertThat(after)
        .as("p0's anonymous RSS within the 256 MiB a pod gets besides its artifact")
        .isLessThan(256L << 20);

    // p1 has p0's peer timeout, as the members of one swarm do: p0 dials p1 (its id sorts first)
    // with a back-off of up to a quarter of its own timeout (5 s), so a p1 with 5 s counted p0
    // lost whenever p0's next dial came a little late (on a loaded machine: its block read twice,
    // above the 1.02 x bound).
    servers.add(
        startInProcess(
            "p1", addresses.get("p1"), peers, "--piece-size", "1Mi", "--peer-timeout", "60s"));
    members.awaitReady(servers);
    await("p0 Ready")
        .atMost(READY)
        .ignoreExceptions()
        .until(() -> members.statusOf(control).phase() == Phase.Ready);
    members.assertByteIdentical(members.statusOf(control));
    members.assertByteIdentical(servers.get(0).status());
    assertThat(proxy.getBodyBytes()).isLessThanOrEqualTo((long) (1.02 * total));
  }

  // ------------------------------------------------------------------ helpers

  /**
   * Waits for every in-process member in {@link #servers}, checks their stores and that they read
   * at most {@code bound} × the artifact from the source (through {@link #proxy}).
   */
  private void loadsWithin(double bound) throws IOException {
    members.awaitReady(servers);
    for (DataPlaneServer s : servers) {
      members.assertByteIdentical(s.status());
    }
    assertThat(proxy.getBodyBytes())
        .as("bytes the honest members read from S3 (headers included) vs the artifact's %d", total)
        .isLessThanOrEqualTo((long) (bound * total));
  }

  /** Waits for every in-process member, checks stores and the source bytes. */
  private void loadsHonestly() throws IOException {
    members.awaitReady(servers);
    for (DataPlaneServer s : servers) {
      members.assertByteIdentical(s.status());
    }
    assertThat(proxy.getBodyBytes())
        .as("bytes read from S3 (headers included) vs the artifact's %d", total)
        .isLessThanOrEqualTo((long) (1.02 * total));
  }

  private static BlockingPeer impostor(InetAddress from, InetSocketAddress to) throws IOException {
    PieceMap map = pieceMap();
    return BlockingPeer.dial(
        new InetSocketAddress(from, 0),
        to,
        FrameCodec.maxFrameLength(map.pieceSize(), map.size()),
        map.size());
  }

  private static Frame.Hello hello(String id, Membership m) throws IOException {
    PieceMap map = pieceMap();
    return new Frame.Hello(
        FrameCodec.VERSION,
        ID,
        id,
        m.epoch(),
        map.pieceSize(),
        map.size(),
        helloDigest(),
        new byte[Frame.NONCE_BYTES]);
  }

  /**
   * {@code u32 length | PIECE | u32 0} of a {@code length}-byte frame and {@code sent} bytes of it.
   */
  private static byte[] partialPieceFrame(int length, int sent) {
    ByteBuffer b = ByteBuffer.allocate(9 + sent);
    b.putInt(length).put(FrameCodec.PIECE).putInt(0);
    return b.array();
  }

  private static long rssAnon(long pid) throws IOException {
    for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
      if (line.startsWith("RssAnon:")) {
        return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
      }
    }
    throw new IllegalStateException("no RssAnon in /proc/" + pid + "/status");
  }

  private List<String> messages() {
    return logged.list.stream().map(ILoggingEvent::getFormattedMessage).toList();
  }

  private static double refused(String metrics, String reason) {
    return metrics
        .lines()
        .filter(
            l ->
                l.startsWith("tensorcast_dataplane_peer_connections_refused_total{")
                    && l.contains("reason=\"" + reason + "\""))
        .mapToDouble(l -> Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1)))
        .sum();
  }

  private static double sample(String exposition, String metric) {
    return PrometheusText.sample(exposition, metric);
  }

  private static void write(Socket s, byte[] bytes) {
    try {
      OutputStream out = s.getOutputStream();
      out.write(bytes);
      out.flush();
    } catch (IOException closed) {
      // closed while sending
    }
  }

  private static long readAll(Socket s) {
    long n = 0;
    byte[] buf = new byte[65536];
    try {
      for (int r; (r = s.getInputStream().read(buf)) >= 0; ) {
        n += r;
      }
    } catch (IOException closed) {
      // reset
    }
    return n;
  }

  private DataPlaneServer startInProcess(
      String id, InetSocketAddress peerListen, String peers, String... extra) throws Exception {
    return ServeMembers.startInProcess(common(members.newRoot(), id, peerListen, peers), extra);
  }

  private List<String> common(Path root, String id, InetSocketAddress peerListen, String peers) {
    return new ArrayList<>(
        swarm
            .member(proxy.endpoint(), root, id, peerListen)
            .option("--peer-timeout", "5s")
            .option("--peers", peers)
            .args());
  }

  private Process startProcess(String id, int control, InetSocketAddress peerListen, String peers)
      throws IOException {
    List<String> args = common(members.newRoot(), id, peerListen, peers);
    args.set(args.indexOf("--piece-size") + 1, "1Mi");
    args.set(args.indexOf("--peer-timeout") + 1, "60s");
    args.addAll(List.of("--listen", "127.0.0.1:" + control));
    return members.startProcess(id, args);
  }

  private static byte[] helloDigest() throws IOException {
    List<io.tensorcast.dataplane.source.SourceFile> listed = new ArrayList<>();
    for (Map.Entry<String, Path> e : files.entrySet()) {
      listed.add(
          new io.tensorcast.dataplane.source.SourceFile(
              e.getKey(), Files.size(e.getValue()), etags.get(e.getKey()), Optional.empty()));
    }
    return PeerSwarm.helloDigest(pieceMap(), listed);
  }

  private static PieceMap pieceMap() throws IOException {
    List<StoreFile> list = new ArrayList<>();
    for (Map.Entry<String, Path> e : files.entrySet()) {
      list.add(new StoreFile(e.getKey(), Files.size(e.getValue())));
    }
    return new PieceMap(list, PIECE);
  }

  private static BitSet block(List<String> members, String id) throws IOException {
    return SwarmPlan.compute(
            pieceMap().size(), new TreeSet<>(members), new TreeSet<>(members), Map.of())
        .assignedTo(id);
  }
}
