package io.tensorcast.dataplane.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.testing.PrometheusText;
import io.tensorcast.dataplane.testing.ServeCommandLine;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import io.tensorcast.testing.TestPorts;
import java.io.IOException;
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
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@code dataplane serve} as it runs in a pod: the real shaded jar started with {@code java -jar}
 * as a child process, credentials in its environment, loading from a real S3-compatible server
 * (S3Mock) into a store under {@code /dev/shm}, probed over HTTP on loopback, stopped with SIGTERM.
 */
class ServeIT {
  private static final String BUCKET = "serve-it";
  private static final String PREFIX = "model/";
  private static final String ID = "x";
  private static final Duration STARTUP = Duration.ofSeconds(60);
  private static final String READ = "serve-it-read-token-0123456789";
  private static final String ADMIN = "serve-it-admin-token-0123456789";

  private static S3MockServer s3;
  private static Path jar;

  /** Path in the artifact → corpus file. */
  private static final Map<String, Path> files = new TreeMap<>();

  private static long totalBytes;
  private static long tensors;

  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final ObjectMapper json = new ObjectMapper();
  private Path root;
  private Path work;
  private Process process;
  private Path log;
  private FaultInjectingProxy proxy;

  @BeforeAll
  static void seed() throws Exception {
    jar = dataplaneJar();
    Path corpus = Corpus.dir();
    try (Stream<Path> shards = Files.list(corpus.resolve("index/safetensorsjl-tiny-sharded"))) {
      shards.forEach(p -> files.put(p.getFileName().toString(), p));
    }
    files.put("config.json", corpus.resolve("index/falcon-180b-chat/config.json"));
    files.put(
        "extra/mnist.safetensors",
        corpus.resolve("safetensors/burn__examples_import-model-weights_mnist.safetensors"));
    s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    for (Map.Entry<String, Path> e : files.entrySet()) {
      s3.putFile(BUCKET, PREFIX + e.getKey(), e.getValue());
      totalBytes += Files.size(e.getValue());
      if (e.getKey().endsWith(".safetensors")) {
        tensors += SafetensorsHeader.read(e.getValue()).tensors().size();
      }
    }
  }

  /** The runnable jar that {@code mvn package} builds; the ITs run after it at {@code verify}. */
  static Path dataplaneJar() {
    String property = System.getProperty("tensorcast.dataplane.jar");
    Path p = property != null ? Path.of(property) : Path.of("target", "tensorcast-dataplane.jar");
    assertThat(p)
        .as(
            "the dataplane jar (built by `mvn -pl dataplane -am package`, before the ITs run at"
                + " `verify`; or set -Dtensorcast.dataplane.jar)")
        .isRegularFile();
    return p.toAbsolutePath();
  }

  @BeforeEach
  void setUp() throws Exception {
    Path shm = Path.of("/dev/shm");
    assumeTrue(Files.isDirectory(shm), "/dev/shm is needed for the page-locked store");
    root = Files.createTempDirectory(shm, "tensorcast-serve-it-");
    work = Files.createTempDirectory("tensorcast-serve-it-");
    log = work.resolve("serve.log");
  }

  @AfterEach
  void tearDown() throws Exception {
    if (process != null && process.isAlive()) {
      process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }
    if (process != null) {
      System.out.println("---- dataplane serve log ----\n" + Files.readString(log));
    }
    if (proxy != null) {
      proxy.close();
    }
    TestFiles.deleteTree(root);
    TestFiles.deleteTree(work);
  }

  @Test
  void servesHealthThenReadinessStatusAndMetricsAndUnloadsOnSigterm() throws Exception {
    // Every request to the store waits 250 ms: the load takes at least a second (listing, two
    // header reads, the data), so the endpoint is seen answering before the artifact is Ready.
    proxy = new FaultInjectingProxy(s3.endpoint()).delay(Duration.ofMillis(250));
    int port = freePort();
    start(port, proxy.endpoint(), null, List.of());

    await("/healthz 200")
        .atMost(STARTUP)
        .pollInterval(Duration.ofMillis(20))
        .until(() -> statusCode(port, "/healthz", null) == 200);
    HttpResponse<String> notYet = get(port, "/readyz", null);
    assertThat(notYet.statusCode()).isEqualTo(503);
    assertThat(notYet.body().strip()).isIn("Pending", "Resolving", "Loading", "Verifying");

    await("/readyz 200")
        .atMost(STARTUP)
        .pollInterval(Duration.ofMillis(100))
        .until(() -> statusCode(port, "/readyz", null) == 200);
    assertThat(get(port, "/readyz", null).body()).isEqualTo("Ready\n");

    HttpResponse<String> statusResponse = get(port, "/status", READ);
    assertThat(statusResponse.statusCode()).isEqualTo(200);
    assertThat(statusResponse.headers().firstValue("content-type")).contains("application/json");
    DataPlaneStatus s = json.readValue(statusResponse.body(), DataPlaneStatus.class);
    Path dir = root.resolve(ID);
    assertThat(s.artifactId()).isEqualTo(ID);
    assertThat(s.phase()).isEqualTo(Phase.Ready);
    assertThat(s.source()).isEqualTo("s3://" + BUCKET + "/" + PREFIX);
    assertThat(s.files()).isEqualTo(files.size());
    assertThat(s.filesComplete()).isEqualTo(files.size());
    assertThat(s.tensors()).isEqualTo(tensors);
    assertThat(s.bytesTotal()).isEqualTo(totalBytes);
    assertThat(s.bytesLoaded()).isEqualTo(totalBytes);
    assertThat(s.bytesFromSource()).isEqualTo(totalBytes);
    assertThat(s.storeDirectory()).isEqualTo(dir.toString());
    assertThat(s.fileStatuses())
        .extracting(
            DataPlaneStatus.FileStatus::path,
            DataPlaneStatus.FileStatus::contentDigest,
            DataPlaneStatus.FileStatus::sha256)
        .containsExactlyElementsOf(
            files.entrySet().stream()
                // single-part objects: the ETag's MD5 verified each file and is what was recorded
                .map(
                    e ->
                        org.assertj.core.groups.Tuple.tuple(
                            e.getKey(), "md5:" + md5(e.getValue()), null))
                .toList());
    for (Map.Entry<String, Path> e : files.entrySet()) {
      assertThat(Files.mismatch(dir.resolve(e.getKey()), e.getValue()))
          .as(e.getKey())
          .isEqualTo(-1L);
    }

    // One tensor read (the list, then one tensor's bytes) for the serving metrics.
    HttpResponse<String> list = get(port, "/v1/tensors", READ);
    assertThat(list.statusCode()).isEqualTo(200);
    com.fasterxml.jackson.databind.JsonNode first =
        json.readTree(list.body()).get("tensors").get(0);
    HttpResponse<byte[]> tensor =
        http.send(
            HttpRequest.newBuilder(
                    URI.create(
                        "http://127.0.0.1:"
                            + port
                            + "/v1/tensors/"
                            + java.net.URLEncoder.encode(
                                    first.get("name").asText(), StandardCharsets.UTF_8)
                                .replace("+", "%20")))
                .header("Authorization", "Bearer " + READ)
                .build(),
            HttpResponse.BodyHandlers.ofByteArray());
    assertThat(tensor.statusCode()).isEqualTo(200);
    assertThat((long) tensor.body().length).isEqualTo(first.get("length").asLong());
    long served = list.body().getBytes(StandardCharsets.UTF_8).length + tensor.body().length;

    String metrics = get(port, "/metrics", null).body();
    assertThat(sample(metrics, "tensorcast_dataplane_artifact_loaded_bytes")).isEqualTo(totalBytes);
    assertThat(sample(metrics, "tensorcast_dataplane_artifact_bytes")).isEqualTo(totalBytes);
    assertThat(sample(metrics, "tensorcast_dataplane_artifact_ready")).isEqualTo(1);
    assertThat(sample(metrics, "tensorcast_dataplane_artifact_locked_bytes"))
        .isEqualTo(s.lock() == null ? 0 : s.lock().lockedBytes());
    // Tensor serving: the two reads above, their body bytes, under the one prefix.
    assertThat(
            plainSample(
                metrics, "tensorcast_dataplane_tensor_requests_seconds_count", "code=\"200\""))
        .isEqualTo(2);
    assertThat(plainSample(metrics, "tensorcast_dataplane_tensor_sent_bytes_total", ""))
        .isEqualTo(served);
    // JVM and process meters keep their standard names; no series appears twice; every series of
    // ours carries the one prefix (the names before it are gone).
    assertThat(metrics).containsPattern("(?m)^jvm_memory_used_bytes\\{");
    assertThat(metrics).containsPattern("(?m)^process_cpu_usage ");
    List<String> series =
        metrics
            .lines()
            .filter(l -> !l.startsWith("#") && !l.isBlank())
            .map(l -> l.substring(0, l.lastIndexOf(' ')))
            .toList();
    assertThat(series).doesNotHaveDuplicates();
    assertThat(series)
        .filteredOn(l -> l.startsWith("tensorcast_"))
        .allMatch(l -> l.startsWith("tensorcast_dataplane_"), "prefixed tensorcast_dataplane_");
    assertThat(get(port, "/nothing-here", null).statusCode()).isEqualTo(404);

    process.destroy(); // SIGTERM, as the kubelet stops a pod
    assertThat(process.waitFor(30, TimeUnit.SECONDS)).as("exited after SIGTERM").isTrue();
    assertThat(process.exitValue()).as("exit status after SIGTERM").isEqualTo(143);
    assertThat(dir).doesNotExist();
    assertThat(root.resolve(".tensorcast").resolve(ID + ".json")).doesNotExist();
  }

  @Test
  void sigtermWhileLoadingStopsTheLoadAndLeavesNothingInTheStore() throws Exception {
    // 64 KiB ranges, two at a time, each request delayed 100 ms: several seconds of Loading.
    proxy = new FaultInjectingProxy(s3.endpoint()).delay(Duration.ofMillis(100));
    int port = freePort();
    start(
        port,
        proxy.endpoint(),
        null,
        List.of("--range-size", "64Ki", "--concurrency", "2", "--lock-policy", "REQUIRED"));
    await("phase Loading")
        .atMost(STARTUP)
        .pollInterval(Duration.ofMillis(20))
        .until(() -> statusCode(port, "/readyz", null) == 503 && phase(port) == Phase.Loading);
    assertThat(root.resolve(ID)).isDirectory();

    process.destroy();
    assertThat(process.waitFor(30, TimeUnit.SECONDS)).as("exited after SIGTERM").isTrue();
    // 143 = 128 + SIGTERM: the JVM ran its shutdown hooks and exited, it did not crash (134)
    assertThat(process.exitValue()).as("exit status after SIGTERM").isEqualTo(143);
    // the load was stopped (its workers ended) before the mappings were released
    assertThat(Files.readString(log))
        .contains("artifact x failed: Interrupted")
        .contains("unloaded x on shutdown")
        .doesNotContain("SIGSEGV")
        .doesNotContain("hs_err");
    try (Stream<Path> left = Files.list(root)) {
      assertThat(left.map(p -> p.getFileName().toString())).containsExactly(".tensorcast");
    }
    try (Stream<Path> left = Files.list(root.resolve(".tensorcast"))) {
      assertThat(left.map(p -> p.getFileName().toString())).containsExactly("store.lock");
    }
  }

  /**
   * {@code serve} killed with SIGKILL halfway through its load, then started again on the same
   * store root: the store adopts the incomplete copy with the ranges the first process recorded,
   * and the second process reads only the missing bytes, so the source is read about once in all.
   */
  @Test
  @org.junit.jupiter.api.Timeout(120)
  void sigkillWhileLoadingThenAStartOnTheSameStoreReadsOnlyTheMissingBytes() throws Exception {
    proxy = new FaultInjectingProxy(s3.endpoint()).delay(Duration.ofMillis(40));
    List<String> args = List.of("--range-size", "16Ki", "--concurrency", "2");
    int port = freePort();
    start(port, proxy.endpoint(), null, args);
    DataPlaneStatus half =
        await("half the artifact in the store")
            .atMost(STARTUP)
            .pollInterval(Duration.ofMillis(10))
            .ignoreExceptions()
            .until(
                () -> status(port),
                s -> s.phase() == Phase.Loading && s.bytesLoaded() >= totalBytes / 2);
    process.destroyForcibly(); // SIGKILL: no shutdown hook, the store keeps what it holds
    assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
    assertThat(process.exitValue()).as("exit status after SIGKILL").isEqualTo(137);
    assertThat(root.resolve(".tensorcast").resolve(ID + ".stored")).isRegularFile();
    long firstRun = proxy.getBodyBytes();

    int second = freePort();
    start(second, proxy.endpoint(), null, args);
    DataPlaneStatus ready =
        await("Ready after the restart")
            .atMost(STARTUP)
            .pollInterval(Duration.ofMillis(50))
            .ignoreExceptions()
            .until(() -> status(second), s -> s.phase() == Phase.Ready);
    Path dir = root.resolve(ID);
    for (Map.Entry<String, Path> e : files.entrySet()) {
      assertThat(Files.mismatch(dir.resolve(e.getKey()), e.getValue()))
          .as(e.getKey())
          .isEqualTo(-1L);
    }
    assertThat(Files.readString(log)).contains("Resumable");
    assertThat(ready.bytesFromSourceOnWire())
        .as(
            "bytes the second process received; %d of %d were in the store",
            half.bytesLoaded(), totalBytes)
        .isLessThanOrEqualTo(totalBytes - half.bytesLoaded() + totalBytes / 20);
    assertThat(proxy.getBodyBytes())
        .as("bytes read from the source by both processes (first: %d)", firstRun)
        .isLessThanOrEqualTo(totalBytes + totalBytes / 20);
  }

  private DataPlaneStatus status(int port) throws Exception {
    return json.readValue(get(port, "/status", READ).body(), DataPlaneStatus.class);
  }

  private Phase phase(int port) throws Exception {
    return json.readValue(get(port, "/status", READ).body(), DataPlaneStatus.class).phase();
  }

  @Test
  void statusNeedsTheBearerTokenFromTheFileAndFollowsItsRotation() throws Exception {
    Path tokenFile = work.resolve("token");
    String first = "first-token-0123456789abcdef";
    String second = "second-token-fedcba9876543210";
    Files.writeString(tokenFile, first + "\n");
    int port = freePort();
    start(port, s3.endpoint(), tokenFile, List.of());
    await("/readyz 200")
        .atMost(STARTUP)
        .pollInterval(Duration.ofMillis(100))
        .until(() -> statusCode(port, "/readyz", null) == 200);

    HttpResponse<String> anonymous = get(port, "/status", null);
    assertThat(anonymous.statusCode()).isEqualTo(401);
    assertThat(anonymous.headers().firstValue("www-authenticate"))
        .contains("Bearer realm=\"tensorcast\"");
    assertThat(anonymous.body()).doesNotContain(ID).doesNotContain(BUCKET);
    assertThat(statusCode(port, "/status", "not-the-token-0123456789")).isEqualTo(401);
    // --control-token-file is the admin token's old name: the admin token reads as well
    HttpResponse<String> withToken = get(port, "/status", first);
    assertThat(withToken.statusCode()).isEqualTo(200);
    assertThat(json.readValue(withToken.body(), DataPlaneStatus.class).phase())
        .isEqualTo(Phase.Ready);
    // health, readiness and metrics stay open to the kubelet and Prometheus
    assertThat(statusCode(port, "/healthz", null)).isEqualTo(200);
    assertThat(statusCode(port, "/metrics", null)).isEqualTo(200);

    // rotate the Secret: the file is replaced the way the kubelet swaps a mounted Secret
    Path next = work.resolve("token.next");
    Files.writeString(next, second + "\n");
    Files.move(next, tokenFile, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    assertThat(statusCode(port, "/status", second)).isEqualTo(200);
    assertThat(statusCode(port, "/status", first)).isEqualTo(401);
  }

  @Test
  void theReadTokenReadsTheAdminTokenAlsoSetsPeersAndNoTokenDoesNeither() throws Exception {
    int port = freePort();
    start(port, s3.endpoint(), null, List.of());
    await("/readyz 200")
        .atMost(STARTUP)
        .pollInterval(Duration.ofMillis(100))
        .until(() -> statusCode(port, "/readyz", null) == 200);
    String body = "{\"epoch\":\"e1\",\"members\":[{\"id\":\"x\",\"address\":\"127.0.0.1:9\"}]}";
    assertThat(put(port, "/v1/peers", body, null).statusCode()).isEqualTo(401);
    HttpResponse<String> withRead = put(port, "/v1/peers", body, READ);
    assertThat(withRead.statusCode()).isEqualTo(403);
    assertThat(withRead.body().strip())
        .isEqualTo("the read token does not allow PUT /v1/peers; it needs the admin token");
    // The admin token passes; this pod loads from the source only, so the answer is its 409.
    HttpResponse<String> withAdmin = put(port, "/v1/peers", body, ADMIN);
    assertThat(withAdmin.statusCode()).isEqualTo(409);
    assertThat(statusCode(port, "/status", null)).isEqualTo(401);
    assertThat(statusCode(port, "/status", READ)).isEqualTo(200);
    assertThat(statusCode(port, "/status", ADMIN)).isEqualTo(200);
    assertThat(statusCode(port, "/v1/tensors", null)).isEqualTo(401);
    assertThat(statusCode(port, "/v1/tensors", READ)).isEqualTo(200);
    assertThat(statusCode(port, "/healthz", null)).isEqualTo(200);
    assertThat(statusCode(port, "/readyz", null)).isEqualTo(200);
    assertThat(statusCode(port, "/metrics", null)).isEqualTo(200);
    assertThat(Files.readString(log))
        .contains("control endpoint: /127.0.0.1:")
        .contains("PUT /v1/peers refused (read token, admin needed)");
  }

  @Test
  void startedWithoutTokenFilesItGeneratesTokensIntoAFileOnlyItsOwnerReads() throws Exception {
    int port = freePort();
    Path tokens = work.resolve("control.tokens");
    start(port, s3.endpoint(), null, List.of("--tokens-out", tokens.toString()));
    await("/readyz 200")
        .atMost(STARTUP)
        .pollInterval(Duration.ofMillis(100))
        .until(() -> statusCode(port, "/readyz", null) == 200);
    assertThat(Files.getPosixFilePermissions(tokens))
        .isEqualTo(java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
    Map<String, String> generated = new java.util.HashMap<>();
    for (String line : Files.readAllLines(tokens)) {
      if (!line.startsWith("#")) {
        generated.put(line.substring(0, line.indexOf('=')), line.substring(line.indexOf('=') + 1));
      }
    }
    assertThat(generated.keySet()).containsExactlyInAnyOrder("read", "admin");
    assertThat(statusCode(port, "/status", null)).isEqualTo(401);
    assertThat(statusCode(port, "/status", generated.get("read"))).isEqualTo(200);
    assertThat(put(port, "/v1/peers", "{}", generated.get("read")).statusCode()).isEqualTo(403);
    assertThat(Files.readString(log)).contains("written to " + tokens + " (mode 0600)");
  }

  @Test
  void aHubTokenGoesToAPlainHttpEndpointOnlyWhenThatIsAllowedExplicitly() throws Exception {
    try (io.tensorcast.testing.HubStandIn hub = io.tensorcast.testing.HubStandIn.start()) {
      hub.repo("org/private")
          .privateWithToken("hf_secret_token_0123456789")
          .commit(Map.of("config.json", files.get("config.json")));
      int port = freePort();
      startHub(port, hub.endpoint(), List.of("--no-insecure-endpoint"));
      await("Failed")
          .atMost(STARTUP)
          .pollInterval(Duration.ofMillis(100))
          .ignoreExceptions()
          .until(() -> phase(port) == Phase.Failed);
      DataPlaneStatus refused =
          json.readValue(get(port, "/status", READ).body(), DataPlaneStatus.class);
      assertThat(refused.reason()).isEqualTo("InsecureEndpoint");
      assertThat(refused.message())
          .startsWith("Hub endpoint '" + hub.endpoint() + "' is plain http and this source sends");
      assertThat(hub.requests()).as("requests that reached the plain-http endpoint").isEmpty();
      assertThat(Files.readString(log)).contains("cannot open source: InsecureEndpoint:");
      process.destroy();
      assertThat(process.waitFor(20, TimeUnit.SECONDS)).isTrue();

      // Allowed explicitly (an in-cluster mirror): the token goes, the load completes.
      int port2 = freePort();
      startHub(port2, hub.endpoint(), List.of());
      await("Ready")
          .atMost(STARTUP)
          .pollInterval(Duration.ofMillis(100))
          .ignoreExceptions()
          .until(() -> phase(port2) == Phase.Ready);
      assertThat(hub.requests()).isNotEmpty();
      DataPlaneStatus ready =
          json.readValue(get(port2, "/status", READ).body(), DataPlaneStatus.class);
      assertThat(ready.fileStatuses())
          .singleElement()
          .satisfies(
              f -> {
                assertThat(f.verification()).isEqualTo(DataPlaneStatus.Verification.SourceDigest);
                assertThat(f.digest()).isEqualTo("git blob sha1 (Hub oid)");
              });
    }
  }

  @Test
  void linkLocalAndMetadataEndpointsAreRefusedBeforeAnyRequest() throws Exception {
    for (String endpoint :
        List.of(
            "http://169.254.169.254",
            "http://[fd00:ec2::254]",
            "http://metadata.google.internal")) {
      io.tensorcast.dataplane.pod.DataPlaneServer s =
          io.tensorcast.dataplane.pod.DataPlaneServer.start(
              ServeCommandLine.serve(ID, "s3://" + BUCKET + "/" + PREFIX)
                  .option("--endpoint", endpoint)
                  .flag("--allow-insecure-endpoint")
                  .store(root, "64Mi")
                  .listen("127.0.0.1:0")
                  .distribution("source-only")
                  .option("--tokens-out", work.resolve("t").toString())
                  .parse());
      try {
        DataPlaneStatus st = s.status();
        assertThat(st.phase()).as(endpoint).isEqualTo(Phase.Failed);
        assertThat(st.reason()).as(endpoint).isEqualTo("ForbiddenEndpoint");
        assertThat(st.message())
            .as(endpoint)
            .startsWith("endpoint '" + endpoint + "' is refused: ")
            .endsWith("a data plane never sends requests (or credentials) there");
      } finally {
        s.close();
      }
    }
  }

  // ------------------------------------------------------------------ helpers

  private void startHub(int port, URI hubEndpoint, List<String> extra) throws IOException {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(List.of("-Xmx256m", "-XX:TieredStopAtLevel=1", "-jar", jar.toString()));
    cmd.addAll(
        ServeCommandLine.serve(ID, "hf://org/private")
            .store(root, "64Mi")
            .listen("127.0.0.1:" + port)
            .distribution("source-only")
            .tokenFiles(
                Files.writeString(work.resolve("read-token"), READ),
                Files.writeString(work.resolve("admin-token"), ADMIN))
            .args());
    if (!extra.contains("--no-insecure-endpoint")) {
      cmd.add("--allow-insecure-endpoint");
    }
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.redirectOutput(log.toFile());
    Map<String, String> env = pb.environment();
    env.put("HF_TOKEN", "hf_secret_token_0123456789");
    env.put("HF_ENDPOINT", hubEndpoint.toString());
    env.remove("TENSORCAST_MEMORY_BUDGET");
    process = pb.start();
  }

  private HttpResponse<String> put(int port, String path, String body, String token)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(10))
            .PUT(HttpRequest.BodyPublishers.ofString(body));
    if (token != null) {
      b.header("Authorization", "Bearer " + token);
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
  }

  private void start(int port, URI endpoint, Path tokenFile, List<String> extra)
      throws IOException {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(List.of("-Xmx256m", "-XX:TieredStopAtLevel=1", "-jar", jar.toString()));
    cmd.addAll(
        ServeCommandLine.serve(ID, "s3://" + BUCKET + "/" + PREFIX)
            .s3(endpoint)
            .store(root, "256Mi")
            .listen("127.0.0.1:" + port)
            // today's single-node behaviour; peer-to-peer is PeerToPeerLoadIT's
            .distribution("source-only")
            .args());
    if (tokenFile != null) {
      cmd.addAll(List.of("--control-token-file", tokenFile.toString()));
    } else if (!extra.contains("--tokens-out")) {
      cmd.addAll(
          List.of(
              "--read-token-file",
              Files.writeString(work.resolve("read-token"), READ).toString(),
              "--admin-token-file",
              Files.writeString(work.resolve("admin-token"), ADMIN).toString()));
    }
    if (!extra.contains("--no-insecure-endpoint")) {
      cmd.add("--allow-insecure-endpoint"); // S3Mock speaks plain http on loopback
    }
    cmd.addAll(extra.stream().filter(a -> !a.equals("--no-insecure-endpoint")).toList());
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.redirectOutput(log.toFile());
    Map<String, String> env = pb.environment();
    env.keySet().removeIf(k -> k.startsWith("AWS_"));
    env.put("AWS_ACCESS_KEY_ID", S3MockServer.ACCESS_KEY);
    env.put("AWS_SECRET_ACCESS_KEY", S3MockServer.SECRET_KEY);
    env.put("AWS_EC2_METADATA_DISABLED", "true");
    env.remove("TENSORCAST_MEMORY_BUDGET");
    process = pb.start();
  }

  private HttpResponse<String> get(int port, String path, String token) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(10));
    if (token != null) {
      b.header("Authorization", "Bearer " + token);
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
  }

  /** The status code, or -1 while nothing listens (the process is still starting). */
  private int statusCode(int port, String path, String token) throws Exception {
    assertThat(process.isAlive()).as("dataplane serve is running").isTrue();
    try {
      return get(port, path, token).statusCode();
    } catch (IOException notListening) {
      return -1;
    }
  }

  /** The value of the one sample of {@code metric} with the artifact. */
  private static double sample(String exposition, String metric) {
    return PrometheusText.sample(exposition, metric, "artifact=\"" + ID + "\"");
  }

  /** The value of the one sample of {@code metric} whose labels contain {@code label}. */
  private static double plainSample(String exposition, String metric, String label) {
    return PrometheusText.sample(exposition, metric, label);
  }

  private static int freePort() throws IOException {
    return TestPorts.freePort();
  }

  /** Lowercase hex MD5 of a file: a single-part object's ETag, what verifies it. */
  static String md5(Path p) {
    try {
      return HexFormat.of()
          .formatHex(MessageDigest.getInstance("MD5").digest(Files.readAllBytes(p)));
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
