package io.tensorcast.dataplane.p2p;

import static io.tensorcast.dataplane.p2p.ServeMembers.addresses;
import static io.tensorcast.dataplane.p2p.ServeMembers.hostPort;
import static io.tensorcast.dataplane.p2p.ServeMembers.peersSpec;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.testing.ServeCommandLine;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A member that joins after the others hold the artifact (a pod replaced while the others loaded, a
 * node added, a pod restarted after the others finished) and is the reader of a share of it: real
 * {@code serve} members on loopback, S3Mock behind a byte-counting proxy, a 7.1 MB corpus artifact
 * in 64 KiB pieces. The newcomer takes its share from the members that hold it, on their claim,
 * checked against the digest S3 publishes for each file (the single-part ETag); what fails that
 * check is read from the source once.
 */
@Timeout(120)
class LateJoinerIT {
  private static final String BUCKET = "late-joiner-it";
  private static final String PREFIX = "model/";
  private static final String ID = "late";
  private static final int PIECE = 64 * 1024;
  private static final Duration READY = Duration.ofSeconds(60);
  private static final byte[] SECRET = new java.security.SecureRandom().generateSeed(32);

  private static ServeMembers.Swarm swarm;
  private static S3MockServer s3;

  /** Path in the artifact → corpus file, in listing order. */
  private static final Map<String, Path> files = new TreeMap<>();

  private static long total;

  /** Path in the artifact → its ETag at S3Mock. */
  private static final Map<String, String> etags = new TreeMap<>();

  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final ServeMembers members = new ServeMembers("late-joiner-it", files, READY);
  private FaultInjectingProxy proxy;

  @BeforeAll
  static void seed() throws Exception {
    swarm = ServeMembers.Swarm.write("late-joiner-it", ID, "s3://" + BUCKET + "/" + PREFIX, SECRET);
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
        "source bytes on the wire (proxy): %d = %.3f x the artifact's %d%n",
        proxy.getBodyBytes(), (double) proxy.getBodyBytes() / total, total);
    proxy.close();
  }

  @Test
  void aMemberJoiningAfterTheOthersFinishedTakesItsShareFromThemAndTheSourceSendsAboutOneCopy()
      throws Exception {
    // a0 and c2 load the artifact between themselves; then b1 joins with a membership of three in
    // which the middle block is its share (as when the operator replaced b1's pod while the others
    // loaded).
    List<String> ids = List.of("a0", "b1", "c2");
    Map<String, InetSocketAddress> addresses = addresses(ids, 221);
    Map<String, InetSocketAddress> first = new TreeMap<>(addresses);
    first.remove("b1");
    DataPlaneServer a = start("a0", addresses.get("a0"), peersSpec(first));
    DataPlaneServer c = start("c2", addresses.get("c2"), peersSpec(first));
    members.awaitReady(List.of(a, c));
    long beforeJoin = proxy.getBodyBytes();

    DataPlaneServer b = start("b1", addresses.get("b1"), null, "--membership-wait", "60s");
    String body = membershipJson("epoch-of-three", addresses);
    for (DataPlaneServer s : List.of(a, b, c)) {
      assertThat(put(s.address().getPort(), body).statusCode()).isEqualTo(204);
    }
    members.awaitReady(List.of(a, b, c));

    DataPlaneStatus joined = b.status();
    members.assertByteIdentical(joined);
    long onTheWire = proxy.getBodyBytes();
    assertThat(onTheWire)
        .as(
            "bytes S3 sent (counted by the proxy, listings and headers of 3 members included; %d"
                + " before b1 joined) vs the artifact's %d; b1's block is %d",
            beforeJoin, total, blockBytes(ids, "b1"))
        .isLessThanOrEqualTo((long) (1.05 * total));
    assertThat(joined.bytesFromSource()).as("piece bytes b1 read from the source").isZero();
    assertThat(joined.bytesFromPeers()).isEqualTo(total);
    assertThat(joined.bytesFromSource() + joined.bytesFromPeers()).isEqualTo(total);
    for (DataPlaneStatus.FileStatus f : joined.fileStatuses()) {
      assertThat(f.verification())
          .as("%s checked against the digest S3 publishes", f.path())
          .isEqualTo(DataPlaneStatus.Verification.SourceDigest);
    }
    assertThat(joined.droppedPeers()).isNullOrEmpty();
  }

  @Test
  void aShareOnlyALiarClaimsFailsItsFilesCheckAndIsReadFromTheSourceOnce() throws Exception {
    // zz-liar holds the secret and the whole artifact: for its own block it announces and serves
    // the true pieces; for n0's block (n0 is the reader, and joins last) it announces forged
    // hashes and serves bytes that match them. n0 fetches them on that claim; each file fails the
    // check against S3's digest, so n0 reads those pieces from the source, once, and drops the
    // liar for the difference.
    List<String> ids = List.of("n0", "zz-liar");
    Map<String, InetSocketAddress> addresses = addresses(ids, 231);
    String peers = peersSpec(addresses);
    PieceMap map = pieceMap();
    BitSet own = block(ids, "n0");
    RogueServingPeer liar =
        new RogueServingPeer(
            addresses.get("zz-liar"),
            "zz-liar",
            ID,
            map,
            helloDigest(),
            SwarmArtifacts.pieceHashes(files, map, own::get),
            RogueServingPeer.Mode.SERVE,
            i ->
                own.get(i)
                    ? SwarmArtifacts.forgedPiece(files, map, i)
                    : SwarmArtifacts.truePiece(files, map, i),
            Duration.ZERO,
            new AtomicInteger(),
            new AtomicInteger(),
            SECRET,
            Membership.parseStatic(peers));
    members.closeables.add(liar);
    DataPlaneServer n = start("n0", addresses.get("n0"), peers);
    members.awaitReady(List.of(n));

    DataPlaneStatus st = n.status();
    members.assertByteIdentical(st);
    long ownBytes = blockBytes(ids, "n0");
    assertThat(st.bytesFromSource())
        .as(
            "piece bytes n0 read from the source: its block (%d) once, after the check failed",
            ownBytes)
        .isGreaterThanOrEqualTo(ownBytes)
        .isLessThanOrEqualTo(total);
    assertThat(proxy.getBodyBytes())
        .as("bytes S3 sent (listing and headers included) vs the artifact's %d", total)
        .isLessThanOrEqualTo((long) (1.05 * total));
    assertThat(liar.served.get()).as("pieces the liar got to send").isPositive();
    assertThat(st.droppedPeers())
        .singleElement()
        .satisfies(
            d -> {
              assertThat(d.id()).isEqualTo("zz-liar");
              assertThat(d.reason())
                  .matches(
                      "announced piece [0-9]+ with sha256 [0-9a-f]{64} but this member read"
                          + " [0-9a-f]{64} from the source");
            });
  }

  // ------------------------------------------------------------------ helpers

  private DataPlaneServer start(
      String id, InetSocketAddress peerListen, String peers, String... extra) throws Exception {
    ServeCommandLine args = swarm.member(proxy.endpoint(), members.newRoot(), id, peerListen);
    if (peers != null) {
      args.option("--peers", peers);
    }
    args.option("--peer-timeout", "2s");
    DataPlaneServer s = ServeMembers.startInProcess(new ArrayList<>(args.args()), extra);
    members.servers.add(s);
    return s;
  }

  private static String membershipJson(String epoch, Map<String, InetSocketAddress> addresses) {
    return addresses.entrySet().stream()
        .map(e -> "{\"id\":\"" + e.getKey() + "\",\"address\":\"" + hostPort(e.getValue()) + "\"}")
        .collect(Collectors.joining(",", "{\"epoch\":\"" + epoch + "\",\"members\":[", "]}"));
  }

  private HttpResponse<String> put(int port, String body) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v1/peers"))
            .timeout(Duration.ofSeconds(10))
            .PUT(HttpRequest.BodyPublishers.ofString(body))
            .header("Content-Type", "application/json")
            .header("Authorization", "Bearer " + PeerToPeerLoadIT.ADMIN_TOKEN)
            .build(),
        HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
  }

  private static PieceMap pieceMap() throws IOException {
    List<StoreFile> list = new ArrayList<>();
    for (Map.Entry<String, Path> e : files.entrySet()) {
      list.add(new StoreFile(e.getKey(), Files.size(e.getValue())));
    }
    return new PieceMap(list, PIECE);
  }

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

  private static BitSet block(List<String> ids, String id) throws IOException {
    return SwarmPlan.compute(pieceMap().size(), new TreeSet<>(ids), new TreeSet<>(ids), Map.of())
        .assignedTo(id);
  }

  private static long blockBytes(List<String> ids, String id) throws IOException {
    PieceMap map = pieceMap();
    BitSet b = block(ids, id);
    long bytes = 0;
    for (int i = b.nextSetBit(0); i >= 0; i = b.nextSetBit(i + 1)) {
      bytes += map.piece(i).length();
    }
    return bytes;
  }
}
