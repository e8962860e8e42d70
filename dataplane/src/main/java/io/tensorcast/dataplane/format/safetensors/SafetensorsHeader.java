package io.tensorcast.dataplane.format.safetensors;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The validated header of one safetensors file: what is where in the file.
 *
 * <p>Layout (huggingface/safetensors): an 8-byte little-endian unsigned header length {@code N},
 * then {@code N} bytes of UTF-8 JSON (an object mapping tensor names to {@code {"dtype", "shape",
 * "data_offsets": [begin, end]}}, plus an optional {@code "__metadata__"} map of strings, possibly
 * followed by space padding), then the data section. Offsets are relative to the data section,
 * which starts at file offset {@link #dataOffset()} = 8 + N.
 *
 * <p>An instance exists only for a header that passed every check of {@link #parse}: the tensors
 * tile the data section exactly from 0 to {@link #dataLength()}, every tensor's span equals shape ×
 * dtype, and the data section ends at {@link #fileSize()}. Immutable.
 */
public final class SafetensorsHeader {

  /** Largest header length accepted: 100,000,000 bytes, the reference's MAX_HEADER_SIZE. */
  public static final long MAX_HEADER_LENGTH = 100_000_000L;

  /** Size of the little-endian u64 header length prefix, in bytes. */
  public static final int LENGTH_PREFIX_BYTES = 8;

  private final long headerLength;
  private final Map<String, String> metadata;
  private final List<TensorInfo> tensors;
  private final Map<String, TensorInfo> byName;
  private final long dataLength;

  /** Trusts its caller: tensors sorted by offset, contiguous from 0 to dataLength. */
  SafetensorsHeader(
      long headerLength, Map<String, String> metadata, List<TensorInfo> tensors, long dataLength) {
    this.headerLength = headerLength;
    this.metadata =
        metadata == null ? null : Collections.unmodifiableMap(new LinkedHashMap<>(metadata));
    this.tensors = List.copyOf(tensors);
    Map<String, TensorInfo> index = new HashMap<>(Math.max(16, tensors.size() * 2));
    for (TensorInfo t : tensors) {
      index.put(t.name(), t);
    }
    this.byName = Collections.unmodifiableMap(index);
    this.dataLength = dataLength;
  }

  /**
   * Reads the 8-byte little-endian header length prefix and checks it against the file.
   *
   * @param fileName the file, as named in error messages (path, object key, URI)
   * @param first8 the file's first 8 bytes
   * @param fileSize the file's total size in bytes
   * @return the header length N in bytes, {@code 1 <= N <= min(MAX_HEADER_LENGTH, fileSize - 8)}
   * @throws SafetensorsFormatException rule {@code file-too-small}, {@code header-length-zero},
   *     {@code header-too-large} or {@code header-length-exceeds-file}
   * @throws IllegalArgumentException if {@code first8} is not 8 bytes long
   */
  public static long readHeaderLength(String fileName, byte[] first8, long fileSize)
      throws SafetensorsFormatException {
    return readHeaderLength(fileName, first8, fileSize, SafetensorsLimits.DEFAULT);
  }

  /**
   * {@link #readHeaderLength(String, byte[], long)} with {@code limits.maxHeaderBytes()} as the
   * largest header accepted.
   */
  public static long readHeaderLength(
      String fileName, byte[] first8, long fileSize, SafetensorsLimits limits)
      throws SafetensorsFormatException {
    if (fileSize < LENGTH_PREFIX_BYTES) {
      HeaderParser.checkHeaderLength(fileName, 0, fileSize, limits); // throws file-too-small
    }
    if (first8.length != LENGTH_PREFIX_BYTES) {
      throw new IllegalArgumentException(
          "need the first 8 bytes of " + fileName + ", got " + first8.length);
    }
    long n = ByteBuffer.wrap(first8).order(ByteOrder.LITTLE_ENDIAN).getLong();
    HeaderParser.checkHeaderLength(fileName, n, fileSize, limits);
    return n;
  }

  /**
   * Parses and validates a header.
   *
   * @param fileName the file, as named in error messages
   * @param fileSize the file's total size in bytes (to check that the tensors cover the data
   *     section exactly)
   * @param headerJson the N header bytes that follow the 8-byte prefix (N = {@code
   *     headerJson.length})
   * @throws SafetensorsFormatException naming the file, the tensor and the rule broken; see the
   *     rule constants of {@link SafetensorsFormatException}
   */
  public static SafetensorsHeader parse(String fileName, long fileSize, byte[] headerJson)
      throws SafetensorsFormatException {
    return parse(fileName, fileSize, headerJson, SafetensorsLimits.DEFAULT);
  }

  /**
   * {@link #parse(String, long, byte[])} within {@code limits}: a header over one is refused
   * ({@code header-too-large}, {@code limit-exceeded}) as soon as the parser meets what is over it.
   */
  public static SafetensorsHeader parse(
      String fileName, long fileSize, byte[] headerJson, SafetensorsLimits limits)
      throws SafetensorsFormatException {
    return HeaderParser.parse(fileName, fileSize, headerJson, limits);
  }

  /**
   * Reads and validates the header of a local file.
   *
   * @throws SafetensorsFormatException if the file breaks a rule of the format
   * @throws IOException if the file cannot be read
   */
  public static SafetensorsHeader read(Path file) throws IOException, SafetensorsFormatException {
    return read(file, SafetensorsLimits.DEFAULT);
  }

  /** {@link #read(Path)} within {@code limits}. */
  public static SafetensorsHeader read(Path file, SafetensorsLimits limits)
      throws IOException, SafetensorsFormatException {
    String name = file.toString();
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      long size = ch.size();
      byte[] prefix = new byte[LENGTH_PREFIX_BYTES];
      if (size >= LENGTH_PREFIX_BYTES) {
        readFully(ch, ByteBuffer.wrap(prefix), 0, name);
      }
      long n = readHeaderLength(name, prefix, size, limits);
      byte[] json = new byte[(int) n];
      readFully(ch, ByteBuffer.wrap(json), LENGTH_PREFIX_BYTES, name);
      return parse(name, size, json, limits);
    }
  }

  private static void readFully(FileChannel ch, ByteBuffer dst, long position, String name)
      throws IOException {
    long pos = position;
    while (dst.hasRemaining()) {
      int r = ch.read(dst, pos);
      if (r < 0) {
        throw new EOFException(name + ": file ended at byte " + pos + " while reading its header");
      }
      pos += r;
    }
  }

  /** N, the header length in bytes (JSON plus any padding), as the prefix says. */
  public long headerLength() {
    return headerLength;
  }

  /** Whether the header has a {@code "__metadata__"} object (possibly empty; null counts as no). */
  public boolean hasMetadata() {
    return metadata != null;
  }

  /** The {@code "__metadata__"} map in header order; empty when absent. Unmodifiable. */
  public Map<String, String> metadata() {
    return metadata == null ? Map.of() : metadata;
  }

  /** All tensors, sorted by data offset (then end offset). Unmodifiable. */
  public List<TensorInfo> tensors() {
    return tensors;
  }

  /** The tensor named {@code name}, if the header declares it. */
  public Optional<TensorInfo> tensor(String name) {
    return Optional.ofNullable(byName.get(name));
  }

  /** File offset of the data section: 8 + {@link #headerLength()}. */
  public long dataOffset() {
    return LENGTH_PREFIX_BYTES + headerLength;
  }

  /** Bytes in the data section: the end offset of the last tensor (0 with no tensors). */
  public long dataLength() {
    return dataLength;
  }

  /** Size of the whole file in bytes: {@link #dataOffset()} + {@link #dataLength()}. */
  public long fileSize() {
    return dataOffset() + dataLength;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof SafetensorsHeader h
        && headerLength == h.headerLength
        && dataLength == h.dataLength
        && Objects.equals(metadata, h.metadata)
        && tensors.equals(h.tensors);
  }

  @Override
  public int hashCode() {
    return Objects.hash(headerLength, metadata, tensors, dataLength);
  }

  @Override
  public String toString() {
    return "SafetensorsHeader[headerLength="
        + headerLength
        + ", tensors="
        + tensors.size()
        + ", dataLength="
        + dataLength
        + ", metadata="
        + metadata
        + "]";
  }
}
