package io.tensorcast.dataplane.write;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.tensor.NaiveSlicer;
import io.tensorcast.testing.OssFront;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import io.tensorcast.testing.TestPorts;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The write half end to end, every party a real process: {@code dataplane serve-writes} JVMs (the
 * shaded jar) as the nodes' data planes on their own loopback addresses, Python processes with the
 * shipped client ({@code clients/python/tensorcast_write.py}) as the trainer ranks and the prefill
 * server, S3Mock (and an OSS-shaped front to it) as the object store, and {@code dataplane serve}
 * (what a ModelArtifact's data-plane pod runs) loading the saved artifacts back. Bytes are compared
 * at every step with tensors generated here and sliced element by element.
 */
@Timeout(600)
class WriteRoundTripIT {
  private static final String WRITE_TOKEN = "write-token-0123456789";
  private static final String CONTROL_TOKEN = "control-token-0123456789";
  private static final String READ_TOKEN = "read-token-0123456789";
  private static final Path PYTHON = Path.of("/usr/bin/python3");

  private final HttpClient http = HttpClient.newHttpClient();
  private final List<Process> processes = new ArrayList<>();
  private final Map<String, Path> logs = new LinkedHashMap<>();
  private final List<Path> roots = new ArrayList<>();
  private S3MockServer s3;
  private Path jar;
  private Path work;
  private boolean failed = true;

  /** One data-plane process. */
  private record Node(String id, String ip, int control, int peer, Path root, Process process) {
    String controlAddress() {
      return ip + ":" + control;
    }

    Path socket() {
      return root.resolve(".writes/write.sock");
    }
  }

  @BeforeEach
  void setUp() throws Exception {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the stores");
    assumeTrue(Files.isExecutable(PYTHON), "/usr/bin/python3 runs the writer processes");
    jar = Path.of("target", "tensorcast-dataplane.jar").toAbsolutePath();
    assertThat(jar).as("the dataplane jar, built by `package` before the ITs").isRegularFile();
    s3 = S3MockServer.shared();
    work = Files.createTempDirectory("tensorcast-roundtrip-");
    Files.writeString(work.resolve("write.token"), WRITE_TOKEN);
    Files.writeString(work.resolve("control.token"), CONTROL_TOKEN);
    Files.writeString(work.resolve("read.token"), READ_TOKEN);
    Files.writeString(
        work.resolve("peer.secret"),
        Base64.getEncoder()
            .encodeToString("the round trip's peer secret, 32+ bytes".getBytes(UTF_8)));
  }

  @AfterEach
  void tearDown() throws Exception {
    for (Process p : processes) {
      p.destroy();
    }
    for (Process p : processes) {
      if (!p.waitFor(20, TimeUnit.SECONDS)) {
        p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
    }
    if (failed) {
      for (Map.Entry<String, Path> l : logs.entrySet()) {
        if (Files.exists(l.getValue())) {
          List<String> lines = Files.readAllLines(l.getValue());
          System.out.println(
              "---- "
                  + l.getKey()
                  + " ----\n"
                  + String.join("\n", lines.subList(Math.max(0, lines.size() - 80), lines.size())));
        }
      }
    }
    for (Path r : roots) {
      TestFiles.deleteTreeQuietly(r);
    }
    TestFiles.deleteTreeQuietly(work);
  }

  private static int freePort() throws IOException {
    // below the ephemeral range: a node's HTTP client once took a writer's peer port meanwhile
    return TestPorts.freePort();
  }

  private Process spawn(String name, List<String> cmd, Map<String, String> env) throws IOException {
    Path log = work.resolve(name + ".log");
    ProcessBuilder pb =
        new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
    pb.environment().remove("AWS_ACCESS_KEY_ID");
    pb.environment().remove("AWS_SECRET_ACCESS_KEY");
    pb.environment().putAll(env);
    Process p = pb.start();
    processes.add(p);
    logs.put(name, log);
    return p;
  }

  private List<String> java(List<String> jvmFlags) {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(List.of("-Xmx192m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"));
    cmd.addAll(jvmFlags);
    cmd.addAll(List.of("-jar", jar.toString()));
    return cmd;
  }

  private Node node(
      String id,
      String ip,
      String peers,
      String writers,
      List<String> args,
      Map<String, String> env,
      List<String> jvmFlags,
      int control,
      int peer)
      throws IOException {
    Path root = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-rt-" + id + "-");
    roots.add(root);
    List<String> cmd = java(jvmFlags);
    cmd.addAll(
        List.of(
            "serve-writes",
            "--artifact-id",
            "rt-" + id,
            "--store-root",
            root.toString(),
            "--budget",
            "256Mi",
            "--listen",
            ip + ":" + control,
            "--admin-token-file",
            work.resolve("control.token").toString(),
            "--read-token-file",
            work.resolve("read.token").toString(),
            "--peer-secret-file",
            work.resolve("peer.secret").toString(),
            "--peer-id",
            id,
            "--peer-listen",
            ip + ":" + peer,
            "--peers",
            peers,
            "--writers",
            writers,
            "--piece-size",
            "64Ki",
            "--peer-timeout",
            "5s",
            "--follow-interval",
            "200ms"));
    cmd.addAll(args);
    return new Node(id, ip, control, peer, root, spawn(id, cmd, env));
  }

  private HttpResponse<byte[]> get(String address, String path) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create("http://" + address + path))
            .header("Authorization", "Bearer " + CONTROL_TOKEN)
            .timeout(Duration.ofSeconds(20))
            .build(),
        HttpResponse.BodyHandlers.ofByteArray());
  }

  private JsonNode json(String address, String path) throws Exception {
    return WriteJson.JSON.readTree(get(address, path).body());
  }

  private JsonNode post(String address, String path, ObjectNode body) throws Exception {
    HttpResponse<byte[]> r =
        http.send(
            HttpRequest.newBuilder(URI.create("http://" + address + path))
                .header("Authorization", "Bearer " + CONTROL_TOKEN)
                .POST(
                    HttpRequest.BodyPublishers.ofByteArray(WriteJson.JSON.writeValueAsBytes(body)))
                .build(),
            HttpResponse.BodyHandlers.ofByteArray());
    assertThat(r.statusCode()).as(new String(r.body())).isEqualTo(202);
    return WriteJson.JSON.readTree(r.body());
  }

  private byte[] tensor(String address, String name, String query) throws Exception {
    HttpResponse<byte[]> r =
        get(address, "/v1/tensors/" + name + (query == null ? "" : "?" + query));
    assertThat(r.statusCode())
        .as(address + " " + name + " " + query + ": " + new String(r.body()))
        .isEqualTo(200);
    return r.body();
  }

  private void awaitUp(String address) {
    await()
        .atMost(Duration.ofSeconds(90))
        .pollInterval(Duration.ofMillis(200))
        .ignoreExceptions()
        .until(() -> get(address, "/healthz").statusCode() == 200);
  }

  private JsonNode versionEntry(String address, String version) throws Exception {
    for (JsonNode v : json(address, "/v1/versions").path("versions")) {
      if (v.path("name").asText().equals(version)) {
        return v;
      }
    }
    return null;
  }

  /** A tensor of the test model: name, dtype, full shape, split dim (null = replicated). */
  private record Spec(String name, Dtype dtype, long[] shape, Integer splitDim) {}

  private static final List<Spec> MODEL =
      List.of(
          new Spec("q", Dtype.BF16, new long[] {512, 256}, 0),
          new Spec("o", Dtype.F32, new long[] {256, 512}, 1),
          new Spec("norm", Dtype.BF16, new long[] {256}, null),
          new Spec("emb", Dtype.I8, new long[] {2048, 64}, 0),
          new Spec("big", Dtype.F32, new long[] {1024, 1024}, 0));

  /** Writes the full tensors of one step to files; returns name → bytes. */
  private Map<String, byte[]> generate(int step) throws IOException {
    Map<String, byte[]> out = new LinkedHashMap<>();
    Path dir = Files.createDirectories(work.resolve("step-" + step));
    int seed = 0;
    for (Spec s : MODEL) {
      byte[] b = NaiveSlicer.data(s.dtype(), s.shape(), 1000L * step + seed++);
      Files.write(dir.resolve(s.name() + ".bin"), b);
      out.put(s.name(), b);
    }
    return out;
  }

  /** Starts the writer process of tp rank {@code rank} of 4 for {@code step}. */
  private Process rankWriter(Node node, int step, int rank, Double pace) throws IOException {
    ObjectNode spec = WriteJson.JSON.createObjectNode();
    spec.put("socket", node.socket().toString()).put("token", WRITE_TOKEN);
    spec.put("version", "step-" + step).put("kind", "RLCheckpoint");
    spec.putObject("metadata").put("step", "" + step);
    if (pace != null) {
      spec.put("pace", pace);
    }
    var arr = spec.putArray("tensors");
    for (Spec s : MODEL) {
      ObjectNode t = arr.addObject().put("name", s.name()).put("dtype", s.dtype().name());
      var shape = t.putArray("shape");
      for (long d : s.shape()) {
        shape.add(d);
      }
      t.put("file", work.resolve("step-" + step).resolve(s.name() + ".bin").toString());
      if (s.splitDim() != null) {
        t.put("writer_partition", "tp:" + rank + "/4@" + s.splitDim());
      }
    }
    Path specFile = work.resolve("writer-" + step + "-" + rank + ".json");
    Files.write(specFile, WriteJson.JSON.writeValueAsBytes(spec));
    return spawn(
        "writer-" + step + "-" + rank + (pace != null ? "-paced" : ""),
        List.of(
            PYTHON.toString(),
            resource("write/rank_writer.py"),
            Path.of("clients", "python").toAbsolutePath().toString(),
            specFile.toString()),
        Map.of());
  }

  private static String resource(String name) {
    return Path.of("src", "test", "resources", name).toAbsolutePath().toString();
  }

  private void writeStep(Node wa, Node wb, int step) throws Exception {
    List<Process> ranks = new ArrayList<>();
    for (int r = 0; r < 4; r++) {
      ranks.add(rankWriter(r < 2 ? wa : wb, step, r, null));
    }
    for (Process p : ranks) {
      assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
      assertThat(p.exitValue()).as("a rank writer failed; see its log").isZero();
    }
    for (Node w : List.of(wa, wb)) {
      try (WriteClient c = WriteClient.unix(w.socket(), WRITE_TOKEN)) {
        JsonNode rec = c.seal("step-" + step).ok().json();
        assertThat(rec.path("ranks").size()).isEqualTo(2);
      }
    }
  }

  @Test
  void tpFourWritersOnTwoNodesReachATpTwoReaderAndAreSavedToS3AndLoadedBack() throws Exception {
    s3.createBucket("roundtrip");
    String[] ids = {"wa", "wb", "rc", "rd"};
    Map<String, int[]> ports = new LinkedHashMap<>();
    StringBuilder peers = new StringBuilder();
    for (int i = 0; i < ids.length; i++) {
      ports.put(ids[i], new int[] {freePort(), freePort()});
      peers
          .append(i == 0 ? "" : ",")
          .append(ids[i])
          .append("=127.0.0.")
          .append(41 + i)
          .append(':')
          .append(ports.get(ids[i])[1]);
    }
    String writers = "wa=127.0.0.41:" + ports.get("wa")[0] + ",wb=127.0.0.42:" + ports.get("wb")[0];
    Map<String, String> aws =
        Map.of(
            "AWS_ACCESS_KEY_ID",
            S3MockServer.ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY",
            S3MockServer.SECRET_KEY);
    List<String> writerArgs =
        List.of("--writer", "--write-token-file", work.resolve("write.token").toString());
    Node wa =
        node(
            "wa",
            "127.0.0.41",
            peers.toString(),
            writers,
            writerArgs,
            Map.of(),
            List.of(),
            ports.get("wa")[0],
            ports.get("wa")[1]);
    Node wb =
        node(
            "wb",
            "127.0.0.42",
            peers.toString(),
            writers,
            writerArgs,
            Map.of(),
            List.of(),
            ports.get("wb")[0],
            ports.get("wb")[1]);
    Node rc =
        node(
            "rc",
            "127.0.0.43",
            peers.toString(),
            writers,
            List.of("--want", "tp:0/2"),
            Map.of(),
            List.of(),
            ports.get("rc")[0],
            ports.get("rc")[1]);
    Node rd =
        node(
            "rd",
            "127.0.0.44",
            peers.toString(),
            writers,
            List.of("--want", "all"),
            aws,
            List.of(),
            ports.get("rd")[0],
            ports.get("rd")[1]);
    for (Node n : List.of(wa, wb, rc, rd)) {
      awaitUp(n.controlAddress());
    }

    // Step 1: four rank writers (two per writer node) put their shards, each writer node seals.
    Map<String, byte[]> step1 = generate(1);
    writeStep(wa, wb, 1);
    await()
        .atMost(Duration.ofSeconds(90))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () ->
                "step-1".equals(json(rc.controlAddress(), "/v1/versions").path("current").asText())
                    && "step-1"
                        .equals(
                            json(rd.controlAddress(), "/v1/versions").path("current").asText()));
    for (Spec s : MODEL) {
      assertThat(tensor(rd.controlAddress(), s.name(), "target=full"))
          .as(s.name())
          .isEqualTo(step1.get(s.name()));
      if (s.splitDim() != null) {
        int esz = s.dtype().bitSize() / 8;
        assertThat(tensor(rc.controlAddress(), s.name(), "target=shard&parallelism=tp:0/2"))
            .as("the TP=2 rank 0 shard of " + s.name() + " on the reader")
            .isEqualTo(NaiveSlicer.shard(step1.get(s.name()), s.shape(), esz, s.splitDim(), 0, 2));
        assertThat(
                get(
                        rc.controlAddress(),
                        "/v1/tensors/" + s.name() + "?target=shard&parallelism=tp:1/2")
                    .statusCode())
            .isEqualTo(409);
      } else {
        assertThat(tensor(rc.controlAddress(), s.name(), "target=full"))
            .isEqualTo(step1.get(s.name()));
      }
    }
    long full = versionEntry(rd.controlAddress(), "step-1").path("bytes").asLong();
    long half = versionEntry(rc.controlAddress(), "step-1").path("bytes").asLong();
    assertThat(half)
        .as("the TP=2 rank 0 reader keeps about half of the artifact")
        .isLessThan(full * 6 / 10);

    // The full copy is saved to S3: multipart for the big rank files, manifest last.
    ObjectNode target = WriteJson.JSON.createObjectNode();
    target.put("uri", "s3://roundtrip/policy/step-1/").put("endpoint", s3.endpoint().toString());
    target.put("pathStyle", true).put("insecureEndpoint", true).put("partSize", 5L << 20);
    post(rd.controlAddress(), "/v1/versions/step-1/save", target);
    await()
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () ->
                versionEntry(rd.controlAddress(), "step-1")
                    .path("save")
                    .path("state")
                    .asText()
                    .matches("Saved|Failed"));
    JsonNode saved = versionEntry(rd.controlAddress(), "step-1").path("save");
    assertThat(saved.path("state").asText()).as(saved.toString()).isEqualTo("Saved");
    var client = s3.client();
    Map<String, byte[]> savedFiles = new LinkedHashMap<>();
    for (JsonNode f : saved.path("result").path("files")) {
      String path = f.path("path").asText();
      byte[] object =
          client
              .getObjectAsBytes(b -> b.bucket("roundtrip").key("policy/step-1/" + path))
              .asByteArray();
      assertThat(object)
          .as(path)
          .isEqualTo(Files.readAllBytes(rd.root().resolve("step-1").resolve(path)));
      savedFiles.put(path, object);
    }
    assertThat(savedFiles.keySet())
        .containsExactly(
            "rank_00000.safetensors",
            "rank_00001.safetensors",
            "rank_00002.safetensors",
            "rank_00003.safetensors",
            "manifest.json");

    // Step 2: the rank 0 writer is killed mid-batch: nothing of it is kept, sealed or saved.
    Map<String, byte[]> step2 = generate(2);
    Process slow = rankWriter(wa, 2, 0, 0.4);
    try (WriteClient c = WriteClient.unix(wa.socket(), WRITE_TOKEN)) {
      // The writer is a JVM of its own: on a loaded machine it starts in tens of seconds.
      await()
          .atMost(Duration.ofSeconds(90))
          .pollInterval(Duration.ofMillis(50))
          .ignoreExceptions()
          .until(() -> c.get("step-2").ok().json().path("inFlight").asInt() == 1);
      slow.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      await()
          .atMost(Duration.ofSeconds(30))
          .until(() -> c.get("step-2").ok().json().path("inFlight").asInt() == 0);
      assertThat(c.get("step-2").ok().json().path("tensors").asInt()).isZero();
      WriteClient.Response seal = c.seal("step-2");
      assertThat(seal.status()).isEqualTo(409);
      assertThat(seal.reason()).isEqualTo("EmptyArtifact");
      WriteClient.Response save =
          c.json(
              "POST",
              "/v1/writes/step-2/save",
              WriteJson.JSON.createObjectNode().put("uri", "s3://roundtrip/policy/step-2/"));
      assertThat(save.status()).isEqualTo(404);
      assertThat(c.get("step-2").ok().json().path("state").asText()).isEqualTo("Open");
    }
    try (Stream<Path> segs = Files.list(wa.root().resolve(".writes/step-2"))) {
      assertThat(segs).as("the killed batch's segment is freed").isEmpty();
    }

    // Step 2 written for real: the readers switch once it is complete, serving step 1 till then.
    AtomicInteger notReady = new AtomicInteger();
    Thread probe =
        new Thread(
            () -> {
              while (!Thread.currentThread().isInterrupted()) {
                try {
                  if (get(rc.controlAddress(), "/readyz").statusCode() != 200) {
                    notReady.incrementAndGet();
                  }
                  Thread.sleep(20);
                } catch (InterruptedException e) {
                  return;
                } catch (Exception e) {
                  notReady.incrementAndGet();
                }
              }
            });
    probe.start();
    writeStep(wa, wb, 2);
    await()
        .atMost(Duration.ofSeconds(90))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () ->
                "step-2".equals(json(rc.controlAddress(), "/v1/versions").path("current").asText())
                    && "step-2"
                        .equals(
                            json(rd.controlAddress(), "/v1/versions").path("current").asText()));
    probe.interrupt();
    probe.join();
    assertThat(notReady.get()).as("the reader stayed ready while step 2 replaced step 1").isZero();
    for (Spec s : MODEL) {
      assertThat(tensor(rd.controlAddress(), s.name(), "target=full"))
          .isEqualTo(step2.get(s.name()));
      if (s.splitDim() != null) {
        assertThat(tensor(rc.controlAddress(), s.name(), "target=shard&parallelism=tp:0/2"))
            .isEqualTo(
                NaiveSlicer.shard(
                    step2.get(s.name()), s.shape(), s.dtype().bitSize() / 8, s.splitDim(), 0, 2));
      }
    }

    // A new ModelArtifact's data plane (dataplane serve) loads the saved step 1 back from S3.
    Path loadRoot = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-rt-load-");
    roots.add(loadRoot);
    String loader = "127.0.0.45:" + freePort();
    List<String> cmd = java(List.of());
    cmd.addAll(
        List.of(
            "serve",
            "--uri",
            "s3://roundtrip/policy/step-1/",
            "--endpoint",
            s3.endpoint().toString(),
            "--path-style",
            "--allow-insecure-endpoint",
            "--artifact-id",
            "policy-step-1",
            "--store-root",
            loadRoot.toString(),
            "--budget",
            "256Mi",
            "--listen",
            loader,
            "--distribution",
            "source-only",
            "--control-token-file",
            work.resolve("control.token").toString()));
    spawn("loader", cmd, aws);
    await()
        .atMost(Duration.ofSeconds(90))
        .pollInterval(Duration.ofMillis(200))
        .ignoreExceptions()
        .until(() -> get(loader, "/readyz").statusCode() == 200);
    for (Map.Entry<String, byte[]> f : savedFiles.entrySet()) {
      assertThat(Files.readAllBytes(loadRoot.resolve("policy-step-1").resolve(f.getKey())))
          .as("loaded " + f.getKey())
          .isEqualTo(f.getValue());
    }
    for (Spec s : MODEL) {
      assertThat(tensor(loader, s.name(), "target=full"))
          .as(s.name())
          .isEqualTo(step1.get(s.name()));
    }
    failed = false;
  }

  @Test
  void aKvCacheSnapshotIsSavedToOssAndLoadedBackByItsKey() throws Exception {
    String key = "3fa9c2d1e0b4a7f6" + "0123456789abcdef" + "fedcba9876543210" + "0011223344556677";
    String version = "kv-" + key.substring(0, 16);
    s3.createBucket("kvcache");
    try (OssFront oss = new OssFront("oss-rt.localhost", "oss-rt-key", s3.endpoint())) {
      Path hosts = Files.writeString(work.resolve("hosts"), oss.hostsFile("kvcache"));
      Map<String, String> ossEnv =
          Map.of("OSS_ACCESS_KEY_ID", "oss-rt-key", "OSS_ACCESS_KEY_SECRET", "oss-rt-secret");
      int control = freePort();
      int peer = freePort();
      Node kv =
          node(
              "kv",
              "127.0.0.46",
              "kv=127.0.0.46:" + peer,
              "kv=127.0.0.46:" + control,
              List.of("--writer", "--write-token-file", work.resolve("write.token").toString()),
              ossEnv,
              List.of("-Djdk.net.hosts.file=" + hosts),
              control,
              peer);
      awaitUp(kv.controlAddress());
      // The prefill server writes its KV tensors zero-copy into the page-locked store, seals and
      // saves the snapshot under its prefix hash.
      long[] shape = {2, 8, 512, 64};
      Map<String, byte[]> kvData = new LinkedHashMap<>();
      ObjectNode spec = WriteJson.JSON.createObjectNode();
      spec.put("socket", kv.socket().toString()).put("token", WRITE_TOKEN).put("version", version);
      spec.put("kind", "KVCache")
          .put("zeroCopy", kv.root().resolve(".writes").toString())
          .put("seal", true);
      spec.putObject("metadata").put("prefix_sha256", key).put("tokens", "512");
      spec.putObject("save")
          .put("uri", "oss://kvcache/llama/" + key + "/")
          .put("endpoint", oss.endpoint().toString())
          .put("region", "cn-hangzhou")
          .put("insecureEndpoint", true)
          .put("partSize", 5L << 20);
      var arr = spec.putArray("tensors");
      for (String layer : List.of("0", "1")) {
        for (String kind : List.of("k", "v")) {
          String name = "layers." + layer + "." + kind;
          byte[] b = NaiveSlicer.data(Dtype.F16, shape, kvData.size() + 77);
          kvData.put(name, b);
          Path f = Files.write(work.resolve(name + ".bin"), b);
          ObjectNode t =
              arr.addObject().put("name", name).put("dtype", "F16").put("file", f.toString());
          var s = t.putArray("shape");
          for (long d : shape) {
            s.add(d);
          }
        }
      }
      Path specFile = Files.write(work.resolve("kv.json"), WriteJson.JSON.writeValueAsBytes(spec));
      Process writer =
          spawn(
              "kv-writer",
              List.of(
                  PYTHON.toString(),
                  resource("write/rank_writer.py"),
                  Path.of("clients", "python").toAbsolutePath().toString(),
                  specFile.toString()),
              Map.of());
      assertThat(writer.waitFor(60, TimeUnit.SECONDS)).isTrue();
      assertThat(writer.exitValue()).as("the KV writer failed; see its log").isZero();
      await()
          .atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(200))
          .until(
              () -> {
                JsonNode v = versionEntry(kv.controlAddress(), version);
                return v != null && v.path("save").path("state").asText().matches("Saved|Failed");
              });
      JsonNode saved = versionEntry(kv.controlAddress(), version).path("save");
      assertThat(saved.path("state").asText()).as(saved.toString()).isEqualTo("Saved");
      assertThat(oss.hosts())
          .as("OSS is addressed virtual-hosted")
          .allMatch(h -> h.startsWith("kvcache."));

      // Loaded back by key, by the data plane a ModelArtifact with that oss:// source would run.
      Path loadRoot = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-rt-kvload-");
      roots.add(loadRoot);
      String loader = "127.0.0.47:" + freePort();
      List<String> cmd = java(List.of("-Djdk.net.hosts.file=" + hosts));
      cmd.addAll(
          List.of(
              "serve",
              "--uri",
              "oss://kvcache/llama/" + key + "/",
              "--endpoint",
              oss.endpoint().toString(),
              "--region",
              "cn-hangzhou",
              "--allow-insecure-endpoint",
              "--artifact-id",
              "kv-loaded",
              "--store-root",
              loadRoot.toString(),
              "--budget",
              "256Mi",
              "--listen",
              loader,
              "--distribution",
              "source-only",
              "--control-token-file",
              work.resolve("control.token").toString()));
      spawn("kv-loader", cmd, ossEnv);
      await()
          .atMost(Duration.ofSeconds(90))
          .pollInterval(Duration.ofMillis(200))
          .ignoreExceptions()
          .until(() -> get(loader, "/readyz").statusCode() == 200);
      assertThat(Files.readAllBytes(loadRoot.resolve("kv-loaded/model.safetensors")))
          .isEqualTo(Files.readAllBytes(kv.root().resolve(version).resolve("model.safetensors")));
      for (Map.Entry<String, byte[]> e : kvData.entrySet()) {
        assertThat(tensor(loader, e.getKey(), null)).as(e.getKey()).isEqualTo(e.getValue());
      }
    }
    failed = false;
  }
}
