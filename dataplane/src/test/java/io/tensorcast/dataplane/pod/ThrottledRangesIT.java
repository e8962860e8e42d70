package io.tensorcast.dataplane.pod;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.cli.ServeArguments;
import io.tensorcast.dataplane.testing.PrometheusText;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.FaultInjectingProxy.RecordedRequest;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A sustained throttling storm on the ranged data reads: S3Mock behind the {@link
 * FaultInjectingProxy}, which from the first request on lets one request in four through and
 * answers every other one {@code 429 SlowDown} with {@code Retry-After: 1}; a real {@link
 * DataPlaneServer} configured by {@code dataplane serve}'s arguments, with two attempts per range.
 * Refusals do not use up a range's attempts: the load's reads pause until each {@code Retry-After}
 * instant and go on, so the server reaches Ready in its first load, with every byte equal and the
 * source bytes on the wire within 5 % of the artifact.
 */
class ThrottledRangesIT {
  private static final String BUCKET = "throttled-ranges-it";
  private static final String PREFIX = "model/";
  private static final String MNIST =
      "safetensors/burn__examples_import-model-weights_mnist.safetensors";

  private static final String READ_TOKEN = "throttled-ranges-it-read-01234";

  private Path file;
  private FaultInjectingProxy proxy;
  private DataPlaneServer server;
  private Path root;
  @TempDir Path secrets;

  @BeforeEach
  void setUp() throws IOException {
    Path shm = Path.of("/dev/shm");
    assumeTrue(Files.isDirectory(shm), "/dev/shm is needed for the page-locked store");
    file = Corpus.dir().resolve(MNIST); // 1 509 296 bytes: 6 ranges of 256 KiB
    S3MockServer s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    s3.putFile(BUCKET, PREFIX + "mnist.safetensors", file);
    root = Files.createTempDirectory(shm, "tensorcast-throttled-ranges-it-");
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
  @Timeout(120)
  void aStormAdmittingOneInFourReachesReadyInOneLoad() throws Exception {
    proxy.admitOneIn(4, Duration.ofSeconds(1));
    server = DataPlaneServer.start(ServeArguments.parse(args(), credentials()));
    DataPlaneStatus ready = awaitReady(Duration.ofSeconds(100));

    long s = Files.size(file);
    assertThat(Files.mismatch(Path.of(ready.storeDirectory()).resolve("mnist.safetensors"), file))
        .as("store copy")
        .isEqualTo(-1L);
    assertThat(ready.bytesTotal()).isEqualTo(s);
    assertThat(ready.bytesFromSourceOnWire())
        .as("source bytes on the wire, S = %d", s)
        .isLessThanOrEqualTo(s + s / 20);
    assertThat(loadRetries()).as("loads that failed and were loaded again").isZero();
    assertThat(proxy.throttled().stream().filter(ThrottledRangesIT::isDataRange).count())
        .as("data ranges refused by the storm and read later in the same load")
        .isGreaterThanOrEqualTo(6);
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

  /** A ranged GET of the loading phase: not the safetensors header's length prefix or JSON. */
  private static boolean isDataRange(RecordedRequest r) {
    if (!r.method().equals("GET") || r.rangeStart().isEmpty() || r.rangeLength().isEmpty()) {
      return false;
    }
    long start = r.rangeStart().get();
    return !(start == 0 && r.rangeLength().get() == 8) && start != 8;
  }

  private long loadRetries() throws Exception {
    return (long)
        PrometheusText.sample(
            PrometheusText.scrape(server.address().getPort(), READ_TOKEN),
            "tensorcast_dataplane_load_retries_total");
  }

  private List<String> args() throws IOException {
    return List.of(
        "serve",
        "--artifact-id",
        "storm-1-in-4",
        "--uri",
        "s3://" + BUCKET + "/" + PREFIX,
        "--endpoint",
        proxy.endpoint().toString(),
        "--path-style",
        "--region",
        S3MockServer.REGION,
        "--store-root",
        root.toString(),
        "--budget",
        "64Mi",
        "--listen",
        "127.0.0.1:0",
        "--max-attempts",
        "2",
        "--range-size",
        "256Ki",
        "--concurrency",
        "2",
        "--load-retry-backoff",
        "100ms",
        "--load-retry-max-backoff",
        "400ms",
        "--distribution",
        "source-only",
        "--allow-insecure-endpoint",
        "--read-token-file",
        Files.writeString(secrets.resolve("read"), READ_TOKEN).toString(),
        "--admin-token-file",
        Files.writeString(secrets.resolve("admin"), "throttled-ranges-it-admin-01234").toString());
  }

  private static Map<String, String> credentials() {
    return Map.of(
        "AWS_ACCESS_KEY_ID",
        S3MockServer.ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY",
        S3MockServer.SECRET_KEY);
  }
}
