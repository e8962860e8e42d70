package io.tensorcast.dataplane.consumer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.netty.handler.codec.http.QueryStringDecoder;
import io.tensorcast.dataplane.consumer.TensorQuery.Axis;
import io.tensorcast.dataplane.consumer.TensorQuery.Target;
import io.tensorcast.dataplane.tensor.ParallelAxis;
import io.tensorcast.dataplane.tensor.ParallelAxis.Kind;
import io.tensorcast.dataplane.tensor.TensorParallelism;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;

class TensorQueryTest {

  private static TensorQuery parse(String query) throws TensorReadException {
    return TensorQuery.parse(new QueryStringDecoder("/v1/tensors/x" + query).parameters());
  }

  private static void rejected(String query, String... messageParts) {
    assertThatThrownBy(() -> parse(query))
        .isInstanceOfSatisfying(
            TensorReadException.class,
            e -> {
              assertThat(e.status()).isEqualTo(400);
              assertThat(e.reason()).isEqualTo("BadParameter");
            })
        .hasMessageContainingAll(messageParts);
  }

  @Test
  void asStoredIsTheDefault() throws Exception {
    assertThat(parse("")).isEqualTo(TensorQuery.AS_STORED);
    assertThat(parse("?target=as_stored")).isEqualTo(TensorQuery.AS_STORED);
    assertThat(parse("").canonical()).isEqualTo("target=as_stored");
    assertThat(parse("?target=full").target()).isEqualTo(Target.FULL);
  }

  @Test
  void shardParallelismIsParsedAndCanonicalised() throws Exception {
    TensorQuery q = parse("?target=shard&parallelism=dp:1/2,tp:3/4@1,ep:0/8,pp:2/3");
    assertThat(q.target()).isEqualTo(Target.SHARD);
    assertThat(q.parallelism())
        .containsExactly(
            new Axis(Kind.DP, 1, 2, OptionalInt.empty()),
            new Axis(Kind.PP, 2, 3, OptionalInt.empty()),
            new Axis(Kind.EP, 0, 8, OptionalInt.empty()),
            new Axis(Kind.TP, 3, 4, OptionalInt.of(1)));
    assertThat(q.canonical()).isEqualTo("target=shard&parallelism=dp:1/2,pp:2/3,ep:0/8,tp:3/4@1");
    // The same canonical form as the tensor package's TensorParallelism.
    assertThat(q.canonical())
        .endsWith(TensorParallelism.parse("ep:0/8,tp:3/4@1,pp:2/3,dp:1/2").toString());
    assertThat(q.parallelism().get(3).toParallelAxis(0)).isEqualTo(ParallelAxis.tp(3, 4, 1));
    assertThat(parse("?target=shard&parallelism=tp:0/2").parallelism().get(0).toParallelAxis(1))
        .isEqualTo(ParallelAxis.tp(0, 2, 1));
    assertThat(parse("?target=shard&parallelism=tp:3/4@1,dp:1/2"))
        .isEqualTo(parse("?parallelism=dp:1/2,tp:3/4@1&target=shard"));
    assertThat(parse("?target=shard&parallelism=tp:0/1").parallelism())
        .containsExactly(new Axis(Kind.TP, 0, 1, OptionalInt.empty()));
  }

  @Test
  void badParametersAreNamed() {
    rejected("?target=sharded", "target='sharded'", "as_stored, shard, full");
    rejected("?tgt=full", "unknown query parameter 'tgt'");
    rejected("?target=full&target=full", "'target' is given 2 times");
    rejected("?target=shard", "target=shard needs parallelism");
    rejected("?parallelism=tp:0/2", "applies to target=shard only, not target=as_stored");
    rejected("?target=full&parallelism=tp:0/2", "not target=full");
    rejected("?target=shard&parallelism=tp:2/2", "axis 'tp:2/2'", "0 <= RANK < SIZE");
    rejected("?target=shard&parallelism=tp:0/0", "axis 'tp:0/0'", "0 <= RANK < SIZE");
    rejected("?target=shard&parallelism=xp:0/2", "kind 'xp'", "not tp, dp, pp or ep");
    rejected("?target=shard&parallelism=tp:0/2,tp:1/2", "repeats the kind tp");
    rejected("?target=shard&parallelism=dp:0/2@1", "axis 'dp:0/2@1'", "only tp");
    rejected("?target=shard&parallelism=tp:a/2", "RANK 'a'");
    rejected("?target=shard&parallelism=tp:-1/2", "RANK '-1'");
    rejected("?target=shard&parallelism=tp:0/2@", "DIM ''");
    rejected("?target=shard&parallelism=tp0/2", "is not KIND:RANK/SIZE");
    rejected("?target=shard&parallelism=tp:0/2,", "axis ''");
    rejected("?target=shard&parallelism=tp:0/99999999", "SIZE 99999999", "above the limit");
  }
}
