package io.tensorcast.dataplane.format.safetensors;

import static io.tensorcast.dataplane.format.safetensors.SafetensorsFormatException.*;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hand-built headers: every rule of the format refused with its id and numbers; odd but valid files
 * accepted.
 */
class SafetensorsHeaderTest {

  private static final String NAME = "hostile.safetensors";

  /** A tiny byte builder for safetensors files. */
  static final class FileBytes {
    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    static FileBytes prefix(long headerLength) {
      FileBytes f = new FileBytes();
      byte[] p =
          ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(headerLength).array();
      f.out.writeBytes(p);
      return f;
    }

    /** Prefix with the right length, then the header text as UTF-8. */
    static FileBytes header(String json) {
      return header(json.getBytes(StandardCharsets.UTF_8));
    }

    static FileBytes header(byte[] json) {
      FileBytes f = prefix(json.length);
      f.out.writeBytes(json);
      return f;
    }

    FileBytes raw(byte[] bytes) {
      out.writeBytes(bytes);
      return this;
    }

    /** {@code n} data bytes 0, 1, 2, … */
    FileBytes data(int n) {
      for (int i = 0; i < n; i++) {
        out.write(i);
      }
      return this;
    }

    byte[] bytes() {
      return out.toByteArray();
    }
  }

  /** Parses as a loader would: prefix first (checked against the size), then the header. */
  static SafetensorsHeader parse(byte[] file) throws SafetensorsFormatException {
    byte[] first8 = Arrays.copyOf(file, 8);
    long n = SafetensorsHeader.readHeaderLength(NAME, first8, file.length);
    return SafetensorsHeader.parse(NAME, file.length, Arrays.copyOfRange(file, 8, 8 + (int) n));
  }

  static SafetensorsHeader parse(FileBytes f) throws SafetensorsFormatException {
    return parse(f.bytes());
  }

  /** Asserts the file is refused for {@code rule}, naming the file and the given fragments. */
  static SafetensorsFormatException refused(FileBytes f, String rule, String... fragments) {
    SafetensorsFormatException ex =
        catchThrowableOfType(SafetensorsFormatException.class, () -> parse(f));
    assertThat(ex).as("expected rule %s", rule).isNotNull();
    assertThat(ex.rule()).as(ex.getMessage()).isEqualTo(rule);
    assertThat(ex.fileName()).isEqualTo(NAME);
    assertThat(ex.getMessage()).startsWith(NAME + ": ").endsWith("[rule " + rule + "]");
    if (fragments.length > 0) {
      assertThat(ex.getMessage()).contains(fragments);
    }
    return ex;
  }

  static String tensor(String name, String dtype, String shape, long begin, long end) {
    return "\""
        + name
        + "\":{\"dtype\":\""
        + dtype
        + "\",\"shape\":"
        + shape
        + ",\"data_offsets\":["
        + begin
        + ","
        + end
        + "]}";
  }

  @Nested
  class LengthPrefix {
    @Test
    void fileShorterThanPrefix() {
      SafetensorsFormatException ex =
          catchThrowableOfType(
              SafetensorsFormatException.class,
              () -> SafetensorsHeader.readHeaderLength(NAME, new byte[8], 5));
      assertThat(ex.rule()).isEqualTo(FILE_TOO_SMALL);
      assertThat(ex.getMessage()).contains(NAME, "5 bytes", "8-byte");
    }

    @Test
    void zeroLength() {
      refused(
          FileBytes.prefix(0).raw("{}".getBytes(StandardCharsets.US_ASCII)),
          HEADER_LENGTH_ZERO,
          "0");
    }

    @Test
    void aboveTheReferenceCap() {
      refused(FileBytes.prefix(100_000_001L).data(16), HEADER_TOO_LARGE, "100000001", "100000000");
    }

    @Test
    void prefixWithTheTopBitSetIsReadUnsigned() {
      refused(FileBytes.prefix(-1L).data(16), HEADER_TOO_LARGE, "18446744073709551615");
    }

    @Test
    void lengthBeyondTheFile() {
      // The shape of safetensors-cpp's abuse_attempt_1: says 1000, file has 88 bytes.
      FileBytes f = FileBytes.prefix(1000).raw(new byte[80]);
      refused(f, HEADER_LENGTH_EXCEEDS_FILE, "1000", "80 bytes after", "88");
    }

    @Test
    void readFromDiskChecksTheSameRules(@TempDir Path dir) throws Exception {
      Path tiny = dir.resolve("tiny.safetensors");
      Files.write(tiny, new byte[] {1, 0, 0});
      assertThatThrownBy(() -> SafetensorsHeader.read(tiny))
          .isInstanceOf(SafetensorsFormatException.class)
          .hasMessageContaining(tiny.toString())
          .hasMessageContaining("3 bytes")
          .hasMessageEndingWith("[rule file-too-small]");

      Path ok = dir.resolve("ok.safetensors");
      Files.write(
          ok, FileBytes.header("{" + tensor("w", "F32", "[2]", 0, 8) + "}").data(8).bytes());
      SafetensorsHeader h = SafetensorsHeader.read(ok);
      assertThat(h.tensor("w").orElseThrow().byteLength()).isEqualTo(8);
      assertThat(h.fileSize()).isEqualTo(Files.size(ok));
    }
  }

  @Nested
  class Encoding {
    @Test
    void invalidUtf8ByteNamesItsOffset() {
      byte[] json = "{\"a\u00ff\":{}}".getBytes(StandardCharsets.ISO_8859_1);
      refused(FileBytes.header(json), HEADER_NOT_UTF8, "0xff", "header offset 3", "file offset 11");
    }

    @Test
    void overlongEncodingIsNotUtf8() {
      // 0xC0 0xAF is an overlong '/', refused by RFC 3629 (and by Rust's from_utf8).
      byte[] json = {'{', '"', (byte) 0xc0, (byte) 0xaf, '"', ':', '{', '}', '}'};
      refused(FileBytes.header(json), HEADER_NOT_UTF8, "0xc0", "header offset 2");
    }

    @Test
    void encodedSurrogateIsNotUtf8() {
      byte[] json = {'{', '"', (byte) 0xed, (byte) 0xa0, (byte) 0x80, '"', ':', '1', '}'};
      refused(FileBytes.header(json), HEADER_NOT_UTF8, "0xed", "header offset 2");
    }

    @Test
    void sequenceCutByTheEndOfTheHeader() {
      byte[] json = {'{', '}', ' ', (byte) 0xe2, (byte) 0x82};
      refused(FileBytes.header(json), HEADER_NOT_UTF8, "header offset 3");
    }

    @Test
    void notStartingWithBrace() {
      refused(FileBytes.header("[]"), HEADER_NOT_OBJECT, "0x5b", "'['");
      refused(FileBytes.header(" {}"), HEADER_NOT_OBJECT, "0x20");
      refused(FileBytes.header("\ufeff{}"), HEADER_NOT_OBJECT, "0xef");
    }
  }

  @Nested
  class Json {
    @Test
    void truncatedJson() {
      refused(FileBytes.header("{\"a\":"), INVALID_JSON, "line 1");
    }

    @Test
    void contentAfterTheObject() {
      refused(FileBytes.header("{} {}"), INVALID_JSON, "content after");
      refused(FileBytes.header("{}x"), INVALID_JSON, "'x'");
    }

    @Test
    void zeroBytesInsteadOfSpacePadding() {
      refused(FileBytes.header("{}\0\0\0\0\0\0"), INVALID_JSON, "code 0");
    }

    @Test
    void trailingComma() {
      refused(FileBytes.header("{\"__metadata__\":{\"a\":\"b\"},}"), INVALID_JSON);
    }

    @Test
    void duplicateTensorName() {
      String t = tensor("w", "U8", "[4]", 0, 4);
      refused(FileBytes.header("{" + t + "," + t + "}").data(4), DUPLICATE_KEY, "'w'");
    }

    @Test
    void duplicateFieldInsideATensor() {
      String json =
          "{\"w\":{\"dtype\":\"U8\",\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,4]}}";
      refused(FileBytes.header(json).data(4), DUPLICATE_KEY, "'dtype'");
    }

    @Test
    void duplicateMetadataKey() {
      refused(
          FileBytes.header("{\"__metadata__\":{\"format\":\"pt\",\"format\":\"np\"}}"),
          DUPLICATE_KEY,
          "'format'");
    }
  }

  @Nested
  class Metadata {
    @Test
    void metadataMustBeAnObject() {
      refused(FileBytes.header("{\"__metadata__\":[]}"), METADATA_NOT_OBJECT, "an array");
      refused(
          FileBytes.header("{\"__metadata__\":\"pt\"}"), METADATA_NOT_OBJECT, "a string \"pt\"");
    }

    @Test
    void metadataValuesMustBeStrings() {
      refused(
          FileBytes.header("{\"__metadata__\":{\"epoch\":3}}"),
          METADATA_VALUE_NOT_STRING,
          "\"epoch\"",
          "a number 3");
      refused(
          FileBytes.header("{\"__metadata__\":{\"cfg\":{\"a\":\"b\"}}}"),
          METADATA_VALUE_NOT_STRING,
          "\"cfg\"",
          "an object");
    }
  }

  @Nested
  class TensorEntries {
    @Test
    void entryMustBeAnObject() {
      SafetensorsFormatException ex =
          refused(FileBytes.header("{\"w\":[0,4]}"), TENSOR_NOT_OBJECT, "tensor \"w\"", "an array");
      assertThat(ex.tensorName()).contains("w");
    }

    @Test
    void missingField() {
      refused(
          FileBytes.header("{\"w\":{\"dtype\":\"U8\",\"shape\":[4]}}").data(4),
          MISSING_FIELD,
          "tensor \"w\"",
          "\"data_offsets\"");
    }

    @Test
    void unknownDtype() {
      refused(
          FileBytes.header("{" + tensor("w", "F128", "[1]", 0, 16) + "}").data(16),
          UNKNOWN_DTYPE,
          "tensor \"w\"",
          "\"F128\"",
          "F8_E8M0");
      // Names are case-sensitive, as in the reference.
      refused(
          FileBytes.header("{" + tensor("w", "f32", "[1]", 0, 4) + "}").data(4),
          UNKNOWN_DTYPE,
          "\"f32\"");
      refused(
          FileBytes.header("{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}").data(4),
          UNKNOWN_DTYPE,
          "a number 4");
    }

    @Test
    void shapeMustBeAnArrayOfIntegers() {
      refused(
          FileBytes.header("{" + tensor("w", "U8", "4", 0, 4) + "}").data(4),
          INVALID_SHAPE,
          "a number 4");
      refused(
          FileBytes.header("{" + tensor("w", "U8", "[\"4\"]", 0, 4) + "}").data(4),
          INVALID_SHAPE,
          "shape[0]",
          "a string \"4\"");
    }

    @Test
    void dataOffsetsMustBeTwoIntegers() {
      String one = "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4]}}";
      refused(FileBytes.header(one).data(4), INVALID_DATA_OFFSETS, "1 numbers", "[4]");
      String three = "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4,8]}}";
      refused(
          FileBytes.header(three).data(4),
          INVALID_DATA_OFFSETS,
          "more than 2 numbers",
          "[0, 4, 8, …]");
      String text = "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":\"0,4\"}}";
      refused(FileBytes.header(text).data(4), INVALID_DATA_OFFSETS, "a string \"0,4\"");
    }

    @Test
    void numbersMustBeNonNegativeIntegersThatFitALong() {
      refused(
          FileBytes.header("{" + tensor("w", "U8", "[-1]", 0, 0) + "}"),
          INVALID_NUMBER,
          "shape[0] = -1",
          "negative");
      refused(
          FileBytes.header("{" + tensor("w", "U8", "[4.0]", 0, 4) + "}").data(4),
          INVALID_NUMBER,
          "4.0",
          "not an integer");
      String exp = "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4e0]}}";
      refused(FileBytes.header(exp).data(4), INVALID_NUMBER, "data_offsets[1] = 4e0");
      refused(
          FileBytes.header("{" + tensor("w", "U8", "[9223372036854775808]", 0, 4) + "}").data(4),
          INVALID_NUMBER,
          "9223372036854775808",
          "64-bit");
    }
  }

  @Nested
  class Sizes {
    @Test
    void beginAfterEnd() {
      refused(
          FileBytes.header("{" + tensor("w", "U8", "[4]", 8, 4) + "}").data(8),
          BEGIN_AFTER_END,
          "[8, 4]");
    }

    @Test
    void elementCountOverflow() {
      refused(
          FileBytes.header("{" + tensor("w", "U8", "[4294967296,4294967296]", 0, 4) + "}").data(4),
          SIZE_OVERFLOW,
          "tensor \"w\"",
          "[4294967296, 4294967296]");
    }

    @Test
    void byteCountOverflow() {
      // 2^62 elements fit a long; 2^62 × 4 bytes does not.
      refused(
          FileBytes.header("{" + tensor("w", "F32", "[4611686018427387904]", 0, 4) + "}").data(4),
          SIZE_OVERFLOW,
          "4611686018427387904 elements of F32");
    }

    @Test
    void subByteTensorMustFillWholeBytes() {
      refused(
          FileBytes.header("{" + tensor("w", "F4", "[3]", 0, 2) + "}").data(2),
          MISALIGNED_SUB_BYTE,
          "3 elements of F4",
          "12 bits");
    }

    @Test
    void shapeTimesDtypeMustEqualTheSpan() {
      refused(
          FileBytes.header("{" + tensor("w", "F32", "[2,2]", 0, 12) + "}").data(12),
          SIZE_MISMATCH,
          "tensor \"w\"",
          "F32",
          "[2, 2]",
          "16 bytes",
          "[0, 12]",
          "12 bytes");
    }
  }

  @Nested
  class Layout {
    @Test
    void dataMustStartAtZero() {
      refused(
          FileBytes.header("{" + tensor("w", "U8", "[4]", 4, 8) + "}").data(8),
          DATA_NOT_AT_ZERO,
          "tensor \"w\"",
          "offset 4");
    }

    @Test
    void gapBetweenTensors() {
      String json =
          "{" + tensor("a", "U8", "[4]", 0, 4) + "," + tensor("b", "U8", "[4]", 8, 12) + "}";
      refused(
          FileBytes.header(json).data(12),
          GAP_IN_OFFSETS,
          "tensor \"b\"",
          "\"a\" ends at 4",
          "gap of 4 bytes");
    }

    @Test
    void overlappingTensors() {
      String json =
          "{" + tensor("a", "U8", "[8]", 0, 8) + "," + tensor("b", "U8", "[8]", 4, 12) + "}";
      refused(
          FileBytes.header(json).data(12),
          OVERLAPPING_OFFSETS,
          "tensor \"b\"",
          "[4, 12]",
          "\"a\" [0, 8]",
          "by 4 bytes");
    }

    @Test
    void aliasingTensors() {
      String json =
          "{" + tensor("a", "U8", "[8]", 0, 8) + "," + tensor("b", "I8", "[8]", 0, 8) + "}";
      refused(FileBytes.header(json).data(8), ALIASING_OFFSETS, "tensor \"b\"", "[0, 8]", "\"a\"");
    }

    @Test
    void zeroSizeTensorInsideAnotherIsRefusedLikeTheReference() {
      String json =
          "{" + tensor("a", "U8", "[8]", 0, 8) + "," + tensor("z", "U8", "[0]", 4, 4) + "}";
      refused(FileBytes.header(json).data(8), OVERLAPPING_OFFSETS, "tensor \"z\"", "[4, 4]");
    }

    @Test
    void truncatedFile() {
      String json = "{" + tensor("w", "F32", "[4]", 0, 16) + "}";
      refused(
          FileBytes.header(json).data(10),
          FILE_TRUNCATED,
          "tensor \"w\"",
          "ends at data offset 16",
          "holds only 10",
          "truncated by 6 bytes");
    }

    @Test
    void trailingBytes() {
      String json = "{" + tensor("w", "F32", "[4]", 0, 16) + "}";
      refused(
          FileBytes.header(json).data(20),
          TRAILING_BYTES,
          "\"w\" ends at data offset 16",
          "holds 20",
          "4 trailing bytes");
      refused(FileBytes.header("{}").data(3), TRAILING_BYTES, "no tensors", "3 trailing bytes");
    }
  }

  @Nested
  class ValidUnusualFiles {
    @Test
    void emptyObject() throws Exception {
      SafetensorsHeader h = parse(FileBytes.header("{}"));
      assertThat(h.tensors()).isEmpty();
      assertThat(h.hasMetadata()).isFalse();
      assertThat(h.metadata()).isEmpty();
      assertThat(h.headerLength()).isEqualTo(2);
      assertThat(h.dataOffset()).isEqualTo(10);
      assertThat(h.dataLength()).isZero();
      assertThat(h.fileSize()).isEqualTo(10);
    }

    @Test
    void onlyMetadata() throws Exception {
      SafetensorsHeader h =
          parse(FileBytes.header("{\"__metadata__\":{\"format\":\"pt\",\"b\":\"\"}}"));
      assertThat(h.tensors()).isEmpty();
      assertThat(h.metadata()).containsExactly(Map.entry("format", "pt"), Map.entry("b", ""));
    }

    @Test
    void emptyMetadataIsPresent() throws Exception {
      SafetensorsHeader h = parse(FileBytes.header("{\"__metadata__\":{}}"));
      assertThat(h.hasMetadata()).isTrue();
      assertThat(h.metadata()).isEmpty();
    }

    @Test
    void nullMetadataMeansNone() throws Exception {
      // Apple MLX writes "__metadata__":null; the reference reads it as absent.
      SafetensorsHeader h =
          parse(
              FileBytes.header("{\"__metadata__\":null," + tensor("w", "U8", "[1]", 0, 1) + "}")
                  .data(1));
      assertThat(h.hasMetadata()).isFalse();
      assertThat(h.tensors()).hasSize(1);
    }

    @Test
    void trailingSpacesAfterTheObject() throws Exception {
      String json = "{" + tensor("w", "U8", "[2]", 0, 2) + "}";
      String padded = json + " ".repeat(8 - json.length() % 8);
      SafetensorsHeader h = parse(FileBytes.header(padded).data(2));
      assertThat(h.headerLength()).isEqualTo(padded.length());
      assertThat(h.dataOffset() % 8).isZero();
      assertThat(h.tensor("w").orElseThrow().end()).isEqualTo(2);
    }

    @Test
    void unknownFieldsInATensorEntryAreIgnoredLikeTheReference() throws Exception {
      String json =
          "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4],"
              + "\"stride\":[1],\"extra\":{\"nested\":[1,2]}}}";
      SafetensorsHeader h = parse(FileBytes.header(json).data(4));
      assertThat(h.tensor("w").orElseThrow().byteLength()).isEqualTo(4);
    }

    @Test
    void zeroSizeTensorsAnywhereIncludingSharedOffsets() throws Exception {
      // The reference writer gives every zero-size tensor the running offset, so several may share
      // one.
      String json =
          "{"
              + tensor("empty_first", "F32", "[0]", 0, 0)
              + ","
              + tensor("a", "F32", "[2]", 0, 8)
              + ","
              + tensor("z1", "F16", "[0,3]", 8, 8)
              + ","
              + tensor("z2", "BF16", "[3,0]", 8, 8)
              + ","
              + tensor("b", "U8", "[2]", 8, 10)
              + ","
              + tensor("empty_last", "I64", "[0]", 10, 10)
              + "}";
      SafetensorsHeader h = parse(FileBytes.header(json).data(10));
      assertThat(h.tensors())
          .extracting(TensorInfo::name)
          .containsExactly("empty_first", "a", "z1", "z2", "b", "empty_last");
      assertThat(h.tensor("z2").orElseThrow().numElements()).isZero();
      assertThat(h.dataLength()).isEqualTo(10);
    }

    @Test
    void rankZeroScalar() throws Exception {
      SafetensorsHeader h =
          parse(FileBytes.header("{" + tensor("step", "I64", "[]", 0, 8) + "}").data(8));
      TensorInfo t = h.tensor("step").orElseThrow();
      assertThat(t.rank()).isZero();
      assertThat(t.numElements()).isEqualTo(1);
      assertThat(t.byteLength()).isEqualTo(8);
    }

    @Test
    void narrowFloatTypes() throws Exception {
      String json =
          "{"
              + tensor("bf", "BF16", "[3]", 0, 6)
              + ","
              + tensor("e4", "F8_E4M3", "[2]", 6, 8)
              + ","
              + tensor("e5", "F8_E5M2", "[2]", 8, 10)
              + ","
              + tensor("e8", "F8_E8M0", "[1]", 10, 11)
              + ","
              + tensor("f4", "F4", "[2,3]", 11, 14)
              + ","
              + tensor("f6", "F6_E2M3", "[4]", 14, 17)
              + ","
              + tensor("c", "C64", "[1]", 17, 25)
              + "}";
      SafetensorsHeader h = parse(FileBytes.header(json).data(25));
      assertThat(h.tensors())
          .extracting(TensorInfo::dtype)
          .containsExactly(
              Dtype.BF16,
              Dtype.F8_E4M3,
              Dtype.F8_E5M2,
              Dtype.F8_E8M0,
              Dtype.F4,
              Dtype.F6_E2M3,
              Dtype.C64);
    }

    @Test
    void entriesInAnyOrderAreSortedByOffset() throws Exception {
      // As MLX writes them: tensors out of offset order, data_offsets before dtype.
      String json =
          "{\"second\":{\"data_offsets\":[4,12],\"dtype\":\"F32\",\"shape\":[2]},"
              + "\"first\":{\"shape\":[4],\"data_offsets\":[0,4],\"dtype\":\"U8\"}}";
      SafetensorsHeader h = parse(FileBytes.header(json).data(12));
      assertThat(h.tensors()).extracting(TensorInfo::name).containsExactly("first", "second");
      assertThat(h.tensor("second").orElseThrow())
          .isEqualTo(new TensorInfo("second", Dtype.F32, new long[] {2}, 4, 12));
    }

    @Test
    void escapedAndNonAsciiNames() throws Exception {
      String json =
          "{"
              + tensor("caf\u00e9.\\\"q\\\"\\u0001", "U8", "[1]", 0, 1)
              + ","
              + tensor("\u5c42.0", "U8", "[1]", 1, 2)
              + "}";
      SafetensorsHeader h = parse(FileBytes.header(json).data(2));
      assertThat(h.tensor("caf\u00e9.\"q\"\u0001")).isPresent();
      assertThat(h.tensor("\u5c42.0")).isPresent();
      assertThat(h.tensor("missing")).isEmpty();
    }

    @Test
    void shapeIsCopiedInAndOut() throws Exception {
      long[] shape = {2, 3};
      TensorInfo t = new TensorInfo("w", Dtype.U8, shape, 0, 6);
      shape[0] = 99;
      t.shape()[1] = 99;
      assertThat(t.shape()).containsExactly(2, 3);
    }
  }

  /**
   * A header of 100,000 tensors (about 12 MB of JSON) parses in one pass. Prints the time of a
   * first (cold) and a second parse; no timing assertion.
   */
  @Test
  void parsesAHundredThousandTensorHeader() throws Exception {
    List<TensorDeclaration> decls = new ArrayList<>(100_000);
    long dataLength = 0;
    for (int i = 0; i < 100_000; i++) {
      TensorDeclaration d =
          new TensorDeclaration(
              "model.layers." + (i / 1000) + ".mlp.experts." + (i % 1000) + ".down_proj.weight",
              i % 3 == 0 ? Dtype.BF16 : Dtype.F8_E4M3,
              new long[] {16, 8 + i % 5});
      decls.add(d);
      dataLength += d.byteLength();
    }
    byte[] prefixAndHeader = SafetensorsWriter.headerBytes(decls, Map.of("format", "pt"));
    byte[] json = Arrays.copyOfRange(prefixAndHeader, 8, prefixAndHeader.length);
    long fileSize = prefixAndHeader.length + dataLength;

    long second = 0;
    long first = 0;
    SafetensorsHeader h = null;
    for (int round = 0; round < 2; round++) {
      long t0 = System.nanoTime();
      h = SafetensorsHeader.parse("generated-100k.safetensors", fileSize, json);
      long took = System.nanoTime() - t0;
      if (round == 0) {
        first = took;
      }
      second = took;
    }
    System.out.printf(
        "safetensors header of %d tensors, %d bytes: first parse %.1f ms, second %.1f ms%n",
        decls.size(), json.length, first / 1e6, second / 1e6);
    assertThat(h.tensors().stream().map(TensorInfo::declaration).toList()).isEqualTo(decls);
    assertThat(h.dataLength()).isEqualTo(dataLength);
    assertThat(h.tensor("model.layers.99.mlp.experts.999.down_proj.weight")).isPresent();
  }
}
