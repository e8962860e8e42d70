package io.tensorcast.dataplane.pod;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.p2p.PeerSwarm;
import io.tensorcast.dataplane.testing.ServeCommandLine;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import io.tensorcast.testing.TestPorts;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A data-plane server whose source fails: S3Mock behind a {@link FaultInjectingProxy} answering
 * 500s, a real {@link DataPlaneServer} configured from {@code dataplane serve}'s own arguments,
 * {@code /status} and {@code /metrics} read over HTTP. A load that fails on a transient source
 * error is loaded again with back-off (never {@code Failed}) until the source recovers, and ends
 * Ready with the store byte-identical to the corpus files; a permanent failure is {@code Failed}
 * and not retried.
 */
class LoadRetryIT {
  private static final String BUCKET = "load-retry-it";
  private static final String PREFIX = "model/";
  private static final Duration READY = Duration.ofSeconds(60);
  private static final Pattern RETRIES =
      Pattern.compile(
          "(?m)^tensorcast_dataplane_load_retries_total\\{artifact=\"([^\"]+)\",?\\} ([0-9.E]+)$");

  private static S3MockServer s3;

  /** Path in the artifact → corpus file. */
  private static final Map<String, Path> files = new TreeMap<>();

  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final ObjectMapper json = new ObjectMapper();
  private final List<DataPlaneServer> servers = new ArrayList<>();
  private FaultInjectingProxy proxy;
  private Path root;
  private int peerPort;
  private String budget = "64Mi";
  private String maxAttempts = "2";
  private String rangeSize = "64Ki";

  @BeforeAll
  static void seed() throws IOException {
    Path corpus = Corpus.dir();
    try (Stream<Path> shards = Files.list(corpus.resolve("index/safetensorsjl-tiny-sharded"))) {
      shards.forEach(p -> files.put(p.getFileName().toString(), p));
    }
    files.put(
        "extra/mnist.safetensors",
        corpus.resolve("safetensors/burn__examples_import-model-weights_mnist.safetensors"));
    s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    for (Map.Entry<String, Path> e : files.entrySet()) {
      s3.putFile(BUCKET, PREFIX + e.getKey(), e.getValue());
    }
  }

  @BeforeEach
  void setUp() throws IOException {
    Path shm = Path.of("/dev/shm");
    assumeTrue(Files.isDirectory(shm), "/dev/shm is needed for the page-locked store");
    root = Files.createTempDirectory(shm, "tensorcast-load-retry-it-");
    proxy = new FaultInjectingProxy(s3.endpoint());
  }

  @AfterEach
  void tearDown() throws IOException {
    servers.forEach(DataPlaneServer::close);
    proxy.close();
    TestFiles.deleteTree(root);
  }

  @Test
  void anOutageLongerThanTheRequestRetriesIsRetriedWithBackOffUntilTheSourceRecovers()
      throws Exception {
    proxy.failRequests(500, 1_000_000, null); // down from the first request on
    DataPlaneServer server = start("outage", "s3://" + BUCKET + "/" + PREFIX, "source-only");

    // Several loads fail (listing exhausts its attempts each time); the pod keeps trying.
    DataPlaneStatus waiting =
        await("a third load announced")
            .atMost(READY)
            .pollInterval(Duration.ofMillis(20))
            .until(() -> status(server), s -> retryAttempt(s) >= 3);
    assertThat(waiting.phase()).isEqualTo(Phase.Pending);
    assertThat(waiting.reason()).isEqualTo("SourceUnavailable");
    assertThat(waiting.message())
        .startsWith("s3://" + BUCKET + "/" + PREFIX + ": listing s3://" + BUCKET + "/" + PREFIX)
        .contains("HTTP 500")
        .containsPattern("; retrying in [0-9]+(ms|s) \\(attempt [0-9]+\\)$");
    assertThat(retriesMetric(server)).isGreaterThanOrEqualTo(2);
    // While the source stays down it is never reported Failed.
    await("still retrying, never Failed")
        .during(Duration.ofMillis(1500))
        .atMost(Duration.ofSeconds(5))
        .pollInterval(Duration.ofMillis(20))
        .until(() -> status(server).phase() != Phase.Failed);
    int failed = proxy.requests().size();
    assertThat(failed).as("requests the proxy failed").isGreaterThan(6);

    proxy.reset(); // the source recovers
    DataPlaneStatus ready = awaitReady(server);
    assertThat(ready.reason()).isNull();
    assertStoreHoldsTheCorpusFiles(ready);
  }

  /**
   * The source fails in the middle of the load: the next load (with a new peer swarm in
   * peer-to-peer mode, on the same peer port) resumes the copy and ends Ready with every byte
   * accounted for once.
   */
  @ParameterizedTest
  @ValueSource(strings = {"source-only", "peer-to-peer"})
  void aLoadThatFailsHalfwayIsLoadedAgain(String distribution) throws Exception {
    proxy.delay(Duration.ofMillis(60));
    DataPlaneServer server =
        start("halfway-" + distribution, "s3://" + BUCKET + "/" + PREFIX, distribution);
    DataPlaneStatus loading =
        await("bytes in the store")
            .atMost(READY)
            .pollInterval(Duration.ofMillis(10))
            .until(() -> server.status(), s -> s.phase() == Phase.Loading && s.bytesLoaded() > 0);
    PeerSwarm first = server.swarm();
    proxy.failRequests(500, 1_000_000, null);

    DataPlaneStatus waiting =
        await("the failed load to be announced for retry")
            .atMost(READY)
            .pollInterval(Duration.ofMillis(10))
            .until(() -> status(server), s -> retryAttempt(s) >= 2);
    assertThat(waiting.phase()).isEqualTo(Phase.Pending);
    assertThat(waiting.reason()).isEqualTo("SourceUnavailable");
    assertThat(waiting.bytesLoaded()).isZero();
    assertThat(waiting.message()).contains("HTTP 500");

    proxy.reset();
    DataPlaneStatus ready = awaitReady(server);
    assertThat(ready.bytesFromSource()).isEqualTo(ready.bytesTotal());
    assertStoreHoldsTheCorpusFiles(ready);
    assertThat(retriesMetric(server)).isGreaterThanOrEqualTo(1);
    if (distribution.equals("peer-to-peer")) {
      assertThat(server.swarm()).as("a new swarm for the new load").isNotSameAs(first);
      assertThat(server.swarm().listenAddress())
          .as("the new swarm listens on the same peer port")
          .isEqualTo(new InetSocketAddress("127.0.0.1", peerPort));
      assertThat(ready.peerEpoch())
          .as("the new swarm has the membership")
          .isNotNull()
          .isEqualTo(loading.peerEpoch());
    }
  }

  /**
   * The source goes away halfway through the load, as a restart of its process does (connections
   * cut, new ones reset) or as a storm of 500s: the next load keeps every byte the store holds and
   * reads only the missing ones, so the bytes read from the source stay within 5 % of the artifact.
   */
  @ParameterizedTest
  @ValueSource(strings = {"restart", "500-storm"})
  @org.junit.jupiter.api.Timeout(60)
  void aSourceFaultHalfwayIsResumedReadingOnlyTheMissingBytes(String fault) throws Exception {
    proxy.delay(Duration.ofMillis(40));
    DataPlaneServer server =
        start("resume-" + fault, "s3://" + BUCKET + "/" + PREFIX, "source-only");
    await("half the artifact in the store")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(5))
        .until(
            () -> server.status(),
            s ->
                s.phase() == Phase.Loading
                    && s.bytesTotal() > 0
                    && s.bytesLoaded() >= s.bytesTotal() / 2);
    if (fault.equals("restart")) {
      proxy.down(true);
    } else {
      proxy.failRequests(500, 1_000_000, null);
    }
    DataPlaneStatus waiting =
        await("the failed load announced for retry")
            .atMost(READY)
            .pollInterval(Duration.ofMillis(5))
            .until(() -> status(server), s -> retryAttempt(s) >= 2);
    assertThat(waiting.reason()).isEqualTo("SourceUnavailable");
    proxy.reset();

    DataPlaneStatus ready = awaitReady(server);
    assertStoreHoldsTheCorpusFiles(ready);
    long total = ready.bytesTotal();
    assertThat(proxy.getBodyBytes())
        .as("bytes the proxy forwarded from the source, artifact of %d bytes", total)
        .isLessThanOrEqualTo(total + total / 20);
    // The pod's own count of what it received agrees with the proxy's.
    assertThat(ready.bytesFromSourceOnWire())
        .isGreaterThanOrEqualTo(total)
        .isLessThanOrEqualTo(proxy.getBodyBytes());
    assertThat(ready.bytesFromSource()).isEqualTo(total);
    assertThat(wireMetric(server)).isEqualTo(ready.bytesFromSourceOnWire());
  }

  /**
   * An object is replaced while it loads: the load is loaded again ({@code SourceChanged} while it
   * waits, never {@code Failed}), the files that did not change keep their bytes, the changed one
   * is read again whole, and the store ends with the new version's bytes.
   */
  @Test
  @org.junit.jupiter.api.Timeout(60)
  void anObjectReplacedDuringTheLoadIsReadAgainAloneAndTheLoadConvergesOnTheNewVersion()
      throws Exception {
    String prefix = "replaced/";
    Path corpus = Corpus.dir();
    Path small =
        corpus.resolve("index/safetensorsjl-tiny-sharded/model-00001-of-00006.safetensors");
    Path big = corpus.resolve("safetensors/burn__examples_import-model-weights_mnist.safetensors");
    s3.putFile(BUCKET, prefix + "a-small.safetensors", small);
    s3.putFile(BUCKET, prefix + "z-big.safetensors", big);
    byte[] v2 = Files.readAllBytes(big);
    v2[v2.length - 1] ^= 0x5a; // a tensor byte: same header and size, another ETag
    long smallSize = Files.size(small);

    proxy.delay(Duration.ofMillis(40));
    // Waits of 0.5-1 s between loads: long enough to see the reason while the pod waits.
    DataPlaneServer server =
        start("replaced", "s3://" + BUCKET + "/" + prefix, "source-only", "1s", "1s");
    await("the small file complete and half the big one in the store")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(5))
        .until(
            () -> server.status(),
            s ->
                s.phase() == Phase.Loading
                    && s.filesComplete() == 1
                    && s.bytesLoaded() >= s.bytesTotal() / 2);
    s3.putBytes(BUCKET, prefix + "z-big.safetensors", v2);
    proxy.reset().delay(Duration.ofMillis(10));

    DataPlaneStatus waiting =
        await("the load announced again")
            .atMost(READY)
            .pollInterval(Duration.ofMillis(5))
            .until(
                () -> status(server),
                s -> {
                  assertThat(s.phase()).as("%s", s.message()).isNotEqualTo(Phase.Failed);
                  return retryAttempt(s) >= 2;
                });
    assertThat(waiting.reason()).isEqualTo("SourceChanged");
    assertThat(waiting.message()).contains("z-big.safetensors");

    DataPlaneStatus ready = awaitReady(server);
    Path dir = Path.of(ready.storeDirectory());
    assertThat(Files.mismatch(dir.resolve("a-small.safetensors"), small)).isEqualTo(-1L);
    assertThat(Files.readAllBytes(dir.resolve("z-big.safetensors"))).isEqualTo(v2);
    // After the change the small file's bytes were not asked for again (its header may be).
    assertThat(proxy.gets("/" + BUCKET + "/" + prefix + "a-small.safetensors"))
        .noneMatch(r -> r.rangeLength().orElse(-1L) == smallSize);
    // The big file was read again from its first byte, at the new version.
    assertThat(proxy.gets("/" + BUCKET + "/" + prefix + "z-big.safetensors"))
        .anyMatch(r -> r.rangeStart().orElse(-1L) == 0L && r.rangeLength().orElse(0L) > 8);
  }

  /**
   * An object is replaced by one of another size, while it loads or while the pod waits to load
   * again after a source outage: the file list's layout changes, yet the file that did not change
   * keeps its verified bytes in the store ({@code PinnedStore#relayout}) and only the replaced one
   * is read again whole. The pod shows {@code SourceChanged} (never {@code Failed}) and ends Ready
   * with the new object's bytes; on the wire the source sent the unchanged file once.
   */
  @ParameterizedTest
  @ValueSource(strings = {"during-the-load", "between-loads"})
  @org.junit.jupiter.api.Timeout(60)
  void anObjectReplacedByOneOfAnotherSizeIsReadAgainAloneAndTheOthersKeepTheirBytes(String when)
      throws Exception {
    String prefix = "resized-" + when + "/";
    Path corpus = Corpus.dir();
    Path kept = corpus.resolve("safetensors/burn__examples_import-model-weights_mnist.safetensors");
    Path before = corpus.resolve("safetensors/peft-gpt2__adapter_model.safetensors");
    Path after = corpus.resolve("safetensors/mlx-examples__0000100_adapters.safetensors");
    long keptSize = Files.size(kept);
    long beforeSize = Files.size(before);
    long afterSize = Files.size(after);
    assertThat(afterSize).isNotEqualTo(beforeSize);
    String keptKey = "/" + BUCKET + "/" + prefix + "a-kept.safetensors";
    s3.putFile(BUCKET, prefix + "a-kept.safetensors", kept);
    s3.putFile(BUCKET, prefix + "z-resized.safetensors", before);

    proxy.delay(Duration.ofMillis(40));
    DataPlaneServer server =
        start("resized-" + when, "s3://" + BUCKET + "/" + prefix, "source-only", "1s", "1s");
    await("the kept file complete and part of the other in the store")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(5))
        .until(
            () -> server.status(),
            s ->
                s.phase() == Phase.Loading
                    && s.filesComplete() == 1
                    && s.bytesLoaded() >= keptSize + 128 * 1024);
    List<FaultInjectingProxy.RecordedRequest> beforeChange = new ArrayList<>();
    if (when.equals("between-loads")) {
      proxy.failRequests(500, 1_000_000, null);
      DataPlaneStatus waiting =
          await("the failed load announced for retry")
              .atMost(READY)
              .pollInterval(Duration.ofMillis(5))
              .until(() -> status(server), s -> retryAttempt(s) >= 2);
      assertThat(waiting.reason()).isEqualTo("SourceUnavailable");
      beforeChange.addAll(proxy.requests());
      s3.putFile(BUCKET, prefix + "z-resized.safetensors", after);
      proxy.reset().delay(Duration.ofMillis(10));
    } else {
      s3.putFile(BUCKET, prefix + "z-resized.safetensors", after);
      beforeChange.addAll(proxy.requests());
    }

    DataPlaneStatus changed =
        await("the change announced")
            .atMost(READY)
            .pollInterval(Duration.ofMillis(5))
            .until(
                () -> status(server),
                s -> {
                  assertThat(s.phase()).as("%s", s.message()).isNotEqualTo(Phase.Failed);
                  return "SourceChanged".equals(s.reason());
                });
    assertThat(changed.message()).contains("z-resized.safetensors");

    DataPlaneStatus ready = awaitReady(server);
    Path dir = Path.of(ready.storeDirectory());
    assertThat(Files.mismatch(dir.resolve("a-kept.safetensors"), kept)).isEqualTo(-1L);
    assertThat(Files.mismatch(dir.resolve("z-resized.safetensors"), after)).isEqualTo(-1L);
    assertThat(ready.bytesTotal()).isEqualTo(keptSize + afterSize);
    try (Stream<Path> walk = Files.walk(dir)) {
      assertThat(walk.filter(Files::isRegularFile).count()).isEqualTo(2);
    }
    // The kept file's bytes were asked for once: after the change at most its header again.
    List<FaultInjectingProxy.RecordedRequest> all = new ArrayList<>(beforeChange);
    all.addAll(
        when.equals("between-loads")
            ? proxy.requests()
            : proxy.requests().subList(beforeChange.size(), proxy.requests().size()));
    long keptAsked =
        all.stream()
            .filter(r -> r.method().equals("GET") && r.path().equals(keptKey))
            .mapToLong(r -> r.rangeLength().orElse(keptSize))
            .sum();
    assertThat(keptAsked)
        .as("bytes of the unchanged file asked for, of its %d", keptSize)
        .isLessThan(keptSize + 64 * 1024);
    // On the wire: the kept file once, what was read of the old object, the new object whole.
    long wire = ready.bytesFromSourceOnWire();
    assertThat(wire)
        .as(
            "bytes received from the source: kept %d + old object at most %d + new object %d",
            keptSize, beforeSize, afterSize)
        .isGreaterThanOrEqualTo(keptSize + afterSize)
        .isLessThanOrEqualTo(keptSize + beforeSize + afterSize + 64 * 1024)
        .isLessThanOrEqualTo(proxy.getBodyBytes());
    assertThat(wireMetric(server)).isEqualTo(wire);
    System.out.printf(
        "resized %s: wire %d bytes for an artifact of %d (kept file %d, old object %d, new %d)%n",
        when, wire, keptSize + afterSize, keptSize, beforeSize, afterSize);
  }

  /**
   * A throttling storm from the first request on that lets one request in two through, each refusal
   * with {@code Retry-After: 1}: no request is repeated before the server's second is over
   * (listing, HEADs, header reads, ranges, loads again), and the load still makes progress and ends
   * Ready, reading the artifact about once.
   */
  @Test
  @org.junit.jupiter.api.Timeout(90)
  void aThrottlingStormIsWaitedOutAsRetryAfterSaysAndTheLoadEndsReady() throws Exception {
    maxAttempts = "6";
    rangeSize = "512Ki";
    proxy.admitOneIn(2, Duration.ofSeconds(1));
    long started = System.nanoTime();
    DataPlaneServer server = start("storm", "s3://" + BUCKET + "/" + PREFIX, "source-only");
    DataPlaneStatus ready = awaitReady(server);
    Duration toReady = Duration.ofNanos(System.nanoTime() - started);
    assertStoreHoldsTheCorpusFiles(ready);

    List<FaultInjectingProxy.RecordedRequest> all = proxy.requests();
    List<FaultInjectingProxy.RecordedRequest> refused = proxy.throttled();
    assertThat(refused).as("requests refused with 429").hasSizeGreaterThan(5);
    for (FaultInjectingProxy.RecordedRequest r : refused) {
      all.stream()
          .filter(x -> x.receivedNanos() > r.receivedNanos() && x.sameAs(r))
          .findFirst()
          .ifPresent(
              again ->
                  assertThat(Duration.ofNanos(again.receivedNanos() - r.receivedNanos()))
                      .as(
                          "%s %s %s asked again after a 429 with Retry-After: 1",
                          r.method(), r.target(), r.range())
                      .isGreaterThanOrEqualTo(Duration.ofSeconds(1)));
    }
    long total = ready.bytesTotal();
    assertThat(ready.bytesFromSourceOnWire()).isLessThanOrEqualTo(total + total / 20);
    assertThat(toReady).as("time to Ready under the storm").isLessThan(Duration.ofSeconds(60));
  }

  /**
   * Three loads fail halfway under a budget that holds one copy and little more: every failed load
   * must give its memory back, or the next one is refused by the store.
   */
  @ParameterizedTest
  @ValueSource(strings = {"source-only", "peer-to-peer"})
  void loadsThatFailHalfwayAgainAndAgainGiveTheirMemoryBack(String distribution) throws Exception {
    budget = "2Mi"; // the artifact is about 1.5 MB
    proxy.delay(Duration.ofMillis(40));
    DataPlaneServer server =
        start("budget-" + distribution, "s3://" + BUCKET + "/" + PREFIX, distribution);
    for (int attempt = 2; attempt <= 4; attempt++) {
      await("bytes in the store")
          .atMost(READY)
          .pollInterval(Duration.ofMillis(5))
          .until(
              () -> server.status(),
              s -> {
                assertThat(s.phase())
                    .as("%s: %s", s.reason(), s.message())
                    .isNotEqualTo(Phase.Failed);
                return s.phase() == Phase.Loading && s.bytesLoaded() > 0;
              });
      proxy.failRequests(500, 1_000_000, null);
      int next = attempt;
      await("load " + next + " announced")
          .atMost(READY)
          .pollInterval(Duration.ofMillis(5))
          .until(() -> status(server), s -> retryAttempt(s) >= next);
      proxy.reset();
      proxy.delay(Duration.ofMillis(40));
    }
    DataPlaneStatus ready = awaitReady(server);
    assertStoreHoldsTheCorpusFiles(ready);
    assertThat(retriesMetric(server)).isGreaterThanOrEqualTo(3);
  }

  /**
   * {@code PUT /v1/peers} while the server keeps failing, waiting and swapping its peer swarm:
   * every PUT is answered without a server error, and the swarm of the load that finally succeeds
   * has the membership given last; the peers gauge follows that swarm.
   */
  @Test
  void membershipPutsDuringWaitsAndSwarmSwapsAreAllKept() throws Exception {
    proxy.failRequests(500, 1_000_000, null);
    DataPlaneServer server =
        start("puts", "s3://" + BUCKET + "/" + PREFIX, "peer-to-peer", "20ms", "40ms");
    await("waiting to load again")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(5))
        .until(() -> status(server), s -> retryAttempt(s) >= 2);
    String member = "{\"id\":\"m0\",\"address\":\"127.0.0.1:" + peerPort + "\"}";
    for (int i = 0; i < 150; i++) {
      HttpResponse<String> r =
          put(server, "{\"epoch\":\"e" + i + "\",\"members\":[" + member + "]}");
      assertThat(r.statusCode()).as("PUT %d: %s", i, r.body()).isBetween(200, 299);
    }
    assertThat(status(server).phase()).as("still retrying").isIn(Phase.Pending, Phase.Resolving);
    proxy.reset();
    DataPlaneStatus ready = awaitReady(server);
    assertThat(ready.peerEpoch()).isEqualTo("e149");
    assertStoreHoldsTheCorpusFiles(ready);
    assertThat(get(server, "/metrics").body())
        .containsPattern("(?m)^tensorcast_dataplane_peers\\{artifact=\"puts\",?\\} 0.0$");
  }

  /** Another process took the peer port while the server waited: the next load still ends Ready. */
  @Test
  void aPeerPortTakenDuringTheWaitLeavesTheNextLoadToTheSourceAlone() throws Exception {
    proxy.delay(Duration.ofMillis(60));
    // The port must be taken within the back-off: 5 s, so a loaded machine that is slow to close
    // the failed load's swarm (or to run this thread) does not let the next load bind it first.
    DataPlaneServer server =
        start("port-taken", "s3://" + BUCKET + "/" + PREFIX, "peer-to-peer", "5s", "5s");
    failMidLoadUntilRetrying(server);
    try (ServerSocket thief = new ServerSocket()) {
      // The failed load's swarm lets the port go once closed, just after the wait is announced.
      await("the peer port free")
          .atMost(Duration.ofSeconds(4))
          .pollInterval(Duration.ofMillis(5))
          .ignoreExceptions()
          .until(
              () -> {
                thief.bind(new InetSocketAddress("127.0.0.1", peerPort));
                return true;
              });
      proxy.reset();
      DataPlaneStatus ready = awaitReady(server);
      assertStoreHoldsTheCorpusFiles(ready);
      assertThat(server.swarm().listenAddress()).isNull();
    }
  }

  /**
   * close() in the middle of the second load: prompt, and nothing of the copy stays in the store.
   */
  @ParameterizedTest
  @ValueSource(strings = {"source-only", "peer-to-peer"})
  void closeDuringTheSecondLoadLeavesNoFiles(String distribution) throws Exception {
    proxy.delay(Duration.ofMillis(60));
    String id = "close-second-" + distribution;
    DataPlaneServer server = start(id, "s3://" + BUCKET + "/" + PREFIX, distribution);
    failMidLoadUntilRetrying(server);
    proxy.reset();
    proxy.delay(Duration.ofMillis(60));
    await("the second load has bytes in the store")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(5))
        .until(() -> server.status(), s -> s.phase() == Phase.Loading && s.bytesLoaded() > 0);
    long started = System.nanoTime();
    server.close();
    assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofSeconds(5));
    assertThat(root.resolve(id)).doesNotExist();
    try (Stream<Path> left = Files.list(root)) {
      assertThat(left.map(p -> p.getFileName().toString()).toList())
          .as("left in the store root")
          .noneMatch(n -> n.contains(id));
    }
  }

  private HttpResponse<String> put(DataPlaneServer s, String body) throws Exception {
    URI uri = URI.create("http://127.0.0.1:" + s.address().getPort() + "/v1/peers");
    return http.send(
        HttpRequest.newBuilder(uri)
            .timeout(Duration.ofSeconds(5))
            .PUT(HttpRequest.BodyPublishers.ofString(body))
            .header("Content-Type", "application/json")
            .header("Authorization", "Bearer " + ADMIN_TOKEN)
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void aMissingBucketIsFailedAndNotRetried() throws Exception {
    DataPlaneServer server = start("missing", "s3://no-such-bucket-here/" + PREFIX, "source-only");
    DataPlaneStatus failed =
        await("Failed")
            .atMost(READY)
            .pollInterval(Duration.ofMillis(20))
            .until(() -> status(server), s -> s.phase() == Phase.Failed);
    assertThat(failed.reason()).isEqualTo("BucketNotFound");
    assertThat(failed.message()).contains("no-such-bucket-here").doesNotContain("retrying");
    int requests = proxy.requests().size();
    assertThat(requests).isPositive();
    // Ten back-off periods (100 ms) later: no new request, still Failed, no retry counted.
    await("no load again")
        .during(Duration.ofSeconds(1))
        .atMost(Duration.ofSeconds(3))
        .pollInterval(Duration.ofMillis(50))
        .until(() -> proxy.requests().size() == requests && status(server).phase() == Phase.Failed);
    assertThat(retriesMetric(server)).isZero();
  }

  @Test
  void closeInterruptsTheBackOffWaitPromptly() throws Exception {
    proxy.failRequests(500, 1_000_000, null);
    DataPlaneServer server =
        start("close", "s3://" + BUCKET + "/" + PREFIX, "source-only", "10m", "10m");
    await("waiting to load again")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(20))
        .until(() -> status(server), s -> retryAttempt(s) == 2);
    long started = System.nanoTime();
    server.close();
    assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofSeconds(5));
    assertThat(root.resolve("close")).doesNotExist();
  }

  // ------------------------------------------------------------------ helpers

  private DataPlaneServer start(String id, String uri, String distribution) throws Exception {
    return start(id, uri, distribution, "100ms", "400ms");
  }

  private DataPlaneServer start(
      String id, String uri, String distribution, String backoff, String maxBackoff)
      throws Exception {
    ServeCommandLine args =
        ServeCommandLine.serve(id, uri)
            .s3(proxy.endpoint())
            .store(root, budget)
            .listen("127.0.0.1:0")
            .option("--max-attempts", maxAttempts)
            .option("--range-size", rangeSize)
            .option("--concurrency", "2")
            .loadRetryBackoff(backoff, maxBackoff)
            .distribution(distribution)
            .flag("--allow-insecure-endpoint")
            .tokenFiles(
                Path.of(tokenFile("read-token", READ_TOKEN)),
                Path.of(tokenFile("admin-token", ADMIN_TOKEN)));
    if (distribution.equals("peer-to-peer")) {
      int port = freePort();
      peerPort = port;
      args.option("--peer-listen", "127.0.0.1:" + port)
          .option("--peer-id", "m0")
          .option("--peers", "m0=127.0.0.1:" + port)
          .option("--piece-size", "64Ki")
          .option("--peer-timeout", "2s")
          .option(
              "--peer-secret-file",
              tokenFile(
                  "peer-secret",
                  java.util.Base64.getEncoder()
                      .encodeToString(new java.security.SecureRandom().generateSeed(32))));
    }
    DataPlaneServer s = DataPlaneServer.start(args.parse());
    servers.add(s);
    return s;
  }

  private static final String READ_TOKEN = "load-retry-it-read-token-0123";
  private static final String ADMIN_TOKEN = "load-retry-it-admin-token-0123";

  @org.junit.jupiter.api.io.TempDir Path secrets;

  /** Writes a token or secret file. */
  private String tokenFile(String name, String content) throws IOException {
    return Files.writeString(secrets.resolve(name), content).toString();
  }

  private static int freePort() throws IOException {
    return TestPorts.freePort();
  }

  private DataPlaneStatus status(DataPlaneServer s) throws Exception {
    HttpResponse<String> r = get(s, "/status");
    assertThat(r.statusCode()).isEqualTo(200);
    return json.readValue(r.body(), DataPlaneStatus.class);
  }

  private HttpResponse<String> get(DataPlaneServer s, String path) throws Exception {
    URI uri = URI.create("http://127.0.0.1:" + s.address().getPort() + path);
    return http.send(
        HttpRequest.newBuilder(uri)
            .header("Authorization", "Bearer " + READ_TOKEN)
            .timeout(Duration.ofSeconds(5))
            .GET()
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** The number of the announced next load while waiting, else 0. */
  /**
   * Waits for the first load's first bytes in the store, then makes every source request fail until
   * the server announces its second load (the caller resets the proxy).
   */
  private void failMidLoadUntilRetrying(DataPlaneServer server) {
    await("bytes in the store")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(10))
        .until(() -> server.status(), s -> s.phase() == Phase.Loading && s.bytesLoaded() > 0);
    proxy.failRequests(500, 1_000_000, null);
    await("waiting to load again")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(5))
        .until(() -> status(server), s -> retryAttempt(s) >= 2);
  }

  private static int retryAttempt(DataPlaneStatus s) {
    if (s.phase() != Phase.Pending || s.message() == null) {
      return 0;
    }
    Matcher m = Pattern.compile("; retrying in \\S+ \\(attempt ([0-9]+)\\)$").matcher(s.message());
    return m.find() ? Integer.parseInt(m.group(1)) : 0;
  }

  private long retriesMetric(DataPlaneServer s) throws Exception {
    String body = get(s, "/metrics").body();
    Matcher m = RETRIES.matcher(body);
    assertThat(m.find()).as("tensorcast_dataplane_load_retries_total in\n%s", body).isTrue();
    assertThat(body)
        .contains(
            "# HELP tensorcast_dataplane_load_retries_total Loads that failed on a transient");
    return (long) Double.parseDouble(m.group(2));
  }

  private long wireMetric(DataPlaneServer s) throws Exception {
    String body = get(s, "/metrics").body();
    Matcher m =
        Pattern.compile(
                "(?m)^tensorcast_dataplane_source_wire_bytes_total\\{artifact=\"[^\"]+\",?\\}"
                    + " ([0-9.E]+)$")
            .matcher(body);
    assertThat(m.find()).as("tensorcast_dataplane_source_wire_bytes_total in\n%s", body).isTrue();
    return (long) Double.parseDouble(m.group(1));
  }

  private DataPlaneStatus awaitReady(DataPlaneServer s) throws Exception {
    DataPlaneStatus st =
        await("Ready or Failed")
            .atMost(READY)
            .pollInterval(Duration.ofMillis(20))
            .until(() -> status(s), x -> x.phase() == Phase.Ready || x.phase() == Phase.Failed);
    assertThat(st.phase()).as("%s: %s", st.reason(), st.message()).isEqualTo(Phase.Ready);
    return st;
  }

  private static void assertStoreHoldsTheCorpusFiles(DataPlaneStatus ready) throws IOException {
    Path dir = Path.of(ready.storeDirectory());
    assertThat(ready.files()).isEqualTo(files.size());
    assertThat(ready.filesComplete()).isEqualTo(files.size());
    for (Map.Entry<String, Path> e : files.entrySet()) {
      assertThat(Files.mismatch(dir.resolve(e.getKey()), e.getValue()))
          .as("store copy of %s", e.getKey())
          .isEqualTo(-1L);
    }
    try (Stream<Path> walk = Files.walk(dir)) {
      assertThat(walk.filter(Files::isRegularFile).count())
          .as("files in %s", dir)
          .isEqualTo(files.size());
    }
  }
}
