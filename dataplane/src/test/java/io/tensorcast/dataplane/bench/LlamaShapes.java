package io.tensorcast.dataplane.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.tensor.ShardLayoutException;
import io.tensorcast.dataplane.tensor.ShardManifest;
import io.tensorcast.dataplane.tensor.StoredLayout;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Tensor shapes of a Llama checkpoint derived from its {@code config.json} (hidden_size,
 * intermediate_size, num_attention_heads, num_key_value_heads, vocab_size, torch_dtype) for every
 * name in its {@code model.safetensors.index.json} weight_map, and the TP split dims of the usual
 * Megatron scheme: q/k/v/gate/up column-parallel (dim 0), o/down row-parallel (dim 1), norms
 * replicated. Embedding and lm_head split along the hidden dim (1): the vocab (128262 for the
 * corpus's Llama 3.1 70B fine-tune) does not divide by 4 or 8, and the layout requires uniform
 * splits.
 */
public final class LlamaShapes {

  /** One tensor: declaration plus split dim (null = replicated). */
  public record Tensor(TensorDeclaration declaration, Integer splitDim) {}

  /** The derived tensors (weight_map order) and the index's metadata.total_size. */
  public record Model(List<Tensor> tensors, long indexTotalSize, Dtype dtype) {
    /** Sum of the derived tensors' byte lengths. */
    public long derivedTotalSize() {
      return tensors.stream().mapToLong(t -> t.declaration().byteLength()).sum();
    }
  }

  private LlamaShapes() {}

  /** Reads {@code dir/config.json} and {@code dir/model.safetensors.index.json}. */
  public static Model read(Path dir) throws IOException {
    ObjectMapper json = new ObjectMapper();
    JsonNode config = json.readTree(dir.resolve("config.json").toFile());
    JsonNode index = json.readTree(dir.resolve("model.safetensors.index.json").toFile());
    long hidden = config.get("hidden_size").asLong();
    long inter = config.get("intermediate_size").asLong();
    long heads = config.get("num_attention_heads").asLong();
    long kvHeads = config.get("num_key_value_heads").asLong();
    long vocab = config.get("vocab_size").asLong();
    long headDim = config.has("head_dim") ? config.get("head_dim").asLong() : hidden / heads;
    Dtype dtype =
        switch (config.path("torch_dtype").asText("bfloat16")) {
          case "float32" -> Dtype.F32;
          case "float16" -> Dtype.F16;
          default -> Dtype.BF16;
        };
    List<Tensor> out = new ArrayList<>();
    for (Iterator<String> it = index.get("weight_map").fieldNames(); it.hasNext(); ) {
      String name = it.next();
      String leaf = name.replaceFirst("^model\\.layers\\.\\d+\\.", "");
      long[] shape;
      Integer split;
      switch (leaf) {
        case "model.embed_tokens.weight", "lm_head.weight" -> {
          shape = new long[] {vocab, hidden};
          split = 1;
        }
        case "model.norm.weight", "input_layernorm.weight", "post_attention_layernorm.weight" -> {
          shape = new long[] {hidden};
          split = null;
        }
        case "self_attn.q_proj.weight" -> {
          shape = new long[] {heads * headDim, hidden};
          split = 0;
        }
        case "self_attn.k_proj.weight", "self_attn.v_proj.weight" -> {
          shape = new long[] {kvHeads * headDim, hidden};
          split = 0;
        }
        case "self_attn.o_proj.weight" -> {
          shape = new long[] {hidden, heads * headDim};
          split = 1;
        }
        case "mlp.gate_proj.weight", "mlp.up_proj.weight" -> {
          shape = new long[] {inter, hidden};
          split = 0;
        }
        case "mlp.down_proj.weight" -> {
          shape = new long[] {hidden, inter};
          split = 1;
        }
        default -> throw new IOException("no Llama shape rule for tensor \"" + name + "\"");
      }
      out.add(new Tensor(new TensorDeclaration(name, dtype, shape), split));
    }
    return new Model(out, index.path("metadata").path("total_size").asLong(-1), dtype);
  }

  /**
   * The TP shard layout of {@code model} with {@code tpSize} ranks, built from headers only (no
   * bytes: a 70B model's rank files would be hundreds of GB).
   */
  public static StoredLayout shardLayout(Model model, int tpSize) throws ShardLayoutException {
    Map<String, ShardManifest.Entry> entries = new LinkedHashMap<>();
    List<String> keys = new ArrayList<>();
    List<TensorDeclaration> local = new ArrayList<>();
    for (Tensor t : model.tensors()) {
      TensorDeclaration d = t.declaration();
      ShardManifest.Entry e =
          new ShardManifest.Entry(
              d.shape(), d.dtype(), t.splitDim(), t.splitDim() == null ? 1 : tpSize);
      entries.put(d.name(), e);
      keys.add(d.name());
      local.add(new TensorDeclaration(d.name(), d.dtype(), e.localShape()));
    }
    ShardManifest m = new ShardManifest(tpSize, "safetensors", keys, entries, List.of());
    List<SafetensorsHeader> headers = new ArrayList<>();
    for (int r = 0; r < tpSize; r++) {
      headers.add(
          SafetensorsWriter.layout(local, Map.of("tp_rank", "" + r, "tp_size", "" + tpSize)));
    }
    return StoredLayout.ofShards(m, headers);
  }
}
