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
}
