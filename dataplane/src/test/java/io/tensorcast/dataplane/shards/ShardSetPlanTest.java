package io.tensorcast.dataplane.shards;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.tensor.StoredTensor;
import io.tensorcast.testing.Corpus;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/** The plan's checks and decisions, on tensors declared in memory and on real index names. */
class ShardSetPlanTest {

  static StoredTensor t(String name, long... shape) {
    return new StoredTensor(
        name,
        Dtype.BF16,
        shape,
        null,
        List.of(new StoredTensor.Piece("f.safetensors", 0, new long[shape.length], shape)));
  }

  static ShardRules rules(ShardRules.Spec... specs) {
    return ShardRules.explicit(List.of(specs));
  }

  static ShardRules.Spec split(String p, int d) {
    return new ShardRules.Spec(p, d, null, null);
  }

  static ShardRules.Spec replicate(String p) {
    return new ShardRules.Spec(p, null, true, null);
  }

  static ShardPlanException fails(List<StoredTensor> ts, ShardRules r, Parallelism p) {
    try {
      ShardSetPlan.plan(ts, r, p);
    } catch (ShardPlanException e) {
      return e;
    }
    throw new AssertionError("expected a ShardPlanException");
  }

  static final Parallelism TP4 = new Parallelism(1, 1, 1, 4);

  @Test
  void splitDimOutOfRangeNamesTensorRuleAndDimensions() {
    ShardPlanException e = fails(List.of(t("norm.weight", 64)), rules(split("norm", 1)), TP4);
    assertThat(e.reason()).isEqualTo(Reason.SplitDimOutOfRange);
    assertThat(e.getMessage())
        .contains("\"norm.weight\"")
        .contains("[64]")
        .contains("1 dimension")
        .contains("spec.rules[0]")
        .contains("splits dimension 1");
  }

  @Test
  void sizesThatDoNotDivideSayWhichTensorAndSizes() {
    ShardPlanException e =
        fails(List.of(t("w", 10, 8)), rules(split("w", 0)), new Parallelism(1, 1, 1, 3));
    assertThat(e.reason()).isEqualTo(Reason.NotDivisible);
    assertThat(e.getMessage())
        .contains("\"w\" BF16[10, 8]")
        .contains("dimension 0 = 10")
        .contains("tp 3")
        .contains("10 = 3 × 3 + 1");
  }

  @Test
  void aRuleThatMatchesNoTensor() {
    ShardPlanException e =
        fails(List.of(t("w", 8, 8)), rules(split("w", 0), replicate("bias$")), TP4);
    assertThat(e.reason()).isEqualTo(Reason.RuleMatchesNoTensor);
    assertThat(e.getMessage()).contains("spec.rules[1] ('bias$', replicate)");
  }

  @Test
  void aTensorNoExplicitRuleCovers() {
    ShardPlanException e =
        fails(List.of(t("w", 8, 8), t("extra.scale", 4)), rules(split("^w$", 0)), TP4);
    assertThat(e.reason()).isEqualTo(Reason.TensorNotCovered);
    assertThat(e.getMessage()).contains("\"extra.scale\"").contains("spec.rules");
  }

  @Test
  void epThatDoesNotDivideTheExperts() {
    List<StoredTensor> ts = new ArrayList<>();
    for (int x = 0; x < 8; x++) {
      ts.add(t("layers.0.experts." + x + ".w1.weight", 8, 8));
    }
    ShardRules r = rules(new ShardRules.Spec("experts\\.(?<expert>[0-9]+)\\.", 0, null, true));
    ShardPlanException e = fails(ts, r, new Parallelism(1, 1, 3, 1));
    assertThat(e.reason()).isEqualTo(Reason.ExpertsNotDivisible);
    assertThat(e.getMessage()).contains("8 experts").contains("ep 3").contains("8 = 3 × 2 + 2");
  }

  @Test
  void expertsGoOnlyToTheirOwnersAndLayersToTheirStage() throws Exception {
    List<StoredTensor> ts = new ArrayList<>();
    for (int l = 0; l < 4; l++) {
      for (int x = 0; x < 4; x++) {
        ts.add(t("model.layers." + l + ".mlp.experts." + x + ".up_proj.weight", 8, 8));
      }
    }
    ts.add(t("model.norm.weight", 8));
    ShardRules r = BuiltinRules.forArchitectures(List.of("Qwen2MoeForCausalLM")).orElseThrow();
    ShardSetPlan plan = ShardSetPlan.plan(ts, r, new Parallelism(1, 2, 2, 2));
    // rank = (pp × 2 + ep) × 2 + tp: rank 6 is pp 1, ep 1, tp 0
    ShardSetPlan.RankFile f = plan.rankFile(6);
    assertThat(f.layoutDirectory()).isEqualTo("pp1-ep1/");
    assertThat(f.file()).isEqualTo("pp1-ep1/rank_00000.safetensors");
    assertThat(f.slices())
        .extracting(s -> s.info().name())
        .containsExactlyInAnyOrder(
            "model.layers.2.mlp.experts.2.up_proj.weight",
            "model.layers.2.mlp.experts.3.up_proj.weight",
            "model.layers.3.mlp.experts.2.up_proj.weight",
            "model.layers.3.mlp.experts.3.up_proj.weight",
            "model.norm.weight");
    assertThat(f.manifest().layoutAxes()).hasToString("[pp:1/2, ep:1/2]");
  }

  @Test
  void builtinRulesOnARealMoeIndexOwnEveryExpertTensorAndSplitTheAttention() throws IOException {
    JsonNode wm =
        new ObjectMapper()
            .readTree(
                Corpus.dir()
                    .resolve("index/qwen3-5-25b-reap-a3b-coding/model.safetensors.index.json")
                    .toFile())
            .get("weight_map");
    ShardRules r =
        BuiltinRules.forArchitectures(List.of("Qwen3_5MoeForConditionalGeneration")).orElseThrow();
    assertThat(r.name()).isEqualTo("built-in Qwen-MoE (Qwen3_5MoeForConditionalGeneration)");
    TreeSet<Integer> experts = new TreeSet<>();
    int expertTensors = 0;
    for (Iterator<Map.Entry<String, JsonNode>> it = wm.fields(); it.hasNext(); ) {
      String name = it.next().getKey();
      var m = r.match(name);
      if (name.contains(".mlp.experts.")) {
        assertThat(m).as(name).isPresent();
        assertThat(m.get().rule().expertOwned()).as(name).isTrue();
        experts.add(m.get().expert());
        expertTensors++;
        assertThat(m.get().rule().splitDim())
            .as(name)
            .isEqualTo(name.endsWith("down_proj.weight") ? 1 : 0);
      }
      if (name.endsWith("self_attn.q_proj.weight") || name.endsWith("lm_head.weight")) {
        assertThat(m.get().rule().splitDim()).as(name).isEqualTo(0);
      }
      if (name.endsWith("self_attn.o_proj.weight")) {
        assertThat(m.get().rule().splitDim()).as(name).isEqualTo(1);
      }
      if (name.endsWith("mlp.gate.weight")) {
        assertThat(m.get().rule().replicate()).as(name).isTrue();
      }
    }
    assertThat(expertTensors).isEqualTo(21600);
    assertThat(experts.first()).isZero();
    assertThat(experts.last()).isEqualTo(179);
  }

  @Test
  void noBuiltinRuleSetForFalcon() {
    assertThat(BuiltinRules.forArchitectures(List.of("FalconForCausalLM"))).isEmpty();
    assertThatThrownBy(() -> ShardRules.explicit(List.of(new ShardRules.Spec("(", 0, null, null))))
        .hasMessageContaining("spec.rules[0].pattern '(' is not a valid Java regular expression");
    assertThatThrownBy(() -> ShardRules.explicit(List.of(new ShardRules.Spec("x", 0, true, null))))
        .hasMessageContaining("exactly one of splitDim and replicate");
  }

  @Test
  void parallelismRoundTripsAndNumbersRanksWithTpFastest() {
    Parallelism p = Parallelism.parse("ep:2,tp:4,dp:2");
    assertThat(p.describe()).isEqualTo("dp:2,ep:2,tp:4");
    assertThat(p.worldSize()).isEqualTo(16);
    assertThat(p.coordinates(13)).isEqualTo(new Parallelism.Coordinates(1, 0, 1, 1));
    assertThat(p.describe(p.coordinates(13))).isEqualTo("dp:1/2,pp:0/1,ep:1/2,tp:1/4");
  }
}
