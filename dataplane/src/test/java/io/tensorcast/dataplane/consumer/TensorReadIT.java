package io.tensorcast.dataplane.consumer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.http.ControlServer;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.LoadMetrics;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.pod.LoadRetry;
import io.tensorcast.dataplane.pod.ServeSettings;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Consumer reads against a real data plane: {@link DataPlaneServer}s started in this JVM, loading
 * real corpus files (several dtypes, a 1000-tensor file, files in a subdirectory) from a {@code
 * file://} source into page-locked stores under {@code /dev/shm}, read over loopback HTTP with the
 * JDK client. Every byte is compared with the corpus file read independently by {@link
 * StoredTensors}.
 */
class TensorReadIT {
  static final String TOKEN = "consumer-read-token-0123456789";
  private static final Duration READY = Duration.ofSeconds(60);
  private static final ObjectMapper JSON = new ObjectMapper();

  private static final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();

  private static Path corpus;
  private static Path shm;
  private static Path work;
  private static DataPlaneServer server;

  /** Artifact-relative path → the test's own reading of that corpus file. */
  private static final Map<String, List<StoredTensors.Tensor>> expected = new LinkedHashMap<>();

  @BeforeAll
  static void start() throws Exception {
    corpus = Corpus.dir();
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    shm = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-tensor-read-it-");
    work = Files.createTempDirectory("tensorcast-tensor-read-it-");
    Files.writeString(work.resolve("token"), TOKEN + "\n");
    // Every corpus file whose tensor names no file chosen before it uses: one artifact with unique
    // names. The tiny sharded model (a subdirectory, BF16 / F8 / BOOL / ints) and the 1000-tensor
    // file come first so they are always in.
    List<Path> candidates = new ArrayList<>();
    try (Stream<Path> s = Files.list(corpus.resolve("index/safetensorsjl-tiny-sharded"))) {
      s.filter(p -> p.toString().endsWith(".safetensors")).sorted().forEach(candidates::add);
    }
    candidates.add(corpus.resolve("safetensors/lerobot__act_1000_steps_actions.safetensors"));
    try (Stream<Path> s = Files.list(corpus.resolve("safetensors"))) {
      s.filter(p -> p.toString().endsWith(".safetensors")).sorted().forEach(candidates::add);
    }
    Set<String> names = new HashSet<>();
    for (Path p : candidates) {
      String rel = corpus.relativize(p).toString();
      if (expected.containsKey(rel)) {
        continue;
      }
      List<StoredTensors.Tensor> tensors = StoredTensors.read(p);
      if (tensors.stream().noneMatch(t -> names.contains(t.name()))) {
        tensors.forEach(t -> names.add(t.name()));
        expected.put(rel, tensors);
      }
    }
    List<String> include = new ArrayList<>(expected.keySet().stream().map(k -> "/" + k).toList());
    include.add("/index/safetensorsjl-tiny-sharded/model.safetensors.index.json"); // not tensors
    server = serve(shm, "consumer", "file://" + corpus, include, work.resolve("token"));
    awaitReady(server);
  }

  @AfterAll
  static void stop() throws IOException {
    if (server != null) {
      server.close();
    }
    TestFiles.deleteTree(shm);
    TestFiles.deleteTree(work);
  }

  // ------------------------------------------------------------------ tests

  @Test
  void theCorpusSelectionCoversManyDtypesThe1000TensorFileAndASubdirectory() {
    Set<String> dtypes = new TreeSet<>();
    expected.values().forEach(ts -> ts.forEach(t -> dtypes.add(t.dtype())));
    assertThat(dtypes).contains("BF16", "F8_E4M3", "F8_E5M2", "F16", "F32", "F64", "BOOL", "I64");
    assertThat(expected).containsKey("safetensors/lerobot__act_1000_steps_actions.safetensors");
    assertThat(expected.get("safetensors/lerobot__act_1000_steps_actions.safetensors"))
        .hasSize(1000);
    assertThat(expected.keySet()).anyMatch(k -> k.startsWith("index/"));
  }

  @Test
  void listsEveryTensorWithFileDtypeShapeOffsetAndLength() throws Exception {
    HttpResponse<String> r = getString("/v1/tensors", TOKEN);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.headers().firstValue("content-type")).contains("application/json");
    JsonNode list = JSON.readTree(r.body());
    assertThat(list.get("artifactId").asText()).isEqualTo("consumer");
    List<String> got = new ArrayList<>();
    list.get("tensors")
        .forEach(
            t -> {
              List<Long> shape = new ArrayList<>();
              t.get("shape").forEach(d -> shape.add(d.asLong()));
              got.add(
                  t.get("file").asText()
                      + " "
                      + t.get("name").asText()
                      + " "
                      + t.get("dtype").asText()
                      + shape
                      + " @"
                      + t.get("offset").asLong()
                      + "+"
                      + t.get("length").asLong());
            });
    List<String> want = new ArrayList<>();
    expected.forEach(
        (file, ts) ->
            ts.forEach(
                t ->
                    want.add(
                        file
                            + " "
                            + t.name()
                            + " "
                            + t.dtype()
                            + t.shape()
                            + " @"
                            + t.fileOffset()
                            + "+"
                            + t.length())));
    assertThat(got).containsExactlyInAnyOrderElementsOf(want);
    assertThat(list.get("tensorCount").asInt()).isEqualTo(want.size());
  }

  @Test
  void readsEveryTensorByteForByteWithItsHeaders() throws Exception {
    int read = 0;
    Set<String> etags = new HashSet<>();
    for (Map.Entry<String, List<StoredTensors.Tensor>> e : expected.entrySet()) {
      Path file = corpus.resolve(e.getKey());
      for (StoredTensors.Tensor t : e.getValue()) {
        HttpResponse<byte[]> r = getBytes(tensorPath(t.name()), TOKEN, Map.of());
        String what = e.getKey() + " " + t.name();
        assertThat(r.statusCode()).as(what).isEqualTo(200);
        assertThat(r.body())
            .as(what)
            .isEqualTo(StoredTensors.bytes(file, t.fileOffset(), t.length()));
        assertThat(r.headers().firstValue("content-type")).contains("application/octet-stream");
        assertThat(r.headers().firstValueAsLong("content-length")).hasValue(t.length());
        assertThat(r.headers().firstValue("x-tensor-dtype")).as(what).contains(t.dtype());
        assertThat(r.headers().firstValue("x-tensor-shape"))
            .as(what)
            .contains(String.join(",", t.shape().stream().map(String::valueOf).toList()));
        assertThat(r.headers().firstValue("x-tensor-name"))
            .contains(TensorEndpoint.encodeHeader(t.name()));
        assertThat(r.headers().firstValue("accept-ranges")).contains("bytes");
        String etag = r.headers().firstValue("etag").orElseThrow();
        assertThat(etag).matches("\"[0-9a-f]{32}\"");
        assertThat(etags.add(etag)).as("ETag of %s is unique", what).isTrue();
        read++;
      }
    }
    assertThat(read).isGreaterThan(1400);
  }

  @Test
  void scalarsHaveAnEmptyShapeHeader() throws Exception {
    StoredTensors.Tensor scalar =
        expected.values().stream()
            .flatMap(List::stream)
            .filter(t -> t.shape().isEmpty())
            .findFirst()
            .orElseThrow();
    HttpResponse<byte[]> r = getBytes(tensorPath(scalar.name()), TOKEN, Map.of());
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("x-tensor-shape")).contains("");
    assertThat(r.body()).hasSize((int) scalar.length());
  }

  @Test
  void rangesFollowRfc9110() throws Exception {
    String rel = "safetensors/burn__examples_import-model-weights_mnist.safetensors";
    assertThat(expected).containsKey(rel);
    StoredTensors.Tensor t =
        expected.get(rel).stream()
            .max((a, b) -> Long.compare(a.length(), b.length()))
            .orElseThrow();
    byte[] all = StoredTensors.bytes(corpus.resolve(rel), t.fileOffset(), t.length());
    int n = all.length;
    String path = tensorPath(t.name());

    partial(path, "bytes=0-0", all, 0, 0);
    partial(path, "bytes=" + (n - 1) + "-" + (n - 1), all, n - 1, n - 1);
    partial(path, "bytes=-1", all, n - 1, n - 1);
    partial(path, "bytes=-1000", all, n - 1000, n - 1);
    partial(path, "bytes=1000-", all, 1000, n - 1);
    partial(path, "bytes=0-", all, 0, n - 1);
    partial(path, "bytes=12345-67890", all, 12345, 67890);
    partial(path, "bytes=5-" + (n + 100_000), all, 5, n - 1);
    partial(path, "bytes=-" + (10L * n), all, 0, n - 1);

    HttpResponse<byte[]> unsatisfiable = getBytes(path, TOKEN, Map.of("Range", "bytes=" + n + "-"));
    assertThat(unsatisfiable.statusCode()).isEqualTo(416);
    assertThat(unsatisfiable.headers().firstValue("content-range")).contains("bytes */" + n);
    assertThat(JSON.readTree(unsatisfiable.body()).get("error").asText())
        .contains("selects no byte of tensor \"" + t.name() + "\", which has " + n + " bytes");

    HttpResponse<byte[]> several = getBytes(path, TOKEN, Map.of("Range", "bytes=0-9,20-29"));
    assertThat(several.statusCode()).isEqualTo(200);
    assertThat(several.body()).isEqualTo(all);
    HttpResponse<byte[]> invalid = getBytes(path, TOKEN, Map.of("Range", "bytes=9-3"));
    assertThat(invalid.statusCode()).isEqualTo(200);
    assertThat(invalid.body()).isEqualTo(all);

    HttpResponse<byte[]> head =
        http.send(
            request(path, TOKEN, Map.of("Range", "bytes=0-9"))
                .method("HEAD", HttpRequest.BodyPublishers.noBody())
                .build(),
            HttpResponse.BodyHandlers.ofByteArray());
    assertThat(head.statusCode()).as("Range is ignored on HEAD").isEqualTo(200);
    assertThat(head.headers().firstValueAsLong("content-length")).hasValue(n);
    assertThat(head.headers().firstValue("x-tensor-dtype")).contains(t.dtype());
    assertThat(head.body()).isEmpty();
  }

  @Test
  void conditionalRequestsUseTheStrongETag() throws Exception {
    StoredTensors.Tensor t = expected.values().iterator().next().get(0);
    String path = tensorPath(t.name());
    String etag = getBytes(path, TOKEN, Map.of()).headers().firstValue("etag").orElseThrow();

    HttpResponse<byte[]> notModified = getBytes(path, TOKEN, Map.of("If-None-Match", etag));
    assertThat(notModified.statusCode()).isEqualTo(304);
    assertThat(notModified.body()).isEmpty();
    assertThat(notModified.headers().firstValue("etag")).contains(etag);
    assertThat(getBytes(path, TOKEN, Map.of("If-None-Match", "W/" + etag)).statusCode())
        .as("If-None-Match compares weakly")
        .isEqualTo(304);
    assertThat(getBytes(path, TOKEN, Map.of("If-None-Match", "\"other\"")).statusCode())
        .isEqualTo(200);

    assertThat(getBytes(path, TOKEN, Map.of("If-Match", etag)).statusCode()).isEqualTo(200);
    HttpResponse<byte[]> failed = getBytes(path, TOKEN, Map.of("If-Match", "\"other\""));
    assertThat(failed.statusCode()).isEqualTo(412);
    assertThat(JSON.readTree(failed.body()).get("error").asText()).endsWith("ETag " + etag);

    HttpResponse<byte[]> ranged =
        getBytes(path, TOKEN, Map.of("Range", "bytes=0-0", "If-Range", etag));
    assertThat(ranged.statusCode()).isEqualTo(206);
    HttpResponse<byte[]> changed =
        getBytes(path, TOKEN, Map.of("Range", "bytes=0-0", "If-Range", "\"other\""));
    assertThat(changed.statusCode()).as("If-Range mismatch: the whole body").isEqualTo(200);
    assertThat(changed.body()).hasSize((int) t.length());
    HttpResponse<byte[]> dated =
        getBytes(
            path, TOKEN, Map.of("Range", "bytes=0-0", "If-Range", "Sun, 29 Nov 2026 10:00:00 GMT"));
    assertThat(dated.statusCode()).as("no Last-Modified: a dated If-Range fails").isEqualTo(200);
  }

  @Test
  void theBearerTokenGuardsListAndReads() throws Exception {
    String one = tensorPath(expected.values().iterator().next().get(0).name());
    for (String path : List.of("/v1/tensors", one)) {
      HttpResponse<String> anonymous = getString(path, null);
      assertThat(anonymous.statusCode()).as(path).isEqualTo(401);
      assertThat(anonymous.headers().firstValue("www-authenticate"))
          .contains("Bearer realm=\"tensorcast\"");
      assertThat(getString(path, "wrong-token-0123456789abc").statusCode()).isEqualTo(401);
      assertThat(getString(path, TOKEN).statusCode()).isEqualTo(200);
    }
    assertThat(getString("/healthz", null).statusCode()).isEqualTo(200);
  }

  @Test
  void errorsNameTheTensorOrParameter() throws Exception {
    HttpResponse<String> unknown = getString(tensorPath("no.such/tensor"), TOKEN);
    assertThat(unknown.statusCode()).isEqualTo(404);
    assertThat(JSON.readTree(unknown.body()).get("error").asText())
        .contains("artifact consumer has no tensor \"no.such/tensor\"");
    assertThat(JSON.readTree(unknown.body()).get("reason").asText()).isEqualTo("UnknownTensor");

    String name = expected.values().iterator().next().get(0).name();
    HttpResponse<String> badTarget = getString(tensorPath(name) + "?target=sharded", TOKEN);
    assertThat(badTarget.statusCode()).isEqualTo(400);
    assertThat(badTarget.body()).contains("target='sharded' is not one of as_stored, shard, full");
    HttpResponse<String> badAxis =
        getString(tensorPath(name) + "?target=shard&parallelism=tp:4/4@0", TOKEN);
    assertThat(badAxis.statusCode()).isEqualTo(400);
    assertThat(badAxis.body()).contains("axis 'tp:4/4@0'").contains("0 <= RANK < SIZE");
    HttpResponse<String> extra = getString(tensorPath(name) + "?limit=3", TOKEN);
    assertThat(extra.statusCode()).isEqualTo(400);
    assertThat(extra.body()).contains("unknown query parameter 'limit'");
    HttpResponse<String> badUtf8 = getString("/v1/tensors/a%C3%28", TOKEN);
    assertThat(badUtf8.statusCode()).isEqualTo(400);
    assertThat(badUtf8.body()).contains("'a%C3%28' does not decode to UTF-8");
    assertThat(getString("/v1/tensors?x=1", TOKEN).statusCode()).isEqualTo(400);

    HttpResponse<String> noDim =
        getString(tensorPath(name) + "?target=shard&parallelism=tp:1/2,dp:0/2", TOKEN);
    assertThat(noDim.statusCode()).isEqualTo(400);
    assertThat(JSON.readTree(noDim.body()).get("error").asText())
        .contains("tensor \"" + name + "\" is stored whole in a plain file")
        .contains("tp:1/2@DIM");
    HttpResponse<String> post =
        http.send(
            request(tensorPath(name), TOKEN, Map.of())
                .POST(HttpRequest.BodyPublishers.ofString("x"))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(post.statusCode()).isEqualTo(405);
  }

  @Test
  void pipelinedRequestsAreAnsweredInOrderAfterAStreamedBody() throws Exception {
    StoredTensors.Tensor big =
        expected.values().stream()
            .flatMap(List::stream)
            .max((a, b) -> Long.compare(a.length(), b.length()))
            .orElseThrow();
    String req =
        "GET "
            + tensorPath(big.name())
            + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + TOKEN
            + "\r\n\r\n";
    String last = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    try (Socket s = new Socket()) {
      s.connect(server.address(), 5000);
      s.setSoTimeout(10_000);
      OutputStream out = s.getOutputStream();
      out.write((req + req + last).getBytes(StandardCharsets.US_ASCII)); // one write: pipelined
      out.flush();
      byte[] response = s.getInputStream().readAllBytes();
      String text = new String(response, StandardCharsets.ISO_8859_1);
      int first = text.indexOf("HTTP/1.1 200 OK");
      int second = text.indexOf("HTTP/1.1 200 OK", first + 1);
      int third = text.indexOf("HTTP/1.1 200 OK", second + 1);
      assertThat(first).isZero();
      assertThat(second).isPositive();
      assertThat(third).isPositive();
      assertThat(text.substring(third)).endsWith("ok\n");
      int bodyStart = text.indexOf("\r\n\r\n") + 4;
      byte[] body = Arrays.copyOfRange(response, bodyStart, bodyStart + (int) big.length());
      String rel =
          expected.entrySet().stream()
              .filter(e -> e.getValue().contains(big))
              .findFirst()
              .orElseThrow()
              .getKey();
      assertThat(body)
          .isEqualTo(StoredTensors.bytes(corpus.resolve(rel), big.fileOffset(), big.length()));
      assertThat(second).isEqualTo(bodyStart + (int) big.length());
    }
  }

  @Test
  void answers503WithThePhaseUntilTheArtifactIsReady() throws Exception {
    Path root = Files.createDirectory(shm.resolve("not-ready"));
    String rel = "safetensors/mnist-tinygrad__model.safetensors";
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    try (PinnedStore store = new PinnedStore(root, 64L << 20, LockPolicy.BEST_EFFORT);
        ArtifactSource source =
            Sources.open(
                "file://" + corpus.resolve("safetensors"),
                SourceOptions.builder().include(List.of("/" + rel.substring(12))).build())) {
      ArtifactLoader loader =
          new ArtifactLoader(
              source,
              store,
              new ArtifactLoader.Options("late", 0, ReadOptions.DEFAULTS),
              new LoadMetrics(registry));
      try (ControlServer control =
          ControlServer.start(
              new InetSocketAddress("127.0.0.1", 0),
              loader::status,
              registry,
              null,
              new TensorEndpoint(
                  "late",
                  () -> loader.status().phase(),
                  () -> store.get("late"),
                  new DefaultTensorReadPlanner()))) {
        String base = "http://127.0.0.1:" + control.address().getPort();
        for (String path : List.of("/v1/tensors", "/v1/tensors/anything")) {
          HttpResponse<String> r =
              http.send(
                  HttpRequest.newBuilder(URI.create(base + path)).build(),
                  HttpResponse.BodyHandlers.ofString());
          assertThat(r.statusCode()).as(path).isEqualTo(503);
          JsonNode body = JSON.readTree(r.body());
          assertThat(body.get("phase").asText()).isEqualTo("Pending");
          assertThat(body.get("error").asText())
              .isEqualTo(
                  "artifact late is Pending, not Ready; tensors can be read once it is Ready (GET"
                      + " /readyz)");
          assertThat(r.headers().firstValue("retry-after")).contains("1");
        }
        assertThat(loader.load().phase()).isEqualTo(Phase.Ready);
        HttpResponse<String> list =
            http.send(
                HttpRequest.newBuilder(URI.create(base + "/v1/tensors")).build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(list.statusCode()).isEqualTo(200);
        assertThat(JSON.readTree(list.body()).get("tensorCount").asInt())
            .isEqualTo(StoredTensors.read(corpus.resolve(rel)).size());
      }
    }
  }

  /**
   * The seam the shard/full planner will use: a plan of many small segments from two files, out of
   * order (nothing coalesces), is streamed in order and sliced by Range across segment boundaries.
   */
  @Test
  void aPlannersSegmentsAreStreamedInOrderAndSlicedByRange() throws Exception {
    String fa = "mnist-tinygrad__model.safetensors";
    String fb = "candle__whisper_mel_filters.safetensors";
    StoredTensors.Tensor a =
        StoredTensors.read(corpus.resolve("safetensors/" + fa)).stream()
            .max((x, y) -> Long.compare(x.length(), y.length()))
            .orElseThrow();
    StoredTensors.Tensor b = StoredTensors.read(corpus.resolve("safetensors/" + fb)).get(0);
    int elements = (int) Math.min(a.length(), b.length()) / 4; // F32 elements taken from each
    // body element 2k = element (elements-1-k) of a, body element 2k+1 = element k of b
    List<Segment> segments = new ArrayList<>();
    byte[] aBytes =
        StoredTensors.bytes(corpus.resolve("safetensors/" + fa), a.fileOffset(), a.length());
    byte[] bBytes =
        StoredTensors.bytes(corpus.resolve("safetensors/" + fb), b.fileOffset(), b.length());
    byte[] want = new byte[elements * 8];
    for (int k = 0; k < elements; k++) {
      int ea = elements - 1 - k;
      segments.add(new Segment(fa, a.fileOffset() + 4L * ea, 4));
      segments.add(new Segment(fb, b.fileOffset() + 4L * k, 4));
      System.arraycopy(aBytes, 4 * ea, want, 8 * k, 4);
      System.arraycopy(bBytes, 4 * k, want, 8 * k + 4, 4);
    }
    TensorReadPlanner interleaving =
        (catalog, name, query) ->
            new ReadPlan(name, Dtype.F32, new long[] {2L * elements}, segments);
    Path root = Files.createDirectory(shm.resolve("segments"));
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    try (PinnedStore store = new PinnedStore(root, 64L << 20, LockPolicy.BEST_EFFORT);
        ArtifactSource source =
            Sources.open(
                "file://" + corpus.resolve("safetensors"),
                SourceOptions.builder().include(List.of("/" + fa, "/" + fb)).build())) {
      ArtifactLoader loader =
          new ArtifactLoader(
              source,
              store,
              new ArtifactLoader.Options("segments", 0, ReadOptions.DEFAULTS),
              new LoadMetrics(registry));
      assertThat(loader.load().phase()).isEqualTo(Phase.Ready);
      try (ControlServer control =
          ControlServer.start(
              new InetSocketAddress("127.0.0.1", 0),
              loader::status,
              registry,
              null,
              new TensorEndpoint(
                  "segments",
                  () -> loader.status().phase(),
                  () -> store.get("segments"),
                  interleaving))) {
        String url = "http://127.0.0.1:" + control.address().getPort() + "/v1/tensors/mixed";
        HttpResponse<byte[]> whole =
            http.send(
                HttpRequest.newBuilder(URI.create(url)).build(),
                HttpResponse.BodyHandlers.ofByteArray());
        assertThat(whole.statusCode()).isEqualTo(200);
        assertThat(segments).hasSizeGreaterThan(30_000);
        assertThat(whole.body()).isEqualTo(want);
        int n = want.length;
        for (String range : List.of("bytes=2-9", "bytes=-6", "bytes=3-", "bytes=1001-70001")) {
          HttpResponse<byte[]> r =
              http.send(
                  HttpRequest.newBuilder(URI.create(url)).header("Range", range).build(),
                  HttpResponse.BodyHandlers.ofByteArray());
          ByteRange br = ByteRange.evaluate(range, n);
          assertThat(r.statusCode()).as(range).isEqualTo(206);
          assertThat(r.body())
              .as(range)
              .isEqualTo(Arrays.copyOfRange(want, (int) br.first(), (int) br.last() + 1));
        }
      }
    }
  }

  @Test
  void aNameInTwoFilesIsAConflictNamingBothFiles() throws Exception {
    String a = "safetensors/safetensorsjl__model_12dtypes_torch.safetensors";
    String b = "index/safetensorsjl-tiny-sharded/model-00001-of-00006.safetensors";
    Set<String> shared = new TreeSet<>();
    StoredTensors.read(corpus.resolve(a)).forEach(t -> shared.add(t.name()));
    shared.retainAll(StoredTensors.read(corpus.resolve(b)).stream().map(t -> t.name()).toList());
    assertThat(shared).isNotEmpty();
    try (DataPlaneServer dup =
        serve(shm, "duplicates", "file://" + corpus, List.of("/" + a, "/" + b), null)) {
      awaitReady(dup);
      HttpResponse<String> list = getString(dup, "/v1/tensors", TOKEN);
      assertThat(list.statusCode()).isEqualTo(409);
      assertThat(JSON.readTree(list.body()).get("error").asText())
          .contains("occurs in both")
          .contains("'" + a + "'")
          .contains("'" + b + "'");
      HttpResponse<String> read = getString(dup, tensorPath(shared.iterator().next()), TOKEN);
      assertThat(read.statusCode()).isEqualTo(409);
      assertThat(read.body()).contains(a).contains(b);
    }
  }

  @Test
  void tpShardLayoutListsRankFilesAndServesOddNamesPercentEncoded() throws Exception {
    Path dir = Files.createDirectories(work.resolve("tp-layout"));
    String odd = "model/layers.0/attn q+k%ü weight";
    List<TensorDeclaration> decls =
        List.of(
            new TensorDeclaration(odd, Dtype.BF16, new long[] {4, 3}),
            new TensorDeclaration("scale", Dtype.F32, new long[] {}));
    for (int rank = 0; rank < 2; rank++) {
      byte[] w = new byte[24];
      Arrays.fill(w, (byte) (rank + 1));
      SafetensorsWriter.write(
          dir.resolve(String.format("rank_%05d.safetensors", rank)),
          decls,
          Map.of(),
          List.of(ByteBuffer.wrap(w), ByteBuffer.wrap(new byte[] {1, 2, 3, (byte) rank})));
    }
    Files.writeString(dir.resolve("manifest.json"), "{\"tp_size\": 2}\n");
    try (DataPlaneServer tp = serve(shm, "tp-layout", "file://" + dir, List.of(), null)) {
      awaitReady(tp);
      HttpResponse<String> list = getString(tp, "/v1/tensors", TOKEN);
      assertThat(list.statusCode()).as(list.body()).isEqualTo(200);
      List<String> entries = new ArrayList<>();
      JSON.readTree(list.body())
          .get("tensors")
          .forEach(t -> entries.add(t.get("file").asText() + ":" + t.get("name").asText()));
      assertThat(entries)
          .containsExactlyInAnyOrder(
              "rank_00000.safetensors:" + odd,
              "rank_00000.safetensors:scale",
              "rank_00001.safetensors:" + odd,
              "rank_00001.safetensors:scale");
      HttpResponse<String> asStored = getString(tp, tensorPath(odd), TOKEN);
      assertThat(asStored.statusCode()).isEqualTo(409);
      assertThat(JSON.readTree(asStored.body()).get("error").asText())
          .contains("tensor \"" + odd + "\" occurs in 2 files")
          .contains("target=shard or target=full");
      HttpResponse<String> shard =
          getString(tp, tensorPath(odd) + "?target=shard&parallelism=tp:1/2@0", TOKEN);
      // the manifest lacks the per-tensor entries the planner needs: the layout is refused
      assertThat(shard.statusCode()).isEqualTo(500);
      assertThat(JSON.readTree(shard.body()).get("reason").asText()).isEqualTo("InvalidLayout");
      assertThat(JSON.readTree(shard.body()).get("error").asText())
          .startsWith("artifact tp-layout: ")
          .contains("manifest.json");
    }

    // the same odd name held by one file is served as stored, both %2F and literal slashes
    Path single = Files.createDirectories(work.resolve("single"));
    byte[] w = new byte[24];
    for (int i = 0; i < w.length; i++) {
      w[i] = (byte) (i * 7);
    }
    SafetensorsWriter.write(
        single.resolve("model.safetensors"),
        decls.subList(0, 1),
        Map.of(),
        List.of(ByteBuffer.wrap(w)));
    try (DataPlaneServer one = serve(shm, "single", "file://" + single, List.of(), null)) {
      awaitReady(one);
      for (String path :
          List.of(tensorPath(odd), "/v1/tensors/model/layers.0/attn%20q+k%25%C3%BC%20weight")) {
        HttpResponse<byte[]> r = getBytes(one, path, TOKEN, Map.of());
        assertThat(r.statusCode()).as(path).isEqualTo(200);
        assertThat(r.body()).isEqualTo(w);
        assertThat(r.headers().firstValue("x-tensor-name"))
            .contains("model/layers.0/attn%20q%2Bk%25%C3%BC%20weight");
        assertThat(r.headers().firstValue("x-tensor-shape")).contains("4,3");
        assertThat(r.headers().firstValue("x-tensor-dtype")).contains("BF16");
      }
    }
  }

  // ------------------------------------------------------------------ helpers

  /** A data plane for {@code uri} on loopback, its store under {@code storeBase/store-<id>}. */
  static DataPlaneServer serve(
      Path storeBase, String id, String uri, List<String> include, Path tokenFile)
      throws InterruptedException, IOException {
    Path root = Files.createDirectories(storeBase.resolve("store-" + id));
    return DataPlaneServer.start(
        new ServeSettings(
            id,
            new InetSocketAddress("127.0.0.1", 0),
            uri,
            include,
            List.of(),
            null,
            null,
            false,
            Optional.empty(),
            ReadOptions.DEFAULTS,
            root,
            "256Mi",
            0,
            LockPolicy.BEST_EFFORT,
            new io.tensorcast.dataplane.http.ControlAuth(
                tokenFile == null
                    ? io.tensorcast.dataplane.http.ControlToken.of(TOKEN)
                    : new io.tensorcast.dataplane.http.ControlToken(tokenFile),
                io.tensorcast.dataplane.http.ControlToken.random()),
            null,
            LoadRetry.DEFAULTS,
            false,
            null,
            io.tensorcast.dataplane.format.FormatLimits.DEFAULT));
  }

  static void awaitReady(DataPlaneServer s) {
    await("artifact Ready or Failed")
        .atMost(READY)
        .pollInterval(Duration.ofMillis(20))
        .until(() -> s.status().phase() == Phase.Ready || s.status().phase() == Phase.Failed);
    DataPlaneStatus status = s.status();
    assertThat(status.phase())
        .as("%s: %s", status.reason(), status.message())
        .isEqualTo(Phase.Ready);
  }

  /** {@code /v1/tensors/} and the name percent-encoded as UTF-8 (slashes as %2F, spaces as %20). */
  static String tensorPath(String name) {
    return "/v1/tensors/" + URLEncoder.encode(name, StandardCharsets.UTF_8).replace("+", "%20");
  }

  private static HttpRequest.Builder request(
      DataPlaneServer s, String path, String token, Map<String, String> headers) {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + s.address().getPort() + path))
            .timeout(Duration.ofSeconds(30));
    if (token != null) {
      b.header("Authorization", "Bearer " + token);
    }
    headers.forEach(b::header);
    return b;
  }

  private static HttpRequest.Builder request(
      String path, String token, Map<String, String> headers) {
    return request(server, path, token, headers);
  }

  private static HttpResponse<String> getString(String path, String token) throws Exception {
    return getString(server, path, token);
  }

  private static HttpResponse<String> getString(DataPlaneServer s, String path, String token)
      throws Exception {
    return http.send(
        request(s, path, token, Map.of()).build(),
        HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
  }

  private static HttpResponse<byte[]> getBytes(
      String path, String token, Map<String, String> headers) throws Exception {
    return getBytes(server, path, token, headers);
  }

  private static HttpResponse<byte[]> getBytes(
      DataPlaneServer s, String path, String token, Map<String, String> headers) throws Exception {
    return http.send(
        request(s, path, token, headers).build(), HttpResponse.BodyHandlers.ofByteArray());
  }

  private static void partial(String path, String range, byte[] all, int first, int last)
      throws Exception {
    HttpResponse<byte[]> r = getBytes(path, TOKEN, Map.of("Range", range));
    assertThat(r.statusCode()).as(range).isEqualTo(206);
    assertThat(r.headers().firstValue("content-range"))
        .as(range)
        .contains("bytes " + first + "-" + last + "/" + all.length);
    assertThat(r.headers().firstValueAsLong("content-length")).hasValue(last - first + 1);
    assertThat(r.body()).as(range).isEqualTo(Arrays.copyOfRange(all, first, last + 1));
  }
}
