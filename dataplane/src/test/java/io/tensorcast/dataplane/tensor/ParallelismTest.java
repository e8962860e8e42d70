package io.tensorcast.dataplane.tensor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class ParallelismTest {

  @Test
  void axesAreValidatedWithClearErrors() {
    assertThatThrownBy(() -> ParallelAxis.tp(4, 4, 0))
        .hasMessage("tp axis: rank 4 is outside [0, 4) for size 4");
    assertThatThrownBy(() -> ParallelAxis.dp(0, 0)).hasMessage("dp axis: size 0 must be >= 1");
    assertThatThrownBy(() -> new ParallelAxis(ParallelAxis.Kind.TP, 0, 2, null))
        .hasMessageContaining("split_dim is required");
    assertThatThrownBy(() -> new ParallelAxis(ParallelAxis.Kind.EP, 0, 2, 1))
        .hasMessageContaining("split_dim 1 is only allowed on a tp axis");
    assertThatThrownBy(() -> ParallelAxis.tp(0, 2, -1)).hasMessageContaining("split_dim -1 < 0");
    assertThatThrownBy(() -> ParallelAxis.Kind.fromLabel("sp"))
        .hasMessageContaining("unknown parallel axis kind \"sp\": expected one of tp, dp, pp, ep");
  }

  @Test
  void parallelismIsCanonicalAndOneAxisPerKind() {
    TensorParallelism a =
        TensorParallelism.of(
            ParallelAxis.tp(1, 4, 0), ParallelAxis.pp(0, 2), ParallelAxis.dp(1, 2));
    TensorParallelism b =
        TensorParallelism.of(
            ParallelAxis.dp(1, 2), ParallelAxis.pp(0, 2), ParallelAxis.tp(1, 4, 0));
    assertThat(a).isEqualTo(b).hasSameHashCodeAs(b);
    assertThat(a.toString()).isEqualTo("dp:1/2,pp:0/2,tp:1/4@0");
    assertThat(a.scopeAxes()).containsExactly(ParallelAxis.dp(1, 2), ParallelAxis.pp(0, 2));
    assertThat(a.tp()).contains(ParallelAxis.tp(1, 4, 0));
    assertThat(TensorParallelism.parse("tp:1/4@0, pp:0/2,dp:1/2")).isEqualTo(a);
    assertThat(a.axes()).isUnmodifiable();
    assertThatThrownBy(() -> TensorParallelism.of(ParallelAxis.dp(0, 2), ParallelAxis.dp(1, 2)))
        .hasMessageContaining("axis kind dp appears twice");
    assertThatThrownBy(() -> new TensorParallelism(List.of()))
        .hasMessageContaining("at least one axis");
    assertThatThrownBy(() -> TensorParallelism.parse("tp:1of4"))
        .hasMessageContaining("expected kind:rank/size");
  }

  @Test
  void readTargetsAndWriterPartitionsNeedATpAxisWhereTheyNameAShard() {
    assertThatThrownBy(() -> ReadTarget.shard(TensorParallelism.of(ParallelAxis.dp(0, 2))))
        .hasMessageContaining("no tp axis; only tp defines a shard");
    assertThatThrownBy(() -> new ReadTarget(ReadTarget.Mode.SHARD, null))
        .hasMessageContaining("needs a parallelism");
    assertThatThrownBy(() -> new WriterPartition(TensorParallelism.of(ParallelAxis.ep(0, 8))))
        .hasMessageContaining("writer_partition ep:0/8 has no tp axis");
    assertThat(ReadTarget.Mode.fromLabel("as_stored")).isEqualTo(ReadTarget.Mode.AS_STORED);
    assertThat(ReadTarget.shard(TensorParallelism.tp(0, 2, 1)).toString())
        .isEqualTo("shard(tp:0/2@1)");
  }
}
