package io.tensorcast.dataplane.pod;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.testing.PrometheusText;
import io.tensorcast.dataplane.testing.ServeCommandLine;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.FaultInjectingProxy.RecordedRequest;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A sustained throttling storm that lets one request in four through (every other one answered
 * {@code 429 SlowDown}, {@code Retry-After: 1}), from the first request on: S3Mock behind the
 * {@link FaultInjectingProxy}, a real {@link DataPlaneServer} configured by {@code dataplane
 * serve}'s arguments. Ranged reads get two attempts each, so loads fail and are loaded again; the
 * metadata requests (listing, {@code HEAD}s, safetensors header and torch structure reads) wait the
 * storm out and what they got is kept from one load to the next. The load reaches Ready, the source
 * bytes on the wire stay within 5 % of the artifact, and no metadata request is answered twice.
 */
class ThrottledMetadataIT {
  private static final String BUCKET = "throttled-metadata-it";
  private static final String PREFIX = "model/";

  private static final String READ_TOKEN = "throttled-metadata-it-read-0123";

  private final Map<String, Path> files = new TreeMap<>();
  private FaultInjectingProxy proxy;
  private DataPlaneServer server;
  private Path root;
  @TempDir Path secrets;

  @BeforeEach
  void setUp() throws IOException {
    Path shm = Path.of("/dev/shm");
    assumeTrue(Files.isDirectory(shm), "/dev/shm is needed for the page-locked store");
    Path corpus = Corpus.dir();
    files.put(
        "mnist.safetensors",
        corpus.resolve("safetensors/burn__examples_import-model-weights_mnist.safetensors"));
    files.put(
        "shard.safetensors",
        corpus.resolve("index/safetensorsjl-tiny-sharded/model-00001-of-00006.safetensors"));
    files.put("int8.pt", corpus.resolve("torch/burn__int8.pt"));
    S3MockServer s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    for (Map.Entry<String, Path> e : files.entrySet()) {
      s3.putFile(BUCKET, PREFIX + e.getKey(), e.getValue());
    }
    root = Files.createTempDirectory(shm, "tensorcast-throttled-metadata-it-");
    proxy = new FaultInjectingProxy(s3.endpoint());
  }

  @AfterEach
  void tearDown() throws IOException {
    if (server != null) {
      server.close();
    }
    proxy.close();
    TestFiles.deleteTree(root);
  }

  @Test
  @Timeout(150)
  void aStormAdmittingOneInFourReachesReadyAskingEachMetadataRequestOnce() throws Exception {
    // What one load asks for its metadata when nothing fails, as the proxy sees it.
    server = DataPlaneServer.start(settings("unthrottled"));
    awaitReady(Duration.ofSeconds(30));
    Map<String, Long> once = metadataAnswered();
    server.close();
    server = null;
    assertThat(once.entrySet().stream().filter(e -> e.getKey().contains("list-type=2")))
        .as("listings of one load")
        .hasSize(1)
        .allMatch(e -> e.getValue() == 1);
    assertThat(once)
        .as("listing, a HEAD per file, header and structure reads of one load")
        .hasSizeGreaterThanOrEqualTo(1 + files.size() + 2 * 2 + 2);

    proxy.reset().admitOneIn(4, Duration.ofSeconds(1));
    // The first data range of mnist.safetensors fails on both its attempts, so at least one load
    // fails (SourceUnavailable) after resolving and is loaded again; the storm fails others. Only
    // the range at 0: the file is read in three ranges, and two of them in flight at once would
    // each take one of the two failures and succeed on its retry.
    proxy.failRequestsWhere(
        r ->
            isDataRange(r)
                && r.path().endsWith("/mnist.safetensors")
                && r.rangeStart().orElse(-1L) == 0,
        500,
        2);
    server = DataPlaneServer.start(settings("storm-1-in-4"));
    DataPlaneStatus ready = awaitReady(Duration.ofSeconds(120));

    Path dir = Path.of(ready.storeDirectory());
    long s = 0;
    for (Map.Entry<String, Path> e : files.entrySet()) {
      assertThat(Files.mismatch(dir.resolve(e.getKey()), e.getValue()))
          .as("store copy of %s", e.getKey())
          .isEqualTo(-1L);
      s += Files.size(e.getValue());
    }
    assertThat(ready.bytesTotal()).isEqualTo(s);
    assertThat(ready.bytesFromSourceOnWire())
        .as("source bytes on the wire, S = %d", s)
        .isLessThanOrEqualTo(s + s / 20);
    assertThat(loadRetries())
        .as("loads that failed and were loaded again")
        .isGreaterThanOrEqualTo(1);
    assertThat(proxy.throttled().stream().filter(r -> !isDataRange(r)))
        .as("metadata requests refused and waited out")
        .isNotEmpty();
    assertThat(metadataAnswered())
        .as("metadata requests answered under the storm, over all loads")
        .isEqualTo(once);
  }

  private DataPlaneStatus awaitReady(Duration within) {
    DataPlaneStatus st =
        await("Ready or Failed")
            .atMost(within)
            .pollInterval(Duration.ofMillis(20))
            .until(server::status, x -> x.phase() == Phase.Ready || x.phase() == Phase.Failed);
    assertThat(st.phase()).as("%s: %s", st.reason(), st.message()).isEqualTo(Phase.Ready);
    return st;
  }

  /** Metadata requests the source answered (not refused by the storm), by request, with counts. */
  private Map<String, Long> metadataAnswered() {
    Set<RecordedRequest> refused = new HashSet<>(proxy.throttled());
    return proxy.requests().stream()
        .filter(r -> !refused.contains(r) && !isDataRange(r))
        .map(r -> r.method() + " " + r.target() + " " + r.range().orElse(""))
        .collect(Collectors.groupingBy(Function.identity(), TreeMap::new, Collectors.counting()));
  }

  /**
   * A ranged GET that may be of the loading phase: any ranged GET but a safetensors header read
   * (the 8-byte length prefix at 0, the JSON at 8) and a torch structure read of less than the
   * whole small checkpoint (its reader also reads it whole once, as the loading phase does).
   */
  private boolean isDataRange(RecordedRequest r) {
    if (!r.method().equals("GET") || r.rangeStart().isEmpty() || r.rangeLength().isEmpty()) {
      return false;
    }
    String key = r.path().substring(("/" + BUCKET + "/" + PREFIX).length());
    long start = r.rangeStart().get();
    long length = r.rangeLength().get();
    if (key.endsWith(".safetensors")) {
      return !(start == 0 && length == 8) && start != 8;
    }
    try {
      return length == Files.size(files.get(key));
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  private long loadRetries() throws Exception {
    return (long)
        PrometheusText.sample(
            PrometheusText.scrape(server.address().getPort(), READ_TOKEN),
            "tensorcast_dataplane_load_retries_total");
  }

  private ServeSettings settings(String artifactId) throws IOException {
    return ServeCommandLine.serve(artifactId, "s3://" + BUCKET + "/" + PREFIX)
        .s3(proxy.endpoint())
        .store(root, "64Mi")
        .listen("127.0.0.1:0")
        .option("--max-attempts", "2")
        .option("--range-size", "512Ki")
        .option("--concurrency", "2")
        .loadRetryBackoff("100ms", "400ms")
        .distribution("source-only")
        .flag("--allow-insecure-endpoint")
        .tokenFiles(
            Files.writeString(secrets.resolve("read"), READ_TOKEN),
            Files.writeString(secrets.resolve("admin"), "throttled-metadata-it-admin-0123"))
        .parse();
  }
}
