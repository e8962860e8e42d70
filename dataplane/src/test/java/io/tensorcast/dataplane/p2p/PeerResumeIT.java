package io.tensorcast.dataplane.p2p;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.cli.ServeArguments;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
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
  private static Path secrets;
  private static Path secretFile;
  private static Path readTokenFile;
  private static Path adminTokenFile;

  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final ObjectMapper json = new ObjectMapper();
  private final List<DataPlaneServer> servers = new ArrayList<>();
  private final List<Process> processes = new ArrayList<>();
  private final List<Path> logs = new ArrayList<>();
  private final List<AutoCloseable> closeables = new ArrayList<>();
  private final List<Path> dirs = new ArrayList<>();
  private FaultInjectingProxy proxy;

  @BeforeAll
  static void seed() throws Exception {
    secrets = Files.createTempDirectory("tensorcast-resume-it-");
    secretFile = write("peer-secret", Base64.getEncoder().encodeToString(SECRET));
    readTokenFile = write("read-token", PeerToPeerLoadIT.READ_TOKEN);
    adminTokenFile = write("admin-token", PeerToPeerLoadIT.ADMIN_TOKEN);
    Path corpus = Corpus.dir();
    // 4.3 MB with small safetensors headers, 70 pieces of 64 KiB.
    files.put(
        "a/mnist.safetensors",
        corpus.resolve("safetensors/burn__examples_import-model-weights_mnist.safetensors"));
    files.put(
        "b/peft.safetensors", corpus.resolve("safetensors/peft-gpt2__adapter_model.safetensors"));
    files.put(
        "c/mlx.safetensors",
        corpus.resolve("safetensors/mlx-examples__0000100_adapters.safetensors"));
    files.put(
        "d/tinygrad.safetensors", corpus.resolve("safetensors/mnist-tinygrad__model.safetensors"));
    files.put("config.json", corpus.resolve("index/falcon-180b-chat/config.json"));
    s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    for (Map.Entry<String, Path> e : files.entrySet()) {
      s3.putFile(BUCKET, PREFIX + e.getKey(), e.getValue());
      total += Files.size(e.getValue());
    }
  }

  private static Path write(String name, String content) throws IOException {
    Path f = Files.writeString(secrets.resolve(name), content);
    f.toFile().deleteOnExit();
    return f;
  }

  @BeforeEach
  void setUp() throws Exception {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    proxy = new FaultInjectingProxy(s3.endpoint()).throttleTotal(2_000_000);
  }

  @AfterEach
  void tearDown() throws Exception {
    servers.parallelStream().forEach(DataPlaneServer::close);
    for (Process p : processes) {
      if (p.isAlive()) {
        p.destroy();
        if (!p.waitFor(20, TimeUnit.SECONDS)) {
          p.destroyForcibly();
        }
      }
    }
    for (AutoCloseable c : closeables) {
      c.close();
    }
    for (Path log : logs) {
      System.out.println("---- " + log.getFileName() + " ----\n" + Files.readString(log));
    }
    proxy.close();
    for (Path d : dirs) {
      TestFiles.deleteTree(d);
    }
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
    Path m2Root = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-resume-it-");
    dirs.add(m2Root);
    DataPlaneServer m2 =
        DataPlaneServer.start(
            ServeArguments.parse(
                withRetry(args(m2Root, "m2", addresses.get("m2"), peers, own.endpoint())), env()));
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

    awaitReady(servers);
    for (DataPlaneServer s : servers) {
      assertByteIdentical(s.status());
    }
    DataPlaneStatus st = m2.status();
    long afterResume = st.bytesFromPeers() + (own.getBodyBytes() - sourceBefore);
    double peerBytes =
        sample(
            get(m2.address().getPort(), "/metrics").body(),
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
    Path m2Root = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-resume-it-");
    dirs.add(m2Root);
    List<String> m2Args = args(m2Root, "m2", addresses.get("m2"), peers, own.endpoint());
    int first = freePort(InetAddress.getLoopbackAddress());
    Process p = startProcess("m2-first", m2Args, first);
    DataPlaneStatus before =
        await("m2 holds a third of the artifact")
            .atMost(READY)
            .pollInterval(Duration.ofMillis(10))
            .ignoreExceptions()
            .until(
                () -> status(first),
                s -> s.phase() == Phase.Loading && s.bytesLoaded() >= total / 3);
    p.destroyForcibly(); // SIGKILL: no shutdown hook, the store keeps what it holds
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as("exit status after SIGKILL").isEqualTo(137);
    long held = storedBytes(m2Root);

    int second = freePort(InetAddress.getLoopbackAddress());
    startProcess("m2-second", m2Args, second);
    DataPlaneStatus ready =
        await("m2 Ready after the restart")
            .atMost(READY)
            .pollInterval(Duration.ofMillis(50))
            .ignoreExceptions()
            .until(() -> status(second), s -> s.phase() == Phase.Ready);
    awaitReady(servers);
    for (DataPlaneServer s : servers) {
      assertByteIdentical(s.status());
    }
    assertByteIdentical(ready);
    long received = ready.bytesFromPeers() + ready.bytesFromSourceOnWire();
    System.out.printf(
        "artifact %d; m2 had loaded %d when killed, %d recorded; the new process received %d"
            + " (%d from peers, %d from the source; limit %d)%n",
        total,
        before.bytesLoaded(),
        held,
        received,
        ready.bytesFromPeers(),
        ready.bytesFromSourceOnWire(),
        (long) (1.05 * (total - held)));
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

  private void awaitReady(List<DataPlaneServer> members) {
    await("every member Ready")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> {
              for (DataPlaneServer s : members) {
                DataPlaneStatus st = s.status();
                assertThat(st.phase()).as("%s", st).isNotEqualTo(Phase.Failed);
                if (st.phase() != Phase.Ready) {
                  return false;
                }
              }
              return true;
            });
  }

  private static void assertByteIdentical(DataPlaneStatus st) throws IOException {
    assertThat(st.phase()).isEqualTo(Phase.Ready);
    Path dir = Path.of(st.storeDirectory());
    for (Map.Entry<String, Path> e : files.entrySet()) {
      assertThat(Files.mismatch(dir.resolve(e.getKey()), e.getValue()))
          .as("first differing byte of %s in %s", e.getKey(), dir)
          .isEqualTo(-1L);
    }
  }

  private DataPlaneServer startInProcess(
      String id, InetSocketAddress peerListen, String peers, URI endpoint) throws Exception {
    Path root = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-resume-it-");
    dirs.add(root);
    List<String> args = args(root, id, peerListen, peers, endpoint);
    args.addAll(List.of("--listen", "127.0.0.1:0"));
    return DataPlaneServer.start(ServeArguments.parse(args, env()));
  }

  /** Source reads give up after two attempts; the load is retried after 1-2 s. */
  private static List<String> withRetry(List<String> args) {
    List<String> out = new ArrayList<>(args);
    out.addAll(
        List.of(
            "--max-attempts",
            "2",
            "--load-retry-backoff",
            "1s",
            "--load-retry-max-backoff",
            "2s",
            "--listen",
            "127.0.0.1:0"));
    return out;
  }

  private static Map<String, String> env() {
    return Map.of(
        "AWS_ACCESS_KEY_ID", S3MockServer.ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY", S3MockServer.SECRET_KEY);
  }

  /**
   * A member's arguments. The peer timeout (15 s) outlasts m2's outage, so the others wait for m2
   * to announce its pieces again rather than read its share from the source.
   */
  private static List<String> args(
      Path root, String id, InetSocketAddress peerListen, String peers, URI endpoint) {
    return new ArrayList<>(
        List.of(
            "serve",
            "--uri",
            "s3://" + BUCKET + "/" + PREFIX,
            "--endpoint",
            endpoint.toString(),
            "--allow-insecure-endpoint",
            "--path-style",
            "--region",
            S3MockServer.REGION,
            "--store-root",
            root.toString(),
            "--budget",
            "64Mi",
            "--artifact-id",
            ID,
            "--concurrency",
            "2",
            "--peer-id",
            id,
            "--peer-listen",
            hostPort(peerListen),
            "--piece-size",
            "64Ki",
            "--peer-timeout",
            "15s",
            "--peer-secret-file",
            secretFile.toString(),
            "--read-token-file",
            readTokenFile.toString(),
            "--admin-token-file",
            adminTokenFile.toString(),
            "--peers",
            peers));
  }

  private Process startProcess(String name, List<String> args, int control) throws IOException {
    Path log = Files.createTempFile("tensorcast-resume-" + name + "-", ".log");
    logs.add(log);
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(List.of("-Xmx128m", "-XX:TieredStopAtLevel=1", "-jar", jar().toString()));
    cmd.addAll(args);
    cmd.addAll(List.of("--listen", "127.0.0.1:" + control));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.redirectOutput(log.toFile());
    Map<String, String> env = pb.environment();
    env.keySet().removeIf(k -> k.startsWith("AWS_"));
    env.putAll(env());
    env.put("AWS_EC2_METADATA_DISABLED", "true");
    env.remove("TENSORCAST_MEMORY_BUDGET");
    Process p = pb.start();
    processes.add(p);
    return p;
  }

  private static Path jar() {
    String property = System.getProperty("tensorcast.dataplane.jar");
    Path p = property != null ? Path.of(property) : Path.of("target", "tensorcast-dataplane.jar");
    assertThat(p).as("the dataplane jar (built by mvn package before the ITs)").isRegularFile();
    return p.toAbsolutePath();
  }

  private HttpResponse<String> get(int port, String path) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .header("Authorization", "Bearer " + PeerToPeerLoadIT.READ_TOKEN)
            .timeout(Duration.ofSeconds(10))
            .build(),
        HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
  }

  private DataPlaneStatus status(int port) throws Exception {
    return json.readValue(get(port, "/status").body(), DataPlaneStatus.class);
  }

  private static double sample(String exposition, String metric) {
    List<String> lines = exposition.lines().filter(l -> l.startsWith(metric + "{")).toList();
    assertThat(lines).as("samples of %s", metric).hasSize(1);
    String line = lines.get(0);
    return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
  }

  private static Map<String, InetSocketAddress> addresses(List<String> ids, int base)
      throws IOException {
    Map<String, InetSocketAddress> out = new LinkedHashMap<>();
    for (int i = 0; i < ids.size(); i++) {
      InetAddress a = InetAddress.getByName("127.0.0." + (base + i));
      out.put(ids.get(i), new InetSocketAddress(a, freePort(a)));
    }
    return out;
  }

  private static String peersSpec(Map<String, InetSocketAddress> addresses) {
    return addresses.entrySet().stream()
        .map(e -> e.getKey() + "=" + hostPort(e.getValue()))
        .collect(Collectors.joining(","));
  }

  private static String hostPort(InetSocketAddress a) {
    return a.getAddress().getHostAddress() + ":" + a.getPort();
  }

  private static int freePort(InetAddress a) throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, a)) {
      return s.getLocalPort();
    }
  }
}
