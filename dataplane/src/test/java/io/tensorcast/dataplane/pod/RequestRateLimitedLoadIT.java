package io.tensorcast.dataplane.pod;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.cli.ServeArguments;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * An origin limited in requests per second, as the Hugging Face Hub and S3's per-prefix request
 * rates are: S3Mock behind the {@link FaultInjectingProxy}, which sends each response body at 256
 * KB/s and answers a request beyond 10 per second (bursts of 5, a token bucket) {@code 429 Too Many
 * Requests} with {@code Retry-After: 1}. Two corpus files (4.7 MB) in ranges of 64 KiB: about 2.6
 * reads in flight use the rate. A real {@link DataPlaneServer} loads them with the adaptive
 * concurrency (the default, ceiling 16) and with a fixed 16 in flight; both reach Ready with every
 * byte equal, and the adaptive one is refused a small fraction of the fixed one's 429s. Counts and
 * bytes are asserted, not time.
 */
class RequestRateLimitedLoadIT {
  private static final String BUCKET = "request-rate-it";
  private static final String PREFIX = "model/";
  private static final List<String> FILES =
      List.of(
          "safetensors/burn__examples_import-model-weights_mnist.safetensors",
          "safetensors/pokemon-diffusers__pytorch_lora_weights.safetensors");

  private FaultInjectingProxy proxy;
  private final List<DataPlaneServer> servers = new ArrayList<>();
  private Path root;
  @TempDir Path secrets;

  @BeforeEach
  void setUp() throws IOException {
    Path shm = Path.of("/dev/shm");
    assumeTrue(Files.isDirectory(shm), "/dev/shm is needed for the page-locked store");
    S3MockServer s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    for (String f : FILES) {
      s3.putFile(BUCKET, PREFIX + name(f), Corpus.dir().resolve(f));
    }
    root = Files.createTempDirectory(shm, "tensorcast-request-rate-it-");
    proxy = new FaultInjectingProxy(s3.endpoint());
  }

  @AfterEach
  void tearDown() throws IOException {
    for (DataPlaneServer s : servers) {
      s.close();
    }
    proxy.close();
    TestFiles.deleteTree(root);
  }

  @Test
  @Timeout(180)
  void theAdaptiveConcurrencyIsRefusedAFractionOfWhatAFixedSixteenIs() throws Exception {
    int fixed = load("fixed-16", "--fixed-concurrency");
    int adaptive = load("adaptive");

    assertThat(fixed).as("429s of the fixed 16 in flight").isGreaterThanOrEqualTo(30);
    assertThat(adaptive)
        .as("429s of the adaptive concurrency (fixed 16: %d)", fixed)
        .isLessThanOrEqualTo(fixed / 3);
  }

  /** Loads the files through the limited origin; returns the 429s the proxy answered. */
  private int load(String id, String... extra) throws Exception {
    proxy.reset();
    proxy.throttleBodies(256_000).limitRequestRate(10, 5);
    DataPlaneServer server = DataPlaneServer.start(ServeArguments.parse(args(id, extra), env()));
    servers.add(server);
    DataPlaneStatus st =
        await("Ready or Failed")
            .atMost(Duration.ofSeconds(80))
            .pollInterval(Duration.ofMillis(20))
            .until(server::status, x -> x.phase() == Phase.Ready || x.phase() == Phase.Failed);
    assertThat(st.phase()).as("%s: %s: %s", id, st.reason(), st.message()).isEqualTo(Phase.Ready);
    long total = 0;
    for (String f : FILES) {
      Path source = Corpus.dir().resolve(f);
      total += Files.size(source);
      assertThat(Files.mismatch(Path.of(st.storeDirectory()).resolve(name(f)), source))
          .as("%s: store copy of %s", id, f)
          .isEqualTo(-1L);
    }
    assertThat(st.bytesTotal()).isEqualTo(total);
    assertThat(st.bytesFromSourceOnWire())
        .as("%s: source bytes on the wire, S = %d", id, total)
        .isLessThanOrEqualTo(total + total / 20);
    int refused = proxy.tooManyRequests();
    assertThat(proxy.throttled()).hasSize(refused);
    server.close();
    servers.remove(server);
    return refused;
  }

  private static String name(String corpusPath) {
    return corpusPath.substring(corpusPath.lastIndexOf('/') + 1);
  }

  private List<String> args(String id, String... extra) throws IOException {
    List<String> a =
        new ArrayList<>(
            List.of(
                "serve",
                "--artifact-id",
                id,
                "--uri",
                "s3://" + BUCKET + "/" + PREFIX,
                "--endpoint",
                proxy.endpoint().toString(),
                "--path-style",
                "--region",
                S3MockServer.REGION,
                "--store-root",
                root.resolve(id).toString(),
                "--budget",
                "64Mi",
                "--listen",
                "127.0.0.1:0",
                "--range-size",
                "64Ki",
                "--concurrency",
                "16",
                "--distribution",
                "source-only",
                "--allow-insecure-endpoint",
                "--read-token-file",
                Files.writeString(secrets.resolve("read"), "request-rate-it-read-0123456")
                    .toString(),
                "--admin-token-file",
                Files.writeString(secrets.resolve("admin"), "request-rate-it-admin-012345")
                    .toString()));
    a.addAll(List.of(extra));
    return a;
  }

  private static Map<String, String> env() {
    return Map.of(
        "AWS_ACCESS_KEY_ID",
        S3MockServer.ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY",
        S3MockServer.SECRET_KEY);
  }
}
