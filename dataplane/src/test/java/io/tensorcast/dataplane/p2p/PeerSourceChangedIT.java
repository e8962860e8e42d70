package io.tensorcast.dataplane.p2p;

import static io.tensorcast.dataplane.p2p.ServeMembers.addresses;
import static io.tensorcast.dataplane.p2p.ServeMembers.peersSpec;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * An S3 object replaced while a peer-to-peer load runs: three {@code serve} members on 127.0.0.x
 * (two in this JVM, one a {@code dataplane serve} JVM) load a corpus artifact from S3Mock through a
 * throttling {@link FaultInjectingProxy}, and one of its files is replaced by another version of
 * the same size while its pieces are being read. Every member shows {@code SourceChanged} (never
 * {@code Failed}), lists again, keeps the verified pieces of the files that did not change, reads
 * the changed file's pieces of the new version once across the swarm, and ends Ready with the new
 * bytes.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class PeerSourceChangedIT {
  private static final String BUCKET = "p2p-source-changed-it";
  private static final String ID = "changed";
  private static final Duration READY = Duration.ofSeconds(60);
  private static final byte[] SECRET = new SecureRandom().generateSeed(32);
  private static final int PIECE = 64 * 1024;

  private final Map<String, Path> files = new TreeMap<>();
  private final ServeMembers members = new ServeMembers("source-changed-it", files, READY);
  private final ScheduledExecutorService poller = Executors.newSingleThreadScheduledExecutor();
  private FaultInjectingProxy proxy;

  @BeforeAll
  static void startS3() {
    S3MockServer.shared(); // its start counts against the lifecycle method, not the test
  }

  @BeforeEach
  void setUp() throws Exception {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    proxy = new FaultInjectingProxy(S3MockServer.shared().endpoint());
  }

  @AfterEach
  void tearDown() throws Exception {
    poller.shutdownNow();
    members.close();
    proxy.close();
  }

  /**
   * {@code b/replaced.safetensors} (1.5 MB of the 3.1 MB artifact) gets a new version with one
   * tensor byte changed — same size and header, another ETag — while the swarm reads its pieces.
   * Pieces of the old version must not fill a copy of the new one; the members must agree on the
   * new listing on their own.
   */
  @Test
  void anObjectReplacedDuringAPeerToPeerLoadIsReadAgainOnceAndEveryMemberEndsReadyWithTheNewBytes()
      throws Exception {
    S3MockServer s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    String prefix = "model-" + System.nanoTime() + "/";
    Path corpus = Corpus.dir();
    Path old = corpus.resolve("safetensors/burn__examples_import-model-weights_mnist.safetensors");
    Map<String, Path> unchanged = new LinkedHashMap<>();
    unchanged.put(
        "a/mlx.safetensors",
        corpus.resolve("safetensors/mlx-examples__0000100_adapters.safetensors"));
    unchanged.put(
        "c/tinygrad.safetensors", corpus.resolve("safetensors/mnist-tinygrad__model.safetensors"));
    unchanged.put("config.json", corpus.resolve("index/falcon-180b-chat/config.json"));
    String changedPath = "b/replaced.safetensors";
    byte[] v2 = Files.readAllBytes(old);
    v2[v2.length - 1] ^= 0x5a; // a tensor byte: same header and size, another ETag
    Path newVersion = Files.createTempFile("tensorcast-source-changed-v2-", ".safetensors");
    newVersion.toFile().deleteOnExit();
    Files.write(newVersion, v2);
    long total = v2.length;
    for (Map.Entry<String, Path> e : unchanged.entrySet()) {
      s3.putFile(BUCKET, prefix + e.getKey(), e.getValue());
      files.put(e.getKey(), e.getValue());
      total += Files.size(e.getValue());
    }
    s3.putFile(BUCKET, prefix + changedPath, old);
    files.put(changedPath, newVersion);

    // About 3 s for the artifact: the replacement lands while the changed file's pieces stream.
    proxy.throttleTotal(1_000_000);
    ServeMembers.Swarm swarm =
        ServeMembers.Swarm.write("source-changed-it", ID, "s3://" + BUCKET + "/" + prefix, SECRET);
    List<String> ids = List.of("m0", "m1", "m2");
    Map<String, InetSocketAddress> addresses = addresses(ids, 221);
    String peers = peersSpec(addresses);
    Map<String, Supplier<DataPlaneStatus>> statuses = new LinkedHashMap<>();
    // The JVM first: it starts while the two members in this JVM do.
    int control = ServeMembers.freePort(InetAddress.getLoopbackAddress());
    List<String> m2 = args(swarm, "m2", addresses, peers);
    m2.addAll(List.of("--listen", "127.0.0.1:" + control));
    members.startProcess("m2", m2);
    for (String id : ids.subList(0, 2)) {
      DataPlaneServer s = ServeMembers.startInProcess(args(swarm, id, addresses, peers));
      members.servers.add(s);
      statuses.put(id, s::status);
    }
    statuses.put(
        "m2",
        () -> {
          try {
            return members.statusOf(control);
          } catch (Exception e) {
            return null; // not listening yet
          }
        });

    // Every reason each member shows, polled while it loads (a wait before loading again is ~1 s).
    Map<String, Set<String>> reasons = new ConcurrentHashMap<>();
    Map<String, Set<Phase>> phases = new ConcurrentHashMap<>();
    poller.scheduleWithFixedDelay(
        () ->
            statuses.forEach(
                (id, status) -> {
                  DataPlaneStatus st = status.get();
                  if (st != null) {
                    phases.computeIfAbsent(id, k -> ConcurrentHashMap.newKeySet()).add(st.phase());
                    if (st.reason() != null) {
                      reasons
                          .computeIfAbsent(id, k -> ConcurrentHashMap.newKeySet())
                          .add(st.reason());
                    }
                  }
                }),
        0,
        10,
        TimeUnit.MILLISECONDS);

    String changedKey = "/" + BUCKET + "/" + prefix + changedPath;
    await("a piece of " + changedPath + " requested from the source")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(5))
        .until(
            () ->
                proxy.gets(changedKey).stream().anyMatch(r -> r.rangeLength().orElse(0L) == PIECE));
    s3.putFile(BUCKET, prefix + changedPath, newVersion);
    long atChange = proxy.getBodyBytes();

    await("every member Ready")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> {
              for (Map.Entry<String, Supplier<DataPlaneStatus>> e : statuses.entrySet()) {
                DataPlaneStatus st = e.getValue().get();
                if (st == null) {
                  return false;
                }
                assertThat(st.phase()).as("%s: %s", e.getKey(), st).isNotEqualTo(Phase.Failed);
                if (st.phase() != Phase.Ready) {
                  return false;
                }
              }
              return true;
            });
    poller.shutdownNow();
    assertThat(poller.awaitTermination(5, TimeUnit.SECONDS)).isTrue();

    long wireOfMembers = 0;
    for (Map.Entry<String, Supplier<DataPlaneStatus>> e : statuses.entrySet()) {
      DataPlaneStatus st = e.getValue().get();
      members.assertByteIdentical(st);
      assertThat(Files.readAllBytes(Path.of(st.storeDirectory()).resolve(changedPath)))
          .as("%s holds the new version of %s", e.getKey(), changedPath)
          .isEqualTo(v2);
      assertThat(reasons.getOrDefault(e.getKey(), Set.of()))
          .as("reasons %s showed while it loaded (phases %s)", e.getKey(), phases.get(e.getKey()))
          .contains("SourceChanged");
      assertThat(phases.get(e.getKey())).doesNotContain(Phase.Failed);
      wireOfMembers += st.bytesFromSourceOnWire();
    }
    long wire = proxy.getBodyBytes();
    long bound = total + (long) (1.05 * v2.length);
    System.out.printf(
        "artifact %d bytes, changed file %d; source bytes on the wire: %d by the proxy (%d when"
            + " the object was replaced), %d by the members' status = %.3f x; bound %d%n",
        total, v2.length, wire, atChange, wireOfMembers, (double) wire / total, bound);
    assertThat(wireOfMembers)
        .as("source bytes on the wire the members counted, against the proxy's %d", wire)
        .isGreaterThanOrEqualTo(total)
        .isLessThanOrEqualTo(wire)
        .isLessThanOrEqualTo(bound);
    assertThat(wire)
        .as("source bytes the swarm received (listings and headers included)")
        .isLessThanOrEqualTo(bound);
    // The unchanged files' bytes were read from the source once across the swarm: their verified
    // pieces were kept through the loads that followed the change. A fill that fails abandons its
    // source reads in flight (two per member) and their pieces are asked for again; reading a file
    // again from its first byte would ask for its whole size a second time.
    for (Map.Entry<String, Path> e : unchanged.entrySet()) {
      long size = Files.size(e.getValue());
      long asked =
          proxy.gets("/" + BUCKET + "/" + prefix + e.getKey()).stream()
              .mapToLong(r -> r.rangeLength().orElse(size))
              .sum();
      // Each member reads a safetensors header itself once (8-byte prefix, then the JSON).
      long headers = 0;
      if (e.getKey().endsWith(".safetensors")) {
        byte[] prefix8 = new byte[8];
        try (var in = Files.newInputStream(e.getValue())) {
          assertThat(in.readNBytes(prefix8, 0, 8)).isEqualTo(8);
        }
        headers =
            ids.size()
                * (8
                    + java.nio.ByteBuffer.wrap(prefix8)
                        .order(java.nio.ByteOrder.LITTLE_ENDIAN)
                        .getLong());
      }
      assertThat(asked)
          .as("bytes of unchanged %s (%d) asked of the source by the swarm", e.getKey(), size)
          .isLessThanOrEqualTo(size + headers + ids.size() * 2L * PIECE);
    }
  }

  /**
   * A member's arguments: 64 KiB pieces read one per request, two source attempts, loads again
   * after 0.5-1 s; the peer timeout (10 s) outlasts a member's wait before loading again, so the
   * others wait for its pieces rather than read its share.
   */
  private List<String> args(
      ServeMembers.Swarm swarm, String id, Map<String, InetSocketAddress> addresses, String peers)
      throws Exception {
    return new ArrayList<>(
        swarm
            .member(proxy.endpoint(), members.newRoot(), id, addresses.get(id))
            .option("--range-size", "64Ki")
            .option("--max-attempts", "2")
            .option("--peer-timeout", "10s")
            .option("--peers", peers)
            .loadRetryBackoff("500ms", "1s")
            .args());
  }
}
