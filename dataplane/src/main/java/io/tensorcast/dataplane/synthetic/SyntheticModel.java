package io.tensorcast.dataplane.synthetic;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.WritableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * A deterministic model directory laid out the way Hugging Face {@code save_pretrained} lays out a
 * sharded Llama-style checkpoint: {@code config.json}, {@code model-0000i-of-0000N.safetensors} and
 * {@code model.safetensors.index.json}, tensor names and shapes of {@code LlamaForCausalLM}, BF16
 * data from a counter-based PRNG (SplitMix64 over the tensor name and the element index, so every
 * byte depends only on the seed, the name and its position).
 *
 * <p>Used by the demo, benchmarks and tests that need a realistic artifact without weights from the
 * network.
 */
public final class SyntheticModel {

  /**
   * Shape of the model.
   *
   * @param vocabSize rows of the embedding and of {@code lm_head}
   * @param hiddenSize model width
   * @param intermediateSize MLP width
   * @param layers decoder layers
   * @param heads attention heads
   * @param kvHeads key/value heads (grouped-query attention)
   * @param shards safetensors files to split the tensors over
   */
  public record Config(
      int vocabSize,
      int hiddenSize,
      int intermediateSize,
      int layers,
      int heads,
      int kvHeads,
      int shards) {
    public Config {
      if (hiddenSize % heads != 0 || heads % kvHeads != 0) {
        throw new IllegalArgumentException("hiddenSize must divide by heads, heads by kvHeads");
      }
      if (shards < 1 || layers < 1) {
        throw new IllegalArgumentException("need at least one layer and one shard");
      }
    }

    /** About 400 MiB of BF16 weights: a 0.2B-parameter Llama shape, 2 shards. */
    public static final Config SMALL_LLAMA = new Config(32000, 1024, 2816, 12, 16, 4, 2);

    /** About 1.1 GiB: for benchmarks that need at least 1 GiB. */
    public static final Config MEDIUM_LLAMA = new Config(32000, 2048, 5632, 10, 16, 4, 4);

    /** A few hundred KiB, for fast tests. */
    public static final Config TINY = new Config(512, 64, 176, 2, 4, 2, 2);

    /** A named preset: {@code tiny}, {@code small-llama}, {@code medium-llama}. */
    public static Config preset(String name) {
      return switch (name.toLowerCase(Locale.ROOT)) {
        case "tiny" -> TINY;
        case "small-llama" -> SMALL_LLAMA;
        case "medium-llama" -> MEDIUM_LLAMA;
        default ->
            throw new IllegalArgumentException(
                "unknown preset '" + name + "'; use tiny, small-llama or medium-llama");
      };
    }
  }

  private SyntheticModel() {}

  /** The tensors of the model in {@code save_pretrained} order, each with its shard index. */
  public static List<Map.Entry<TensorDeclaration, Integer>> tensors(Config c) {
    int headDim = c.hiddenSize() / c.heads();
    int kv = c.kvHeads() * headDim;
    List<Map.Entry<TensorDeclaration, Integer>> out = new ArrayList<>();
    out.add(Map.entry(bf16("model.embed_tokens.weight", c.vocabSize(), c.hiddenSize()), 0));
    for (int l = 0; l < c.layers(); l++) {
      int shard = (int) ((long) l * c.shards() / c.layers());
      String p = "model.layers." + l + ".";
      out.add(
          Map.entry(bf16(p + "self_attn.q_proj.weight", c.hiddenSize(), c.hiddenSize()), shard));
      out.add(Map.entry(bf16(p + "self_attn.k_proj.weight", kv, c.hiddenSize()), shard));
      out.add(Map.entry(bf16(p + "self_attn.v_proj.weight", kv, c.hiddenSize()), shard));
      out.add(
          Map.entry(bf16(p + "self_attn.o_proj.weight", c.hiddenSize(), c.hiddenSize()), shard));
      out.add(
          Map.entry(bf16(p + "mlp.gate_proj.weight", c.intermediateSize(), c.hiddenSize()), shard));
      out.add(
          Map.entry(bf16(p + "mlp.up_proj.weight", c.intermediateSize(), c.hiddenSize()), shard));
      out.add(
          Map.entry(bf16(p + "mlp.down_proj.weight", c.hiddenSize(), c.intermediateSize()), shard));
      out.add(Map.entry(bf16(p + "input_layernorm.weight", c.hiddenSize()), shard));
      out.add(Map.entry(bf16(p + "post_attention_layernorm.weight", c.hiddenSize()), shard));
    }
    int last = c.shards() - 1;
    out.add(Map.entry(bf16("model.norm.weight", c.hiddenSize()), last));
    out.add(Map.entry(bf16("lm_head.weight", c.vocabSize(), c.hiddenSize()), last));
    return out;
  }

  /**
   * Writes the model directory.
   *
   * @param dir directory to create (or reuse; existing model files are overwritten)
   * @return total bytes of the safetensors shards
   * @throws IOException if writing fails
   */
  public static long write(Path dir, Config c, long seed) throws IOException {
    Files.createDirectories(dir);
    ObjectMapper json = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    List<Map.Entry<TensorDeclaration, Integer>> all = tensors(c);
    Map<String, String> weightMap = new LinkedHashMap<>();
    long total = 0;
    for (int s = 0; s < c.shards(); s++) {
      String file = String.format(Locale.ROOT, "model-%05d-of-%05d.safetensors", s + 1, c.shards());
      List<TensorDeclaration> decl = new ArrayList<>();
      for (var e : all) {
        if (e.getValue() == s) {
          decl.add(e.getKey());
          weightMap.put(e.getKey().name(), file);
        }
      }
      var header =
          SafetensorsWriter.write(
              dir.resolve(file), decl, Map.of("format", "pt"), (t, out) -> fill(t, seed, out));
      total += header.dataLength();
    }
    ObjectNode index = json.createObjectNode();
    index.putObject("metadata").put("total_size", total);
    ObjectNode wm = index.putObject("weight_map");
    weightMap.forEach(wm::put);
    Files.writeString(
        dir.resolve("model.safetensors.index.json"),
        json.writeValueAsString(index),
        StandardCharsets.UTF_8);
    Files.writeString(
        dir.resolve("config.json"),
        json.writeValueAsString(config(json, c)),
        StandardCharsets.UTF_8);
    return total;
  }

  private static ObjectNode config(ObjectMapper json, Config c) {
    ObjectNode n = json.createObjectNode();
    n.putArray("architectures").add("LlamaForCausalLM");
    n.put("model_type", "llama");
    n.put("torch_dtype", "bfloat16");
    n.put("vocab_size", c.vocabSize());
    n.put("hidden_size", c.hiddenSize());
    n.put("intermediate_size", c.intermediateSize());
    n.put("num_hidden_layers", c.layers());
    n.put("num_attention_heads", c.heads());
    n.put("num_key_value_heads", c.kvHeads());
    n.put("max_position_embeddings", 4096);
    n.put("rms_norm_eps", 1e-5);
    n.put("tie_word_embeddings", false);
    n.put("_tensorcast_synthetic", true);
    return n;
  }

  private static TensorDeclaration bf16(String name, long... shape) {
    return new TensorDeclaration(name, Dtype.BF16, shape);
  }

  /** Writes the tensor's bytes: SplitMix64 of (seed ^ name hash, 8-byte word index). */
  private static void fill(TensorInfo t, long seed, WritableByteChannel out) throws IOException {
    long key = seed ^ mix(t.name().hashCode() * 0x9E3779B97F4A7C15L);
    ByteBuffer buf = ByteBuffer.allocate(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
    long remaining = t.byteLength();
    long word = 0;
    while (remaining > 0) {
      buf.clear();
      int n = (int) Math.min(buf.capacity(), remaining);
      int words = n / 8;
      for (int i = 0; i < words; i++) {
        buf.putLong(mix(key + word++));
      }
      long tail = mix(key + word);
      for (int i = words * 8; i < n; i++) {
        buf.put((byte) tail);
        tail >>>= 8;
      }
      buf.flip();
      while (buf.hasRemaining()) {
        out.write(buf);
      }
      remaining -= n;
    }
  }

  private static long mix(long z) {
    z += 0x9E3779B97F4A7C15L;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
