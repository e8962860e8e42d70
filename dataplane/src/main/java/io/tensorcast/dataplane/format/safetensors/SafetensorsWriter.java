package io.tensorcast.dataplane.format.safetensors;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.CharBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * Writes safetensors files in the reference layout (huggingface/safetensors {@code serialize}):
 * 8-byte little-endian header length, compact JSON header with {@code "__metadata__"} first (when
 * given) and then the tensors in data order, each as {@code {"dtype":…,"shape":[…],
 * "data_offsets":[begin,end]}}, padded with spaces to a multiple of 8 bytes, then the data.
 *
 * <p>Tensors are laid out contiguously in the order given; {@link #referenceOrder} gives the order
 * the reference writer would choose (dtype descending, then name). With the same order, metadata
 * order and data, the output is byte-identical to the reference's.
 *
 * <p>{@code metadata} arguments may be {@code null}: no {@code "__metadata__"} key is written. An
 * empty map writes {@code "__metadata__":{}}.
 */
public final class SafetensorsWriter {

  private SafetensorsWriter() {}

  /** Supplies one tensor's bytes while a file is written. */
  @FunctionalInterface
  public interface TensorDataWriter {
    /**
     * Writes exactly {@code tensor.byteLength()} bytes of the tensor's data (little-endian,
     * row-major) to {@code out}. Writing more fails at once; writing fewer fails after return.
     * Closing {@code out} does not close the file.
     */
    void write(TensorInfo tensor, WritableByteChannel out) throws IOException;
  }

  /**
   * The header a file with these tensors would have: offsets, header length, file size. Writes
   * nothing.
   *
   * @throws IllegalArgumentException if names repeat, a name is {@code "__metadata__"}, a name or
   *     metadata entry is not valid Unicode, or the header would exceed {@link
   *     SafetensorsHeader#MAX_HEADER_LENGTH}
   */
  public static SafetensorsHeader layout(
      List<TensorDeclaration> tensors, Map<String, String> metadata) {
    return prepare(tensors, metadata).header();
  }

  /**
   * The bytes before the data section of a file with these tensors: the 8-byte prefix and the
   * padded JSON header ({@code layout(...).dataOffset()} bytes, a multiple of 8).
   *
   * @throws IllegalArgumentException as {@link #layout}
   */
  public static byte[] headerBytes(List<TensorDeclaration> tensors, Map<String, String> metadata) {
    return prepare(tensors, metadata).bytes().clone();
  }

  /**
   * The tensors in the order the reference writer stores them: dtype descending in {@link Dtype}
   * declaration order (widest alignment first), then name in code point (UTF-8 byte) order.
   */
  public static List<TensorDeclaration> referenceOrder(Collection<TensorDeclaration> tensors) {
    List<TensorDeclaration> sorted = new ArrayList<>(tensors);
    sorted.sort(
        Comparator.comparing(TensorDeclaration::dtype, Comparator.reverseOrder())
            .thenComparing(TensorDeclaration::name, SafetensorsWriter::compareCodePoints));
    return sorted;
  }

  /**
   * Streams a file to {@code out}: header first, then each tensor's bytes from {@code data}, one
   * tensor at a time, so nothing but the header is held in memory.
   *
   * @param out a blocking channel positioned where the file starts
   * @return the header written
   * @throws IOException if writing fails or {@code data} writes more or fewer bytes than a tensor
   *     takes (the message names the tensor and both counts)
   * @throws IllegalArgumentException as {@link #layout}
   */
  public static SafetensorsHeader write(
      WritableByteChannel out,
      List<TensorDeclaration> tensors,
      Map<String, String> metadata,
      TensorDataWriter data)
      throws IOException {
    Objects.requireNonNull(data, "data");
    return writePrepared(out, prepare(tensors, metadata), data);
  }

  private static SafetensorsHeader writePrepared(
      WritableByteChannel out, Prepared prepared, TensorDataWriter data) throws IOException {
    writeFully(out, ByteBuffer.wrap(prepared.bytes()));
    for (TensorInfo t : prepared.header().tensors()) {
      BoundedChannel bounded = new BoundedChannel(out, t);
      data.write(t, bounded);
      bounded.close();
      if (bounded.written != t.byteLength()) {
        throw new IOException(
            "tensor \""
                + t.name()
                + "\": data writer supplied "
                + bounded.written
                + " bytes but "
                + t.dtype()
                + " × "
                + Arrays.toString(t.shape())
                + " takes "
                + t.byteLength());
      }
    }
    return prepared.header();
  }

  /**
   * Streams a file to {@code file} (created or truncated). On failure the partial file is deleted.
   *
   * @see #write(WritableByteChannel, List, Map, TensorDataWriter)
   */
  public static SafetensorsHeader write(
      Path file,
      List<TensorDeclaration> tensors,
      Map<String, String> metadata,
      TensorDataWriter data)
      throws IOException {
    Objects.requireNonNull(data, "data");
    Prepared prepared =
        prepare(tensors, metadata); // bad declarations fail before the file is touched
    boolean done = false;
    try (FileChannel ch =
        FileChannel.open(
            file,
            StandardOpenOption.CREATE,
            StandardOpenOption.TRUNCATE_EXISTING,
            StandardOpenOption.WRITE)) {
      SafetensorsHeader header = writePrepared(ch, prepared, data);
      done = true;
      return header;
    } finally {
      if (!done) {
        Files.deleteIfExists(file);
      }
    }
  }

  /**
   * Writes a file from in-memory buffers, {@code data.get(i)} holding tensor {@code i}'s bytes
   * (from its position to its limit; positions are not moved).
   *
   * @throws IllegalArgumentException if the counts differ or a buffer's remaining bytes differ from
   *     its tensor's byte length (checked before anything is written), or as {@link #layout}
   */
  public static SafetensorsHeader write(
      WritableByteChannel out,
      List<TensorDeclaration> tensors,
      Map<String, String> metadata,
      List<ByteBuffer> data)
      throws IOException {
    return write(out, tensors, metadata, buffers(tensors, data));
  }

  /**
   * Writes a file from in-memory buffers to {@code file} (created or truncated).
   *
   * @see #write(WritableByteChannel, List, Map, List)
   */
  public static SafetensorsHeader write(
      Path file,
      List<TensorDeclaration> tensors,
      Map<String, String> metadata,
      List<ByteBuffer> data)
      throws IOException {
    return write(file, tensors, metadata, buffers(tensors, data));
  }

  private static TensorDataWriter buffers(List<TensorDeclaration> tensors, List<ByteBuffer> data) {
    if (tensors.size() != data.size()) {
      throw new IllegalArgumentException(
          tensors.size() + " tensors declared but " + data.size() + " data buffers given");
    }
    Map<String, ByteBuffer> byName = new HashMap<>();
    for (int i = 0; i < tensors.size(); i++) {
      TensorDeclaration t = tensors.get(i);
      ByteBuffer b = data.get(i);
      if (b.remaining() != t.byteLength()) {
        throw new IllegalArgumentException(
            "tensor \""
                + t.name()
                + "\": buffer holds "
                + b.remaining()
                + " bytes but "
                + t.dtype()
                + " × "
                + Arrays.toString(t.shape())
                + " takes "
                + t.byteLength());
      }
      byName.put(t.name(), b);
    }
    return (t, ch) -> writeFully(ch, byName.get(t.name()).duplicate());
  }

  private record Prepared(byte[] bytes, SafetensorsHeader header) {}

  private static Prepared prepare(List<TensorDeclaration> tensors, Map<String, String> metadata) {
    Objects.requireNonNull(tensors, "tensors");
    List<TensorInfo> infos = new ArrayList<>(tensors.size());
    Set<String> names = new HashSet<>(Math.max(16, tensors.size() * 2));
    StringBuilder json = new StringBuilder(64 + tensors.size() * 96);
    json.append('{');
    boolean first = true;
    if (metadata != null) {
      json.append("\"__metadata__\":{");
      boolean firstEntry = true;
      for (Map.Entry<String, String> e : metadata.entrySet()) {
        if (!firstEntry) {
          json.append(',');
        }
        firstEntry = false;
        appendString(json, Objects.requireNonNull(e.getKey(), "metadata key"));
        json.append(':');
        appendString(json, Objects.requireNonNull(e.getValue(), "metadata value of " + e.getKey()));
      }
      json.append('}');
      first = false;
    }
    long offset = 0;
    for (TensorDeclaration t : tensors) {
      if ("__metadata__".equals(t.name())) {
        throw new IllegalArgumentException(
            "a tensor may not be named \"__metadata__\": that key holds the file's metadata");
      }
      if (!names.add(t.name())) {
        throw new IllegalArgumentException("tensor \"" + t.name() + "\" is declared twice");
      }
      long end;
      try {
        end = Math.addExact(offset, t.byteLength());
      } catch (ArithmeticException e) {
        throw new IllegalArgumentException(
            "tensor \"" + t.name() + "\": data section size overflows 64 bits", e);
      }
      TensorInfo info = new TensorInfo(t.name(), t.dtype(), t.shape(), offset, end);
      infos.add(info);
      if (!first) {
        json.append(',');
      }
      first = false;
      appendString(json, t.name());
      json.append(":{\"dtype\":\"").append(t.dtype().name()).append("\",\"shape\":[");
      long[] shape = t.shape();
      for (int i = 0; i < shape.length; i++) {
        if (i > 0) {
          json.append(',');
        }
        json.append(shape[i]);
      }
      json.append("],\"data_offsets\":[").append(offset).append(',').append(end).append("]}");
      offset = end;
    }
    json.append('}');

    ByteBuffer encoded;
    try {
      encoded = StandardCharsets.UTF_8.newEncoder().encode(CharBuffer.wrap(json));
    } catch (CharacterCodingException e) {
      throw new IllegalArgumentException(
          "a tensor name or metadata entry is not valid Unicode (unpaired surrogate)", e);
    }
    int jsonLength = encoded.remaining();
    long padded = ((long) jsonLength + 7) / 8 * 8;
    if (padded > SafetensorsHeader.MAX_HEADER_LENGTH) {
      throw new IllegalArgumentException(
          "header would be "
              + padded
              + " bytes, above the cap of "
              + SafetensorsHeader.MAX_HEADER_LENGTH
              + " bytes that readers enforce");
    }
    byte[] bytes = new byte[SafetensorsHeader.LENGTH_PREFIX_BYTES + (int) padded];
    ByteBuffer buf = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    buf.putLong(padded);
    buf.put(encoded);
    while (buf.hasRemaining()) {
      buf.put((byte) ' ');
    }
    return new Prepared(bytes, new SafetensorsHeader(padded, metadata, infos, offset));
  }

  /** Appends {@code s} as a JSON string escaped exactly as serde_json does (the reference). */
  private static void appendString(StringBuilder sb, String s) {
    sb.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> sb.append("\\\"");
        case '\\' -> sb.append("\\\\");
        case '\b' -> sb.append("\\b");
        case '\f' -> sb.append("\\f");
        case '\n' -> sb.append("\\n");
        case '\r' -> sb.append("\\r");
        case '\t' -> sb.append("\\t");
        default -> {
          if (c < 0x20) {
            sb.append("\\u00")
                .append(Character.forDigit(c >> 4, 16))
                .append(Character.forDigit(c & 0xf, 16));
          } else {
            sb.append(c);
          }
        }
      }
    }
    sb.append('"');
  }

  private static int compareCodePoints(String a, String b) {
    int i = 0;
    int j = 0;
    while (i < a.length() && j < b.length()) {
      int ca = a.codePointAt(i);
      int cb = b.codePointAt(j);
      if (ca != cb) {
        return Integer.compare(ca, cb);
      }
      i += Character.charCount(ca);
      j += Character.charCount(cb);
    }
    return Boolean.compare(i < a.length(), j < b.length());
  }

  private static void writeFully(WritableByteChannel out, ByteBuffer src) throws IOException {
    while (src.hasRemaining()) {
      out.write(src);
    }
  }

  /** Passes one tensor's bytes through, refusing any beyond its byte length. */
  private static final class BoundedChannel implements WritableByteChannel {
    private final WritableByteChannel out;
    private final TensorInfo tensor;
    private long written;
    private boolean open = true;

    BoundedChannel(WritableByteChannel out, TensorInfo tensor) {
      this.out = out;
      this.tensor = tensor;
    }

    @Override
    public int write(ByteBuffer src) throws IOException {
      if (!open) {
        throw new ClosedChannelException();
      }
      int n = src.remaining();
      if (n > tensor.byteLength() - written) {
        throw new IOException(
            "tensor \""
                + tensor.name()
                + "\": data writer tried to write "
                + n
                + " bytes after "
                + written
                + " but the tensor takes "
                + tensor.byteLength());
      }
      writeFully(out, src);
      written += n;
      return n;
    }

    @Override
    public boolean isOpen() {
      return open;
    }

    @Override
    public void close() {
      open = false;
    }
  }
}
