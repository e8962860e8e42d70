package io.tensorcast.dataplane.tensor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.tensor.ShardLayoutWriter.TensorBytes;
import io.tensorcast.dataplane.tensor.ShardLayoutWriter.WriteBatch;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Golden tests of the TP shard layout: save with tp_size=4, read back per rank, full, and under tp
 * sizes 2, 3, 6, 8 and another split dim; every expected byte comes from {@link NaiveSlicer}.
 */
class ShardLayoutGoldenTest {

  @TempDir Path dir;

  /** name -> (shape, split dim) of the golden set: dims 0 and 1 of a 2-D and dim 2 of a 3-D. */
  private static final Map<String, long[]> SHAPES = new LinkedHashMap<>();

  static {
    SHAPES.put("rows", new long[] {24, 8});
    SHAPES.put("cols", new long[] {8, 24});
    SHAPES.put("cube", new long[] {4, 6, 24});
    SHAPES.put("norm", new long[] {24});
  }

  private static final Map<String, Integer> SPLITS = Map.of("rows", 0, "cols", 1, "cube", 2);

  private record Saved(ShardManifest manifest, Map<String, byte[]> full) {}

  private Saved save(Dtype dtype, int tpSize) throws IOException {
    List<TensorBytes> tensors = new ArrayList<>();
    Map<String, byte[]> full = new LinkedHashMap<>();
    long seed = 7;
    for (Map.Entry<String, long[]> e : SHAPES.entrySet()) {
      byte[] b = NaiveSlicer.data(dtype, e.getValue(), seed++);
      full.put(e.getKey(), b);
      tensors.add(new TensorBytes(e.getKey(), dtype, e.getValue(), ByteBuffer.wrap(b)));
    }
    ShardManifest m = ShardLayoutWriter.save(dir, tpSize, List.of(), tensors, SPLITS);
    return new Saved(m, full);
  }

  private static int elemBytes(Dtype d) {
    return d.bitSize() / 8;
  }

  private byte[] readPlan(StoredLayout layout, String name, ReadTarget target) throws IOException {
    TensorReadPlan plan = TensorReadPlanner.plan(layout, name, target);
    try (FileByteSource src = FileByteSource.channels(dir)) {
      ByteBuffer b = Reconstructor.read(plan, src);
      byte[] out = new byte[b.remaining()];
      b.get(out);
      return out;
    }
  }

  @ParameterizedTest
  @EnumSource(
      value = Dtype.class,
      names = {"BF16", "F8_E4M3", "I8", "I32", "I64", "BOOL", "F32"})
  void savedRankFilesHoldExactlyTheIndependentSlices(Dtype dtype) throws Exception {
    Saved s = save(dtype, 4);
    assertThat(s.manifest.tpSize()).isEqualTo(4);
    assertThat(s.manifest.keys()).containsExactly("rows", "cols", "cube", "norm");
    assertThat(s.manifest.entry("norm").splitDim()).isNull();
    assertThat(s.manifest.entry("cube").splitDim()).isEqualTo(2);
    for (int r = 0; r < 4; r++) {
      // Read each rank file with the safetensors header reader only, not the planner.
      Path f = dir.resolve(String.format("rank_%05d.safetensors", r));
      assertThat(f).exists();
      SafetensorsHeader h = SafetensorsHeader.read(f);
      assertThat(h.metadata()).containsEntry("tp_rank", "" + r).containsEntry("tp_size", "4");
      byte[] bytes = Files.readAllBytes(f);
      for (String name : SHAPES.keySet()) {
        TensorInfo t = h.tensor(name).orElseThrow();
        byte[] stored =
            Arrays.copyOfRange(
                bytes, (int) (h.dataOffset() + t.begin()), (int) (h.dataOffset() + t.end()));
        long[] shape = SHAPES.get(name);
        Integer d = SPLITS.get(name);
        byte[] expected =
            d == null
                ? s.full.get(name)
                : NaiveSlicer.shard(s.full.get(name), shape, elemBytes(dtype), d, r, 4);
        assertThat(stored).as("%s rank %d", name, r).isEqualTo(expected);
        assertThat(t.dtype()).isEqualTo(dtype);
      }
    }
  }

  @ParameterizedTest
  @EnumSource(
      value = Dtype.class,
      names = {"BF16", "F8_E4M3", "I8", "I32", "I64", "BOOL"})
  void shardFullAndHeterogeneousReadsEqualIndependentSlices(Dtype dtype) throws Exception {
    Saved s = save(dtype, 4);
    StoredLayout layout = StoredLayout.open(dir);
    assertThat(layout.kind()).isEqualTo(StoredLayout.Kind.TP_SHARDS);
    int eb = elemBytes(dtype);
    for (String name : SPLITS.keySet()) {
      long[] shape = SHAPES.get(name);
      int d = SPLITS.get(name);
      byte[] full = s.full.get(name);
      // Full reconstruction from the 4 shards.
      assertThat(readPlan(layout, name, ReadTarget.full())).as("%s full", name).isEqualTo(full);
      // Exact-match shard reads: one range each, equal to the slice.
      for (int r = 0; r < 4; r++) {
        ReadTarget t = ReadTarget.shard(TensorParallelism.tp(r, 4, d));
        assertThat(TensorReadPlanner.plan(layout, name, t).copies()).hasSize(1);
        assertThat(readPlan(layout, name, t))
            .isEqualTo(NaiveSlicer.shard(full, shape, eb, d, r, 4));
        assertThat(readPlan(layout, name, ReadTarget.asStored(TensorParallelism.tp(r, 4, d))))
            .isEqualTo(NaiveSlicer.shard(full, shape, eb, d, r, 4));
      }
      // Heterogeneous TP: 2 and 8 (divide / multiply 4), 3 and 6 (neither).
      for (int size : new int[] {1, 2, 3, 6, 8}) {
        for (int r = 0; r < size; r++) {
          ReadTarget t = ReadTarget.shard(TensorParallelism.tp(r, size, d));
          assertThat(readPlan(layout, name, t))
              .as("%s tp %d/%d along %d", name, r, size, d)
              .isEqualTo(NaiveSlicer.shard(full, shape, eb, d, r, size));
        }
      }
      // A shard along a different dim than stored (dim 0 of every tensor here, 2 ranks).
      if (d != 0) {
        for (int r = 0; r < 2; r++) {
          assertThat(readPlan(layout, name, ReadTarget.shard(TensorParallelism.tp(r, 2, 0))))
              .isEqualTo(NaiveSlicer.shard(full, shape, eb, 0, r, 2));
        }
      }
    }
    // A replicated tensor: full and as_stored are the tensor itself, from one range.
    assertThat(readPlan(layout, "norm", ReadTarget.full())).isEqualTo(s.full.get("norm"));
    assertThat(readPlan(layout, "norm", ReadTarget.asStored(TensorParallelism.tp(3, 4, 0))))
        .isEqualTo(s.full.get("norm"));
  }

  @Test
  void tp2AndTp8ShardsOfDim0ReadOnlyTheNeededFiles() throws Exception {
    save(Dtype.BF16, 4);
    StoredLayout layout = StoredLayout.open(dir);
    // tp 2 rank 1 of a 24-row tensor = rows 12..23 = stored ranks 2 and 3, one range each.
    TensorReadPlan p2 =
        TensorReadPlanner.plan(layout, "rows", ReadTarget.shard(TensorParallelism.tp(1, 2, 0)));
    assertThat(p2.files()).containsExactly("rank_00002.safetensors", "rank_00003.safetensors");
    assertThat(p2.copies()).hasSize(2);
    assertThat(p2.shape()).containsExactly(12, 8);
    // tp 8 rank 5 = rows 15..17 = the second half of stored rank 2 (rows 12..17).
    TensorReadPlan p8 =
        TensorReadPlanner.plan(layout, "rows", ReadTarget.shard(TensorParallelism.tp(5, 8, 0)));
    assertThat(p8.files()).containsExactly("rank_00002.safetensors");
    assertThat(p8.copies()).hasSize(1);
    assertThat(p8.totalBytes()).isEqualTo(3 * 8 * 2);
  }

  @Test
  void scopeAxesFormTheIdentityAndAxisOrderDoesNotMatter() throws Exception {
    long[] shape = {8, 6};
    byte[] full = NaiveSlicer.data(Dtype.BF16, shape, 11);
    for (ParallelAxis scope :
        List.of(ParallelAxis.dp(1, 2), ParallelAxis.pp(0, 4), ParallelAxis.ep(3, 8))) {
      Path d = dir.resolve(scope.kind().label());
      for (int r = 0; r < 4; r++) {
        // Each writer holds the full tensor and stores only its shard (writer partition),
        // with the axes given tp-first to check canonicalisation.
        WriterPartition wp =
            new WriterPartition(new TensorParallelism(List.of(ParallelAxis.tp(r, 4, 0), scope)));
        ShardLayoutWriter.writeBatch(
            d,
            WriteBatch.withWriterPartitions(
                List.of(new TensorBytes("w", Dtype.BF16, shape, ByteBuffer.wrap(full))),
                List.of(wp)));
      }
      StoredLayout layout = StoredLayout.open(d);
      assertThat(layout.layoutAxes()).containsExactly(scope);
      for (int r = 0; r < 4; r++) {
        TensorParallelism scopeFirst = TensorParallelism.of(scope, ParallelAxis.tp(r, 4, 0));
        TensorParallelism tpFirst = TensorParallelism.of(ParallelAxis.tp(r, 4, 0), scope);
        assertThat(scopeFirst).isEqualTo(tpFirst).hasSameHashCodeAs(tpFirst);
        TensorReadPlan plan = TensorReadPlanner.plan(layout, "w", ReadTarget.shard(tpFirst));
        assertThat(plan.copies()).hasSize(1);
        try (FileByteSource src = FileByteSource.mapped(d)) {
          byte[] got = Reconstructor.read(plan, src).array();
          assertThat(got).isEqualTo(NaiveSlicer.shard(full, shape, 2, 0, r, 4));
        }
      }
      try (FileByteSource src = FileByteSource.channels(d)) {
        TensorReadPlan plan =
            TensorReadPlanner.plan(
                layout,
                "w",
                ReadTarget.full(TensorParallelism.of(ParallelAxis.tp(0, 4, 0), scope)));
        assertThat(Reconstructor.read(plan, src).array()).isEqualTo(full);
      }
      ParallelAxis other =
          new ParallelAxis(scope.kind(), (scope.rank() + 1) % scope.size(), scope.size(), null);
      assertThatThrownBy(
              () ->
                  TensorReadPlanner.plan(
                      layout,
                      "w",
                      ReadTarget.shard(TensorParallelism.of(other, ParallelAxis.tp(0, 4, 0)))))
          .isInstanceOf(TensorIoException.class)
          .hasMessageContaining("scope axes [" + other + "]")
          .hasMessageContaining("layout_axes [" + scope + "]")
          .extracting(e -> ((TensorIoException) e).reason())
          .isEqualTo(TensorIoException.Reason.IDENTITY_MISMATCH);
    }
  }

  @Test
  void parallelismBatchesFollowTheDesignWriteTable() throws Exception {
    long[] shape = {4, 8};
    byte[] full = NaiveSlicer.data(Dtype.I32, shape, 5);
    byte[] norm = NaiveSlicer.data(Dtype.I32, new long[] {8}, 6);
    for (int r = 0; r < 2; r++) {
      // [tp] alone: the caller passes the shard itself.
      byte[] shard = NaiveSlicer.shard(full, shape, 4, 1, r, 2);
      ShardLayoutWriter.writeBatch(
          dir.resolve("tp"),
          WriteBatch.withParallelisms(
              List.of(
                  new TensorBytes("w", Dtype.I32, new long[] {4, 4}, ByteBuffer.wrap(shard)),
                  new TensorBytes("norm", Dtype.I32, new long[] {8}, ByteBuffer.wrap(norm))),
              List.of(TensorParallelism.tp(r, 2, 1), TensorParallelism.tp(r, 2, 0))));
      // [pp, tp]: the caller passes the full tensor; only the tp shard is stored.
      ShardLayoutWriter.writeBatch(
          dir.resolve("pptp"),
          WriteBatch.withParallelisms(
              List.of(new TensorBytes("w", Dtype.I32, shape, ByteBuffer.wrap(full))),
              List.of(TensorParallelism.of(ParallelAxis.tp(r, 2, 1), ParallelAxis.pp(1, 2)))));
    }
    StoredLayout tp = StoredLayout.open(dir.resolve("tp"));
    assertThat(tp.manifest().orElseThrow().entry("w").globalShape()).containsExactly(4, 8);
    try (FileByteSource src = FileByteSource.channels(dir.resolve("tp"))) {
      assertThat(
              Reconstructor.read(TensorReadPlanner.plan(tp, "w", ReadTarget.full()), src).array())
          .isEqualTo(full);
    }
    StoredLayout pptp = StoredLayout.open(dir.resolve("pptp"));
    try (FileByteSource src = FileByteSource.channels(dir.resolve("pptp"))) {
      assertThat(
              Reconstructor.read(TensorReadPlanner.plan(pptp, "w", ReadTarget.full()), src).array())
          .isEqualTo(full);
    }
    // [dp] alone stores the object as passed (replicated), and does not split it.
    ShardManifest dp =
        ShardLayoutWriter.writeBatch(
            dir.resolve("dp"),
            WriteBatch.withParallelisms(
                List.of(new TensorBytes("w", Dtype.I32, shape, ByteBuffer.wrap(full))),
                List.of(TensorParallelism.of(ParallelAxis.dp(1, 2)))));
    assertThat(dp.tpSize()).isEqualTo(1);
    assertThat(dp.entry("w").splitDim()).isNull();
    assertThat(dp.layoutAxes()).containsExactly(ParallelAxis.dp(1, 2));
  }

  @Test
  void mixingParallelismsAndWriterPartitionsIsRejected() {
    TensorBytes t = new TensorBytes("w", Dtype.I8, new long[] {4}, ByteBuffer.allocate(4));
    assertThatThrownBy(
            () ->
                new WriteBatch(
                    List.of(t),
                    List.of(TensorParallelism.tp(0, 2, 0)),
                    List.of(WriterPartition.tp(0, 2, 0))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("both parallelisms and writer_partitions")
        .hasMessageContaining("ambiguous");
    assertThatThrownBy(() -> WriteBatch.withWriterPartitions(List.of(t), List.of()))
        .hasMessageContaining("1 tensors but 0 writer_partitions");
  }

  @Test
  void nonUniformSplitsAreRejectedWithTheNumbers() throws Exception {
    TensorBytes t = new TensorBytes("w", Dtype.F32, new long[] {10, 4}, ByteBuffer.allocate(160));
    assertThatThrownBy(() -> ShardLayoutWriter.save(dir, 4, List.of(), List.of(t), Map.of("w", 0)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "tensor \"w\" [10, 4]: dimension 0 = 10 does not split uniformly into tp size 4 (10 = 4"
                + " × 2 + 2)");
    assertThatThrownBy(
            () ->
                ShardLayoutWriter.writeBatch(
                    dir,
                    WriteBatch.withWriterPartitions(
                        List.of(t), List.of(WriterPartition.tp(1, 3, 1)))))
        .hasMessageContaining(
            "dimension 1 = 4 does not split uniformly into tp size 3 (4 = 3 × 1 + 1)");
    save(Dtype.I8, 4);
    StoredLayout layout = StoredLayout.open(dir);
    assertThatThrownBy(
            () ->
                TensorReadPlanner.plan(
                    layout, "rows", ReadTarget.shard(TensorParallelism.tp(0, 5, 0))))
        .isInstanceOf(TensorIoException.class)
        .hasMessageContaining(
            "dimension 0 = 24 does not split uniformly into tp size 5 (24 = 5 × 4 + 4)")
        .extracting(e -> ((TensorIoException) e).reason())
        .isEqualTo(TensorIoException.Reason.NOT_DIVISIBLE);
    assertThatThrownBy(
            () ->
                TensorReadPlanner.plan(
                    layout, "norm", ReadTarget.shard(TensorParallelism.tp(0, 2, 1))))
        .hasMessageContaining("split_dim 1 of tp:0/2@1 is outside its 1 dimensions");
    assertThatThrownBy(() -> TensorReadPlanner.plan(layout, "nope", ReadTarget.full()))
        .hasMessageContaining("no tensor \"nope\"");
    assertThatThrownBy(() -> TensorReadPlanner.plan(layout, "rows", ReadTarget.asStored()))
        .hasMessageContaining("the layout stores tp_size 4, so as_stored needs a parallelism");
    assertThatThrownBy(
            () ->
                TensorReadPlanner.plan(
                    layout, "rows", ReadTarget.asStored(TensorParallelism.tp(0, 2, 0))))
        .hasMessageContaining("names tp size 2 but the layout stores tp_size 4");
  }

  @Test
  void layoutsThatDisagreeWithTheirManifestAreRejected() throws Exception {
    save(Dtype.I8, 4);
    Files.delete(dir.resolve("rank_00003.safetensors"));
    assertThatThrownBy(() -> StoredLayout.open(dir))
        .isInstanceOf(ShardLayoutException.class)
        .hasMessageContaining("says tp_size 4 but rank_00003.safetensors is missing");

    Path other = dir.resolve("other");
    Files.createDirectories(other);
    ShardLayoutWriter.save(
        other,
        2,
        List.of(),
        List.of(new TensorBytes("w", Dtype.I8, new long[] {4, 2}, ByteBuffer.allocate(8))),
        Map.of("w", 0));
    // A manifest whose local_shape contradicts its own global shape is refused as written.
    String original = Files.readString(other.resolve("manifest.json"));
    Files.writeString(other.resolve("manifest.json"), original.replace("[ 4, 2 ]", "[ 8, 2 ]"));
    assertThatThrownBy(() -> StoredLayout.open(other))
        .hasMessageContaining("tensor \"w\": local_shape [2,2] disagrees with global_shape [8, 2]");
    // A manifest claiming a larger global shape than the rank files hold.
    String json = original.replace("[ 4, 2 ]", "[ 8, 2 ]").replace("[ 2, 2 ]", "[ 4, 2 ]");
    Files.writeString(other.resolve("manifest.json"), json);
    assertThatThrownBy(() -> StoredLayout.open(other))
        .hasMessageContaining("rank_00000.safetensors: tensor \"w\" has shape [2, 2]")
        .hasMessageContaining("implies [4, 2]");
  }

  @Test
  void manifestValidationNamesKeyAndNumbers() {
    String good =
        """
        {"format":"safetensors","tp_size":4,"keys":["w"],
         "tensors":{"w":{"global_shape":[10,4],"dtype":"BF16","split_dim":0,"shard_count":4}}}
        """;
    assertThatThrownBy(() -> ShardManifest.parse("m.json", good.getBytes()))
        .isInstanceOf(ShardLayoutException.class)
        .hasMessageContaining(
            "m.json: tensor \"w\": global_shape[0] = 10 is not divisible by tp_size 4");
    assertThatThrownBy(
            () ->
                ShardManifest.parse(
                    "m.json",
                    good.replace("[10,4]", "[8,4]")
                        .replace("\"shard_count\":4", "\"shard_count\":2")
                        .getBytes()))
        .hasMessageContaining("shard_count 2 differs from tp_size 4");
    assertThatThrownBy(
            () ->
                ShardManifest.parse(
                    "m.json", good.replace("\"keys\"", "\"extra\":1,\"keys\"").getBytes()))
        .hasMessageContaining("unknown field \"extra\"");
    assertThatThrownBy(
            () -> ShardManifest.parse("m.json", good.replace("\"tp_size\":4,", "").getBytes()))
        .hasMessageContaining("field \"tp_size\" is missing");
    assertThatThrownBy(
            () -> ShardManifest.parse("m.json", good.replace("\"w\"]", "\"w\",\"v\"]").getBytes()))
        .hasMessageContaining("key \"v\" is listed in keys but has no entry in tensors");
    assertThatThrownBy(
            () -> ShardManifest.parse("m.json", good.replace("BF16", "bfloat16").getBytes()))
        .hasMessageContaining("dtype \"bfloat16\" is not a safetensors dtype");
  }

  @Test
  void manifestRoundTripsThroughJson() throws Exception {
    ShardManifest m =
        new ShardManifest(
            2,
            "safetensors",
            List.of("w", "n"),
            new LinkedHashMap<>(
                Map.of(
                    "w", new ShardManifest.Entry(new long[] {4, 6}, Dtype.BF16, 1, 2),
                    "n", new ShardManifest.Entry(new long[] {6}, Dtype.F32, null, 1))),
            List.of(ParallelAxis.pp(1, 2), ParallelAxis.dp(0, 2)));
    ShardManifest back = ShardManifest.parse("x", m.toJson());
    assertThat(back).isEqualTo(m);
    assertThat(back.layoutAxes()).containsExactly(ParallelAxis.dp(0, 2), ParallelAxis.pp(1, 2));
    assertThat(new String(m.toJson())).contains("\"split_dim\" : null").contains("\"tp_size\" : 2");
  }

  @Test
  void aDifferentExistingManifestIsAConflict() throws Exception {
    byte[] full = new byte[8];
    ShardLayoutWriter.writeBatch(
        dir,
        WriteBatch.withWriterPartitions(
            List.of(new TensorBytes("w", Dtype.I8, new long[] {8}, ByteBuffer.wrap(full))),
            List.of(WriterPartition.tp(0, 2, 0))));
    assertThatThrownBy(
            () ->
                ShardLayoutWriter.writeBatch(
                    dir,
                    WriteBatch.withWriterPartitions(
                        List.of(
                            new TensorBytes("w", Dtype.I8, new long[] {8}, ByteBuffer.wrap(full))),
                        List.of(WriterPartition.tp(1, 4, 0)))))
        .isInstanceOf(ShardLayoutException.class)
        .hasMessageContaining("differs from what this batch (tp rank 1 of 4) implies");
  }

  @Test
  void readsEqualAcrossByteSources() throws Exception {
    Saved s = save(Dtype.F32, 4);
    StoredLayout layout = StoredLayout.open(dir);
    Map<String, ByteBuffer> files = new HashMap<>();
    for (String f : layout.files()) {
      files.put(f, ByteBuffer.wrap(Files.readAllBytes(dir.resolve(f))));
    }
    TensorReadPlan plan =
        TensorReadPlanner.plan(layout, "cube", ReadTarget.shard(TensorParallelism.tp(1, 3, 1)));
    byte[] expected = NaiveSlicer.shard(s.full.get("cube"), SHAPES.get("cube"), 4, 1, 1, 3);
    assertThat(Reconstructor.read(plan, StoredFiles.ofBuffers(files)).array()).isEqualTo(expected);
    try (FileByteSource m = FileByteSource.mapped(dir)) {
      // Into a direct buffer at a non-zero position.
      ByteBuffer dst = ByteBuffer.allocateDirect(expected.length + 16);
      dst.position(16);
      Reconstructor.execute(plan, m, dst);
      assertThat(dst.position()).isEqualTo(16 + expected.length);
      byte[] got = new byte[expected.length];
      dst.position(16);
      dst.get(got);
      assertThat(got).isEqualTo(expected);
    }
    // Range windows (HTTP Range) reassemble the same bytes.
    byte[] assembled = new byte[expected.length];
    for (long from = 0; from < expected.length; from += 7) {
      long to = Math.min(expected.length, from + 7);
      for (RangeCopy c : plan.copiesInRange(from, to)) {
        ByteBuffer b = ByteBuffer.allocate((int) c.length());
        StoredFiles.ofBuffers(files).read(c.file(), c.sourceOffset(), b);
        System.arraycopy(
            b.array(), 0, assembled, (int) (from + c.destinationOffset()), (int) c.length());
      }
    }
    assertThat(assembled).isEqualTo(expected);
  }
}
