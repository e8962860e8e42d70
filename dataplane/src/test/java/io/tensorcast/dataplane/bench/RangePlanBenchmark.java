package io.tensorcast.dataplane.bench;

import io.tensorcast.dataplane.tensor.ReadTarget;
import io.tensorcast.dataplane.tensor.StoredLayout;
import io.tensorcast.dataplane.tensor.StoredTensor;
import io.tensorcast.dataplane.tensor.TensorParallelism;
import io.tensorcast.dataplane.tensor.TensorReadPlanner;
import io.tensorcast.testing.Corpus;
import java.nio.file.Path;
import java.util.List;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Range planning for a 70B-class layout: the corpus's Reflection Llama 3.1 70B (723 tensors, shapes
 * from its config.json, names from its model.safetensors.index.json), stored as TP=4 shards. One
 * invocation plans every tensor for every rank of TP=8 (5,784 plans) or of the exact TP=4 layout
 * (2,892 plans); scores are per plan.
 */
@State(Scope.Benchmark)
public class RangePlanBenchmark {

  /** Tensors in the model. */
  public static final int TENSORS = 723;

  StoredLayout tp4;
  List<String> names;
  ReadTarget[][] tp8;
  ReadTarget[][] tp4Exact;

  /** The corpus directory ({@link Corpus}); a benchmark without it cannot run. */
  static Path corpus() {
    return Corpus.find()
        .orElseThrow(
            () ->
                new IllegalStateException(
                    "corpus not found: set -Dtensorcast.corpus or put it at ../shared/corpus"
                        + " beside the repository"));
  }

  @Setup
  public void setup() throws Exception {
    LlamaShapes.Model m = LlamaShapes.read(corpus().resolve("index/reflection-llama-3-1-70b"));
    if (m.tensors().size() != TENSORS) {
      throw new IllegalStateException(
          "expected " + TENSORS + " tensors, got " + m.tensors().size());
    }
    tp4 = LlamaShapes.shardLayout(m, 4);
    names = tp4.tensorNames();
    tp8 = targets(8);
    tp4Exact = targets(4);
  }

  private ReadTarget[][] targets(int size) {
    ReadTarget[][] t = new ReadTarget[size][names.size()];
    for (int r = 0; r < size; r++) {
      for (int i = 0; i < names.size(); i++) {
        StoredTensor st = tp4.tensor(names.get(i)).orElseThrow();
        int dim = st.splitDim() == null ? 0 : st.splitDim();
        t[r][i] = ReadTarget.shard(TensorParallelism.tp(r, size, dim));
      }
    }
    return t;
  }

  /** Every tensor, every rank of TP=8, from the TP=4 store (heterogeneous). */
  @Benchmark
  @OperationsPerInvocation(8 * TENSORS)
  public void planTp8FromTp4(Blackhole bh) {
    for (ReadTarget[] rank : tp8) {
      for (int i = 0; i < rank.length; i++) {
        bh.consume(TensorReadPlanner.plan(tp4, names.get(i), rank[i]).copies().size());
      }
    }
  }

  /** Every tensor, every rank of TP=4, from the TP=4 store (exact match: one range each). */
  @Benchmark
  @OperationsPerInvocation(4 * TENSORS)
  public void planTp4Exact(Blackhole bh) {
    for (ReadTarget[] rank : tp4Exact) {
      for (int i = 0; i < rank.length; i++) {
        bh.consume(TensorReadPlanner.plan(tp4, names.get(i), rank[i]).copies().size());
      }
    }
  }
}
