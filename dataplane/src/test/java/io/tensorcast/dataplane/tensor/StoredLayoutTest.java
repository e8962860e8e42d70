package io.tensorcast.dataplane.tensor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.tensor.ShardLayoutWriter.TensorBytes;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Opening plain checkpoints (with and without an HF index) and shard layouts from disk. */
class StoredLayoutTest {

  @TempDir Path dir;

  private void writeFile(String file, String tensor, long[] shape, byte[] data) throws Exception {
    Files.createDirectories(dir.resolve(file).getParent());
    SafetensorsWriter.write(
        dir.resolve(file),
        List.of(new TensorDeclaration(tensor, Dtype.I32, shape)),
        Map.of("format", "pt"),
        List.of(ByteBuffer.wrap(data)));
  }

  @Test
  void hfIndexedCheckpointIsReadThroughItsWeightMap() throws Exception {
    long[] shape = {6, 4};
    byte[] a = NaiveSlicer.data(Dtype.I32, shape, 1);
    byte[] b = NaiveSlicer.data(Dtype.I32, shape, 2);
    writeFile("model-00001-of-00002.safetensors", "layers.0.w", shape, a);
    writeFile("model-00002-of-00002.safetensors", "layers.1.w", shape, b);
    // A stray file the index does not name is ignored.
    writeFile("stray.safetensors", "layers.0.w", shape, b);
    Files.writeString(
        dir.resolve("model.safetensors.index.json"),
        """
        {"metadata": {"total_size": 192},
         "weight_map": {"layers.0.w": "model-00001-of-00002.safetensors",
                        "layers.1.w": "model-00002-of-00002.safetensors"}}
        """);
    StoredLayout layout = StoredLayout.open(dir);
    assertThat(layout.kind()).isEqualTo(StoredLayout.Kind.SAFETENSORS_FILES);
    assertThat(layout.files())
        .containsExactly("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors");
    try (FileByteSource src = FileByteSource.channels(dir)) {
      TensorReadPlan p =
          TensorReadPlanner.plan(
              layout, "layers.1.w", ReadTarget.shard(TensorParallelism.tp(2, 3, 0)));
      assertThat(p.copies()).hasSize(1);
      assertThat(p.files()).containsExactly("model-00002-of-00002.safetensors");
      assertThat(Reconstructor.read(p, src).array())
          .isEqualTo(NaiveSlicer.shard(b, shape, 4, 0, 2, 3));
      TensorReadPlan full = TensorReadPlanner.plan(layout, "layers.0.w", ReadTarget.asStored());
      assertThat(Reconstructor.read(full, src).array()).isEqualTo(a);
    }
    Files.writeString(
        dir.resolve("model.safetensors.index.json"),
        """
        {"weight_map": {"layers.0.w": "model-00002-of-00002.safetensors",
                        "layers.1.w": "model-00002-of-00002.safetensors"}}
        """);
    assertThatThrownBy(() -> StoredLayout.open(dir))
        .isInstanceOf(ShardLayoutException.class)
        .hasMessageContaining(
            "maps \"layers.0.w\" to model-00002-of-00002.safetensors but no file declares it");
    Files.writeString(
        dir.resolve("model.safetensors.index.json"),
        """
        {"weight_map": {"layers.0.w": "../outside.safetensors"}}
        """);
    assertThatThrownBy(() -> StoredLayout.open(dir))
        .isInstanceOf(ShardLayoutException.class)
        .hasMessageContaining(
            "names shard \"../outside.safetensors\": a shard is a file name relative to the"
                + " index's folder");
  }

  @Test
  void plainFilesWithoutIndexMustNotRepeatATensor() throws Exception {
    writeFile("a.safetensors", "w", new long[] {2}, new byte[8]);
    writeFile("b.safetensors", "w", new long[] {2}, new byte[8]);
    assertThatThrownBy(() -> StoredLayout.open(dir))
        .hasMessage("tensor \"w\" is declared in both a.safetensors and b.safetensors");
    Path empty = Files.createDirectories(dir.resolve("empty"));
    assertThatThrownBy(() -> StoredLayout.open(empty))
        .hasMessageContaining(
            "no manifest.json, no model.safetensors.index.json and no *.safetensors");
  }

  @Test
  void extraRankFilesAndForeignTensorsAreRejected() throws Exception {
    ShardLayoutWriter.save(
        dir,
        2,
        List.of(),
        List.of(new TensorBytes("w", Dtype.I32, new long[] {4}, ByteBuffer.allocate(16))),
        Map.of("w", 0));
    Files.copy(dir.resolve("rank_00001.safetensors"), dir.resolve("rank_00002.safetensors"));
    assertThatThrownBy(() -> StoredLayout.open(dir))
        .hasMessageContaining("says tp_size 2 but rank_00002.safetensors exists too");
    Files.delete(dir.resolve("rank_00002.safetensors"));
    writeFile("rank_00001.safetensors", "v", new long[] {2}, new byte[8]);
    assertThatThrownBy(() -> StoredLayout.open(dir))
        .hasMessageContaining(
            "rank_00001.safetensors declares tensor \"v\" that manifest.json does not list");
  }

  @Test
  void byteSourcesRefusePathsOutsideTheirDirectory() throws Exception {
    try (FileByteSource src = FileByteSource.channels(dir)) {
      assertThatThrownBy(() -> src.read("../etc/passwd", 0, ByteBuffer.allocate(1)))
          .hasMessageContaining("resolves outside");
    }
  }
}
