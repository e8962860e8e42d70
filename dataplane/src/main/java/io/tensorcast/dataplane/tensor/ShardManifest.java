package io.tensorcast.dataplane.tensor;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * The {@code manifest.json} of a TP shard layout (unified artifact IO seed, section 3): a directory
 * with {@code manifest.json} and one {@code rank_NNNNN.safetensors} per TP rank.
 *
 * <pre>{@code
 * {
 *   "format": "safetensors",
 *   "tp_size": 4,
 *   "keys": ["w", "norm"],
 *   "layout_axes": [{"kind": "dp", "rank": 0, "size": 2}],
 *   "tensors": {
 *     "w":    {"global_shape": [8, 6], "dtype": "BF16", "split_dim": 0,    "shard_count": 4},
 *     "norm": {"global_shape": [6],    "dtype": "F32",  "split_dim": null, "shard_count": 1}
 *   }
 * }
 * }</pre>
 *
 * <p>Per tensor, the design's manifest fields: {@code global_shape}, {@code dtype} (safetensors
 * spelling), {@code split_dim} ({@code null} = replicated: every rank file holds the full tensor)
 * and {@code shard_count} ({@code tp_size} when split, 1 when replicated). Rank {@code r}'s file
 * holds each split tensor's slice {@code [r × g/S, (r+1) × g/S)} along {@code split_dim} ({@code g
 * = global_shape[split_dim]}, {@code S = tp_size}), which must divide evenly (uniform sharding, as
 * the design requires). {@code layout_axes} are the scope axes ({@code dp}, {@code pp}, {@code ep})
 * of the layout identity, in canonical order; the tp axis is implied by {@code tp_size} and the
 * file's rank. {@code layout_kind} ({@code "shard"} when split, {@code "full"} when replicated) and
 * {@code local_shape} (each rank file's shape) are written for readers and checked when read.
 * Unknown fields are rejected.
 *
 * @param tpSize number of TP ranks (rank files), {@code >= 1}
 * @param format always {@code "safetensors"}
 * @param keys tensor names in file order
 * @param tensors per-tensor entries, one per key
 * @param layoutAxes scope axes of the identity (no tp axis), canonical order; may be empty
 */
public record ShardManifest(
    int tpSize,
    String format,
    List<String> keys,
    Map<String, Entry> tensors,
    List<ParallelAxis> layoutAxes) {

  /** The manifest's file name inside the layout directory. */
  public static final String FILE_NAME = "manifest.json";

  /** {@code layout_kind} of a tensor every rank file holds whole ({@code split_dim} null). */
  public static final String LAYOUT_FULL = "full";

  /** {@code layout_kind} of a tensor each rank file holds one tp slice of. */
  public static final String LAYOUT_SHARD = "shard";

  /** The only supported value of {@code format}. */
  public static final String FORMAT_SAFETENSORS = "safetensors";

  private static final ObjectMapper JSON =
      new ObjectMapper()
          .enable(SerializationFeature.INDENT_OUTPUT)
          .enable(DeserializationFeature.FAIL_ON_READING_DUP_TREE_KEY)
          .enable(DeserializationFeature.USE_BIG_INTEGER_FOR_INTS);

  /**
   * One tensor of the manifest.
   *
   * @param globalShape shape of the full (reconstructed) tensor
   * @param dtype element type
   * @param splitDim split dimension, or {@code null} if replicated on every rank
   * @param shardCount number of uniform shards: {@code tp_size} when split, 1 when replicated
   */
  public record Entry(long[] globalShape, Dtype dtype, Integer splitDim, int shardCount) {
    public Entry {
      globalShape = Objects.requireNonNull(globalShape, "global_shape").clone();
      Objects.requireNonNull(dtype, "dtype");
    }

    @Override
    public long[] globalShape() {
      return globalShape.clone();
    }

    /** The shape of each rank's stored object: the global shape with the split dim divided. */
    public long[] localShape() {
      long[] s = globalShape.clone();
      if (splitDim != null) {
        s[splitDim] /= shardCount;
      }
      return s;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Entry e
          && Arrays.equals(globalShape, e.globalShape)
          && dtype == e.dtype
          && Objects.equals(splitDim, e.splitDim)
          && shardCount == e.shardCount;
    }

    @Override
    public int hashCode() {
      return Objects.hash(Arrays.hashCode(globalShape), dtype, splitDim, shardCount);
    }

    @Override
    public String toString() {
      return dtype
          + Arrays.toString(globalShape)
          + " split_dim="
          + splitDim
          + " shard_count="
          + shardCount;
    }
  }

  /**
   * @throws IllegalArgumentException naming the key and numbers if a rule is broken: {@code tp_size
   *     < 1}; format not safetensors; keys repeated or not the keys of {@code tensors}; {@code
   *     split_dim} outside the shape; {@code shard_count} not {@code tp_size} (split) or 1
   *     (replicated); {@code global_shape[split_dim]} not divisible by {@code tp_size}; a tp axis
   *     or a repeated kind in {@code layout_axes}
   */
  public ShardManifest {
    Objects.requireNonNull(format, "format");
    keys = List.copyOf(keys);
    tensors = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(tensors));
    layoutAxes = canonicalScope(layoutAxes);
    if (tpSize < 1) {
      throw new IllegalArgumentException("tp_size " + tpSize + " must be >= 1");
    }
    if (!FORMAT_SAFETENSORS.equals(format)) {
      throw new IllegalArgumentException(
          "format \"" + format + "\" is not supported; the TP shard layout stores safetensors");
    }
    Set<String> seen = new HashSet<>();
    for (String k : keys) {
      if (!seen.add(k)) {
        throw new IllegalArgumentException("key \"" + k + "\" is listed twice in keys");
      }
      if (!tensors.containsKey(k)) {
        throw new IllegalArgumentException(
            "key \"" + k + "\" is listed in keys but has no entry in tensors");
      }
    }
    for (String k : tensors.keySet()) {
      if (!seen.contains(k)) {
        throw new IllegalArgumentException(
            "tensors has an entry \"" + k + "\" that keys does not list");
      }
    }
    for (String k : keys) {
      checkEntry(k, tensors.get(k), tpSize);
    }
  }

  private static List<ParallelAxis> canonicalScope(List<ParallelAxis> axes) {
    Objects.requireNonNull(axes, "layout_axes");
    if (axes.isEmpty()) {
      return List.of();
    }
    for (ParallelAxis a : axes) {
      if (a.splitsBytes()) {
        throw new IllegalArgumentException(
            "layout_axes "
                + axes
                + " contains a tp axis; tp is given by tp_size and the rank file");
      }
    }
    return new TensorParallelism(axes).axes();
  }

  private static void checkEntry(String key, Entry e, int tpSize) {
    long[] g = e.globalShape;
    for (long d : g) {
      if (d < 0) {
        throw new IllegalArgumentException(
            "tensor \"" + key + "\": negative dimension in global_shape " + Arrays.toString(g));
      }
    }
    if (e.splitDim == null) {
      if (e.shardCount != 1) {
        throw new IllegalArgumentException(
            "tensor \""
                + key
                + "\": split_dim is null (replicated) so shard_count must be 1, not "
                + e.shardCount);
      }
      return;
    }
    int d = e.splitDim;
    if (d < 0 || d >= g.length) {
      throw new IllegalArgumentException(
          "tensor \""
              + key
              + "\": split_dim "
              + d
              + " is outside the "
              + g.length
              + "-D global_shape "
              + Arrays.toString(g));
    }
    if (e.shardCount != tpSize) {
      throw new IllegalArgumentException(
          "tensor \""
              + key
              + "\": shard_count "
              + e.shardCount
              + " differs from tp_size "
              + tpSize
              + " (a split tensor has one shard per rank file)");
    }
    if (g[d] % tpSize != 0) {
      throw new IllegalArgumentException(
          "tensor \""
              + key
              + "\": global_shape["
              + d
              + "] = "
              + g[d]
              + " is not divisible by tp_size "
              + tpSize
              + " (non-uniform split: "
              + g[d]
              + " = "
              + tpSize
              + " × "
              + g[d] / tpSize
              + " + "
              + g[d] % tpSize
              + ")");
    }
  }

  /** The file name of rank {@code rank}: {@code rank_NNNNN.safetensors} (5 digits, seed). */
  public static String rankFileName(int rank) {
    if (rank < 0 || rank > 99_999) {
      throw new IllegalArgumentException("rank " + rank + " outside [0, 99999]");
    }
    return String.format("rank_%05d.safetensors", rank);
  }

  /** The entry of {@code key}, or {@code null}. */
  public Entry entry(String key) {
    return tensors.get(key);
  }

  /** The manifest as JSON (UTF-8, indented, keys in the order of the class comment). */
  public byte[] toJson() {
    ObjectNode root = JSON.createObjectNode();
    root.put("format", format);
    root.put("tp_size", tpSize);
    ArrayNode k = root.putArray("keys");
    keys.forEach(k::add);
    ArrayNode axes = root.putArray("layout_axes");
    for (ParallelAxis a : layoutAxes) {
      axes.addObject().put("kind", a.kind().label()).put("rank", a.rank()).put("size", a.size());
    }
    ObjectNode ts = root.putObject("tensors");
    for (String key : keys) {
      Entry e = tensors.get(key);
      ObjectNode t = ts.putObject(key);
      ArrayNode shape = t.putArray("global_shape");
      for (long d : e.globalShape) {
        shape.add(d);
      }
      t.put("dtype", e.dtype.name());
      if (e.splitDim == null) {
        t.putNull("split_dim");
      } else {
        t.put("split_dim", e.splitDim);
      }
      t.put("shard_count", e.shardCount);
      t.put("layout_kind", e.splitDim == null ? LAYOUT_FULL : LAYOUT_SHARD);
      ArrayNode local = t.putArray("local_shape");
      for (long d : e.localShape()) {
        local.add(d);
      }
    }
    try {
      return JSON.writeValueAsBytes(root);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot serialise manifest", e);
    }
  }

  /**
   * Writes {@code dir/manifest.json} atomically (temporary file, then rename), so readers never see
   * a partial manifest.
   */
  public void write(Path dir) throws IOException {
    Path tmp = Files.createTempFile(dir, ".manifest", ".json.tmp");
    try {
      Files.write(tmp, toJson());
      Files.move(
          tmp,
          dir.resolve(FILE_NAME),
          StandardCopyOption.ATOMIC_MOVE,
          StandardCopyOption.REPLACE_EXISTING);
    } finally {
      Files.deleteIfExists(tmp);
    }
  }

  /**
   * Reads and validates {@code file}.
   *
   * @throws ShardLayoutException naming the file, the field and the rule broken
   */
  public static ShardManifest read(Path file) throws IOException {
    return parse(file.toString(), Files.readAllBytes(file));
  }

  /**
   * Parses and validates a manifest.
   *
   * @param source the file as named in error messages
   * @throws ShardLayoutException naming {@code source}, the field and the rule broken
   */
  public static ShardManifest parse(String source, byte[] json) throws ShardLayoutException {
    JsonNode root;
    try {
      root = JSON.readTree(json);
    } catch (IOException e) {
      throw new ShardLayoutException(source + ": not valid JSON: " + e.getMessage(), e);
    }
    try {
      if (root == null || !root.isObject()) {
        throw new IllegalArgumentException("top level must be a JSON object");
      }
      onlyFields(root, "manifest", Set.of("format", "tp_size", "keys", "layout_axes", "tensors"));
      int tpSize = intField(root, "tp_size", "manifest");
      String format = textField(root, "format", "manifest");
      List<String> keys = new ArrayList<>();
      for (JsonNode k : arrayField(root, "keys", "manifest")) {
        if (!k.isTextual()) {
          throw new IllegalArgumentException("keys: element " + k + " is not a string");
        }
        keys.add(k.asText());
      }
      List<ParallelAxis> axes = new ArrayList<>();
      if (root.has("layout_axes")) {
        int i = 0;
        for (JsonNode a : arrayField(root, "layout_axes", "manifest")) {
          String where = "layout_axes[" + i++ + "]";
          if (!a.isObject()) {
            throw new IllegalArgumentException(where + " is not an object");
          }
          onlyFields(a, where, Set.of("kind", "rank", "size"));
          axes.add(
              new ParallelAxis(
                  ParallelAxis.Kind.fromLabel(textField(a, "kind", where)),
                  intField(a, "rank", where),
                  intField(a, "size", where),
                  null));
        }
      }
      JsonNode ts = root.get("tensors");
      if (ts == null || !ts.isObject()) {
        throw new IllegalArgumentException("manifest: field \"tensors\" must be an object");
      }
      Map<String, Entry> tensors = new LinkedHashMap<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = ts.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> f = it.next();
        String where = "tensor \"" + f.getKey() + "\"";
        JsonNode t = f.getValue();
        if (!t.isObject()) {
          throw new IllegalArgumentException(where + " is not an object");
        }
        onlyFields(
            t,
            where,
            Set.of(
                "global_shape", "dtype", "split_dim", "shard_count", "layout_kind", "local_shape"));
        JsonNode shapeNode = arrayField(t, "global_shape", where);
        long[] shape = new long[shapeNode.size()];
        for (int i = 0; i < shape.length; i++) {
          JsonNode d = shapeNode.get(i);
          if (!d.isIntegralNumber() || !d.canConvertToLong()) {
            throw new IllegalArgumentException(
                where + ": global_shape[" + i + "] = " + d + " is not an integer");
          }
          shape[i] = d.asLong();
        }
        String dtypeName = textField(t, "dtype", where);
        Dtype dtype =
            Dtype.fromName(dtypeName)
                .orElseThrow(
                    () ->
                        new IllegalArgumentException(
                            where + ": dtype \"" + dtypeName + "\" is not a safetensors dtype"));
        if (!t.has("split_dim")) {
          throw new IllegalArgumentException(
              where + ": field \"split_dim\" is missing (null = replicated)");
        }
        Integer splitDim = t.get("split_dim").isNull() ? null : intField(t, "split_dim", where);
        Entry entry = new Entry(shape, dtype, splitDim, intField(t, "shard_count", where));
        checkDerived(t, where, entry);
        tensors.put(f.getKey(), entry);
      }
      return new ShardManifest(tpSize, format, keys, tensors, axes);
    } catch (IllegalArgumentException e) {
      throw new ShardLayoutException(source + ": " + e.getMessage(), e);
    }
  }

  /**
   * The optional derived fields {@code layout_kind} and {@code local_shape} must agree with {@code
   * split_dim}, {@code shard_count} and {@code global_shape} (a manifest that says two things is
   * refused). The range check of {@code split_dim} comes later, in the record's constructor.
   */
  private static void checkDerived(JsonNode t, String where, Entry e) {
    if (t.has("layout_kind")) {
      String kind = textField(t, "layout_kind", where);
      String expected = e.splitDim == null ? LAYOUT_FULL : LAYOUT_SHARD;
      if (!kind.equals(expected)) {
        throw new IllegalArgumentException(
            where
                + ": layout_kind \""
                + kind
                + "\" but split_dim "
                + e.splitDim
                + " means \""
                + expected
                + "\"");
      }
    }
    if (t.has("local_shape")
        && (e.splitDim == null || (e.splitDim >= 0 && e.splitDim < e.globalShape.length))) {
      JsonNode l = arrayField(t, "local_shape", where);
      long[] expected = e.shardCount > 0 ? e.localShape() : e.globalShape.clone();
      boolean same = l.size() == expected.length;
      for (int i = 0; same && i < expected.length; i++) {
        same = l.get(i).isIntegralNumber() && l.get(i).asLong() == expected[i];
      }
      if (!same) {
        throw new IllegalArgumentException(
            where
                + ": local_shape "
                + l
                + " disagrees with global_shape "
                + Arrays.toString(e.globalShape)
                + ", split_dim "
                + e.splitDim
                + " and shard_count "
                + e.shardCount
                + " (which give "
                + Arrays.toString(expected)
                + ")");
      }
    }
  }

  private static void onlyFields(JsonNode node, String where, Set<String> allowed) {
    for (Iterator<String> it = node.fieldNames(); it.hasNext(); ) {
      String f = it.next();
      if (!allowed.contains(f)) {
        throw new IllegalArgumentException(
            where
                + ": unknown field \""
                + f
                + "\" (allowed: "
                + new java.util.TreeSet<>(allowed)
                + ")");
      }
    }
  }

  private static JsonNode required(JsonNode node, String field, String where) {
    JsonNode v = node.get(field);
    if (v == null || v.isNull()) {
      throw new IllegalArgumentException(where + ": field \"" + field + "\" is missing");
    }
    return v;
  }

  private static int intField(JsonNode node, String field, String where) {
    JsonNode v = required(node, field, where);
    if (!v.isIntegralNumber() || !v.canConvertToInt()) {
      throw new IllegalArgumentException(
          where + ": field \"" + field + "\" = " + v + " is not a 32-bit integer");
    }
    return v.asInt();
  }

  private static String textField(JsonNode node, String field, String where) {
    JsonNode v = required(node, field, where);
    if (!v.isTextual()) {
      throw new IllegalArgumentException(
          where + ": field \"" + field + "\" = " + v + " is not a string");
    }
    return v.asText();
  }

  private static JsonNode arrayField(JsonNode node, String field, String where) {
    JsonNode v = required(node, field, where);
    if (!v.isArray()) {
      throw new IllegalArgumentException(
          where + ": field \"" + field + "\" = " + v + " is not an array");
    }
    return v;
  }
}
