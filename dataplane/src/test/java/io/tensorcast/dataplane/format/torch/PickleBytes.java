package io.tensorcast.dataplane.format.torch;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;

/** Writes pickle opcodes and torch-like zip archives by hand, for hostile-input tests. */
final class PickleBytes {
  private final ByteArrayOutputStream out = new ByteArrayOutputStream();

  PickleBytes op(int... bytes) {
    for (int b : bytes) {
      out.write(b);
    }
    return this;
  }

  PickleBytes proto() {
    return op(0x80, 2);
  }

  PickleBytes global(String module, String name) {
    op('c');
    out.writeBytes((module + "\n" + name + "\n").getBytes(StandardCharsets.UTF_8));
    return this;
  }

  PickleBytes str(String s) {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    op('X');
    le4(b.length);
    out.writeBytes(b);
    return this;
  }

  PickleBytes integer(long v) {
    if (v >= Integer.MIN_VALUE && v <= Integer.MAX_VALUE) {
      op('J');
      le4((int) v);
    } else {
      op(0x8a, 8);
      out.writeBytes(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v).array());
    }
    return this;
  }

  PickleBytes le4(int v) {
    out.writeBytes(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(v).array());
    return this;
  }

  PickleBytes mark() {
    return op('(');
  }

  PickleBytes tuple() {
    return op('t');
  }

  PickleBytes ints(long... v) {
    mark();
    for (long x : v) {
      integer(x);
    }
    return tuple();
  }

  /** A {@code _rebuild_tensor_v2} call on storage {@code key} of {@code numel} float32. */
  PickleBytes tensor(String key, long numel, long offset, long[] shape, long[] stride) {
    global("torch._utils", "_rebuild_tensor_v2");
    mark();
    mark().str("storage").global("torch", "FloatStorage").str(key).str("cpu").integer(numel);
    tuple().op('Q');
    integer(offset).ints(shape).ints(stride).op(0x89);
    global("collections", "OrderedDict").op(')', 'R');
    tuple().op('R');
    return this;
  }

  PickleBytes stop() {
    return op('.');
  }

  byte[] bytes() {
    return out.toByteArray();
  }

  /** A pickle {@code {"w": tensor}} of one float32 tensor. */
  static byte[] stateDict(String key, long numel, long offset, long[] shape, long[] stride) {
    return new PickleBytes()
        .proto()
        .op('}')
        .str("w")
        .tensor(key, numel, offset, shape, stride)
        .op('s')
        .stop()
        .bytes();
  }

  /** A zip archive of STORED entries (name, bytes), in order. */
  static byte[] zip(Object... nameThenBytes) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    try (ZipOutputStream z = new ZipOutputStream(b)) {
      for (int i = 0; i < nameThenBytes.length; i += 2) {
        byte[] data =
            nameThenBytes[i + 1] instanceof String s
                ? s.getBytes(StandardCharsets.UTF_8)
                : (byte[]) nameThenBytes[i + 1];
        ZipEntry e = new ZipEntry((String) nameThenBytes[i]);
        e.setMethod(ZipEntry.STORED);
        e.setSize(data.length);
        e.setCompressedSize(data.length);
        CRC32 crc = new CRC32();
        crc.update(data);
        e.setCrc(crc.getValue());
        z.putNextEntry(e);
        z.write(data);
        z.closeEntry();
      }
    }
    return b.toByteArray();
  }

  /** BINPUT / LONG_BINPUT: memo[i] = top of stack. */
  PickleBytes put(int i) {
    return i < 256 ? op('q', i) : op('r').le4(i);
  }

  /** BINGET / LONG_BINGET: push memo[i]. */
  PickleBytes get(int i) {
    return i < 256 ? op('h', i) : op('j').le4(i);
  }

  /** A zip archive like {@link #zip} but with {@code deflated} entries compressed (DEFLATED). */
  static byte[] zipDeflating(java.util.Set<String> deflated, Object... nameThenBytes)
      throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    try (ZipOutputStream z = new ZipOutputStream(b)) {
      for (int i = 0; i < nameThenBytes.length; i += 2) {
        String name = (String) nameThenBytes[i];
        byte[] data =
            nameThenBytes[i + 1] instanceof String s
                ? s.getBytes(StandardCharsets.UTF_8)
                : (byte[]) nameThenBytes[i + 1];
        ZipEntry e = new ZipEntry(name);
        if (!deflated.contains(name)) {
          e.setMethod(ZipEntry.STORED);
          e.setSize(data.length);
          e.setCompressedSize(data.length);
          CRC32 crc = new CRC32();
          crc.update(data);
          e.setCrc(crc.getValue());
        }
        z.putNextEntry(e);
        z.write(data);
        z.closeEntry();
      }
    }
    return b.toByteArray();
  }

  /**
   * Rewrites the uncompressed size of central directory record {@code name} (the size a reader
   * trusts) to {@code size}.
   */
  static byte[] withDeclaredSize(byte[] zip, String name, long size) {
    byte[] n = name.getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.wrap(zip).order(ByteOrder.LITTLE_ENDIAN);
    for (int at = 0; at + 46 <= zip.length; at++) {
      if (b.getInt(at) == 0x02014b50 && (b.getShort(at + 28) & 0xffff) == n.length) {
        if (java.util.Arrays.equals(zip, at + 46, at + 46 + n.length, n, 0, n.length)) {
          byte[] out = zip.clone();
          ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN).putInt(at + 24, (int) size);
          return out;
        }
      }
    }
    throw new IllegalArgumentException("no central directory record " + name);
  }
}
