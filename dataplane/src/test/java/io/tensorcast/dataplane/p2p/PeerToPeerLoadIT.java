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
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.testing.PrometheusText;
import io.tensorcast.dataplane.testing.ServeCommandLine;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * Peer-to-peer loading on loopback: data-plane members on 127.0.0.x (in-process {@link
 * DataPlaneServer}s, or {@code dataplane serve} JVMs for the kill test) load a corpus-based
 * artifact from S3Mock through a byte-counting {@link FaultInjectingProxy}, with 64 KiB pieces so
 * there are about a hundred of them; test-side peers built on {@link FrameCodec} corrupt or
 * withhold pieces.
 */
class PeerToPeerLoadIT {
  private static final String BUCKET = "p2p-it";
  private static final String PREFIX = "model/";
  private static final String ID = "p2p";
  private static final int PIECE = 64 * 1024;
  private static final Duration READY = Duration.ofSeconds(90);
  static final String READ_TOKEN = "p2p-it-read-token-0123456789abcdef";
  static final String ADMIN_TOKEN = "p2p-it-admin-token-0123456789abcdef";

  /**
   * The swarm's peer secret (32 random bytes) and the files every member reads it and tokens from.
   */
  static final byte[] SECRET = new java.security.SecureRandom().generateSeed(32);

  private static ServeMembers.Swarm swarm;

  private static S3MockServer s3;

  /** Path in the artifact → corpus file, in listing order. */
  private static final Map<String, Path> files = new TreeMap<>();

  private static long total;

  /** Path in the artifact → its ETag at S3Mock. */
  private static final Map<String, String> etags = new TreeMap<>();

  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final ServeMembers members = new ServeMembers("p2p-it", files, READY);
  private final List<DataPlaneServer> servers = members.servers;
  private final List<Process> processes = members.processes;
  private final List<AutoCloseable> closeables = members.closeables;
  private FaultInjectingProxy proxy;

  @BeforeAll
  static void seed() throws Exception {
    swarm = ServeMembers.Swarm.write("p2p-it", ID, "s3://" + BUCKET + "/" + PREFIX, SECRET);
    files.putAll(SwarmArtifacts.mixed());
    s3 = S3MockServer.shared();
    total = SwarmArtifacts.upload(s3, BUCKET, PREFIX, files, etags);
  }

  @BeforeEach
  void setUp() throws Exception {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    proxy = new FaultInjectingProxy(s3.endpoint());
  }

  @AfterEach
  void tearDown() throws Exception {
    members.close();
    System.out.printf(
        "source bytes (proxy): %d = %.3f x the artifact's %d%n",
        proxy.getBodyBytes(), (double) proxy.getBodyBytes() / total, total);
    proxy.close();
  }

  @Test
  void fourMembersReadEachPieceFromTheSourceAboutOnceAndEndByteIdentical() throws Exception {
    List<String> ids = List.of("m0", "m1", "m2", "m3");
    Map<String, InetSocketAddress> addresses = addresses(ids, 1);
    String peers = peersSpec(addresses);
    ListAppender<ILoggingEvent> ready = new ListAppender<>();
    ready.start();
    Logger loaderLog = (Logger) LoggerFactory.getLogger(ArtifactLoader.class);
    loaderLog.addAppender(ready);
    try {
      loadAll(ids, addresses, peers, "5s");
    } finally {
      loaderLog.detachAppender(ready);
    }
    // Each member's digests take in pieces while they arrive: the bytes hashed after the last
    // byte are at most the artifact, and less at some member (all of it if the fill's pieces
    // were hashed only once the fill returned).
    java.util.regex.Pattern line =
        java.util.regex.Pattern.compile(
            "ready: \\d+ files, (\\d+) bytes in .*\\((\\d+) bytes hashed after it\\)");
    List<Long> hashedAfter = new ArrayList<>();
    for (ILoggingEvent e : List.copyOf(ready.list)) {
      java.util.regex.Matcher m = line.matcher(e.getFormattedMessage());
      if (m.find() && Long.parseLong(m.group(1)) == total) {
        hashedAfter.add(Long.parseLong(m.group(2)));
      }
    }
    assertThat(hashedAfter).hasSize(ids.size()).allMatch(b -> b <= total);
    assertThat(hashedAfter.stream().mapToLong(Long::longValue).sum())
        .as("bytes hashed after the last byte, per member: %s (artifact %d)", hashedAfter, total)
        .isLessThan(ids.size() * total);
    long fromSource = proxy.getBodyBytes();
    assertThat(fromSource)
        .as("bytes read from S3 (counted by the proxy, headers included) vs artifact %d", total)
        .isLessThanOrEqualTo((long) (1.05 * total));
    long sumFromPeers = 0;
    for (DataPlaneServer s : servers) {
      DataPlaneStatus st = s.status();
      assertThat(st.bytesFromSource() + st.bytesFromPeers()).isEqualTo(total);
      assertThat(st.bytesFromPeers()).as("bytes %s got from peers", st).isPositive();
      assertThat(st.peerEpoch()).isEqualTo(Membership.parseStatic(peers).epoch());
      sumFromPeers += st.bytesFromPeers();
    }
    await().atMost(Duration.ofSeconds(10)).until(() -> servers.get(0).status().peers() == 3);
    assertThat(sumFromPeers).isGreaterThanOrEqualTo(2 * total);
    String metrics = members.get(servers.get(1).address().getPort(), "/metrics").body();
    assertThat(sample(metrics, "tensorcast_dataplane_peer_bytes_received_total"))
        .isEqualTo(servers.get(1).status().bytesFromPeers());
    assertThat(sample(metrics, "tensorcast_dataplane_source_bytes_total"))
        .isEqualTo(servers.get(1).status().bytesFromSource());
    assertThat(sample(metrics, "tensorcast_dataplane_peers")).isEqualTo(3.0);
    assertThat(sample(metrics, "tensorcast_dataplane_pieces_rejected_total")).isZero();
    double sent = 0;
    for (DataPlaneServer s : servers) {
      sent +=
          sample(
              members.get(s.address().getPort(), "/metrics").body(),
              "tensorcast_dataplane_peer_bytes_sent_total");
    }
    assertThat(sent).isGreaterThanOrEqualTo(sumFromPeers);
  }

  @Test
  void aMemberHandshakesReadsItsShareAndTakesPiecesWhileItsDigestsAreStillBeingRead()
      throws Exception {
    // d1's source holds every HEAD (the published digests) until the test lets them go: d1 starts
    // its transport after the listing and fills meanwhile (before: it waited in Resolving, its
    // peer port closed, until the digests were in).
    List<String> ids = List.of("d0", "d1");
    Map<String, InetSocketAddress> addresses = addresses(ids, 121);
    String peers = peersSpec(addresses);
    java.util.concurrent.CountDownLatch digests = new java.util.concurrent.CountDownLatch(1);
    try (FaultInjectingProxy held = new FaultInjectingProxy(s3.endpoint())) {
      held.holdWhere(r -> r.method().equals("HEAD"), digests);
      DataPlaneServer d0 =
          startInProcess("d0", addresses.get("d0"), peers, "--peer-timeout", "30s");
      servers.add(d0);
      ServeCommandLine d1Args =
          swarm.member(held.endpoint(), members.newRoot(), "d1", addresses.get("d1"));
      d1Args.option("--peers", peers);
      DataPlaneServer d1 = ServeMembers.startInProcess(d1Args.args(), "--peer-timeout", "30s");
      servers.add(d1);
      try {
        await("d1 connected to d0, reading from the source and taking pieces from d0")
            .atMost(Duration.ofSeconds(60))
            .until(
                () -> {
                  DataPlaneStatus st = d1.status();
                  return d0.status().peers() == 1
                      && st.bytesFromSource() > 0
                      && st.bytesFromPeers() > 0;
                });
        assertThat(held.requests())
            .as("d1 asked for its digests")
            .anyMatch(r -> r.method().equals("HEAD"));
        assertThat(digests.getCount()).as("the digests were held all along").isEqualTo(1);
        assertThat(d1.status().phase()).isIn(Phase.Loading, Phase.Verifying);
      } finally {
        digests.countDown();
      }
      members.awaitReady(servers);
      for (DataPlaneServer s : servers) {
        members.assertByteIdentical(s.status());
      }
    }
  }

  @Test
  void piecesFromACorruptingPeerAreRejectedAndFetchedElsewhere() throws Exception {
    List<String> ids = List.of("m0", "m1", "m2", "zz-corrupt");
    Map<String, InetSocketAddress> addresses = addresses(ids, 11);
    String peers = peersSpec(addresses);
    RogueServingPeer rogue =
        new RogueServingPeer(
            addresses.get("zz-corrupt"),
            "zz-corrupt",
            ID,
            pieceMap(),
            helloDigest(),
            pieceHashes(),
            RogueServingPeer.Mode.CORRUPT,
            SECRET,
            Membership.parseStatic(peers));
    closeables.add(rogue);
    for (String id : ids.subList(0, 3)) {
      servers.add(startInProcess(id, addresses.get(id), peers, "--peer-timeout", "5s"));
    }
    members.awaitReady(servers);

    double rejected = 0;
    for (DataPlaneServer s : servers) {
      members.assertByteIdentical(s.status());
      rejected +=
          sample(
              members.get(s.address().getPort(), "/metrics").body(),
              "tensorcast_dataplane_pieces_rejected_total");
    }
    assertThat(rogue.requests.get()).isPositive();
    // Every member asks the rogue until it stops trusting it: dropped at the first bad piece of
    // the block it is the reader of (it cannot back its own hash), refused after MAX_FAULTS bad
    // pieces of other blocks.
    assertThat(rejected)
        .as("pieces rejected")
        .isGreaterThanOrEqualTo(servers.size())
        .isLessThanOrEqualTo(servers.size() * (SwarmPolicy.MAX_FAULTS + 8.0));
    assertThat(proxy.getBodyBytes()).isLessThanOrEqualTo((long) (1.05 * total));
  }

  @Test
  void aSilentPeerIsNotWaitedForBeyondThePeerTimeout() throws Exception {
    List<String> ids = List.of("m0", "m1", "m2", "zz-silent");
    Map<String, InetSocketAddress> addresses = addresses(ids, 21);
    String peers = peersSpec(addresses);
    RogueServingPeer rogue =
        new RogueServingPeer(
            addresses.get("zz-silent"),
            "zz-silent",
            ID,
            pieceMap(),
            helloDigest(),
            pieceHashes(),
            RogueServingPeer.Mode.SILENT,
            SECRET,
            Membership.parseStatic(peers));
    closeables.add(rogue);
    long started = System.nanoTime();
    for (String id : ids.subList(0, 3)) {
      servers.add(startInProcess(id, addresses.get(id), peers, "--peer-timeout", "1s"));
    }
    members.awaitReady(servers);
    Duration took = Duration.ofNanos(System.nanoTime() - started);

    for (DataPlaneServer s : servers) {
      members.assertByteIdentical(s.status());
    }
    assertThat(rogue.requests.get()).as("the silent peer was asked").isPositive();
    // Its pieces are asked for once (stuck after 1 s, MAX_FAULTS at once), then read elsewhere:
    // a few peer timeouts, not a wait for the peer.
    assertThat(took).isLessThan(Duration.ofSeconds(20));
    assertThat(proxy.getBodyBytes()).isLessThanOrEqualTo((long) (1.05 * total));
  }

  @Test
  void aBusyPeerThatKeepsDeliveringIsNotDroppedAsStuck() throws Exception {
    // zz-busy holds every piece and sends one per 150 ms in request order: with up to 4 requests
    // of each member queued there, a request waits longer than the 400 ms peer timeout although
    // the peer delivers all the time. Dropping it as stuck (as before) left the pieces of its
    // block, which only it held, to the last-resort source read; a busy peer is not a stuck one.
    // (The members read their own blocks: a piece's hash is trusted from its reader only.)
    List<String> ids = List.of("m0", "m1", "zz-busy");
    Map<String, InetSocketAddress> addresses = addresses(ids, 51);
    RogueServingPeer busy =
        honestHolder(addresses, "zz-busy", RogueServingPeer.Mode.SLOW, Duration.ofMillis(150));
    String peers = peersSpec(addresses);
    loadAll(ids.subList(0, 2), addresses, peers, "400ms");
    // Dropped as stuck, zz-busy would send a few pieces and its block would be read from the
    // source; a glitch of the loaded test machine may cost a piece or two, not half the block.
    assertThat(
            servers.get(0).status().bytesFromSource() + servers.get(1).status().bytesFromSource())
        .as("piece bytes the members read from the source: their own blocks, not zz-busy's")
        .isGreaterThanOrEqualTo(blockBytes(ids, "m0") + blockBytes(ids, "m1"))
        .isLessThan(blockBytes(ids, "m0") + blockBytes(ids, "m1") + blockBytes(ids, "zz-busy") / 2);
    assertThat(busy.served.get())
        .as("pieces the busy peer sent")
        .isGreaterThan(blockPieces(ids, "zz-busy") / 2);
  }

  @Test
  void aPeerWhosePieceBytesKeepArrivingIsNotStuckBeforeAPieceIsWhole() throws Exception {
    // The only holder streams each 64 KiB piece in 16 KiB chunks every 80 ms: a piece takes ~320 ms
    // to arrive whole, longer than the 250 ms peer timeout, but its bytes never stop. Counting only
    // whole pieces (as before) dropped it as stuck after 3 timeouts and sent the members to the
    // source for everything.
    List<String> ids = List.of("m0", "m1", "zz-trickle");
    Map<String, InetSocketAddress> addresses = addresses(ids, 91);
    RogueServingPeer trickle =
        honestHolder(addresses, "zz-trickle", RogueServingPeer.Mode.TRICKLE, Duration.ofMillis(80));
    String peers = peersSpec(addresses);
    loadAll(ids.subList(0, 2), addresses, peers, "250ms");
    // Counted as stuck, the holder would be dropped after three timeouts and its block read from
    // the source; a glitch of the loaded test machine may cost a piece or two, not half the block.
    assertThat(trickle.served.get())
        .as("pieces the trickling holder sent whole")
        .isGreaterThan(blockPieces(ids, "zz-trickle") / 2);
    assertThat(
            servers.get(0).status().bytesFromSource() + servers.get(1).status().bytesFromSource())
        .as("piece bytes the members read from the source: their own blocks, not the holder's")
        .isGreaterThanOrEqualTo(blockBytes(ids, "m0") + blockBytes(ids, "m1"))
        .isLessThan(
            blockBytes(ids, "m0") + blockBytes(ids, "m1") + blockBytes(ids, "zz-trickle") / 2);
  }

  @Test
  void aMemberKeepsAtMostEightRequestsInFlightAcrossAllItsPeers() throws Exception {
    // One member and five busy peers that each hold every piece: 4 requests per peer would be 20
    // pieces queued behind this member's one link; the cap across peers is 8.
    List<String> ids = List.of("m0", "zz-b1", "zz-b2", "zz-b3", "zz-b4", "zz-b5");
    Map<String, InetSocketAddress> addresses = addresses(ids, 61);
    PieceMap map = pieceMap();
    java.util.concurrent.atomic.AtomicInteger outstanding =
        new java.util.concurrent.atomic.AtomicInteger();
    java.util.concurrent.atomic.AtomicInteger maxOutstanding =
        new java.util.concurrent.atomic.AtomicInteger();
    for (String id : ids.subList(1, ids.size())) {
      closeables.add(
          new RogueServingPeer(
              addresses.get(id),
              id,
              ID,
              map,
              helloDigest(),
              pieceHashes(),
              RogueServingPeer.Mode.SLOW,
              i -> truePiece(map, i),
              Duration.ofMillis(40),
              outstanding,
              maxOutstanding,
              SECRET,
              Membership.parseStatic(peersSpec(addresses))));
    }
    servers.add(startInProcess("m0", addresses.get("m0"), peersSpec(addresses)));
    members.awaitReady(servers);

    members.assertByteIdentical(servers.get(0).status());
    // Every other member holds m0's block too: m0 fetches it on their claim (each file checked
    // against the digest S3 publishes) instead of reading it.
    assertThat(servers.get(0).status().bytesFromSource())
        .as("m0 takes everything from the five holders, its own block included")
        .isZero();
    assertThat(maxOutstanding.get())
        .as("requests outstanding at once across the five peers")
        .isEqualTo(SwarmPolicy.maxTotalInFlight(4))
        .isEqualTo(8);
  }

  @Test
  void theSwarmReadsFromTheSourceWithTheConcurrencyOfOneLoader() throws Exception {
    // 4 members with --concurrency 8: the swarm together keeps at most 8 piece reads at the origin
    // (2 each). 8 each (32 at once) made every piece take 32 piece-times to arrive whole, so the
    // peers had nothing to exchange until late and most pieces finished together at the end.
    List<String> ids = List.of("c0", "c1", "c2", "c3");
    Map<String, InetSocketAddress> addresses = addresses(ids, 71);
    // Piece reads are runs of one or more whole pieces (headers are shorter than a piece).
    proxy.delay(Duration.ofMillis(30)).countInFlightOnly(r -> r.rangeLength().orElse(0L) >= PIECE);
    String peers = peersSpec(addresses);
    for (String id : ids) {
      servers.add(
          startInProcess(
              id, addresses.get(id), peers, "--peer-timeout", "5s", "--concurrency", "8"));
    }
    members.awaitReady(servers);

    long fromSource = 0;
    for (DataPlaneServer s : servers) {
      members.assertByteIdentical(s.status());
      fromSource += s.status().bytesFromSource();
    }
    assertThat(fromSource).isEqualTo(total);
    assertThat(proxy.maxInFlightGets())
        .as("piece reads in flight at the origin across the 4 members")
        .isGreaterThanOrEqualTo(2)
        .isLessThanOrEqualTo(SwarmPolicy.sourceReadsInFlight(8, 4) * 4)
        .isLessThanOrEqualTo(8);
  }

  @Test
  void sourceReadsAreRunsOfPiecesUpToTheRangeSizeAndEachPieceIsSharedBeforeItsRunEnds()
      throws Exception {
    // 64 KiB pieces, --range-size 512 KiB: a member reads up to 8 consecutive pieces of its block
    // with one ranged request, so the origin sees about as many piece GETs as a plain load with
    // 512 KiB ranges, not one per piece. The origin sends each body at 256 KiB/s, so a run takes
    // 2 s; the peer must get its first piece from the reader before any run has ended.
    List<String> ids = List.of("s0", "s1");
    Map<String, InetSocketAddress> addresses = addresses(ids, 81);
    proxy.throttleBodies(256 * 1024).countInFlightOnly(r -> r.rangeLength().orElse(0L) >= PIECE);
    String peers = peersSpec(addresses);
    for (String id : ids) {
      servers.add(
          startInProcess(
              id, addresses.get(id), peers, "--range-size", "512Ki", "--concurrency", "2"));
    }
    DataPlaneServer s1 = servers.get(1);
    await("s1 received a piece from s0")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(5))
        .until(() -> s1.status().bytesFromPeers() > 0);
    int runsEnded = proxy.finishedGets();
    proxy.throttleBodies(0);
    members.awaitReady(servers);

    assertThat(runsEnded)
        .as("piece reads the origin had finished when s1 got its first piece from s0")
        .isZero();
    List<FaultInjectingProxy.RecordedRequest> pieceGets =
        proxy.requests().stream().filter(r -> r.rangeLength().orElse(0L) >= PIECE).toList();
    long longest = pieceGets.stream().mapToLong(r -> r.rangeLength().orElseThrow()).max().orElse(0);
    assertThat(longest)
        .as("longest piece read")
        .isGreaterThan(PIECE)
        .isLessThanOrEqualTo(512 * 1024);
    // Runs also end at file ends and where the two blocks meet: against ~120 requests for one
    // per piece.
    assertThat(pieceGets)
        .as("piece GETs at the origin")
        .hasSizeLessThanOrEqualTo((int) (total / (512 * 1024) + files.size() + 2));
    long fromSource = 0;
    for (DataPlaneServer s : servers) {
      members.assertByteIdentical(s.status());
      fromSource += s.status().bytesFromSource();
    }
    assertThat(fromSource).isEqualTo(total);
  }

  @Test
  void aMemberLoadingAgainAfterTheObjectWasReplacedBySameSizeBytesDoesNotTakeTheOldPieces()
      throws Exception {
    // n1's first load fails (its route answers 500s) while n0 loads version 1 alone. The object
    // is then replaced by version 2 of the same size (same header, other tensor bytes: a
    // fine-tuned checkpoint of the same shapes), and n1's route recovers. n1's second load lists
    // version 2; pieces n0 holds of version 1 must not end up in n1's copy.
    String bucket = "p2p-replaced-it";
    String key = "model/mnist.safetensors";
    s3.createBucket(bucket);
    Path original = files.get("a/mnist.safetensors");
    byte[] v1 = Files.readAllBytes(original);
    byte[] v2 = v1.clone();
    for (int i = (int) headerEnd(original); i < v2.length; i++) {
      v2[i] ^= 0x5A;
    }
    s3.putBytes(bucket, key, v1);
    List<String> ids = List.of("n0", "n1");
    Map<String, InetSocketAddress> addresses = addresses(ids, 91);
    String peers = peersSpec(addresses);
    FaultInjectingProxy n1Route = new FaultInjectingProxy(s3.endpoint());
    closeables.add(n1Route);
    n1Route.failRequests(500, 1_000_000, null);
    String uri = "s3://" + bucket + "/model/";
    DataPlaneServer n0 =
        startInProcess("n0", addresses.get("n0"), peers, "--uri", uri, "--peer-timeout", "2s");
    DataPlaneServer n1 =
        startInProcess(
            "n1",
            addresses.get("n1"),
            peers,
            "--uri",
            uri,
            "--peer-timeout",
            "2s",
            "--endpoint",
            n1Route.endpoint().toString(),
            "--max-attempts",
            "2",
            "--load-retry-backoff",
            "200ms",
            "--load-retry-max-backoff",
            "200ms");
    servers.add(n0);
    servers.add(n1);
    members.awaitReady(List.of(n0));
    assertThat(
            Files.mismatch(
                Path.of(n0.status().storeDirectory()).resolve("mnist.safetensors"), original))
        .isEqualTo(-1L);
    await("n1 waiting to load again")
        .atMost(READY)
        .until(() -> n1.status(), s -> "SourceUnavailable".equals(s.reason()));

    s3.putBytes(bucket, key, v2);
    n1Route.reset();
    members.awaitReady(List.of(n1));

    byte[] copy =
        Files.readAllBytes(Path.of(n1.status().storeDirectory()).resolve("mnist.safetensors"));
    assertThat(java.util.Arrays.mismatch(copy, v2))
        .as("first byte where n1's copy differs from version 2 (-1: none)")
        .isEqualTo(-1);
  }

  /**
   * A peer holding every piece that sends the true bytes, slowly ({@code SLOW}: a piece per {@code
   * delay}; {@code TRICKLE}: 16 KiB per {@code delay}); closed after the test.
   */
  private RogueServingPeer honestHolder(
      Map<String, InetSocketAddress> addresses,
      String id,
      RogueServingPeer.Mode mode,
      Duration delay)
      throws Exception {
    PieceMap map = pieceMap();
    RogueServingPeer peer =
        new RogueServingPeer(
            addresses.get(id),
            id,
            ID,
            map,
            helloDigest(),
            pieceHashes(),
            mode,
            i -> truePiece(map, i),
            delay,
            new java.util.concurrent.atomic.AtomicInteger(),
            new java.util.concurrent.atomic.AtomicInteger(),
            SECRET,
            Membership.parseStatic(peersSpec(addresses)));
    closeables.add(peer);
    return peer;
  }

  /** Pieces the plan of {@code members} (all live) assigns {@code id} to read: its block. */
  private static int blockPieces(List<String> members, String id) throws IOException {
    PieceMap map = pieceMap();
    return SwarmPlan.compute(
            map.size(),
            new java.util.TreeSet<>(members),
            new java.util.TreeSet<>(members),
            Map.of())
        .assignedTo(id)
        .cardinality();
  }

  /** Bytes of {@code id}'s block in the plan of {@code members}. */
  private static long blockBytes(List<String> members, String id) throws IOException {
    PieceMap map = pieceMap();
    java.util.BitSet block =
        SwarmPlan.compute(
                map.size(),
                new java.util.TreeSet<>(members),
                new java.util.TreeSet<>(members),
                Map.of())
            .assignedTo(id);
    long bytes = 0;
    for (int i = block.nextSetBit(0); i >= 0; i = block.nextSetBit(i + 1)) {
      bytes += map.piece(i).length();
    }
    return bytes;
  }

  private static byte[] truePiece(PieceMap map, int i) {
    PieceMap.Piece p = map.piece(i);
    try {
      byte[] all = Files.readAllBytes(files.get(p.path()));
      return java.util.Arrays.copyOfRange(all, (int) p.offset(), (int) p.offset() + p.length());
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  @Test
  void aPeerThatFloodsRequestsWithoutReadingIsCutOff() throws Exception {
    List<String> ids = List.of("m0", "zz-flood");
    Map<String, InetSocketAddress> addresses = addresses(ids, 41);
    DataPlaneServer m0 =
        startInProcess("m0", addresses.get("m0"), peersSpec(addresses), "--peer-timeout", "30s");
    servers.add(m0);
    members.awaitReady(servers);

    PieceMap map = pieceMap();
    int requests = 2_000;
    long received = 0;
    boolean closed = false;
    Membership membership = Membership.parseStatic(peersSpec(addresses));
    try (BlockingPeer flooder =
        BlockingPeer.dial(
            addresses.get("zz-flood"),
            addresses.get("m0"),
            FrameCodec.maxFrameLength(map.pieceSize(), map.size()),
            map.size(),
            4096)) {
      flooder.hello(
          new Frame.Hello(
              FrameCodec.VERSION,
              ID,
              "zz-flood",
              membership.epoch(),
              map.pieceSize(),
              map.size(),
              helloDigest(),
              new byte[32]),
          SECRET,
          true,
          membership);
      assertThat(flooder.finishHandshake()).isEqualTo("ok");
      Socket s = flooder.socket;
      // 2000 requests for piece 0 (82 KB sealed), none of whose answers is read meanwhile
      List<Frame> flood = new ArrayList<>();
      for (int i = 0; i < requests; i++) {
        flood.add(new Frame.Request(0));
      }
      try {
        flooder.sendAll(flood);
      } catch (java.net.SocketException cut) {
        closed = true; // cut off while still sending
      }
      s.setSoTimeout(5_000);
      byte[] buf = new byte[1 << 16];
      try {
        for (int n; (n = s.getInputStream().read(buf)) >= 0; ) {
          received += n;
        }
        closed = true;
      } catch (java.net.SocketException reset) {
        closed = true;
      } catch (java.net.SocketTimeoutException stillOpen) {
        // the member kept serving the flood
      }
    }
    assertThat(closed).as("the member closed the flooding connection").isTrue();
    assertThat(received)
        .as("bytes sent to the flooder before it was cut off")
        .isLessThan((long) requests * PIECE / 2);
    // the member still serves its consumers
    members.assertByteIdentical(m0.status());
  }

  @Test
  void membershipArrivesByPutAndBadBodiesAreRefusedNamingTheField() throws Exception {
    List<String> ids = List.of("p0", "p1");
    Map<String, InetSocketAddress> addresses = addresses(ids, 31);
    for (String id : ids) {
      servers.add(startInProcess(id, addresses.get(id), null, "--membership-wait", "60s"));
    }
    int port = servers.get(0).address().getPort();
    HttpResponse<String> bad = put(port, "{\"epoch\":\"e1\",\"members\":{}}");
    assertThat(bad.statusCode()).isEqualTo(400);
    assertThat(bad.body().strip()).isEqualTo("members: must be an array of {id, address}");
    HttpResponse<String> badAddress =
        put(port, "{\"epoch\":\"e1\",\"members\":[{\"id\":\"p0\",\"address\":\"nope\"}]}");
    assertThat(badAddress.body().strip()).isEqualTo("members[0].address: 'nope' is not HOST:PORT");
    assertThat(servers.get(0).status().phase()).isNotEqualTo(Phase.Ready);

    String body =
        addresses.entrySet().stream()
            .map(
                e ->
                    "{\"id\":\""
                        + e.getKey()
                        + "\",\"address\":\""
                        + hostPort(e.getValue())
                        + "\"}")
            .collect(Collectors.joining(",", "{\"epoch\":\"epoch-1\",\"members\":[", "]}"));
    for (DataPlaneServer s : servers) {
      assertThat(put(s.address().getPort(), body).statusCode()).isEqualTo(204);
    }
    assertThat(put(port, body).statusCode()).isEqualTo(200);
    members.awaitReady(servers);
    for (DataPlaneServer s : servers) {
      members.assertByteIdentical(s.status());
      assertThat(s.status().peerEpoch()).isEqualTo("epoch-1");
    }
    assertThat(servers.get(0).status().bytesFromPeers() + servers.get(1).status().bytesFromPeers())
        .isPositive();
    assertThat(proxy.getBodyBytes()).isLessThanOrEqualTo((long) (1.05 * total));
  }

  @Test
  void aMemberKilledMidTransferDoesNotStopTheOthers() throws Exception {
    // Every source request waits, so the load lasts long enough to kill a member in the middle.
    proxy.delay(Duration.ofMillis(40));
    List<String> ids = List.of("k0", "k1", "k2", "k3");
    Map<String, InetSocketAddress> addresses = addresses(ids, 41);
    Map<String, Integer> control = new LinkedHashMap<>();
    // The members resolve (list, read headers) and then wait for the membership, which they all get
    // at once. With --peers each starts its fill the moment its own JVM has resolved, and on a
    // loaded machine those moments lie seconds apart (5 s at load average 15), more than the 2 s
    // peer timeout: the others count the late member lost and read its block, and it reads its
    // block again once it is there (a piece's hash is trusted only from its reader, as in
    // membersJoiningMidLoad...). Up to 3/4 of the artifact read twice before anyone was killed
    // (2.33 x S once at load average 20+); this test is about the kill.
    // The peer timeout is the default 10 s, not 2 s: it is also the handshake and idle timeout, and
    // at load average 40 handshakes and pauses took longer than 2 s, so connections between live
    // members dropped and came back, the members saw different sets of live members, shares were
    // re-split and handed over while their readers only waited for their peers, and pieces were
    // read again by their next readers (3.02 x S).
    for (String id : ids) {
      int port = freePort(InetAddress.getLoopbackAddress());
      control.put(id, port);
      startProcess(
          id,
          port,
          addresses.get(id),
          null,
          members.newRoot(),
          "--membership-wait",
          "5m",
          "--peer-timeout",
          "10s");
    }
    await("every member resolved the artifact and waits for a membership")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(100))
        .ignoreExceptionsInstanceOf(IOException.class)
        .until(
            () -> {
              for (int port : control.values()) {
                if (members.statusOf(port).phase() != Phase.Loading) {
                  return false;
                }
              }
              return true;
            });
    for (int port : control.values()) {
      assertThat(bytesLoaded(port)).as("bytes loaded before the membership").isZero();
    }
    String body = membershipJson("epoch-kill", addresses);
    List<java.util.concurrent.CompletableFuture<HttpResponse<String>>> puts = new ArrayList<>();
    for (int port : control.values()) {
      puts.add(putAsync(port, body));
    }
    for (java.util.concurrent.CompletableFuture<HttpResponse<String>> put : puts) {
      assertThat(put.get(60, TimeUnit.SECONDS).statusCode()).isEqualTo(204);
    }
    String victim = "k2";
    Process victimProcess = processes.get(2);
    await("the victim has loaded some bytes")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(20))
        .until(() -> bytesLoaded(control.get(victim)) > 0);
    assertThat(members.statusOf(control.get("k0")).phase()).isNotEqualTo(Phase.Ready);
    victimProcess.destroyForcibly(); // SIGKILL
    victimProcess.waitFor(10, TimeUnit.SECONDS);

    List<Integer> survivors = List.of(control.get("k0"), control.get("k1"), control.get("k3"));
    await("survivors Ready")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(100))
        .until(
            () -> {
              for (int port : survivors) {
                DataPlaneStatus st = members.statusOf(port);
                assertThat(st.phase()).as("%s", st).isNotEqualTo(Phase.Failed);
                if (st.phase() != Phase.Ready) {
                  return false;
                }
              }
              return true;
            });
    for (int port : survivors) {
      members.assertByteIdentical(members.statusOf(port));
    }
    // The victim's unfinished pieces are read again, but not the whole artifact per member.
    assertThat(proxy.getBodyBytes()).isLessThan(2 * total);
  }

  @Test
  void membersJoiningMidLoadReadTheirOwnBlocksOnlyAndTheFirstMemberNothingOfTheirs()
      throws Exception {
    // Every source request waits 100 ms and reads one piece (--range-size = the piece size): m0
    // alone needs seconds, so the others join mid-load. With runs of several pieces j0 would have
    // claimed (READING) all of the small artifact before anyone joined.
    proxy.delay(Duration.ofMillis(100));
    List<String> ids = List.of("j0", "j1", "j2");
    Map<String, InetSocketAddress> addresses = addresses(ids, 51);
    // The newcomers resolve first and wait for a membership before reading any piece.
    String onePiece = String.valueOf(PIECE);
    DataPlaneServer b =
        startInProcess(
            "j1", addresses.get("j1"), null, "--membership-wait", "60s", "--range-size", onePiece);
    DataPlaneServer c =
        startInProcess(
            "j2", addresses.get("j2"), null, "--membership-wait", "60s", "--range-size", onePiece);
    servers.add(b);
    servers.add(c);
    await("the newcomers resolved and wait for a membership")
        .atMost(READY)
        .until(() -> b.status().phase() == Phase.Loading && c.status().phase() == Phase.Loading);
    long beforeA = proxy.getBodyBytes();
    DataPlaneServer a =
        startInProcess(
            "j0",
            addresses.get("j0"),
            "j0=" + hostPort(addresses.get("j0")),
            "--peer-timeout",
            "5s",
            "--range-size",
            onePiece);
    servers.add(0, a);
    // Past the first third: after the re-split j0 has read part of j1's block. A piece's hash is
    // trusted only from the member assigned to read it, so j1 reads its whole block itself: what
    // j0 read there alone is read twice, and nothing else is.
    await("j0, alone, has stored more than 45% of the pieces")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(10))
        .until(() -> a.status().bytesFromSource() > total * 45 / 100);
    DataPlaneStatus early = a.status();
    assertThat(early.bytesFromSource()).as("j0 is still loading").isLessThan(total * 3 / 4);

    String body = membershipJson("epoch-joined", addresses);
    for (DataPlaneServer s : servers) {
      assertThat(put(s.address().getPort(), body).statusCode()).isEqualTo(204);
    }
    members.awaitReady(servers);

    long fromSource = proxy.getBodyBytes();
    long slack = 4L * PIECE; // j0's reads in flight when the membership arrived
    assertThat(fromSource)
        .as(
            "bytes read from S3 (headers of 3 members included; %d before j0 started) vs %d"
                + " + the %d j0 had read alone",
            beforeA, total, early.bytesFromSource())
        .isLessThanOrEqualTo((long) (1.05 * (total + early.bytesFromSource())));
    for (DataPlaneServer s : servers) {
      members.assertByteIdentical(s.status());
      assertThat(s.status().bytesFromSource() + s.status().bytesFromPeers()).isEqualTo(total);
    }
    assertThat(b.status().bytesFromSource())
        .as("the newcomer j1 reads its own block, nothing more")
        .isPositive()
        .isLessThanOrEqualTo(blockBytes(ids, "j1"));
    assertThat(c.status().bytesFromSource())
        .isPositive()
        .isLessThanOrEqualTo(blockBytes(ids, "j2"));
    assertThat(a.status().bytesFromSource() - early.bytesFromSource())
        .as("what j0 read after the membership arrived: its own block")
        .isLessThanOrEqualTo(blockBytes(ids, "j0") + slack);
    long pieceBytes = servers.stream().mapToLong(s -> s.status().bytesFromSource()).sum();
    assertThat(pieceBytes)
        .as("piece bytes that became store bytes from the source")
        .isGreaterThanOrEqualTo(total)
        .isLessThanOrEqualTo(total + early.bytesFromSource() + slack);
  }

  @Test
  void aCopyAdoptedAfterARestartServesEverythingToANewcomerWithoutTheSource() throws Exception {
    List<String> ids = List.of("r0", "r1");
    Map<String, InetSocketAddress> addresses = addresses(ids, 61);
    Path rootA = members.newRoot();
    int controlA = freePort(InetAddress.getLoopbackAddress());
    Process first =
        startProcess(
            "r0", controlA, addresses.get("r0"), "r0=" + hostPort(addresses.get("r0")), rootA);
    awaitProcessReady(controlA);
    members.assertByteIdentical(members.statusOf(controlA));
    first.destroyForcibly(); // SIGKILL: the store's files stay for the next start to adopt
    assertThat(first.waitFor(20, TimeUnit.SECONDS)).isTrue();

    long beforeRestart = proxy.getBodyBytes();
    startProcess("r0", controlA, addresses.get("r0"), peersSpec(addresses), rootA);
    awaitProcessReady(controlA);
    DataPlaneStatus adopted = members.statusOf(controlA);
    members.assertByteIdentical(adopted);
    assertThat(adopted.bytesFromSource()).as("the restarted r0 adopted its copy").isZero();
    assertThat(proxy.getBodyBytes() - beforeRestart)
        .as("the restart read listings and headers only")
        .isLessThan(PIECE);

    int requestsBefore = proxy.requests().size();
    DataPlaneServer b =
        startInProcess("r1", addresses.get("r1"), peersSpec(addresses), "--peer-timeout", "5s");
    servers.add(b);
    members.awaitReady(servers);
    DataPlaneStatus st = b.status();
    members.assertByteIdentical(st);
    // r1 is the reader of its block, which r0 (its only peer) holds: r1 fetches it from r0 on
    // r0's claim and keeps it once each file matches the digest S3 publishes (the ETag), so
    // nothing but listings and headers comes from the source.
    assertThat(st.bytesFromSource()).as("piece bytes r1 read from the source").isZero();
    assertThat(st.bytesFromPeers()).isEqualTo(total);
    for (DataPlaneStatus.FileStatus f : st.fileStatuses()) {
      assertThat(f.verification())
          .as("%s checked against the digest S3 publishes", f.path())
          .isEqualTo(DataPlaneStatus.Verification.SourceDigest);
    }
    // What r1 asked the source for: the listing, the safetensors headers and the index files
    // (read whole, to check them against the headers); no range of its block.
    for (FaultInjectingProxy.RecordedRequest r :
        proxy.requests().subList(requestsBefore, proxy.requests().size())) {
      if (r.range().isEmpty()) {
        continue;
      }
      String key = r.path().substring(("/" + BUCKET + "/" + PREFIX).length());
      if (io.tensorcast.dataplane.format.index.ShardIndex.isIndexPath(key)) {
        continue;
      }
      long start = r.rangeStart().orElseThrow();
      assertThat(start < headerEnd(files.get(key)))
          .as("range %s of %s read from the source: a header", r.range().get(), key)
          .isTrue();
    }
  }

  @Test
  void aSourceOnlyDataPlaneAnswersPutPeersWithAConflictSayingWhy() throws Exception {
    List<String> ids = List.of("s0");
    Map<String, InetSocketAddress> addresses = addresses(ids, 71);
    DataPlaneServer s =
        startInProcess("s0", addresses.get("s0"), null, "--distribution", "source-only");
    servers.add(s);
    HttpResponse<String> r = put(s.address().getPort(), membershipJson("e1", addresses));
    assertThat(r.statusCode()).isEqualTo(409);
    assertThat(r.body().strip())
        .isEqualTo(
            "this data plane runs with --distribution source-only (or --peer-listen off);"
                + " peer membership is not used");
    members.awaitReady(servers);
    members.assertByteIdentical(s.status());
    assertThat(s.status().peerEpoch()).isNull();
  }

  // ------------------------------------------------------------------ helpers

  private DataPlaneServer startInProcess(
      String id, InetSocketAddress peerListen, String peers, String... extra) throws Exception {
    // an extra option replaces the default of common()
    return ServeMembers.startInProcess(common(members.newRoot(), id, peerListen, peers), extra);
  }

  private List<String> common(Path root, String id, InetSocketAddress peerListen, String peers) {
    ServeCommandLine args = swarm.member(proxy.endpoint(), root, id, peerListen);
    if (peers != null) {
      args.option("--peers", peers);
    }
    return new ArrayList<>(args.args());
  }

  private Process startProcess(
      String id, int controlPort, InetSocketAddress peerListen, String peers) throws IOException {
    return startProcess(id, controlPort, peerListen, peers, members.newRoot());
  }

  /**
   * Starts a {@code dataplane serve} JVM with {@code --peer-timeout 2s --membership-wait 30s}; each
   * option of {@code extra} (name, value pairs) replaces the one of the same name.
   */
  private Process startProcess(
      String id,
      int controlPort,
      InetSocketAddress peerListen,
      String peers,
      Path root,
      String... extra)
      throws IOException {
    List<String> args = common(root, id, peerListen, peers);
    args.addAll(
        List.of(
            "--listen",
            "127.0.0.1:" + controlPort,
            "--peer-timeout",
            "2s",
            "--membership-wait",
            "30s"));
    ServeMembers.replaceOptions(args, extra);
    return members.startProcess(id, args);
  }

  private void awaitProcessReady(int controlPort) {
    await("dataplane serve on port " + controlPort + " Ready")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(100))
        .ignoreExceptionsInstanceOf(IOException.class)
        .until(
            () -> {
              DataPlaneStatus st = members.statusOf(controlPort);
              assertThat(st.phase()).as("%s", st).isNotEqualTo(Phase.Failed);
              return st.phase() == Phase.Ready;
            });
  }

  /** The PUT /v1/peers body for these members. */
  private static String membershipJson(String epoch, Map<String, InetSocketAddress> addresses) {
    return addresses.entrySet().stream()
        .map(e -> "{\"id\":\"" + e.getKey() + "\",\"address\":\"" + hostPort(e.getValue()) + "\"}")
        .collect(Collectors.joining(",", "{\"epoch\":\"" + epoch + "\",\"members\":[", "]}"));
  }

  /** End of a safetensors file's header (8-byte length + JSON); the whole size for others. */
  private static long headerEnd(Path file) throws IOException {
    if (!file.getFileName().toString().endsWith(".safetensors")) {
      return 0;
    }
    try (java.io.InputStream in = Files.newInputStream(file)) {
      byte[] prefix = in.readNBytes(8);
      return 8 + java.nio.ByteBuffer.wrap(prefix).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong();
    }
  }

  /**
   * Starts {@code members} in process with {@code --peer-timeout timeout}, waits until every
   * started server is Ready and checks each store byte for byte against the corpus.
   */
  private void loadAll(
      List<String> members, Map<String, InetSocketAddress> addresses, String peers, String timeout)
      throws Exception {
    for (String id : members) {
      servers.add(startInProcess(id, addresses.get(id), peers, "--peer-timeout", timeout));
    }
    this.members.awaitReady(servers);
    for (DataPlaneServer s : servers) {
      this.members.assertByteIdentical(s.status());
    }
  }

  /** The map digest the members send in HELLO for the artifact (sizes and ETags). */
  private static byte[] helloDigest() throws IOException {
    List<io.tensorcast.dataplane.source.SourceFile> listed = new ArrayList<>();
    for (Map.Entry<String, Path> e : files.entrySet()) {
      listed.add(
          new io.tensorcast.dataplane.source.SourceFile(
              e.getKey(),
              Files.size(e.getValue()),
              etags.get(e.getKey()),
              java.util.Optional.empty()));
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

  private static byte[][] pieceHashes() throws Exception {
    PieceMap map = pieceMap();
    byte[][] out = new byte[map.size()][];
    for (PieceMap.Piece p : map.pieces()) {
      byte[] all = Files.readAllBytes(files.get(p.path()));
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      md.update(all, (int) p.offset(), p.length());
      out[p.index()] = md.digest();
    }
    return out;
  }

  private HttpResponse<String> put(int port, String body) throws Exception {
    return http.send(
        putPeers(port, body), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
  }

  /** {@link #put}, sent without waiting for the answer. */
  private java.util.concurrent.CompletableFuture<HttpResponse<String>> putAsync(
      int port, String body) {
    return http.sendAsync(
        putPeers(port, body), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
  }

  private static HttpRequest putPeers(int port, String body) {
    return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v1/peers"))
        .timeout(Duration.ofSeconds(30))
        .PUT(HttpRequest.BodyPublishers.ofString(body))
        .header("Content-Type", "application/json")
        .header("Authorization", "Bearer " + ADMIN_TOKEN)
        .build();
  }

  private long bytesLoaded(int port) {
    try {
      return members.statusOf(port).bytesLoaded();
    } catch (Exception notYet) {
      return 0;
    }
  }

  /** The value of the one sample of {@code metric} with this artifact's tag. */
  private static double sample(String exposition, String metric) {
    return PrometheusText.sample(exposition, metric, "artifact=\"" + ID + "\"");
  }
}
