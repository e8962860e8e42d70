package io.tensorcast.dataplane.testing;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.testing.Corpus;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real model's tensor names and file layout at toy size: reads a corpus folder's {@code
 * config.json} and {@code model.safetensors.index.json} (or {@code pytorch_model.bin.index.json}),
 * keeps the tensors of the first {@code layers} layers and every tensor outside the layers, gives
 * each the shape its name has in the architecture with the config's sizes scaled down ({@code
 * hidden 64}, 4 heads of 16, 2 key-value heads, {@code intermediate 128}, {@code vocab 256}, the
 * real expert count), fills them with deterministic BF16 bytes, and writes the shard files the
 * index names (only those that keep a tensor), a filtered index and a scaled {@code config.json}.
 */
public final class ScaledModel {
  public static final int HIDDEN = 64;
  public static final int HEADS = 4;
  public static final int KV_HEADS = 2;
  public static final int HEAD_DIM = HIDDEN / HEADS;
  public static final int INTERMEDIATE = 128;
  public static final int VOCAB = 256;

  private static final Pattern LAYER = Pattern.compile("\\.layers\\.([0-9]+)\\.");
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * The model written.
   *
   * @param dir the folder
   * @param files file name → path, every file written (shards, index, config)
   * @param tensors tensor name → (shape, bytes)
   * @param experts the expert count (0 for dense models)
   */
  public record Model(
      Path dir, Map<String, Path> files, Map<String, Tensor> tensors, int experts) {}

  /** One tensor's BF16 data. */
  public record Tensor(long[] shape, byte[] data) {}

  private ScaledModel() {}

  /**
   * Writes the scaled model of corpus folder {@code corpusFolder} into {@code out}.
   *
   * @param layers how many layers to keep
   */
  public static Model write(String corpusFolder, int layers, Path out) throws IOException {
    Path src = Corpus.dir().resolve("index").resolve(corpusFolder);
    JsonNode config = JSON.readTree(src.resolve("config.json").toFile());
    Path index = src.resolve("model.safetensors.index.json");
    if (!Files.isRegularFile(index)) {
      index = src.resolve("pytorch_model.bin.index.json");
    }
    JsonNode weightMap = JSON.readTree(index.toFile()).get("weight_map");
    int experts = config.path("num_local_experts").asInt(config.path("num_experts").asInt(0));
    Map<String, List<String>> byFile = new TreeMap<>();
    Map<String, Tensor> tensors = new LinkedHashMap<>();
    ObjectNode keptMap = JSON.createObjectNode();
    long seed = 1;
    for (Iterator<Map.Entry<String, JsonNode>> it = weightMap.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      String name = e.getKey();
      Matcher m = LAYER.matcher(name);
      if (m.find() && Integer.parseInt(m.group(1)) >= layers) {
        continue;
      }
      String file =
          e.getValue().asText().replace(".bin", ".safetensors").replace("pytorch_model", "model");
      long[] shape = shape(name, experts);
      long n = 1;
      for (long d : shape) {
        n *= d;
      }
      byte[] data = new byte[Math.toIntExact(n * 2)];
      long x = 0x9E3779B97F4A7C15L * seed++;
      for (int i = 0; i < data.length; i++) {
        x ^= x << 13;
        x ^= x >>> 7;
        x ^= x << 17;
        data[i] = (byte) x;
      }
      tensors.put(name, new Tensor(shape, data));
      byFile.computeIfAbsent(file, k -> new ArrayList<>()).add(name);
      keptMap.put(name, file);
    }
    Files.createDirectories(out);
    Map<String, Path> files = new LinkedHashMap<>();
    long total = 0;
    for (Map.Entry<String, List<String>> f : byFile.entrySet()) {
      List<TensorDeclaration> decls = new ArrayList<>();
      List<ByteBuffer> data = new ArrayList<>();
      for (TensorDeclaration d :
          SafetensorsWriter.referenceOrder(
              f.getValue().stream()
                  .map(n -> new TensorDeclaration(n, Dtype.BF16, tensors.get(n).shape()))
                  .toList())) {
        decls.add(d);
        data.add(ByteBuffer.wrap(tensors.get(d.name()).data()));
        total += tensors.get(d.name()).data().length;
      }
      Path p = out.resolve(f.getKey());
      SafetensorsWriter.write(p, decls, Map.of("format", "pt"), data);
      files.put(f.getKey(), p);
    }
    ObjectNode idx = JSON.createObjectNode();
    idx.putObject("metadata").put("total_size", total);
    idx.set("weight_map", keptMap);
    Path indexOut = out.resolve("model.safetensors.index.json");
    JSON.writerWithDefaultPrettyPrinter().writeValue(indexOut.toFile(), idx);
    files.put("model.safetensors.index.json", indexOut);
    ObjectNode cfg = (ObjectNode) config.deepCopy();
    cfg.put("hidden_size", HIDDEN)
        .put("num_attention_heads", HEADS)
        .put("num_key_value_heads", KV_HEADS)
        .put("intermediate_size", INTERMEDIATE)
        .put("vocab_size", VOCAB)
        .put("num_hidden_layers", layers)
        .put("torch_dtype", "bfloat16");
    Path configOut = out.resolve("config.json");
    JSON.writerWithDefaultPrettyPrinter().writeValue(configOut.toFile(), cfg);
    files.put("config.json", configOut);
    return new Model(out, files, tensors, experts);
  }

  /** The shape {@code name} has in a Llama/Mistral/Mixtral/Qwen-MoE decoder at the toy sizes. */
  static long[] shape(String name, int experts) {
    if (name.endsWith("embed_tokens.weight") || name.endsWith("lm_head.weight")) {
      return new long[] {VOCAB, HIDDEN};
    }
    if (name.matches(".*self_attn\\.q_proj\\.weight$")) {
      return new long[] {HEADS * HEAD_DIM, HIDDEN};
    }
    if (name.matches(".*self_attn\\.(k|v)_proj\\.weight$")) {
      return new long[] {KV_HEADS * HEAD_DIM, HIDDEN};
    }
    if (name.matches(".*self_attn\\.o_proj\\.weight$")) {
      return new long[] {HIDDEN, HEADS * HEAD_DIM};
    }
    if (name.matches(".*(gate_proj|up_proj|w1|w3)\\.weight$")) {
      return new long[] {INTERMEDIATE, HIDDEN};
    }
    if (name.matches(".*(down_proj|w2)\\.weight$")) {
      return new long[] {HIDDEN, INTERMEDIATE};
    }
    if (name.matches(".*(block_sparse_moe|mlp)\\.gate\\.weight$")) {
      return new long[] {experts, HIDDEN};
    }
    if (name.matches(".*(q|k)_norm\\.weight$")) {
      return new long[] {HEAD_DIM};
    }
    return new long[] {HIDDEN};
  }

  /**
   * The reference slice, element by element: {@code [rank × g/tp, (rank+1) × g/tp)} along {@code
   * dim} of a row-major BF16 tensor (2 bytes per element), or the whole tensor for {@code dim}
   * null.
   */
  public static byte[] slice(Tensor t, Integer dim, int rank, int tp) {
    if (dim == null) {
      return t.data().clone();
    }
    long[] s = t.shape();
    long extent = s[dim] / tp;
    long outer = 1;
    for (int i = 0; i < dim; i++) {
      outer *= s[i];
    }
    long inner = 1;
    for (int i = dim + 1; i < s.length; i++) {
      inner *= s[i];
    }
    byte[] out = new byte[Math.toIntExact(outer * extent * inner * 2)];
    int o = 0;
    for (long a = 0; a < outer; a++) {
      for (long k = rank * extent; k < (rank + 1) * extent; k++) {
        for (long b = 0; b < inner; b++) {
          long element = (a * s[dim] + k) * inner + b;
          out[o++] = t.data()[(int) (element * 2)];
          out[o++] = t.data()[(int) (element * 2 + 1)];
        }
      }
    }
    return out;
  }
}
