package io.tensorcast.dataplane.bench;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.dataplane.tensor.ReadTarget;
import io.tensorcast.dataplane.tensor.StoredLayout;
import io.tensorcast.dataplane.tensor.TensorParallelism;
import io.tensorcast.dataplane.tensor.TensorReadPlan;
import io.tensorcast.dataplane.tensor.TensorReadPlanner;
import io.tensorcast.testing.Corpus;
import org.junit.jupiter.api.Test;

/** The 70B layout the planning benchmark uses is the real model's: sizes match the index. */
class LlamaShapesTest {

  @Test
  void derivedShapesAddUpToTheIndexTotalSize() throws Exception {
    LlamaShapes.Model m = LlamaShapes.read(Corpus.dir().resolve("index/reflection-llama-3-1-70b"));
    assertThat(m.tensors()).hasSize(723);
    assertThat(m.derivedTotalSize()).isEqualTo(m.indexTotalSize()).isEqualTo(282_215_219_200L);
    StoredLayout tp4 = LlamaShapes.shardLayout(m, 4);
    // o_proj is row-parallel: a tp 8 shard from tp 4 is one 1024-column run per row.
    TensorReadPlan p =
        TensorReadPlanner.plan(
            tp4,
            "model.layers.0.self_attn.o_proj.weight",
            ReadTarget.shard(TensorParallelism.tp(3, 8, 1)));
    assertThat(p.shape()).containsExactly(8192, 1024);
    assertThat(p.copies()).hasSize(8192);
    assertThat(p.files()).containsExactly("rank_00001.safetensors");
    // q_proj is column-parallel: half of stored rank 1, one range.
    TensorReadPlan q =
        TensorReadPlanner.plan(
            tp4,
            "model.layers.0.self_attn.q_proj.weight",
            ReadTarget.shard(TensorParallelism.tp(3, 8, 0)));
    assertThat(q.copies()).hasSize(1);
    assertThat(q.totalBytes()).isEqualTo(1024L * 8192 * 4);
  }
}
