package io.tensorcast.dataplane.tensor;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.tensor.ShardLayoutWriter.TensorBytes;
import io.tensorcast.testing.Corpus;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The corpus's per-rank example files ({@code rank-files/}, read in place) through the reader: as a
 * plain layout, then re-saved as a TP shard layout and read back.
 */
class CorpusRankFilesTest {

  @TempDir Path out;

  @Test
  void corpusRankFilesRoundTripThroughTheReader() throws Exception {
    Path dir = Corpus.dir().resolve("rank-files");
    StoredLayout layout = StoredLayout.open(dir);
    assertThat(layout.kind()).isEqualTo(StoredLayout.Kind.SAFETENSORS_FILES);
    assertThat(layout.files())
        .containsExactly("fastsafetensors__a.safetensors", "fastsafetensors__b.safetensors");
    assertThat(layout.tensorNames()).containsExactly("a0", "b0");
    int checked = 0;
    try (FileByteSource src = FileByteSource.mapped(dir)) {
      for (String file : layout.files()) {
        SafetensorsHeader h = SafetensorsHeader.read(dir.resolve(file));
        byte[] raw = Files.readAllBytes(dir.resolve(file));
        for (TensorInfo t : h.tensors()) {
          byte[] expected =
              Arrays.copyOfRange(
                  raw, (int) (h.dataOffset() + t.begin()), (int) (h.dataOffset() + t.end()));
          TensorReadPlan full = TensorReadPlanner.plan(layout, t.name(), ReadTarget.full());
          assertThat(full.copies()).hasSize(1);
          assertThat(full.dtype()).isEqualTo(t.dtype());
          assertThat(full.shape()).isEqualTo(t.shape());
          assertThat(Reconstructor.read(full, src).array()).isEqualTo(expected);
          int eb = t.dtype().bitSize() / 8;
          // Shards of the plain file, then a tp 4 layout of it read back as tp 2 and full.
          for (int r = 0; r < 2; r++) {
            TensorReadPlan p =
                TensorReadPlanner.plan(
                    layout, t.name(), ReadTarget.shard(TensorParallelism.tp(r, 2, 1)));
            assertThat(Reconstructor.read(p, src).array())
                .isEqualTo(NaiveSlicer.shard(expected, t.shape(), eb, 1, r, 2));
          }
          Path saved = out.resolve(t.name());
          ShardLayoutWriter.save(
              saved,
              4,
              List.of(),
              List.of(new TensorBytes(t.name(), t.dtype(), t.shape(), ByteBuffer.wrap(expected))),
              Map.of(t.name(), 0));
          StoredLayout sharded = StoredLayout.open(saved);
          try (FileByteSource s2 = FileByteSource.channels(saved)) {
            assertThat(
                    Reconstructor.read(
                            TensorReadPlanner.plan(sharded, t.name(), ReadTarget.full()), s2)
                        .array())
                .isEqualTo(expected);
            for (int r = 0; r < 2; r++) {
              TensorReadPlan p =
                  TensorReadPlanner.plan(
                      sharded, t.name(), ReadTarget.shard(TensorParallelism.tp(r, 2, 0)));
              assertThat(Reconstructor.read(p, s2).array())
                  .isEqualTo(NaiveSlicer.shard(expected, t.shape(), eb, 0, r, 2));
            }
          }
          checked++;
        }
      }
    }
    assertThat(checked).isEqualTo(2);
  }
}
