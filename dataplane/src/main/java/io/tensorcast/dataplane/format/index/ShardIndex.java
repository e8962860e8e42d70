package io.tensorcast.dataplane.format.index;

import static io.tensorcast.dataplane.format.index.IndexFormatException.DUPLICATE_KEY;
import static io.tensorcast.dataplane.format.index.IndexFormatException.INVALID_JSON;
import static io.tensorcast.dataplane.format.index.IndexFormatException.INVALID_STRUCTURE;
import static io.tensorcast.dataplane.format.index.IndexFormatException.LIMIT_EXCEEDED;
import static io.tensorcast.dataplane.format.index.IndexFormatException.MERGE_CONFLICT;
import static io.tensorcast.dataplane.format.index.IndexFormatException.TOO_LARGE;
import static io.tensorcast.dataplane.format.index.IndexFormatException.UNSAFE_SHARD_PATH;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.regex.Pattern;

/**
 * The index file of a sharded checkpoint, as Hugging Face {@code save_pretrained} writes it:
 *
 * <pre>{@code
 * {"metadata": {"total_size": 16060522496},
 *  "weight_map": {"model.embed_tokens.weight": "model-00001-of-00004.safetensors", ...}}
 * }</pre>
 *
 * <p>{@code weight_map} (required) maps each tensor name to the shard file holding it, named
 * relative to the index's own directory; {@code metadata.total_size} (optional) is the bytes of all
 * the tensors. Other fields are ignored. Parsed strictly: duplicate keys, a shard name that is
 * absolute or leaves the directory, and anything but the types above are refused; a file that is
 * not JSON because a git merge left conflict markers in it is named as such, with the marker's
 * line. Immutable.
 */
public final class ShardIndex {
  /**
   * Names of index files: {@code <name>.safetensors.index.json} and {@code <name>.bin.index.json},
   * with an optional variant before {@code .json} (diffusers' {@code
   * ...safetensors.index.fp16.json}).
   */
  private static final Pattern INDEX_NAME =
      Pattern.compile("(?:.*/)?[^/]+\\.(?:safetensors|bin)\\.index(?:\\.[^./]+)?\\.json");

  private static final Pattern CONFLICT_MARKER =
      Pattern.compile("^(<{7}|={7}|>{7}|\\|{7})(?: .*)?$", Pattern.MULTILINE);

  private static final JsonFactory JSON =
      JsonFactory.builder()
          .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
          .disable(JsonFactory.Feature.CANONICALIZE_FIELD_NAMES)
          .disable(JsonFactory.Feature.INTERN_FIELD_NAMES)
          .streamReadConstraints(
              StreamReadConstraints.builder()
                  .maxStringLength(Integer.MAX_VALUE)
                  .maxNameLength(Integer.MAX_VALUE)
                  .maxNestingDepth(128)
                  .build())
          .build();

  private final String fileName;
  private final String directory;
  private final Map<String, String> weightMap;
  private final OptionalLong totalSize;

  private ShardIndex(
      String fileName, String directory, Map<String, String> weightMap, OptionalLong totalSize) {
    this.fileName = fileName;
    this.directory = directory;
    this.weightMap = Collections.unmodifiableMap(weightMap);
    this.totalSize = totalSize;
  }

  /** Whether an artifact-relative path names an index file. */
  public static boolean isIndexPath(String path) {
    return INDEX_NAME.matcher(path).matches();
  }

  /**
   * Parses an index file.
   *
   * @param path the artifact-relative path of the index ({@code a/b/model.safetensors.index.json});
   *     shard names resolve against its directory
   * @param json the file's bytes
   * @param maxEntries most {@code weight_map} entries
   * @throws IndexFormatException naming the file, the position or entry, and the rule
   */
  public static ShardIndex parse(String path, byte[] json, int maxEntries)
      throws IndexFormatException {
    int slash = path.lastIndexOf('/');
    String directory = slash < 0 ? "" : path.substring(0, slash + 1);
    Map<String, String> weightMap = null;
    OptionalLong totalSize = OptionalLong.empty();
    String text;
    try {
      text =
          StandardCharsets.UTF_8
              .newDecoder()
              .onMalformedInput(CodingErrorAction.REPORT)
              .onUnmappableCharacter(CodingErrorAction.REPORT)
              .decode(ByteBuffer.wrap(json))
              .toString();
    } catch (CharacterCodingException e) {
      throw new IndexFormatException(
          path, INVALID_JSON, "is not valid UTF-8 (" + e.getMessage() + "); JSON files are UTF-8");
    }
    try (JsonParser p = JSON.createParser(text)) {
      JsonToken t = p.nextToken();
      if (t != JsonToken.START_OBJECT) {
        throw structure(path, "is not a JSON object" + at(p), p);
      }
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String field = p.currentName();
        switch (field) {
          case "weight_map" -> weightMap = weightMap(path, p, maxEntries);
          case "metadata" -> totalSize = metadata(path, p);
          default -> {
            p.nextToken();
            p.skipChildren();
          }
        }
      }
      if (p.nextToken() != null) {
        throw new IndexFormatException(
            path, INVALID_JSON, "has content after its JSON object" + at(p));
      }
    } catch (JsonProcessingException e) {
      throw invalidJson(path, text, e);
    } catch (IOException e) {
      throw new IndexFormatException(path, INVALID_JSON, "is not valid JSON: " + e.getMessage());
    }
    if (weightMap == null) {
      throw new IndexFormatException(
          path, INVALID_STRUCTURE, "has no \"weight_map\" object (tensor name → shard file name)");
    }
    return new ShardIndex(path, directory, weightMap, totalSize);
  }

  /**
   * Refuses an index longer than {@code maxBytes} before it is read.
   *
   * @throws IndexFormatException {@link IndexFormatException#TOO_LARGE}
   */
  public static void checkSize(String path, long size, long maxBytes) throws IndexFormatException {
    if (size > maxBytes) {
      throw new IndexFormatException(
          path,
          TOO_LARGE,
          "is "
              + size
              + " bytes, more than the limit of "
              + maxBytes
              + " (--max-index-bytes); an index of a 180B-parameter model is about 50 KiB");
    }
  }

  private static Map<String, String> weightMap(String path, JsonParser p, int maxEntries)
      throws IOException, IndexFormatException {
    if (p.nextToken() != JsonToken.START_OBJECT) {
      throw structure(path, "\"weight_map\" is not an object" + at(p), p);
    }
    Map<String, String> map = new LinkedHashMap<>();
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String tensor = p.currentName();
      if (map.size() >= maxEntries) {
        throw new IndexFormatException(
            path,
            LIMIT_EXCEEDED,
            "\"weight_map\" has more than " + maxEntries + " entries (--max-tensors)" + at(p));
      }
      if (p.nextToken() != JsonToken.VALUE_STRING) {
        throw structure(
            path,
            "weight_map[\"" + abbreviate(tensor) + "\"] is not a file name (a string)" + at(p),
            p);
      }
      String shard = p.getText();
      checkShardName(path, tensor, shard);
      map.put(tensor, shard);
    }
    return map;
  }

  private static OptionalLong metadata(String path, JsonParser p)
      throws IOException, IndexFormatException {
    JsonToken t = p.nextToken();
    if (t == JsonToken.VALUE_NULL) {
      return OptionalLong.empty();
    }
    if (t != JsonToken.START_OBJECT) {
      throw structure(path, "\"metadata\" is not an object" + at(p), p);
    }
    OptionalLong total = OptionalLong.empty();
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String field = p.currentName();
      JsonToken v = p.nextToken();
      if (!field.equals("total_size")) {
        p.skipChildren();
        continue;
      }
      if (v == JsonToken.VALUE_NULL) {
        continue;
      }
      BigDecimal n =
          v == JsonToken.VALUE_NUMBER_INT || v == JsonToken.VALUE_NUMBER_FLOAT
              ? p.getDecimalValue()
              : null;
      if (n == null
          || n.signum() < 0
          || n.stripTrailingZeros().scale() > 0
          || n.compareTo(BigDecimal.valueOf(Long.MAX_VALUE)) > 0) {
        throw structure(
            path,
            "\"metadata\".\"total_size\" is "
                + abbreviate(p.getText())
                + ", not a byte count (a whole number ≥ 0)"
                + at(p),
            p);
      }
      total = OptionalLong.of(n.longValueExact());
    }
    return total;
  }

  /** A shard name must stay inside the index's directory: relative, no '..', '.', '\' or "". */
  private static void checkShardName(String path, String tensor, String shard)
      throws IndexFormatException {
    boolean unsafe =
        shard.isEmpty()
            || shard.startsWith("/")
            || shard.contains("\\")
            || shard.indexOf('\0') >= 0
            || List.of(shard.split("/", -1)).stream()
                .anyMatch(s -> s.isEmpty() || s.equals(".") || s.equals(".."));
    if (unsafe) {
      throw new IndexFormatException(
          path,
          UNSAFE_SHARD_PATH,
          "weight_map[\""
              + abbreviate(tensor)
              + "\"] names shard \""
              + abbreviate(shard)
              + "\": a shard is a file name relative to the index's folder (not empty, not"
              + " absolute, no '.', '..' or '\\')");
    }
  }

  private static IndexFormatException invalidJson(
      String path, String text, JsonProcessingException e) {
    var m = CONFLICT_MARKER.matcher(text);
    if (m.find()) {
      int line = 1;
      for (int i = 0; i < m.start(); i++) {
        if (text.charAt(i) == '\n') {
          line++;
        }
      }
      return new IndexFormatException(
          path,
          MERGE_CONFLICT,
          "is not JSON: line "
              + line
              + ", column 1 holds the git merge-conflict marker \""
              + abbreviate(m.group())
              + "\"; the file was committed in the middle of a merge, resolve the conflict");
    }
    String msg = e.getOriginalMessage();
    if (msg != null && msg.startsWith("Duplicate field")) {
      return new IndexFormatException(
          path, DUPLICATE_KEY, "repeats a key: " + msg + at(e.getLocation()));
    }
    return new IndexFormatException(
        path, INVALID_JSON, "is not valid JSON: " + msg + at(e.getLocation()));
  }

  private static IndexFormatException structure(String path, String detail, JsonParser p) {
    return new IndexFormatException(path, INVALID_STRUCTURE, detail);
  }

  private static String at(JsonParser p) {
    return at(p.currentLocation());
  }

  private static String at(JsonLocation loc) {
    if (loc == null || loc.getLineNr() < 0) {
      return "";
    }
    return " at line " + loc.getLineNr() + ", column " + loc.getColumnNr();
  }

  static String abbreviate(String s) {
    return s.length() <= 80 ? s : s.substring(0, 80) + "…";
  }

  /** The index file's artifact-relative path. */
  public String fileName() {
    return fileName;
  }

  /** Tensor name → shard file name (relative to the index's folder), in file order. */
  public Map<String, String> weightMap() {
    return weightMap;
  }

  /** {@code metadata.total_size}, when given. */
  public OptionalLong totalSize() {
    return totalSize;
  }

  /** The artifact-relative path of a shard file name of {@link #weightMap()}. */
  public String shardPath(String shard) {
    return directory + shard;
  }

  /** The artifact-relative paths of the shards, in order of first mention. */
  public List<String> shardPaths() {
    LinkedHashSet<String> out = new LinkedHashSet<>();
    for (String shard : weightMap.values()) {
      out.add(shardPath(shard));
    }
    return List.copyOf(out);
  }
}
