package io.tensorcast.dataplane.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.format.torch.HostileCheckpoints;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.pod.LoadRetry;
import io.tensorcast.dataplane.pod.ServeSettings;
import io.tensorcast.dataplane.store.LockPolicy;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import picocli.CommandLine;

/**
 * Hostile and broken inputs through the real entry points: {@code dataplane inspect} of small files
 * that a careless reader would expand, run as the shipped jar in a JVM with a 256 MiB heap (it must
 * exit with the named refusal, not run out of memory); broken index files failing {@code inspect},
 * {@code load} and {@code serve} with {@code InvalidIndex} unless the index is left out; {@code
 * inspect} of one file; and tensors with awkward names, each fetched over HTTP by the name {@code
 * GET /v1/tensors} lists. All files are written by the test; stores live under {@code /dev/shm}.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class HostileInputIT {
  private Path dir;
  private Path shm;

  @BeforeEach
  void setUp() throws IOException {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    dir = Files.createTempDirectory("tensorcast-hostile-it-");
    shm = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-hostile-it-");
  }

  @AfterEach
  void tearDown() throws IOException {
    for (Path p : List.of(dir, shm)) {
      try (Stream<Path> s = Files.walk(p)) {
        for (Path f : s.sorted((a, b) -> b.getNameCount() - a.getNameCount()).toList()) {
          Files.deleteIfExists(f);
        }
      }
    }
  }

  // --------------------------------------------------------------- expansion in a small heap

  static Stream<Arguments> expansions() {
    return Stream.of(
        Arguments.of(
            "memo-lists.pt",
            (Generator) () -> HostileCheckpoints.doublingLists(40),
            "InvalidTorchCheckpoint",
            "is reached by more than 16 paths through the pickle memo (--max-reuse)"),
        Arguments.of(
            "memo-dicts.pt",
            (Generator) () -> HostileCheckpoints.doublingDicts(60),
            "InvalidTorchCheckpoint",
            "is reached by more than 16 paths through the pickle memo (--max-reuse)"),
        Arguments.of(
            "cyclic-pid.pt",
            (Generator) HostileCheckpoints::cyclicPersistentId,
            "InvalidTorchCheckpoint",
            "persistent id ('storage', [(...)], '0', 'cpu', 4, None) is not"),
        Arguments.of(
            "zip-bomb.pt",
            (Generator) () -> HostileCheckpoints.zipBomb(512L << 20, 2),
            "InvalidTorchCheckpoint",
            "bomb/data.pkl inflates to more than the 2 bytes its central directory record declares"),
        Arguments.of(
            "zip-ratio.pt",
            (Generator) () -> HostileCheckpoints.zipBomb(512L << 20, -1),
            "InvalidTorchCheckpoint",
            "bomb/data.pkl declares 536870912 bytes inflated from"),
        Arguments.of(
            "dims.safetensors",
            (Generator) () -> shapeOfOnes(40_000_000),
            "InvalidSafetensors",
            "shape has more than 64 dimensions (--max-rank); refused at shape[64]"));
  }

  @FunctionalInterface
  interface Generator {
    byte[] bytes() throws Exception;
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("expansions")
  void aSmallFileThatWouldExpandIsRefusedByNameInA256MiBHeap(
      String name, Generator file, String reason, String text) throws Exception {
    Path folder = Files.createDirectories(dir.resolve("artifact"));
    Files.write(folder.resolve(name), file.bytes());

    ProcessResult r = runJar(List.of("-Xmx256m"), "inspect", folder.toString());

    assertThat(r.stderr()).doesNotContain("OutOfMemoryError").doesNotContain("StackOverflowError");
    assertThat(r.exitCode()).as(r.stderr()).isEqualTo(1);
    assertThat(r.stderr())
        .contains("inspect failed: " + reason + ": " + name + ": ")
        .contains(text)
        .contains("[rule ");
  }

  /** {@code {"a": {"dtype": "F32", "shape": [1, 1, ...], "data_offsets": [0, 4]}}} + 4 bytes. */
  static byte[] shapeOfOnes(int n) {
    StringBuilder sb = new StringBuilder(2 * n + 64);
    sb.append("{\"a\":{\"dtype\":\"F32\",\"shape\":[1");
    sb.append(",1".repeat(n - 1));
    sb.append("],\"data_offsets\":[0,4]}}");
    return safetensorsFile(sb.toString().getBytes(StandardCharsets.US_ASCII), new byte[4]);
  }

  // --------------------------------------------------------------------------- index files

  /** Two shards of U8 tensors and an index describing them: a..b in m-1, c in m-2. */
  private void shardedModel(String index) throws IOException {
    Map<String, byte[]> one = new LinkedHashMap<>();
    one.put("a", new byte[] {1, 2, 3});
    one.put("b", new byte[] {4});
    Files.write(dir.resolve("m-1.safetensors"), safetensors(one));
    Files.write(dir.resolve("m-2.safetensors"), safetensors(Map.of("c", new byte[] {5, 6})));
    Files.writeString(dir.resolve("model.safetensors.index.json"), index);
    Files.writeString(dir.resolve("config.json"), "{}");
  }

  private static final String GOOD_INDEX =
      "{\"metadata\": {\"total_size\": 6},\n"
          + " \"weight_map\": {\"a\": \"m-1.safetensors\", \"b\": \"m-1.safetensors\",\n"
          + "                \"c\": \"m-2.safetensors\"}}\n";

  private static final String CONFLICTED_INDEX =
      "{\n"
          + "  \"metadata\": {\"total_size\": 6},\n"
          + "<<<<<<< HEAD\n"
          + "  \"weight_map\": {\"a\": \"m-1.safetensors\", \"b\": \"m-1.safetensors\","
          + " \"c\": \"m-2.safetensors\"}\n"
          + "=======\n"
          + "  \"weight_map\": {\"a\": \"m-1.safetensors\", \"c\": \"m-2.safetensors\"}\n"
          + ">>>>>>> upstream/main\n"
          + "}\n";

  @Test
  void aGoodIndexInspectsAndLoads() throws Exception {
    shardedModel(GOOD_INDEX);

    Run inspect = cli("inspect", dir.toString());
    Run load = cli(loadArgs());

    assertThat(inspect.code()).as(inspect.err()).isZero();
    assertThat(inspect.out()).contains("4 files, 3 tensors");
    assertThat(load.code()).as(load.err()).isZero();
  }

  @Test
  void anIndexWithMergeConflictMarkersFailsInspectAndLoadUnlessLeftOut() throws Exception {
    shardedModel(CONFLICTED_INDEX);
    String expected =
        "InvalidIndex: model.safetensors.index.json: is not JSON: line 3, column 1 holds the git"
            + " merge-conflict marker \"<<<<<<< HEAD\"; the file was committed in the middle of a"
            + " merge, resolve the conflict [rule merge-conflict]; to load the files without this"
            + " index, leave it out with spec.source.exclude (CLI --exclude)"
            + " '/model.safetensors.index.json'";

    Run inspect = cli("inspect", dir.toString());
    Run load = cli(loadArgs());
    Run without = cli(loadArgs("--exclude", "/model.safetensors.index.json"));

    assertThat(inspect.code()).isEqualTo(1);
    assertThat(inspect.err()).contains("inspect failed: " + expected);
    assertThat(load.code()).isEqualTo(1);
    assertThat(load.err()).contains("load failed: " + expected);
    assertThat(shm.resolve("store").resolve("m")).doesNotExist();
    assertThat(without.code()).as(without.err()).isZero();
    assertThat(without.out()).contains("files      3 (3 verified), 3 tensors");
  }

  @Test
  void anIndexNamingAShardTheSourceLacksFailsTheLoad() throws Exception {
    shardedModel(GOOD_INDEX.replace("\"c\": \"m-2.safetensors\"", "\"c\": \"m-3.safetensors\""));

    Run load = cli(loadArgs());

    assertThat(load.code()).isEqualTo(1);
    assertThat(load.err())
        .contains(
            "load failed: InvalidIndex: model.safetensors.index.json: names shard"
                + " \"m-3.safetensors\", which the source does not hold [rule missing-shard]");
  }

  @Test
  void anIndexNamingAShardTheFiltersLeaveOutSaysSo() throws Exception {
    shardedModel(GOOD_INDEX);

    Run load = cli(loadArgs("--exclude", "m-2.safetensors"));

    assertThat(load.code()).isEqualTo(1);
    assertThat(load.err())
        .contains(
            "names shard \"m-2.safetensors\", which the include/exclude filters leave out"
                + " (include=[] exclude=[m-2.safetensors]); include the shard, or exclude the"
                + " index too [rule excluded-shard]");
  }

  @Test
  void anIndexMappingATensorToTheWrongShardFailsTheLoad() throws Exception {
    shardedModel(GOOD_INDEX.replace("\"c\": \"m-2.safetensors\"", "\"c\": \"m-1.safetensors\""));

    Run load = cli(loadArgs());

    assertThat(load.code()).isEqualTo(1);
    assertThat(load.err())
        .contains(
            "maps tensor \"c\" to \"m-1.safetensors\", which does not declare it; it is in"
                + " \"m-2.safetensors\" [rule tensor-not-in-shard]");
  }

  @Test
  void serveWithABrokenIndexFailsAndNeverGoesReady() throws Exception {
    shardedModel(CONFLICTED_INDEX);

    try (DataPlaneServer s = serve("broken-index", List.of())) {
      await("Failed")
          .atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(20))
          .until(() -> s.status().phase() == Phase.Failed || s.status().phase() == Phase.Ready);
      DataPlaneStatus status = s.status();

      assertThat(status.phase()).isEqualTo(Phase.Failed);
      assertThat(status.reason()).isEqualTo("InvalidIndex");
      assertThat(status.message())
          .contains("model.safetensors.index.json: is not JSON: line 3, column 1");
      HttpResponse<String> ready =
          HttpClient.newHttpClient()
              .send(
                  HttpRequest.newBuilder(
                          URI.create("http://127.0.0.1:" + s.address().getPort() + "/readyz"))
                      .build(),
                  HttpResponse.BodyHandlers.ofString());
      assertThat(ready.statusCode()).isNotEqualTo(200);
    }
  }

  // --------------------------------------------------------------------------- one file

  @Test
  void inspectTakesOneSafetensorsFile() throws Exception {
    shardedModel(GOOD_INDEX);

    Run r = cli("inspect", dir.resolve("m-1.safetensors").toString(), "--tensors");

    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.out()).contains("m-1.safetensors").contains("1 files, 2 tensors");
    assertThat(r.out()).doesNotContain("m-2.safetensors").doesNotContain("config.json");
  }

  @Test
  void inspectTakesOneTorchCheckpointWhoseNameHasGlobCharacters() throws Exception {
    Path pt = Files.write(dir.resolve("ckpt [v1]*.pt"), HostileCheckpoints.stateDict("w", 4));
    Files.write(dir.resolve("ckpt [v1]x.pt"), HostileCheckpoints.stateDict("other", 4));

    Run r = cli("inspect", pt.toUri().toString(), "--tensors");

    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.out()).contains("ckpt [v1]*.pt").contains("1 files, 1 tensors");
    assertThat(r.out()).doesNotContain("other");
  }

  // ------------------------------------------------------------------------- awkward names

  @Test
  void everyListedTensorIsFetchedByItsName() throws Exception {
    Map<String, byte[]> tensors = new LinkedHashMap<>();
    String[] names = {
      "/leading",
      "trailing/",
      "a//b",
      "..",
      ".",
      "?q=1&r",
      "#frag",
      "100%",
      "sp ace",
      "plus+",
      "ünï/cödé",
      "tab\there",
      "nul\u0000x",
      "%2F",
      "emoji \uD83D\uDE00"
    };
    for (int i = 0; i < names.length; i++) {
      tensors.put(names[i], new byte[] {(byte) i, (byte) (i + 1)});
    }
    Files.write(dir.resolve("odd.safetensors"), safetensors(tensors));

    try (DataPlaneServer s = serve("odd-names", List.of())) {
      await("Ready")
          .atMost(Duration.ofSeconds(60))
          .until(() -> s.status().phase() == Phase.Ready || s.status().phase() == Phase.Failed);
      assertThat(s.status().phase()).as(s.status().message()).isEqualTo(Phase.Ready);
      HttpClient http = HttpClient.newHttpClient();
      String base = "http://127.0.0.1:" + s.address().getPort();
      var list =
          new com.fasterxml.jackson.databind.ObjectMapper()
              .readTree(
                  http.send(
                          HttpRequest.newBuilder(URI.create(base + "/v1/tensors"))
                              .header("Authorization", "Bearer " + READ_TOKEN)
                              .build(),
                          HttpResponse.BodyHandlers.ofString())
                      .body());
      List<String> listed = new ArrayList<>();
      list.get("tensors").forEach(t -> listed.add(t.get("name").asText()));
      assertThat(listed).containsExactlyInAnyOrder(names);

      for (String name : listed) {
        HttpResponse<byte[]> r =
            http.send(
                HttpRequest.newBuilder(URI.create(base + "/v1/tensors/" + percentEncode(name)))
                    .header("Authorization", "Bearer " + READ_TOKEN)
                    .build(),
                HttpResponse.BodyHandlers.ofByteArray());
        assertThat(r.statusCode()).as("GET %s", name).isEqualTo(200);
        assertThat(r.body()).as(name).isEqualTo(tensors.get(name));
      }
    }
  }

  /** Every UTF-8 byte outside {@code A-Z a-z 0-9 - _ ~} as {@code %XX} (dots too). */
  static String percentEncode(String name) {
    StringBuilder sb = new StringBuilder();
    for (byte b : name.getBytes(StandardCharsets.UTF_8)) {
      int c = b & 0xff;
      if ((c >= 'A' && c <= 'Z')
          || (c >= 'a' && c <= 'z')
          || (c >= '0' && c <= '9')
          || c == '-'
          || c == '_'
          || c == '~') {
        sb.append((char) c);
      } else {
        sb.append(String.format("%%%02X", c));
      }
    }
    return sb.toString();
  }

  // ------------------------------------------------------------------------------ helpers

  /** A safetensors file of U8 tensors, in the map's order. */
  static byte[] safetensors(Map<String, byte[]> tensors) {
    StringBuilder json = new StringBuilder("{");
    ByteArrayOutputStream data = new ByteArrayOutputStream();
    for (Map.Entry<String, byte[]> e : tensors.entrySet()) {
      int begin = data.size();
      data.writeBytes(e.getValue());
      json.append(json.length() > 1 ? "," : "")
          .append(jsonString(e.getKey()))
          .append(":{\"dtype\":\"U8\",\"shape\":[")
          .append(e.getValue().length)
          .append("],\"data_offsets\":[")
          .append(begin)
          .append(',')
          .append(data.size())
          .append("]}");
    }
    return safetensorsFile(
        json.append('}').toString().getBytes(StandardCharsets.UTF_8), data.toByteArray());
  }

  static byte[] safetensorsFile(byte[] header, byte[] data) {
    ByteBuffer b = ByteBuffer.allocate(8 + header.length + data.length);
    b.order(ByteOrder.LITTLE_ENDIAN).putLong(header.length).put(header).put(data);
    return b.array();
  }

  private static String jsonString(String s) {
    StringBuilder sb = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        sb.append('\\').append(c);
      } else if (c < 0x20) {
        sb.append(String.format("\\u%04x", (int) c));
      } else {
        sb.append(c);
      }
    }
    return sb.append('"').toString();
  }

  private record Run(int code, String out, String err) {}

  private static Run cli(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    CommandLine cli = DataplaneCli.commandLine();
    cli.setOut(new PrintWriter(out, true));
    cli.setErr(new PrintWriter(err, true));
    int code = cli.execute(args);
    return new Run(code, out.toString(), err.toString());
  }

  private String[] loadArgs(String... more) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "load",
                dir.toString(),
                "--store-root",
                shm.resolve("store").toString(),
                "--budget",
                "64Mi",
                "--artifact-id",
                "m",
                "--unload"));
    args.addAll(List.of(more));
    return args.toArray(String[]::new);
  }

  private static final String READ_TOKEN = "hostile-input-read-token-0123";

  private DataPlaneServer serve(String id, List<String> exclude) throws Exception {
    Path root = Files.createDirectories(shm.resolve("store-" + id));
    return DataPlaneServer.start(
        new ServeSettings(
            id,
            new InetSocketAddress("127.0.0.1", 0),
            dir.toUri().toString(),
            List.of(),
            exclude,
            null,
            null,
            false,
            Optional.empty(),
            ReadOptions.DEFAULTS,
            root,
            "64Mi",
            0,
            LockPolicy.BEST_EFFORT,
            new io.tensorcast.dataplane.http.ControlAuth(
                io.tensorcast.dataplane.http.ControlToken.of(READ_TOKEN),
                io.tensorcast.dataplane.http.ControlToken.random()),
            null,
            LoadRetry.DEFAULTS,
            false,
            null,
            io.tensorcast.dataplane.format.FormatLimits.DEFAULT));
  }

  record ProcessResult(int exitCode, String stderr) {}

  /** Runs the shipped jar with {@code jvmArgs} and {@code args}; at most 90 s. */
  static ProcessResult runJar(List<String> jvmArgs, String... args) throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(jvmArgs);
    cmd.addAll(List.of("-XX:TieredStopAtLevel=1", "-jar", ServeIT.dataplaneJar().toString()));
    cmd.addAll(List.of(args));
    Path stderr = Files.createTempFile("tensorcast-hostile-it-", ".stderr");
    try {
      Process p =
          new ProcessBuilder(cmd)
              .redirectOutput(ProcessBuilder.Redirect.DISCARD)
              .redirectError(stderr.toFile())
              .start();
      try {
        if (!p.waitFor(90, TimeUnit.SECONDS)) {
          throw new AssertionError(
              "dataplane " + String.join(" ", args) + " still runs after 90 s");
        }
      } finally {
        p.destroyForcibly();
      }
      return new ProcessResult(p.exitValue(), Files.readString(stderr));
    } finally {
      Files.deleteIfExists(stderr);
    }
  }
}
