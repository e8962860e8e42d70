package io.tensorcast.dataplane.write;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.tensor.TensorParallelism;
import io.tensorcast.dataplane.tensor.WriterPartition;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** The JSON of the write API: declarations in, summaries out. Strict: unknown fields refused. */
public final class WriteJson {
  static final ObjectMapper JSON =
      new ObjectMapper()
          .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
          .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

  private WriteJson() {}

  /** Parses a JSON body into an object node. */
  static ObjectNode object(byte[] body, String what) throws WriteException {
    JsonNode n;
    try {
      n = body.length == 0 ? JSON.createObjectNode() : JSON.readTree(body);
    } catch (IOException e) {
      throw WriteException.bad("BadRequest", what + ": body is not JSON: " + e.getMessage());
    }
    if (!(n instanceof ObjectNode o)) {
      throw WriteException.bad("BadRequest", what + ": body must be a JSON object");
    }
    return o;
  }

  static void onlyFields(JsonNode node, String where, Set<String> allowed) throws WriteException {
    for (Iterator<String> it = node.fieldNames(); it.hasNext(); ) {
      String f = it.next();
      if (!allowed.contains(f)) {
        throw WriteException.bad(
            "BadRequest",
            where
                + ": unknown field \""
                + f
                + "\" (allowed: "
                + String.join(", ", new java.util.TreeSet<>(allowed))
                + ")");
      }
    }
  }

  static String text(JsonNode node, String field, String where, boolean required)
      throws WriteException {
    JsonNode v = node.get(field);
    if (v == null || v.isNull()) {
      if (required) {
        throw WriteException.bad("BadRequest", where + ": field \"" + field + "\" is required");
      }
      return null;
    }
    if (!v.isTextual()) {
      throw WriteException.bad(
          "BadRequest", where + ": field \"" + field + "\" must be a string, got " + v);
    }
    return v.asText();
  }

  static Map<String, String> stringMap(JsonNode node, String field, String where)
      throws WriteException {
    JsonNode v = node.get(field);
    Map<String, String> out = new LinkedHashMap<>();
    if (v == null || v.isNull()) {
      return out;
    }
    if (!v.isObject()) {
      throw WriteException.bad(
          "BadRequest", where + ": field \"" + field + "\" must be an object of strings");
    }
    for (Iterator<Map.Entry<String, JsonNode>> it = v.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      if (!e.getValue().isTextual()) {
        throw WriteException.bad(
            "BadRequest",
            where
                + ": "
                + field
                + "[\""
                + e.getKey()
                + "\"] must be a string, got "
                + e.getValue());
      }
      out.put(e.getKey(), e.getValue().asText());
    }
    return out;
  }

  /**
   * Parses {@code {"tensors": [{"name", "dtype", "shape", "parallelism"?, "writer_partition"?}]}}
   * plus the given extra top-level fields (returned in the node for the caller).
   */
  static List<TensorPut> tensors(ObjectNode body, String where, Set<String> extraFields)
      throws WriteException {
    Set<String> allowed = new java.util.HashSet<>(extraFields);
    allowed.add("tensors");
    onlyFields(body, where, allowed);
    JsonNode arr = body.get("tensors");
    if (arr == null || !arr.isArray()) {
      throw WriteException.bad("BadRequest", where + ": field \"tensors\" must be an array");
    }
    if (arr.size() > BatchPlan.MAX_TENSORS) {
      throw WriteException.bad(
          "BadRequest",
          where
              + ": "
              + arr.size()
              + " tensors, more than "
              + BatchPlan.MAX_TENSORS
              + "; split it");
    }
    List<TensorPut> out = new ArrayList<>();
    int i = 0;
    for (JsonNode t : arr) {
      String w = where + ": tensors[" + i++ + "]";
      if (!t.isObject()) {
        throw WriteException.bad("BadRequest", w + " must be an object");
      }
      onlyFields(t, w, Set.of("name", "dtype", "shape", "parallelism", "writer_partition"));
      String name = text(t, "name", w, true);
      JsonNode shapeNode = t.get("shape");
      if (shapeNode == null || !shapeNode.isArray()) {
        throw WriteException.bad(
            "BadRequest", w + " (\"" + name + "\"): field \"shape\" must be an array of integers");
      }
      long[] shape = new long[shapeNode.size()];
      for (int d = 0; d < shape.length; d++) {
        JsonNode dim = shapeNode.get(d);
        if (!dim.isIntegralNumber() || !dim.canConvertToLong()) {
          throw WriteException.bad(
              "InvalidTensor",
              w + " (\"" + name + "\"): shape[" + d + "] = " + dim + " is not an integer");
        }
        shape[d] = dim.asLong();
      }
      out.add(
          put(
              name,
              text(t, "dtype", w, true),
              shape,
              text(t, "parallelism", w, false),
              text(t, "writer_partition", w, false)));
    }
    return out;
  }

  /**
   * One put from its parts (query parameters or JSON).
   *
   * @throws WriteException 400 {@code InvalidTensor} or {@code InvalidParallelism} naming the
   *     tensor
   */
  static TensorPut put(
      String name, String dtype, long[] shape, String parallelism, String writerPartition)
      throws WriteException {
    Dtype dt =
        Dtype.fromName(dtype == null ? "" : dtype)
            .orElseThrow(
                () ->
                    WriteException.bad(
                        "InvalidTensor",
                        "tensor \""
                            + name
                            + "\": dtype '"
                            + dtype
                            + "' is not a safetensors dtype (BOOL, U8, I8, F8_E4M3, F16, BF16,"
                            + " F32, F64, I32, I64, ...)"));
    TensorParallelism p = null;
    WriterPartition wp = null;
    try {
      if (parallelism != null && !parallelism.isBlank()) {
        p = TensorParallelism.parse(parallelism);
      }
      if (writerPartition != null && !writerPartition.isBlank()) {
        wp = new WriterPartition(TensorParallelism.parse(writerPartition));
      }
    } catch (IllegalArgumentException e) {
      throw WriteException.bad("InvalidParallelism", "tensor \"" + name + "\": " + e.getMessage());
    }
    try {
      return new TensorPut(name, dt, shape, p, wp);
    } catch (IllegalArgumentException e) {
      throw WriteException.bad(
          e.getMessage().contains("both a parallelism") ? "MixedBatch" : "InvalidTensor",
          e.getMessage());
    }
  }

  /** Parses {@code 4096,4096} (empty for a scalar). */
  static long[] shape(String text, String name) throws WriteException {
    if (text == null) {
      throw WriteException.bad(
          "InvalidTensor", "tensor \"" + name + "\": query parameter shape is required");
    }
    if (text.isEmpty()) {
      return new long[0];
    }
    String[] parts = text.split(",", -1);
    long[] out = new long[parts.length];
    for (int i = 0; i < parts.length; i++) {
      String s = parts[i].trim();
      if (!s.matches("-?[0-9]{1,19}")) {
        throw WriteException.bad(
            "InvalidTensor",
            "tensor \""
                + name
                + "\": shape '"
                + text
                + "': dimension '"
                + s
                + "' is not an integer");
      }
      try {
        out[i] = Long.parseLong(s);
      } catch (NumberFormatException e) {
        throw WriteException.bad(
            "InvalidTensor",
            "tensor \"" + name + "\": shape '" + text + "': dimension '" + s + "' overflows");
      }
    }
    return out;
  }

  static ObjectNode summary(WritableVersion v) {
    WritableVersion.Summary s = v.summary();
    ObjectNode o = JSON.createObjectNode();
    o.put("name", s.name());
    o.put("kind", s.kind());
    o.put("state", s.state().name());
    if (s.layout() != null) {
      o.put("layout", s.layout());
      o.put("tpSize", s.tpSize());
    }
    ArrayNode ranks = o.putArray("ranks");
    s.ranks().forEach(ranks::add);
    o.put("tensors", s.tensors());
    o.put("storedBytes", s.storedBytes());
    o.put("inFlight", s.inFlight());
    if (s.failure() != null) {
      o.put("failure", s.failure());
    }
    o.put("created", s.created());
    ObjectNode meta = o.putObject("metadata");
    v.metadata().forEach(meta::put);
    return o;
  }

  static ObjectNode error(WriteException e, String version) {
    ObjectNode o = JSON.createObjectNode();
    o.put("error", e.getMessage());
    o.put("reason", e.reason());
    if (version != null) {
      o.put("version", version);
    }
    return o;
  }
}
