package io.tensorcast.dataplane.shards;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Split rules for common Hugging Face architectures, chosen from {@code config.json}'s {@code
 * architectures}. Dimensions follow the weights' {@code [out, in]} layout and the tensor-parallel
 * scheme of Megatron-LM as vLLM applies it: column-parallel projections (q, k, v, gate, up, the
 * embedding and the LM head, split by vocabulary) along dim 0, row-parallel projections (o, down)
 * along dim 1, biases of column-parallel projections along dim 0, norms and routers replicated.
 * Expert tensors ({@code experts.N.}) are expert-owned and split like the dense MLP. Tensors no
 * rule names (e.g. MLA's low-rank projections, linear-attention parameters) are replicated.
 *
 * <p>Known limit: when {@code tp} exceeds {@code num_key_value_heads}, splitting k and v along dim
 * 0 cuts inside heads (vLLM replicates whole heads instead); give explicit rules for such layouts.
 */
public final class BuiltinRules {

  private BuiltinRules() {}

  /** The dense decoder: Llama, Qwen2/Qwen3, Mistral and their kin. */
  static List<ShardRules.Rule> dense() {
    List<ShardRules.Rule> r = new ArrayList<>();
    add(r, "(?:^|\\.)(?:embed_tokens|wte|word_embeddings)\\.weight$", 0, false);
    add(r, "(?:^|\\.)lm_head\\.weight$", 0, false);
    add(r, "self_attn\\.(?:q|k|v)_proj\\.(?:weight|bias)$", 0, false);
    add(r, "self_attn\\.o_proj\\.weight$", 1, false);
    add(r, "self_attn\\.o_proj\\.bias$", null, false);
    add(r, "mlp\\.(?:gate|up)_proj\\.weight$", 0, false);
    add(r, "mlp\\.down_proj\\.weight$", 1, false);
    return r;
  }

  /** Mixture-of-experts additions: Mixtral ({@code w1 w2 w3}), Qwen-MoE and DeepSeek experts. */
  static List<ShardRules.Rule> experts() {
    List<ShardRules.Rule> r = new ArrayList<>();
    String e = "\\.experts\\.(?<expert>[0-9]+)\\.";
    add(r, e + "(?:w1|w3|gate_proj|up_proj)\\.weight$", 0, true);
    add(r, e + "(?:w2|down_proj)\\.weight$", 1, true);
    add(r, "(?:block_sparse_moe|mlp)\\.gate\\.(?:weight|e_score_correction_bias)$", null, false);
    add(r, "mlp\\.shared_experts?\\.(?:gate|up)_proj\\.weight$", 0, false);
    add(r, "mlp\\.shared_experts?\\.down_proj\\.weight$", 1, false);
    add(r, "mlp\\.shared_expert_gate\\.weight$", null, false);
    // DeepSeek MLA: the up-projections are column-parallel; the low-rank ones stay whole.
    add(r, "self_attn\\.(?:q_b_proj|kv_b_proj)\\.weight$", 0, false);
    return r;
  }

  private static void add(List<ShardRules.Rule> r, String pattern, Integer dim, boolean expert) {
    r.add(new ShardRules.Rule(r.size(), Pattern.compile(pattern), dim, expert));
  }

  /** Architecture families and the {@code architectures} values that select them. */
  private enum Family {
    LLAMA("Llama", false, "LlamaForCausalLM"),
    QWEN2("Qwen2", false, "Qwen2ForCausalLM", "Qwen3ForCausalLM"),
    MISTRAL("Mistral", false, "MistralForCausalLM"),
    MIXTRAL("Mixtral", true, "MixtralForCausalLM"),
    QWEN_MOE(
        "Qwen-MoE",
        true,
        "Qwen2MoeForCausalLM",
        "Qwen3MoeForCausalLM",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5MoeForCausalLM"),
    DEEPSEEK("DeepSeek", true, "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM");

    final String label;
    final boolean moe;
    final List<String> architectures;

    Family(String label, boolean moe, String... architectures) {
      this.label = label;
      this.moe = moe;
      this.architectures = List.of(architectures);
    }
  }

  /** The architectures that have a built-in set, for messages. */
  public static List<String> supported() {
    List<String> out = new ArrayList<>();
    for (Family f : Family.values()) {
      out.addAll(f.architectures);
    }
    return out;
  }

  /**
   * The built-in set for the first of {@code architectures} that has one.
   *
   * @param architectures {@code config.json}'s {@code architectures}, in order
   */
  public static Optional<ShardRules> forArchitectures(List<String> architectures) {
    for (String a : architectures) {
      for (Family f : Family.values()) {
        if (f.architectures.stream()
            .anyMatch(x -> x.toLowerCase(Locale.ROOT).equals(a.toLowerCase(Locale.ROOT)))) {
          List<ShardRules.Rule> rules = new ArrayList<>();
          if (f.moe) {
            rules.addAll(experts());
          }
          for (ShardRules.Rule r : dense()) {
            rules.add(new ShardRules.Rule(rules.size(), r.pattern(), r.splitDim(), false));
          }
          List<ShardRules.Rule> numbered = new ArrayList<>();
          for (ShardRules.Rule r : rules) {
            numbered.add(
                new ShardRules.Rule(numbered.size(), r.pattern(), r.splitDim(), r.expertOwned()));
          }
          return Optional.of(
              new ShardRules("built-in " + f.label + " (" + a + ")", numbered, false));
        }
      }
    }
    return Optional.empty();
  }
}
