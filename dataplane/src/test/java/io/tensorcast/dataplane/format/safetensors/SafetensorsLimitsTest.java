package io.tensorcast.dataplane.format.safetensors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.Timeout.ThreadMode;

/**
 * Headers under the byte cap that would make the parser keep far more than they are worth (tens of
 * millions of dimensions, of offsets, of tensors), configurable caps, and names that cannot be
 * addressed: each refused early with the rule and the numbers.
 */
@Timeout(value = 20, unit = TimeUnit.SECONDS, threadMode = ThreadMode.SEPARATE_THREAD)
class SafetensorsLimitsTest {
  private static final String FILE = "big.safetensors";

  /** Parses {@code json} as the header of a file whose data section is {@code dataBytes} long. */
  private static SafetensorsFormatException refused(
      byte[] json, long dataBytes, SafetensorsLimits limits) {
    SafetensorsFormatException e =
        catchThrowableOfType(
            () -> SafetensorsHeader.parse(FILE, 8 + json.length + dataBytes, json, limits),
            SafetensorsFormatException.class);
    assertThat(e).as("refused").isNotNull();
    assertThat(e).hasMessageStartingWith(FILE + ": ");
    return e;
  }

  /** {@code {"a": {"dtype": "F32", "shape": [1, 1, ... (n)], "data_offsets": [0, 4]}}}. */
  static byte[] shapeOfOnes(int n) {
    StringBuilder sb = new StringBuilder(2 * n + 64);
    sb.append("{\"a\":{\"dtype\":\"F32\",\"shape\":[");
    for (int i = 0; i < n; i++) {
      sb.append(i == 0 ? "1" : ",1");
    }
    sb.append("],\"data_offsets\":[0,4]}}");
    return sb.toString().getBytes(StandardCharsets.US_ASCII);
  }

  @Test
  void aShapeOfTensOfMillionsOfDimensionsUnderTheByteCapIsRefusedAtTheRankLimit() {
    byte[] json = shapeOfOnes(25_000_000);
    assertThat((long) json.length).isLessThan(SafetensorsHeader.MAX_HEADER_LENGTH);

    SafetensorsFormatException e = refused(json, 4, SafetensorsLimits.DEFAULT);

    assertThat(e.rule()).isEqualTo(SafetensorsFormatException.LIMIT_EXCEEDED);
    assertThat(e.tensorName()).contains("a");
    assertThat(e)
        .hasMessageContaining(
            "tensor \"a\": shape has more than 64 dimensions (--max-rank); refused at shape[64]");
  }

  @Test
  void theRankLimitIsConfigurable() {
    SafetensorsFormatException e =
        refused(shapeOfOnes(5), 4, SafetensorsLimits.DEFAULT.withMaxRank(4));

    assertThat(e).hasMessageContaining("shape has more than 4 dimensions (--max-rank)");
    assertThat(
            catchThrowableOfType(
                () ->
                    SafetensorsHeader.parse(
                        FILE,
                        8 + shapeOfOnes(5).length + 4,
                        shapeOfOnes(5),
                        SafetensorsLimits.DEFAULT.withMaxRank(5)),
                SafetensorsFormatException.class))
        .isNull();
  }

  @Test
  void tensOfMillionsOfDataOffsetsAreRefusedAtTheThird() {
    StringBuilder sb =
        new StringBuilder("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0");
    for (int i = 0; i < 20_000_000; i++) {
      sb.append(",4");
    }
    byte[] json = sb.append("]}}").toString().getBytes(StandardCharsets.US_ASCII);

    SafetensorsFormatException e = refused(json, 4, SafetensorsLimits.DEFAULT);

    assertThat(e.rule()).isEqualTo(SafetensorsFormatException.INVALID_DATA_OFFSETS);
    assertThat(e).hasMessageContaining("more than 2 numbers: [0, 4, 4, …]");
  }

  @Test
  void moreTensorsThanTheLimitAreRefused() {
    StringBuilder sb = new StringBuilder("{");
    for (int i = 0; i < 11; i++) {
      sb.append(i == 0 ? "" : ",")
          .append("\"t")
          .append(i)
          .append("\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[")
          .append(i)
          .append(',')
          .append(i + 1)
          .append("]}");
    }
    byte[] json = sb.append('}').toString().getBytes(StandardCharsets.US_ASCII);

    SafetensorsFormatException e = refused(json, 11, SafetensorsLimits.DEFAULT.withMaxTensors(10));

    assertThat(e.rule()).isEqualTo(SafetensorsFormatException.LIMIT_EXCEEDED);
    assertThat(e)
        .hasMessageContaining(
            "header declares more than 10 tensors (--max-tensors); refused at \"t10\"");
  }

  @Test
  void moreMetadataEntriesThanTheLimitAreRefused() {
    StringBuilder sb = new StringBuilder("{\"__metadata__\":{");
    for (int i = 0; i < 11; i++) {
      sb.append(i == 0 ? "" : ",").append("\"k").append(i).append("\":\"v\"");
    }
    byte[] json = sb.append("}}").toString().getBytes(StandardCharsets.US_ASCII);

    SafetensorsFormatException e = refused(json, 0, SafetensorsLimits.DEFAULT.withMaxTensors(10));

    assertThat(e).hasMessageContaining("\"__metadata__\" has more than 10 entries (--max-tensors)");
  }

  @Test
  void theHeaderByteCapIsConfigurable() {
    byte[] json = shapeOfOnes(1000);

    SafetensorsFormatException e =
        catchThrowableOfType(
            () ->
                SafetensorsHeader.readHeaderLength(
                    FILE,
                    java.nio.ByteBuffer.allocate(8)
                        .order(java.nio.ByteOrder.LITTLE_ENDIAN)
                        .putLong(json.length)
                        .array(),
                    8 + json.length + 4,
                    SafetensorsLimits.DEFAULT.withMaxHeaderBytes(1024)),
            SafetensorsFormatException.class);

    assertThat(e.rule()).isEqualTo(SafetensorsFormatException.HEADER_TOO_LARGE);
    assertThat(e)
        .hasMessageContaining(
            "header length prefix says 2052 bytes, above the limit of 1024 bytes"
                + " (--max-header-bytes; huggingface/safetensors caps headers at 100000000)");
  }

  @Test
  void anEmptyTensorNameIsRefused() {
    byte[] json =
        "{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}"
            .getBytes(StandardCharsets.US_ASCII);

    SafetensorsFormatException e = refused(json, 1, SafetensorsLimits.DEFAULT);

    assertThat(e.rule()).isEqualTo(SafetensorsFormatException.INVALID_TENSOR_NAME);
    assertThat(e)
        .hasMessageContaining(
            "a tensor is named \"\" (the empty string): it cannot be addressed by name");
  }

  @Test
  void aNameWithALoneSurrogateIsRefused() {
    byte[] json =
        "{\"w\\ud800x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}"
            .getBytes(StandardCharsets.US_ASCII);

    SafetensorsFormatException e = refused(json, 1, SafetensorsLimits.DEFAULT);

    assertThat(e.rule()).isEqualTo(SafetensorsFormatException.INVALID_TENSOR_NAME);
    assertThat(e).hasMessageContaining("has a lone surrogate \\uD800 at character 1");
  }

  /** Found by the format fuzzer: "{" and NUL bytes made the JSON reader switch to UTF-32. */
  @Test
  void aHeaderThatLooksLikeUtf32IsRefusedAsInvalidJson() {
    // Read as UTF-32 these bytes hold a code point above U+10FFFF: Jackson throws an I/O error.
    byte[] json = {
      '{', 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, '"', 'a', '"', ':', '{', '}', '}'
    };

    SafetensorsFormatException e = refused(json, 0, SafetensorsLimits.DEFAULT);

    assertThat(e.rule()).isEqualTo(SafetensorsFormatException.INVALID_JSON);
    assertThat(e).hasMessageContaining("a NUL byte at header offset 1 (file offset 9)");
  }

  @Test
  void deepNestingInAnUnknownFieldIsRefusedAsInvalidJson() {
    String deep = "[".repeat(100_000) + "]".repeat(100_000);
    byte[] json =
        ("{\"a\":{\"x\":" + deep + ",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}")
            .getBytes(StandardCharsets.US_ASCII);

    SafetensorsFormatException e = refused(json, 1, SafetensorsLimits.DEFAULT);

    assertThat(e.rule()).isEqualTo(SafetensorsFormatException.INVALID_JSON);
    assertThat(e).hasMessageContaining("nesting depth").hasMessageContaining("128");
  }
}
