package io.tensorcast.dataplane.format.safetensors;

import java.util.Optional;

/**
 * A safetensors file breaks a rule of the format. The message names the file, the tensor (when one
 * is at fault), what was found with its numbers, and the rule id.
 *
 * <p>{@link #rule()} is a stable kebab-case id (one of the constants below) that callers may map to
 * a condition reason; the message is for people.
 */
public class SafetensorsFormatException extends Exception {
  private static final long serialVersionUID = 1L;

  /** The file is shorter than the 8-byte header length prefix. */
  public static final String FILE_TOO_SMALL = "file-too-small";

  /** The header length prefix is 0; a header holds at least {@code {}}. */
  public static final String HEADER_LENGTH_ZERO = "header-length-zero";

  /**
   * The header length prefix is above the limit ({@link SafetensorsLimits#maxHeaderBytes()}; by
   * default the reference cap of 100,000,000 bytes).
   */
  public static final String HEADER_TOO_LARGE = "header-too-large";

  /** The header length prefix claims more bytes than the file has after the prefix. */
  public static final String HEADER_LENGTH_EXCEEDS_FILE = "header-length-exceeds-file";

  /** The header bytes are not valid UTF-8. */
  public static final String HEADER_NOT_UTF8 = "header-not-utf8";

  /** The header does not start with {@code {} (the reference's {@code InvalidHeaderStart}). */
  public static final String HEADER_NOT_OBJECT = "header-not-object";

  /** The header is not well-formed JSON, or has content after the top-level object. */
  public static final String INVALID_JSON = "invalid-json";

  /** A JSON object in the header repeats a key (tensor name or field). */
  public static final String DUPLICATE_KEY = "duplicate-key";

  /** {@code __metadata__} is neither a JSON object nor {@code null}. */
  public static final String METADATA_NOT_OBJECT = "metadata-not-object";

  /** A {@code __metadata__} value is not a JSON string. */
  public static final String METADATA_VALUE_NOT_STRING = "metadata-value-not-string";

  /** The header holds more tensors, dimensions or metadata entries than a limit allows. */
  public static final String LIMIT_EXCEEDED = "limit-exceeded";

  /** A tensor name is empty or not valid Unicode (a lone surrogate). */
  public static final String INVALID_TENSOR_NAME = "invalid-tensor-name";

  /** A tensor's entry is not a JSON object. */
  public static final String TENSOR_NOT_OBJECT = "tensor-not-object";

  /** A tensor's entry lacks {@code dtype}, {@code shape} or {@code data_offsets}. */
  public static final String MISSING_FIELD = "missing-field";

  /** A tensor's {@code dtype} is not a string naming a {@link Dtype}. */
  public static final String UNKNOWN_DTYPE = "unknown-dtype";

  /** A tensor's {@code shape} is not a JSON array of integers. */
  public static final String INVALID_SHAPE = "invalid-shape";

  /** A tensor's {@code data_offsets} is not a JSON array of exactly two integers. */
  public static final String INVALID_DATA_OFFSETS = "invalid-data-offsets";

  /** A number is negative, fractional, or does not fit in a signed 64-bit integer. */
  public static final String INVALID_NUMBER = "invalid-number";

  /** A tensor's {@code data_offsets} begin is after its end. */
  public static final String BEGIN_AFTER_END = "begin-after-end";

  /** The element count or byte count of a tensor overflows 64 bits. */
  public static final String SIZE_OVERFLOW = "size-overflow";

  /** A sub-byte tensor (F4, F6_*) does not fill a whole number of bytes. */
  public static final String MISALIGNED_SUB_BYTE = "misaligned-sub-byte";

  /** shape × dtype size differs from the span of {@code data_offsets}. */
  public static final String SIZE_MISMATCH = "size-mismatch";

  /** No tensor begins at offset 0 of the data section. */
  public static final String DATA_NOT_AT_ZERO = "data-not-at-zero";

  /** Bytes between two tensors belong to no tensor. */
  public static final String GAP_IN_OFFSETS = "gap-in-offsets";

  /** Two tensors share some bytes. */
  public static final String OVERLAPPING_OFFSETS = "overlapping-offsets";

  /** Two non-empty tensors declare the same {@code data_offsets}. */
  public static final String ALIASING_OFFSETS = "aliasing-offsets";

  /** The tensors need more bytes than the file's data section holds. */
  public static final String FILE_TRUNCATED = "file-truncated";

  /** The file has bytes after the end of the last tensor. */
  public static final String TRAILING_BYTES = "trailing-bytes";

  private final String fileName;
  private final String rule;
  private final String tensorName;

  /**
   * @param fileName the file as the caller named it (path, object key or URI)
   * @param rule one of this class's rule ids
   * @param tensorName the tensor at fault, or {@code null} when the fault is not one tensor's
   * @param detail what was found, with the numbers
   */
  public SafetensorsFormatException(
      String fileName, String rule, String tensorName, String detail) {
    super(compose(fileName, rule, tensorName, detail));
    this.fileName = fileName;
    this.rule = rule;
    this.tensorName = tensorName;
  }

  private static String compose(String fileName, String rule, String tensorName, String detail) {
    StringBuilder sb = new StringBuilder();
    sb.append(fileName).append(": ");
    if (tensorName != null) {
      sb.append("tensor \"").append(tensorName).append("\": ");
    }
    sb.append(detail).append(" [rule ").append(rule).append(']');
    return sb.toString();
  }

  /** The file at fault, as the caller named it. */
  public String fileName() {
    return fileName;
  }

  /** The rule broken: a kebab-case id such as {@link #SIZE_MISMATCH}. */
  public String rule() {
    return rule;
  }

  /** The tensor at fault, when the rule concerns one tensor. */
  public Optional<String> tensorName() {
    return Optional.ofNullable(tensorName);
  }
}
