package io.tensorcast.dataplane.shards;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.Reason;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.ShardReport;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.format.torch.ByteSource;
import io.tensorcast.dataplane.format.torch.TorchCheckpoint;
import io.tensorcast.dataplane.format.torch.TorchCheckpointReader;
import io.tensorcast.dataplane.format.torch.TorchTensor;
import io.tensorcast.dataplane.load.LoadFailure;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.tensor.ShardManifest;
import io.tensorcast.dataplane.testing.S3Options;
import io.tensorcast.dataplane.testing.ScaledModel;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * TensorShardSet rank files from a real S3-compatible server: a Llama model with the tensor names
 * of a real 70B checkpoint's index (scaled down), cut at TP=4 by the built-in rules chosen from its
 * config.json; every tensor of every rank file equals the slice computed element by element from
 * the full tensor; replicated tensors are in every rank file; the amplification of dim-0 splits and
 * the cost model's choices for dim-1 splits; torch checkpoints as source.
 */
@Timeout(120)
class ShardSetLoaderIT {
  static final AtomicInteger BUCKETS = new AtomicInteger();
  static S3MockServer s3;
  static ScaledModel.Model llama;
  static String llamaUri;

  @TempDir static Path tmp;

  @BeforeAll
  static void seed() throws IOException {
    s3 = S3MockServer.shared();
    llama = ScaledModel.write("reflection-llama-3-1-70b", 2, tmp.resolve("llama"));
    llamaUri = upload(llama.files());
  }

  static String upload(Map<String, Path> files) {
    String bucket = "shards-" + ProcessHandle.current().pid() + "-" + BUCKETS.incrementAndGet();
    s3.createBucket(bucket);
    files.forEach((k, p) -> s3.putFile(bucket, "m/" + k, p));
    return "s3://" + bucket + "/m/";
  }

  /** The split dim the Llama architecture gives a tensor, written out independently of the code. */
  static Integer llamaDim(String name) {
    if (name.endsWith("norm.weight")) {
      return null;
    }
    if (name.endsWith("o_proj.weight") || name.endsWith("down_proj.weight")) {
      return 1;
    }
    return 0;
  }

  DataPlaneStatus load(
      String uri,
      Path root,
      Parallelism p,
      List<Integer> ranks,
      List<ShardRules.Spec> rules,
      FetchPlanner.Costs costs)
      throws Exception {
    try (ArtifactSource source = Sources.open(uri, S3Options.direct(s3).build());
        PinnedStore store = new PinnedStore(root, 256L << 20, LockPolicy.BEST_EFFORT)) {
      ShardSetLoader loader =
          new ShardSetLoader(
              source,
              store,
              "tss-g1",
              0,
              ReadOptions.DEFAULTS.withConcurrency(4),
              new ShardSettings(p, ranks, rules, costs, List.of(), null, Duration.ZERO),
              List::of);
      DataPlaneStatus s = loader.load();
      copyOut(root.resolve("tss-g1"), root.resolve("copy"));
      return s;
    }
  }

  /** The store unloads on close: keep a copy of the files to look at. */
  static void copyOut(Path from, Path to) throws IOException {
    try (var walk = Files.walk(from)) {
      for (Path p : walk.toList()) {
        Path t = to.resolve(from.relativize(p).toString());
        if (Files.isDirectory(p)) {
          Files.createDirectories(t);
        } else {
          Files.copy(p, t);
        }
      }
    }
  }

  static ByteBuffer tensorBytes(Path file, TensorInfo t, SafetensorsHeader h) throws IOException {
    byte[] all = Files.readAllBytes(file);
    return ByteBuffer.wrap(
        Arrays.copyOfRange(
            all, (int) (h.dataOffset() + t.begin()), (int) (h.dataOffset() + t.end())));
  }

  @Test
  void tp4RanksEqualTheSlicesOfTheFullTensorsAndHoldEveryReplicatedTensor(@TempDir Path dir)
      throws Exception {
    Parallelism tp4 = new Parallelism(1, 1, 1, 4);
    DataPlaneStatus a =
        load(
            llamaUri, dir.resolve("a"), tp4, List.of(0, 1), List.of(), FetchPlanner.Costs.DEFAULTS);
    DataPlaneStatus b =
        load(
            llamaUri, dir.resolve("b"), tp4, List.of(2, 3), List.of(), FetchPlanner.Costs.DEFAULTS);
    assertThat(a.phase()).isEqualTo(DataPlaneStatus.Phase.Ready);
    assertThat(a.shards().ruleSet()).isEqualTo("built-in Llama (LlamaForCausalLM)");
    assertThat(a.shards().rankFileBytes()).hasSize(4);
    for (int r = 0; r < 4; r++) {
      Path copy = dir.resolve(r < 2 ? "a" : "b").resolve("copy");
      Path file = copy.resolve(ShardManifest.rankFileName(r));
      SafetensorsHeader h = SafetensorsHeader.read(file);
      assertThat(h.metadata())
          .containsEntry("tp_rank", Integer.toString(r))
          .containsEntry("tp_size", "4")
          .containsEntry("format", "pt")
          .containsEntry("coordinates", "dp:0/1,pp:0/1,ep:0/1,tp:" + r + "/4");
      assertThat(h.tensors())
          .extracting(TensorInfo::name)
          .containsExactlyInAnyOrderElementsOf(llama.tensors().keySet());
      for (TensorInfo t : h.tensors()) {
        byte[] expected =
            ScaledModel.slice(llama.tensors().get(t.name()), llamaDim(t.name()), r, 4);
        assertThat(tensorBytes(file, t, h).array())
            .as("rank %d tensor %s", r, t.name())
            .isEqualTo(expected);
      }
      assertThat(Files.size(file))
          .isEqualTo(a.shards().rankFileBytes().get(r) - Files.size(copy.resolve("manifest.json")));
      ShardManifest m = ShardManifest.read(copy.resolve("manifest.json"));
      assertThat(m.tpSize()).isEqualTo(4);
      assertThat(m.entry("model.norm.weight").splitDim()).isNull();
      assertThat(m.entry("model.layers.0.self_attn.o_proj.weight").splitDim()).isEqualTo(1);
    }
    // Not the other ranks' files: a node holds only its ranks.
    assertThat(dir.resolve("a/copy").resolve(ShardManifest.rankFileName(2))).doesNotExist();
    ShardReport.Rank r0 = a.shards().ranks().get(0);
    assertThat(r0.complete()).isTrue();
    assertThat(r0.bytesNeeded()).isEqualTo(a.shards().rankTensorBytes().get(0));
    assertThat(r0.file()).endsWith("/tss-g1/rank_00000.safetensors");
  }

  @Test
  void dim0SplitsFetchAtMostTwoPercentMore(@TempDir Path dir) throws Exception {
    List<ShardRules.Spec> dim0 =
        List.of(
            new ShardRules.Spec("norm\\.weight$", null, true, null),
            new ShardRules.Spec("weight$", 0, null, null));
    DataPlaneStatus s =
        load(
            llamaUri,
            dir,
            new Parallelism(1, 1, 1, 4),
            List.of(1),
            dim0,
            FetchPlanner.Costs.DEFAULTS);
    ShardReport.Rank r = s.shards().ranks().get(0);
    assertThat(r.bytesFetched()).isGreaterThanOrEqualTo(r.bytesNeeded());
    assertThat((double) r.bytesFetched() / r.bytesNeeded()).isLessThanOrEqualTo(1.02);
    assertThat(s.bytesFromSource()).isEqualTo(r.bytesFetched());
  }

  @Test
  void costModelReadsRowsOrWholeTensorsForDim1Splits(@TempDir Path dir) throws Exception {
    List<ShardRules.Spec> dim1 =
        List.of(
            new ShardRules.Spec("norm\\.weight$", null, true, null),
            new ShardRules.Spec("weight$", 1, null, null));
    Parallelism tp4 = new Parallelism(1, 1, 1, 4);
    // No request latency: every gap costs more than a request, so one read per row.
    DataPlaneStatus rows =
        load(
            llamaUri,
            dir.resolve("rows"),
            tp4,
            List.of(0),
            dim1,
            new FetchPlanner.Costs(Duration.ZERO, 200_000_000L, 8 << 20));
    ShardReport.Rank r = rows.shards().ranks().get(0);
    assertThat(r.bytesFetched()).isEqualTo(r.bytesNeeded());
    // Default costs: whole tensors, sliced on the node.
    DataPlaneStatus whole =
        load(llamaUri, dir.resolve("whole"), tp4, List.of(0), dim1, FetchPlanner.Costs.DEFAULTS);
    ShardReport.Rank w = whole.shards().ranks().get(0);
    assertThat(w.requests()).isLessThan(r.requests() / 10);
    assertThat((double) w.bytesFetched() / w.bytesNeeded()).isGreaterThan(2.5);
    // All four ranks on one node: whole tensors are needed entirely, nothing extra is read.
    DataPlaneStatus all =
        load(
            llamaUri,
            dir.resolve("all"),
            tp4,
            List.of(0, 1, 2, 3),
            dim1,
            FetchPlanner.Costs.DEFAULTS);
    long needed = all.shards().ranks().stream().mapToLong(ShardReport.Rank::bytesNeeded).sum();
    long fetched = all.shards().ranks().stream().mapToLong(ShardReport.Rank::bytesFetched).sum();
    assertThat((double) fetched / needed).isBetween(0.99, 1.01);
  }

  @Test
  void badRulesFailBeforeAnythingIsStored(@TempDir Path dir) {
    assertThatThrownBy(
            () ->
                load(
                    llamaUri,
                    dir,
                    new Parallelism(1, 1, 1, 3),
                    List.of(0),
                    List.of(),
                    FetchPlanner.Costs.DEFAULTS))
        .isInstanceOf(LoadFailure.class)
        .hasMessageContaining("does not split into tp 3")
        .satisfies(e -> assertThat(((LoadFailure) e).reason()).isEqualTo(Reason.NotDivisible));
    assertThat(dir.resolve("tss-g1")).doesNotExist();
  }

  @Test
  void torchCheckpointShardsBecomeSafetensorsRankFiles(@TempDir Path dir) throws Exception {
    Path pt = Corpus.dir().resolve("torch/generated-by-torch-1.13/torch113_state_dict_dtypes.pt");
    String uri = upload(Map.of("pytorch_model-00001-of-00001.bin", pt));
    TorchCheckpoint c = TorchCheckpointReader.read(pt);
    List<ShardRules.Spec> rules = List.of(new ShardRules.Spec(".", null, true, null));
    DataPlaneStatus s =
        load(uri, dir, new Parallelism(1, 1, 1, 2), List.of(1), rules, FetchPlanner.Costs.DEFAULTS);
    Path file = dir.resolve("copy").resolve(ShardManifest.rankFileName(1));
    SafetensorsHeader h = SafetensorsHeader.read(file);
    int checked = 0;
    for (TorchTensor t : c.tensors()) {
      if (t.safetensorsDtype().isEmpty()) {
        continue;
      }
      TensorInfo info = h.tensor(t.name()).orElseThrow();
      assertThat(tensorBytes(file, info, h).array())
          .as(t.name())
          .isEqualTo(t.contiguousBytes(ByteSource.of(Files.readAllBytes(pt))));
      checked++;
    }
    assertThat(checked).isGreaterThan(5);
    assertThat(s.phase()).isEqualTo(DataPlaneStatus.Phase.Ready);
  }
}
