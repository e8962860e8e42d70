package io.tensorcast.dataplane.format.safetensors;

import static io.tensorcast.dataplane.format.safetensors.SafetensorsFormatException.*;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Validating parser of a safetensors header's JSON, one streaming pass with Jackson's {@link
 * JsonParser}: no data binding, no regex, no per-tensor reflection.
 */
final class HeaderParser {

  private static final JsonFactory JSON =
      JsonFactory.builder()
          // Without it Jackson silently keeps the last of duplicate keys; refuse them instead.
          .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
          // Names are unique tensor names: a symbol table only costs memory, and its hash-flood
          // guard would fail valid headers with many colliding names.
          .disable(JsonFactory.Feature.CANONICALIZE_FIELD_NAMES)
          .disable(JsonFactory.Feature.INTERN_FIELD_NAMES)
          // Strings and names are bounded by the header's byte length, checked before parsing;
          // nesting as in the reference reader (serde_json's recursion limit).
          .streamReadConstraints(
              StreamReadConstraints.builder()
                  .maxStringLength(Integer.MAX_VALUE)
                  .maxNameLength(Integer.MAX_VALUE)
                  .maxNestingDepth(128)
                  .maxNumberLength(1000)
                  .build())
          .build();

  private static final String METADATA_KEY = "__metadata__";

  private static final Comparator<TensorInfo> OFFSET_ORDER =
      Comparator.comparingLong(TensorInfo::begin).thenComparingLong(TensorInfo::end);

  private final String fileName;
  private final long fileSize;
  private final byte[] json;
  private final SafetensorsLimits limits;

  private HeaderParser(String fileName, long fileSize, byte[] json, SafetensorsLimits limits) {
    this.fileName = fileName;
    this.fileSize = fileSize;
    this.json = json;
    this.limits = limits;
  }

  static SafetensorsHeader parse(
      String fileName, long fileSize, byte[] json, SafetensorsLimits limits)
      throws SafetensorsFormatException {
    return new HeaderParser(fileName, fileSize, json, limits).parse();
  }

  /** Checks a header length against the prefix rules; shared with readHeaderLength. */
  static void checkHeaderLength(
      String fileName, long headerLength, long fileSize, SafetensorsLimits limits)
      throws SafetensorsFormatException {
    if (fileSize < SafetensorsHeader.LENGTH_PREFIX_BYTES) {
      throw new SafetensorsFormatException(
          fileName,
          FILE_TOO_SMALL,
          null,
          "file is "
              + fileSize
              + " bytes, shorter than the "
              + SafetensorsHeader.LENGTH_PREFIX_BYTES
              + "-byte header length prefix");
    }
    if (headerLength == 0) {
      throw new SafetensorsFormatException(
          fileName,
          HEADER_LENGTH_ZERO,
          null,
          "header length prefix is 0; a header holds at least the JSON object {}");
    }
    if (headerLength < 0 || headerLength > limits.maxHeaderBytes()) {
      throw new SafetensorsFormatException(
          fileName,
          HEADER_TOO_LARGE,
          null,
          "header length prefix says "
              + Long.toUnsignedString(headerLength)
              + " bytes, above the limit of "
              + limits.maxHeaderBytes()
              + " bytes (--max-header-bytes; huggingface/safetensors caps headers at "
              + SafetensorsHeader.MAX_HEADER_LENGTH
              + ")");
    }
    long available = fileSize - SafetensorsHeader.LENGTH_PREFIX_BYTES;
    if (headerLength > available) {
      throw new SafetensorsFormatException(
          fileName,
          HEADER_LENGTH_EXCEEDS_FILE,
          null,
          "header length prefix says "
              + headerLength
              + " bytes but the file has only "
              + available
              + " bytes after the 8-byte prefix (file size "
              + fileSize
              + "); the file is truncated or the prefix is corrupt");
    }
  }

  private SafetensorsHeader parse() throws SafetensorsFormatException {
    checkHeaderLength(fileName, json.length, fileSize, limits);
    int bad = firstInvalidUtf8(json);
    if (bad >= 0) {
      throw fail(
          HEADER_NOT_UTF8,
          null,
          "header is not valid UTF-8: bad byte 0x"
              + hex(json[bad])
              + " at header offset "
              + bad
              + " (file offset "
              + (bad + SafetensorsHeader.LENGTH_PREFIX_BYTES)
              + ")");
    }
    if (json[0] != '{') {
      throw fail(
          HEADER_NOT_OBJECT,
          null,
          "header must be a JSON object starting with '{' but its first byte is 0x"
              + hex(json[0])
              + printable(json[0]));
    }

    if (json.length > 1 && json[1] == 0) {
      // Jackson would take "{" followed by NUL bytes for UTF-16 or UTF-32 text.
      throw fail(
          INVALID_JSON,
          null,
          "header is not valid JSON: a NUL byte at header offset 1 (file offset 9)");
    }
    Map<String, String> metadata = null;
    List<TensorInfo> tensors = new ArrayList<>();
    try (JsonParser p = JSON.createParser(json)) {
      p.nextToken(); // START_OBJECT, guaranteed by the first byte
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String key = p.currentName();
        if (METADATA_KEY.equals(key)) {
          metadata = readMetadata(p);
        } else {
          checkName(key);
          if (tensors.size() >= limits.maxTensors()) {
            throw fail(
                LIMIT_EXCEEDED,
                null,
                "header declares more than "
                    + limits.maxTensors()
                    + " tensors (--max-tensors); refused at \""
                    + abbreviate(key)
                    + "\""
                    + at(p));
          }
          tensors.add(readTensor(p, key));
        }
      }
      if (t != JsonToken.END_OBJECT) {
        throw fail(INVALID_JSON, null, "header JSON is not a well-formed object" + at(p));
      }
      if (p.nextToken() != null) {
        throw fail(
            INVALID_JSON,
            null,
            "header has content after its JSON object" + at(p) + "; only spaces may follow");
      }
    } catch (JsonProcessingException e) {
      String msg = e.getOriginalMessage();
      if (msg != null && msg.startsWith("Duplicate field")) {
        throw fail(
            DUPLICATE_KEY,
            null,
            "header JSON repeats a key: "
                + msg
                + at(e.getLocation())
                + "; readers disagree on which value wins, so duplicates are refused");
      }
      throw fail(INVALID_JSON, null, "header is not valid JSON: " + msg + at(e.getLocation()));
    } catch (IOException e) {
      throw fail(INVALID_JSON, null, "header is not valid JSON: " + e.getMessage());
    }

    tensors.sort(OFFSET_ORDER);
    long dataEnd = checkContiguous(tensors);
    long dataLength = fileSize - SafetensorsHeader.LENGTH_PREFIX_BYTES - json.length;
    if (dataEnd > dataLength) {
      TensorInfo last = tensors.get(tensors.size() - 1);
      throw fail(
          FILE_TRUNCATED,
          last.name(),
          "ends at data offset "
              + dataEnd
              + " but the data section holds only "
              + dataLength
              + " bytes (file size "
              + fileSize
              + " = 8 + header "
              + json.length
              + " + data "
              + dataLength
              + "): the file is truncated by "
              + (dataEnd - dataLength)
              + " bytes");
    }
    if (dataEnd < dataLength) {
      String what =
          tensors.isEmpty()
              ? "the header declares no tensors"
              : "the last tensor \""
                  + tensors.get(tensors.size() - 1).name()
                  + "\" ends at data offset "
                  + dataEnd;
      throw fail(
          TRAILING_BYTES,
          null,
          what
              + " but the data section holds "
              + dataLength
              + " bytes (file size "
              + fileSize
              + " = 8 + header "
              + json.length
              + " + data "
              + dataLength
              + "): "
              + (dataLength - dataEnd)
              + " trailing bytes belong to no tensor");
    }
    return new SafetensorsHeader(json.length, metadata, tensors, dataLength);
  }

  private Map<String, String> readMetadata(JsonParser p)
      throws IOException, SafetensorsFormatException {
    JsonToken t = p.nextToken();
    if (t == JsonToken.VALUE_NULL) {
      return null; // the reference reads null as "no metadata" (MLX writes it)
    }
    if (t != JsonToken.START_OBJECT) {
      throw fail(
          METADATA_NOT_OBJECT,
          null,
          "\"__metadata__\" must be a JSON object of strings (or null) but is " + describe(p, t));
    }
    Map<String, String> metadata = new LinkedHashMap<>();
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String key = p.currentName();
      if (metadata.size() >= limits.maxTensors()) {
        throw fail(
            LIMIT_EXCEEDED,
            null,
            "\"__metadata__\" has more than "
                + limits.maxTensors()
                + " entries (--max-tensors)"
                + at(p));
      }
      JsonToken v = p.nextToken();
      if (v != JsonToken.VALUE_STRING) {
        throw fail(
            METADATA_VALUE_NOT_STRING,
            null,
            "\"__metadata__\" key \""
                + key
                + "\" has "
                + describe(p, v)
                + "; metadata values must be strings");
      }
      metadata.put(key, p.getText());
    }
    return metadata;
  }

  private TensorInfo readTensor(JsonParser p, String name)
      throws IOException, SafetensorsFormatException {
    JsonToken t = p.nextToken();
    if (t != JsonToken.START_OBJECT) {
      throw fail(
          TENSOR_NOT_OBJECT,
          name,
          "entry must be a JSON object with dtype, shape and data_offsets but is "
              + describe(p, t));
    }
    String dtypeName = null;
    long[] shape = null;
    long[] offsets = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String field = p.currentName();
      switch (field) {
        case "dtype" -> {
          JsonToken v = p.nextToken();
          if (v != JsonToken.VALUE_STRING) {
            throw fail(UNKNOWN_DTYPE, name, "dtype must be a string but is " + describe(p, v));
          }
          dtypeName = p.getText();
        }
        case "shape" -> shape = readIntegers(p, name, "shape", INVALID_SHAPE, limits.maxRank());
        case "data_offsets" -> {
          offsets = readIntegers(p, name, "data_offsets", INVALID_DATA_OFFSETS, 2);
          if (offsets.length != 2) {
            throw fail(
                INVALID_DATA_OFFSETS,
                name,
                "data_offsets must be [begin, end] but has "
                    + offsets.length
                    + " numbers: "
                    + Arrays.toString(offsets));
          }
        }
        default -> {
          // Like the reference reader (serde without deny_unknown_fields): extra keys in a
          // tensor entry are ignored, so files from writers that add fields still load. Move to
          // the value first: skipChildren() on the field name would skip nothing.
          p.nextToken();
          p.skipChildren();
        }
      }
    }
    if (dtypeName == null || shape == null || offsets == null) {
      String missing = dtypeName == null ? "dtype" : shape == null ? "shape" : "data_offsets";
      throw fail(MISSING_FIELD, name, "entry lacks the field \"" + missing + "\"");
    }
    Dtype dtype = Dtype.fromName(dtypeName).orElse(null);
    if (dtype == null) {
      throw fail(
          UNKNOWN_DTYPE,
          name,
          "unknown dtype \""
              + dtypeName
              + "\"; the format defines "
              + Arrays.toString(Dtype.values()));
    }
    long begin = offsets[0];
    long end = offsets[1];
    if (begin > end) {
      throw fail(
          BEGIN_AFTER_END, name, "data_offsets [" + begin + ", " + end + "] begin after end");
    }
    long elements = 1;
    for (long d : shape) {
      if (d != 0 && elements > Long.MAX_VALUE / d) {
        throw fail(
            SIZE_OVERFLOW,
            name,
            "element count of shape " + Arrays.toString(shape) + " overflows 64 bits");
      }
      elements *= d;
    }
    long bytes;
    try {
      bytes = dtype.byteSize(elements);
    } catch (ArithmeticException e) {
      throw fail(
          SIZE_OVERFLOW,
          name,
          "byte count of " + elements + " elements of " + dtype + " overflows 64 bits");
    } catch (IllegalArgumentException e) {
      throw fail(
          MISALIGNED_SUB_BYTE,
          name,
          "shape "
              + Arrays.toString(shape)
              + " has "
              + elements
              + " elements of "
              + dtype
              + " ("
              + dtype.bitSize()
              + " bits each) = "
              + elements * dtype.bitSize()
              + " bits, not a whole number of bytes");
    }
    if (bytes != end - begin) {
      throw fail(
          SIZE_MISMATCH,
          name,
          "dtype "
              + dtype
              + " × shape "
              + Arrays.toString(shape)
              + " = "
              + elements
              + " elements = "
              + bytes
              + " bytes, but data_offsets ["
              + begin
              + ", "
              + end
              + "] span "
              + (end - begin)
              + " bytes");
    }
    return new TensorInfo(name, dtype, shape, begin, end);
  }

  /**
   * Reads a JSON array of non-negative integers that fit in a long, refusing it at its {@code max +
   * 1}st element (before keeping it).
   */
  private long[] readIntegers(JsonParser p, String tensor, String field, String rule, int max)
      throws IOException, SafetensorsFormatException {
    JsonToken t = p.nextToken();
    if (t != JsonToken.START_ARRAY) {
      throw fail(
          rule, tensor, field + " must be a JSON array of integers but is " + describe(p, t));
    }
    long[] values = new long[4];
    int n = 0;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      String where = field + "[" + n + "]";
      if (t == JsonToken.VALUE_NUMBER_FLOAT) {
        throw fail(INVALID_NUMBER, tensor, where + " = " + p.getText() + " is not an integer");
      }
      if (t != JsonToken.VALUE_NUMBER_INT) {
        throw fail(rule, tensor, where + " must be an integer but is " + describe(p, t));
      }
      if (p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
        throw fail(
            INVALID_NUMBER,
            tensor,
            where + " = " + p.getText() + " does not fit in a signed 64-bit integer");
      }
      long v = p.getLongValue();
      if (v < 0) {
        throw fail(INVALID_NUMBER, tensor, where + " = " + v + " is negative");
      }
      if (n == max) {
        if (rule.equals(INVALID_SHAPE)) {
          throw fail(
              LIMIT_EXCEEDED,
              tensor,
              "shape has more than "
                  + max
                  + " dimensions (--max-rank); refused at "
                  + where
                  + at(p));
        }
        long[] shown = Arrays.copyOf(values, n + 1);
        shown[n] = v;
        throw fail(
            rule,
            tensor,
            field
                + " must be [begin, end] but has more than "
                + max
                + " numbers: "
                + Arrays.toString(shown).replace("]", ", …]"));
      }
      if (n == values.length) {
        values = Arrays.copyOf(values, n * 2);
      }
      values[n++] = v;
    }
    return n == values.length ? values : Arrays.copyOf(values, n);
  }

  /**
   * Checks that the tensors, sorted by (begin, end), tile the data section from 0 without gaps,
   * overlaps or aliases, as the reference's {@code Metadata::validate} does. Several zero-size
   * tensors may share an offset (the reference writer produces that).
   *
   * @return the end of the last tensor, i.e. the data section length the header implies
   */
  private long checkContiguous(List<TensorInfo> sorted) throws SafetensorsFormatException {
    long expected = 0;
    TensorInfo prev = null;
    for (TensorInfo t : sorted) {
      if (t.begin() != expected) {
        if (prev == null) {
          throw fail(
              DATA_NOT_AT_ZERO,
              t.name(),
              "is first in offset order but begins at data offset "
                  + t.begin()
                  + "; the data section must start with a tensor at offset 0 ("
                  + t.begin()
                  + " bytes belong to no tensor)");
        }
        if (t.begin() > expected) {
          throw fail(
              GAP_IN_OFFSETS,
              t.name(),
              "begins at data offset "
                  + t.begin()
                  + " but the previous tensor \""
                  + prev.name()
                  + "\" ends at "
                  + expected
                  + ": a gap of "
                  + (t.begin() - expected)
                  + " bytes belongs to no tensor");
        }
        if (t.begin() == prev.begin() && t.end() == prev.end()) {
          throw fail(
              ALIASING_OFFSETS,
              t.name(),
              "has the same data_offsets ["
                  + t.begin()
                  + ", "
                  + t.end()
                  + "] as tensor \""
                  + prev.name()
                  + "\"; tensors may not share bytes");
        }
        throw fail(
            OVERLAPPING_OFFSETS,
            t.name(),
            "data_offsets ["
                + t.begin()
                + ", "
                + t.end()
                + "] overlap tensor \""
                + prev.name()
                + "\" ["
                + prev.begin()
                + ", "
                + prev.end()
                + "] by "
                + (Math.min(t.end(), prev.end()) - t.begin())
                + " bytes");
      }
      expected = t.end();
      prev = t;
    }
    return expected;
  }

  /**
   * A tensor name must be addressable: not empty (it could not be asked for by name, e.g. in {@code
   * GET /v1/tensors/{name}}), and valid Unicode (a lone surrogate from a {@code \\uD800} escape has
   * no UTF-8 form; the reference reader refuses it as invalid JSON).
   */
  private void checkName(String name) throws SafetensorsFormatException {
    if (name.isEmpty()) {
      throw fail(
          INVALID_TENSOR_NAME,
          null,
          "a tensor is named \"\" (the empty string): it cannot be addressed by name; rename it");
    }
    for (int i = 0; i < name.length(); i++) {
      char c = name.charAt(i);
      if (Character.isHighSurrogate(c)
          && i + 1 < name.length()
          && Character.isLowSurrogate(name.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        throw fail(
            INVALID_TENSOR_NAME,
            null,
            "tensor name \""
                + abbreviate(name.substring(0, i))
                + "…\" has a lone surrogate \\u"
                + String.format("%04X", (int) c)
                + " at character "
                + i
                + ": it is not valid Unicode");
      }
    }
  }

  private SafetensorsFormatException fail(String rule, String tensor, String detail) {
    return new SafetensorsFormatException(fileName, rule, tensor, detail);
  }

  private static String describe(JsonParser p, JsonToken t) throws IOException {
    if (t == null) {
      return "missing";
    }
    return switch (t) {
      case START_OBJECT -> "an object";
      case START_ARRAY -> "an array";
      case VALUE_STRING -> "a string \"" + abbreviate(p.getText()) + "\"";
      case VALUE_NUMBER_INT, VALUE_NUMBER_FLOAT -> "a number " + p.getText();
      case VALUE_TRUE, VALUE_FALSE -> "a boolean " + p.getText();
      case VALUE_NULL -> "null";
      default -> t.asString() == null ? t.name() : t.asString();
    };
  }

  private static String abbreviate(String s) {
    return s.length() <= 64 ? s : s.substring(0, 64) + "…";
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

  private static String hex(byte b) {
    return String.format("%02x", b & 0xff);
  }

  private static String printable(byte b) {
    return b >= 0x21 && b < 0x7f ? " ('" + (char) b + "')" : "";
  }

  /**
   * Index of the first byte of the first invalid UTF-8 sequence (RFC 3629: no overlong forms, no
   * surrogates, nothing above U+10FFFF), or -1 if all of {@code b} is valid.
   */
  static int firstInvalidUtf8(byte[] b) {
    int i = 0;
    int n = b.length;
    while (i < n) {
      int c = b[i];
      if (c >= 0) {
        i++;
        continue;
      }
      c &= 0xff;
      int need;
      int lo = 0x80;
      int hi = 0xbf;
      if (c >= 0xc2 && c <= 0xdf) {
        need = 1;
      } else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        if (c == 0xe0) {
          lo = 0xa0;
        } else if (c == 0xed) {
          hi = 0x9f;
        }
      } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        if (c == 0xf0) {
          lo = 0x90;
        } else if (c == 0xf4) {
          hi = 0x8f;
        }
      } else {
        return i;
      }
      if (i + need >= n) {
        return i;
      }
      int b1 = b[i + 1] & 0xff;
      if (b1 < lo || b1 > hi) {
        return i;
      }
      for (int k = 2; k <= need; k++) {
        int bk = b[i + k] & 0xff;
        if (bk < 0x80 || bk > 0xbf) {
          return i;
        }
      }
      i += need + 1;
    }
    return -1;
  }
}
