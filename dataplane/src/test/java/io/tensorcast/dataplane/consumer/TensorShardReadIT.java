package io.tensorcast.dataplane.consumer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.http.BodyStreaming;
import io.tensorcast.dataplane.http.ControlServer;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.LoadMetrics;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.tensor.ParallelAxis;
import io.tensorcast.dataplane.tensor.ShardLayoutWriter;
import io.tensorcast.dataplane.tensor.ShardLayoutWriter.TensorBytes;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
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
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code target=shard} and {@code target=full} over HTTP against a real {@link DataPlaneServer}: a
 * TP=4 layout (and a DP+TP scoped TP=2 layout) written with {@link ShardLayoutWriter} into a
 * directory, loaded from a {@code file://} source into a page-locked store under {@code /dev/shm},
 * read over loopback. Every body is compared with a slice the test computes element by element from
 * the full tensors it generated, independently of the planner; the plain corpus file is read with
 * {@link StoredTensors}.
 */
class TensorShardReadIT {
  private static final Duration READY = Duration.ofSeconds(60);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();

  /** A generated tensor: its full bytes and how the TP=4 layout stores it. */
  private record Gen(Dtype dtype, long[] shape, Integer splitDim, byte[] full) {
    int elem() {
      return dtype.bitSize() / 8;
    }
  }

  private static final Map<String, Gen> TP4 = new LinkedHashMap<>();
  private static final Map<String, Gen> DPTP = new LinkedHashMap<>();
  private static final String CORPUS_FILE = "safetensors/mnist-tinygrad__model.safetensors";

  private static Path shm;
  private static Path src;
  private static Path corpus;
  private static DataPlaneServer shards;
  private static DataPlaneServer plain;

  @BeforeAll
  static void start() throws Exception {
    corpus = Corpus.dir();
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    shm = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-shard-read-it-");
    src = Files.createTempDirectory("tensorcast-shard-read-it-");
    gen(TP4, "attn.q.weight", Dtype.BF16, new long[] {64, 48}, 0);
    gen(TP4, "mlp.up.weight", Dtype.F8_E4M3, new long[] {24, 64}, 1);
    gen(TP4, "embed.tokens", Dtype.I8, new long[] {40, 16}, 0);
    gen(TP4, "proj.cube", Dtype.I32, new long[] {3, 8, 24}, 2);
    gen(TP4, "norm.weight", Dtype.F32, new long[] {48}, null);
    // 4096 rows, split along the last dim: 128-byte row segments, 2 MiB in full (gathered).
    gen(TP4, "lm_head.rows", Dtype.F16, new long[] {4096, 256}, 1);
    gen(DPTP, "dp.scoped.weight", Dtype.BF16, new long[] {16, 8}, 0);
    gen(DPTP, "dp.scoped.norm", Dtype.F32, new long[] {8}, null);
    ShardLayoutWriter.save(src.resolve("tp4"), 4, List.of(), tensors(TP4), splits(TP4));
    ShardLayoutWriter.save(
        src.resolve("dptp"), 2, List.of(ParallelAxis.dp(1, 2)), tensors(DPTP), splits(DPTP));
    shards = serve("shards", "file://" + src, List.of());
    plain = serve("plain", "file://" + corpus, List.of("/" + CORPUS_FILE));
    awaitReady(shards);
    awaitReady(plain);
  }

  @AfterAll
  static void stop() throws IOException {
    for (DataPlaneServer s : new DataPlaneServer[] {shards, plain}) {
      if (s != null) {
        s.close();
      }
    }
    TestFiles.deleteTree(shm);
    TestFiles.deleteTree(src);
  }

  // ------------------------------------------------------------------ tests

  @Test
  void exactMatchShardsEqualTheStoredRankObjectsAndTheIndependentSlices() throws Exception {
    for (Map.Entry<String, Gen> e : TP4.entrySet()) {
      Gen g = e.getValue();
      if (g.splitDim() == null) {
        continue;
      }
      for (int r = 0; r < 4; r++) {
        byte[] want = shard(g, g.splitDim(), r, 4);
        // the rank file's own bytes of the tensor, read from the source directory
        Path rankFile = src.resolve("tp4").resolve(String.format("rank_%05d.safetensors", r));
        StoredTensors.Tensor stored =
            StoredTensors.read(rankFile).stream()
                .filter(t -> t.name().equals(e.getKey()))
                .findFirst()
                .orElseThrow();
        assertThat(StoredTensors.bytes(rankFile, stored.fileOffset(), stored.length()))
            .as("%s rank %d as stored", e.getKey(), r)
            .isEqualTo(want);
        for (String p :
            List.of("tp:" + r + "/4@" + g.splitDim(), "tp:" + r + "/4" /* dim from manifest */)) {
          HttpResponse<byte[]> resp = get(shards, e.getKey(), "target=shard&parallelism=" + p);
          assertThat(resp.statusCode()).as("%s %s", e.getKey(), p).isEqualTo(200);
          assertThat(resp.body()).as("%s %s", e.getKey(), p).isEqualTo(want);
          long[] shape = g.shape().clone();
          shape[g.splitDim()] /= 4;
          assertThat(resp.headers().firstValue("x-tensor-shape")).contains(shapeHeader(shape));
          assertThat(resp.headers().firstValue("x-tensor-dtype")).contains(g.dtype().name());
        }
      }
    }
  }

  @Test
  void heterogeneousTpTwoAndEightAndAnotherSplitDimAreReconstructed() throws Exception {
    for (Map.Entry<String, Gen> e : TP4.entrySet()) {
      Gen g = e.getValue();
      for (int size : new int[] {2, 8}) {
        for (int dim = 0; dim < g.shape().length; dim++) {
          if (g.shape()[dim] % size != 0) {
            continue;
          }
          for (int r = 0; r < size; r++) {
            String p = "tp:" + r + "/" + size + "@" + dim;
            HttpResponse<byte[]> resp = get(shards, e.getKey(), "target=shard&parallelism=" + p);
            assertThat(resp.statusCode()).as("%s %s", e.getKey(), p).isEqualTo(200);
            assertThat(resp.body()).as("%s %s", e.getKey(), p).isEqualTo(shard(g, dim, r, size));
            long[] shape = g.shape().clone();
            shape[dim] /= size;
            assertThat(resp.headers().firstValue("x-tensor-shape")).contains(shapeHeader(shape));
          }
        }
      }
    }
    // attn.q.weight is stored split along dim 0; read it split along dim 1 under tp 4
    Gen q = TP4.get("attn.q.weight");
    for (int r = 0; r < 4; r++) {
      HttpResponse<byte[]> resp =
          get(shards, "attn.q.weight", "target=shard&parallelism=tp:" + r + "/4@1");
      assertThat(resp.body()).as("rank %d along dim 1", r).isEqualTo(shard(q, 1, r, 4));
    }
  }

  @Test
  void fullTensorsAreReconstructedFromTheFourShards() throws Exception {
    for (Map.Entry<String, Gen> e : TP4.entrySet()) {
      HttpResponse<byte[]> resp = get(shards, e.getKey(), "target=full");
      assertThat(resp.statusCode()).as(e.getKey()).isEqualTo(200);
      assertThat(resp.body()).as(e.getKey()).isEqualTo(e.getValue().full());
      assertThat(resp.headers().firstValue("x-tensor-shape"))
          .contains(shapeHeader(e.getValue().shape()));
      assertThat(resp.headers().firstValue("x-tensor-dtype")).contains(e.getValue().dtype().name());
      assertThat(resp.headers().firstValue("x-tensor-target")).contains("target=full");
    }
  }

  @Test
  void aReplicatedTensorIsWholeForEveryRankUnlessADimIsGiven() throws Exception {
    Gen norm = TP4.get("norm.weight");
    for (int r = 0; r < 4; r++) {
      HttpResponse<byte[]> whole =
          get(shards, "norm.weight", "target=shard&parallelism=tp:" + r + "/4");
      assertThat(whole.statusCode()).isEqualTo(200);
      assertThat(whole.body()).isEqualTo(norm.full());
      assertThat(whole.headers().firstValue("x-tensor-shape")).contains("48");
      HttpResponse<byte[]> sliced =
          get(shards, "norm.weight", "target=shard&parallelism=tp:" + r + "/4@0");
      assertThat(sliced.body()).isEqualTo(shard(norm, 0, r, 4));
    }
  }

  @Test
  void aDpScopedLayoutNeedsItsExactIdentity() throws Exception {
    Gen w = DPTP.get("dp.scoped.weight");
    for (int r = 0; r < 2; r++) {
      for (String p : List.of("dp:1/2,tp:" + r + "/2", "tp:" + r + "/2@0,dp:1/2")) {
        HttpResponse<byte[]> resp =
            get(shards, "dp.scoped.weight", "target=shard&parallelism=" + p);
        assertThat(resp.statusCode()).as(p).isEqualTo(200);
        assertThat(resp.body()).as(p).isEqualTo(shard(w, 0, r, 2));
        assertThat(resp.headers().firstValue("x-tensor-target"))
            .contains(
                "target=shard&parallelism=dp:1/2,tp:" + r + "/2" + (p.contains("@") ? "@0" : ""));
      }
    }
    assertThat(get(shards, "dp.scoped.norm", "target=shard&parallelism=dp:1/2,tp:1/2").body())
        .isEqualTo(DPTP.get("dp.scoped.norm").full());
    assertThat(get(shards, "dp.scoped.weight", "target=full").body()).isEqualTo(w.full());

    HttpResponse<String> wrongDp =
        getString(shards, "dp.scoped.weight", "target=shard&parallelism=dp:0/2,tp:0/2");
    assertThat(wrongDp.statusCode()).isEqualTo(409);
    JsonNode err = JSON.readTree(wrongDp.body());
    assertThat(err.get("reason").asText()).isEqualTo("IdentityMismatch");
    assertThat(err.get("error").asText())
        .contains("artifact shards")
        .contains("tensor \"dp.scoped.weight\"")
        .contains("[dp:0/2]")
        .contains("layout_axes [dp:1/2]");
    HttpResponse<String> noDp =
        getString(shards, "dp.scoped.weight", "target=shard&parallelism=tp:0/2");
    assertThat(noDp.statusCode()).isEqualTo(409);
    assertThat(noDp.body()).contains("layout_axes [dp:1/2]");
  }

  @Test
  void aPlainCorpusFileIsShardedAlongEitherDim() throws Exception {
    Path file = corpus.resolve(CORPUS_FILE);
    StoredTensors.Tensor t =
        StoredTensors.read(file).stream()
            .filter(x -> x.shape().size() == 2 && x.shape().get(0) % 4 == 0)
            .max((a, b) -> Long.compare(a.length(), b.length()))
            .orElseThrow();
    long[] shape = t.shape().stream().mapToLong(Long::longValue).toArray();
    Gen g =
        new Gen(
            Dtype.valueOf(t.dtype()),
            shape,
            null,
            StoredTensors.bytes(file, t.fileOffset(), t.length()));
    for (int r = 0; r < 4; r++) {
      HttpResponse<byte[]> resp = get(plain, t.name(), "target=shard&parallelism=tp:" + r + "/4@0");
      assertThat(resp.statusCode()).isEqualTo(200);
      assertThat(resp.body()).as("rank %d", r).isEqualTo(shard(g, 0, r, 4));
      assertThat(resp.headers().firstValue("x-tensor-shape"))
          .contains((shape[0] / 4) + "," + shape[1]);
    }
    if (shape[1] % 4 == 0) {
      HttpResponse<byte[]> resp = get(plain, t.name(), "target=shard&parallelism=tp:3/4@1");
      assertThat(resp.body()).isEqualTo(shard(g, 1, 3, 4));
    }
    assertThat(get(plain, t.name(), "target=full").body()).isEqualTo(g.full());
    HttpResponse<String> noDim = getString(plain, t.name(), "target=shard&parallelism=tp:0/4");
    assertThat(noDim.statusCode()).isEqualTo(400);
    assertThat(noDim.body()).contains("stored whole in a plain file").contains("tp:0/4@DIM");
  }

  @Test
  void rangesAndHeadOfAReconstructedBody() throws Exception {
    Gen g = TP4.get("lm_head.rows");
    byte[] full = g.full(); // 2 MiB from 4 x 4096 row segments of 128 bytes each
    int n = full.length;
    String path = TensorReadIT.tensorPath("lm_head.rows") + "?target=full";
    for (String range :
        List.of(
            "bytes=0-0",
            "bytes=-100",
            "bytes=100-300000", // across many 128-byte segments
            "bytes=1048000-1049000", // across the first 1 MiB gather buffer's end
            "bytes=" + (n - 130) + "-")) {
      HttpResponse<byte[]> r =
          http.send(
              request(shards, path).header("Range", range).build(),
              HttpResponse.BodyHandlers.ofByteArray());
      ByteRange br = ByteRange.evaluate(range, n);
      assertThat(r.statusCode()).as(range).isEqualTo(206);
      assertThat(r.headers().firstValue("content-range"))
          .contains("bytes " + br.first() + "-" + br.last() + "/" + n);
      assertThat(r.body())
          .as(range)
          .isEqualTo(Arrays.copyOfRange(full, (int) br.first(), (int) br.last() + 1));
    }
    // a range of a heterogeneous shard (tp 8 along dim 1: 4096 rows of 64 bytes, each a slice of
    // one rank file's 128-byte row)
    byte[] shard = shard(g, 1, 5, 8);
    HttpResponse<byte[]> r =
        http.send(
            request(
                    shards,
                    TensorReadIT.tensorPath("lm_head.rows") + "?target=shard&parallelism=tp:5/8@1")
                .header("Range", "bytes=30-100")
                .build(),
            HttpResponse.BodyHandlers.ofByteArray());
    assertThat(r.statusCode()).isEqualTo(206);
    assertThat(r.body()).isEqualTo(Arrays.copyOfRange(shard, 30, 101));

    HttpResponse<byte[]> head =
        http.send(
            request(shards, path).method("HEAD", HttpRequest.BodyPublishers.noBody()).build(),
            HttpResponse.BodyHandlers.ofByteArray());
    assertThat(head.statusCode()).isEqualTo(200);
    assertThat(head.body()).isEmpty();
    assertThat(head.headers().firstValueAsLong("content-length")).hasValue(n);
    assertThat(head.headers().firstValue("x-tensor-shape")).contains("4096,256");
    assertThat(head.headers().firstValue("x-tensor-dtype")).contains("F16");
    assertThat(head.headers().firstValue("etag"))
        .isEqualTo(get(shards, "lm_head.rows", "target=full").headers().firstValue("etag"));
  }

  @Test
  void unsatisfiableReadsSayWhyWithTheNumbers() throws Exception {
    HttpResponse<String> notDivisible =
        getString(shards, "attn.q.weight", "target=shard&parallelism=tp:0/3@0");
    assertThat(notDivisible.statusCode()).isEqualTo(400);
    JsonNode e = JSON.readTree(notDivisible.body());
    assertThat(e.get("reason").asText()).isEqualTo("NotDivisible");
    assertThat(e.get("error").asText())
        .contains("tensor \"attn.q.weight\" [64, 48]")
        .contains("dimension 0 = 64 does not split uniformly into tp size 3")
        .contains("64 = 3 × 21 + 1");

    HttpResponse<String> badDim =
        getString(shards, "attn.q.weight", "target=shard&parallelism=tp:0/2@2");
    assertThat(badDim.statusCode()).isEqualTo(400);
    assertThat(JSON.readTree(badDim.body()).get("reason").asText()).isEqualTo("InvalidTarget");
    assertThat(badDim.body()).contains("split_dim 2").contains("outside its 2 dimensions");

    HttpResponse<String> noTp =
        getString(shards, "attn.q.weight", "target=shard&parallelism=dp:0/2");
    assertThat(noTp.statusCode()).isEqualTo(400);
    assertThat(JSON.readTree(noTp.body()).get("error").asText())
        .contains("tensor \"attn.q.weight\"")
        .contains("parallelism=dp:0/2 has no tp axis");

    HttpResponse<String> unknown = getString(shards, "no.such", "target=full");
    assertThat(unknown.statusCode()).isEqualTo(404);
    assertThat(unknown.body()).contains("artifact shards has no tensor \\\"no.such\\\"");

    HttpResponse<String> asStored = getString(shards, "attn.q.weight", "target=as_stored");
    assertThat(asStored.statusCode()).isEqualTo(409);
    assertThat(asStored.body()).contains("occurs in 4 files");
  }

  /**
   * The same bodies with every segment sent zero-copy and with small segments gathered into buffers
   * (tiny buffers and one in flight, so a body takes many): identical bytes either way.
   */
  @Test
  void gatheredAndZeroCopyStreamingSendTheSameBytes() throws Exception {
    Path root = Files.createDirectory(shm.resolve("direct"));
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    try (PinnedStore store = new PinnedStore(root, 64L << 20, LockPolicy.BEST_EFFORT);
        ArtifactSource source = Sources.open("file://" + src, SourceOptions.builder().build())) {
      ArtifactLoader loader =
          new ArtifactLoader(
              source,
              store,
              new ArtifactLoader.Options("direct", 0, ReadOptions.DEFAULTS),
              new LoadMetrics(registry));
      assertThat(loader.load().phase()).isEqualTo(Phase.Ready);
      for (BodyStreaming streaming :
          List.of(
              BodyStreaming.ZERO_COPY_ONLY,
              new BodyStreaming(200, 1000, 1),
              BodyStreaming.DEFAULTS)) {
        try (ControlServer control =
            ControlServer.start(
                new InetSocketAddress("127.0.0.1", 0),
                loader::status,
                registry,
                null,
                new TensorEndpoint(
                    "direct",
                    () -> loader.status().phase(),
                    () -> store.get("direct"),
                    new DefaultTensorReadPlanner()),
                null,
                streaming)) {
          String base = "http://127.0.0.1:" + control.address().getPort();
          Gen g = TP4.get("lm_head.rows");
          for (String q :
              List.of(
                  "target=full",
                  "target=shard&parallelism=tp:1/8@1",
                  "target=shard&parallelism=tp:1/2@0")) {
            HttpResponse<byte[]> r =
                http.send(
                    HttpRequest.newBuilder(
                            URI.create(base + TensorReadIT.tensorPath("lm_head.rows") + "?" + q))
                        .build(),
                    HttpResponse.BodyHandlers.ofByteArray());
            byte[] want =
                q.equals("target=full")
                    ? g.full()
                    : q.endsWith("@1") ? shard(g, 1, 1, 8) : shard(g, 0, 1, 2);
            assertThat(r.statusCode()).as("%s %s", streaming, q).isEqualTo(200);
            assertThat(r.body()).as("%s %s", streaming, q).isEqualTo(want);
          }
        }
      }
    }
  }

  // ------------------------------------------------------------------ helpers

  private static void gen(Map<String, Gen> into, String name, Dtype d, long[] shape, Integer dim) {
    long n = 1;
    for (long x : shape) {
      n *= x;
    }
    byte[] b = new byte[(int) (n * d.bitSize() / 8)];
    new Random(name.hashCode()).nextBytes(b);
    into.put(name, new Gen(d, shape, dim, b));
  }

  private static List<TensorBytes> tensors(Map<String, Gen> gens) {
    List<TensorBytes> out = new ArrayList<>();
    gens.forEach(
        (k, g) -> out.add(new TensorBytes(k, g.dtype(), g.shape(), ByteBuffer.wrap(g.full()))));
    return out;
  }

  private static Map<String, Integer> splits(Map<String, Gen> gens) {
    Map<String, Integer> out = new LinkedHashMap<>();
    gens.forEach(
        (k, g) -> {
          if (g.splitDim() != null) {
            out.put(k, g.splitDim());
          }
        });
    return out;
  }

  /**
   * Rank {@code rank} of a {@code size}-way split along {@code dim}, element by element: for every
   * element of the shard, its multi-index, shifted along {@code dim}, gives the linear index in the
   * full tensor.
   */
  private static byte[] shard(Gen g, int dim, int rank, int size) {
    long[] shape = g.shape();
    long[] box = shape.clone();
    box[dim] = shape[dim] / size;
    int eb = g.elem();
    long count = 1;
    for (long x : box) {
      count *= x;
    }
    byte[] out = new byte[(int) (count * eb)];
    long[] idx = new long[shape.length];
    for (long e = 0; e < count; e++) {
      long rem = e;
      for (int i = shape.length - 1; i >= 0; i--) {
        idx[i] = rem % box[i];
        rem /= box[i];
      }
      long lin = 0;
      for (int i = 0; i < shape.length; i++) {
        lin = lin * shape[i] + idx[i] + (i == dim ? rank * box[dim] : 0);
      }
      System.arraycopy(g.full(), (int) (lin * eb), out, (int) (e * eb), eb);
    }
    return out;
  }

  private static String shapeHeader(long[] shape) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < shape.length; i++) {
      b.append(i == 0 ? "" : ",").append(shape[i]);
    }
    return b.toString();
  }

  private static DataPlaneServer serve(String id, String uri, List<String> include)
      throws InterruptedException, IOException {
    return TensorReadIT.serve(shm, id, uri, include, null);
  }

  private static void awaitReady(DataPlaneServer s) {
    TensorReadIT.awaitReady(s);
  }

  private static HttpRequest.Builder request(DataPlaneServer s, String path) {
    return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + s.address().getPort() + path))
        .header("Authorization", "Bearer " + TensorReadIT.TOKEN)
        .timeout(Duration.ofSeconds(30));
  }

  private static HttpResponse<byte[]> get(DataPlaneServer s, String name, String query)
      throws Exception {
    return http.send(
        request(s, TensorReadIT.tensorPath(name) + "?" + query).build(),
        HttpResponse.BodyHandlers.ofByteArray());
  }

  private static HttpResponse<String> getString(DataPlaneServer s, String name, String query)
      throws Exception {
    return http.send(
        request(s, TensorReadIT.tensorPath(name) + "?" + query).build(),
        HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
  }
}
