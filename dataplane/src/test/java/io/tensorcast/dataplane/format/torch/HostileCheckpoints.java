package io.tensorcast.dataplane.format.torch;

/**
 * Small torch checkpoints written by the tests that a careless reader would expand into far more
 * memory or time than their size, for tests outside this package (a forked JVM with a small heap,
 * the command line).
 */
public final class HostileCheckpoints {
  private HostileCheckpoints() {}

  /** A zip checkpoint {@code bomb/…} with {@code pickle} and one float32 storage of n elements. */
  public static byte[] checkpoint(byte[] pickle, int storageElements) throws Exception {
    return TorchResourceBoundsTest.checkpoint(pickle, storageElements);
  }

  /** {@code l0 = [tensor]; l(i+1) = [l(i), l(i)]}: under 1 KiB for 40 levels, 2^40 paths. */
  public static byte[] doublingLists(int levels) throws Exception {
    return checkpoint(TorchResourceBoundsTest.doublingLists(levels), 4);
  }

  /** {@code d0 = {"w": t}; d(i+1) = {"a": d(i), "b": d(i)}}: 2^levels names of 2·levels chars. */
  public static byte[] doublingDicts(int levels) throws Exception {
    PickleBytes p = new PickleBytes().proto().op('}').str("w");
    p.tensor("0", 4, 0, new long[] {4}, new long[] {1}).op('s').put(0).op('0');
    for (int i = 1; i <= levels; i++) {
      p.op('}').mark().str("a").get(i - 1).str("b").get(i - 1).op('u').put(i).op('0');
    }
    return checkpoint(p.get(levels).stop().bytes(), 4);
  }

  /** A persistent id that contains itself through a list. */
  public static byte[] cyclicPersistentId() throws Exception {
    byte[] pickle =
        new PickleBytes()
            .proto()
            .op(']')
            .put(0)
            .mark()
            .str("storage")
            .get(0)
            .str("0")
            .str("cpu")
            .integer(4)
            .op('N')
            .tuple()
            .put(1)
            .op('a', '0')
            .get(1)
            .op('Q')
            .stop()
            .bytes();
    return checkpoint(pickle, 4);
  }

  /**
   * A checkpoint whose {@code data.pkl} is {@code inflatedBytes} zeros, deflated (about a
   * thousandth of that), its central directory claiming {@code declaredBytes} (or the truth when
   * negative).
   */
  public static byte[] zipBomb(long inflatedBytes, long declaredBytes) throws Exception {
    java.io.ByteArrayOutputStream b = new java.io.ByteArrayOutputStream();
    try (java.util.zip.ZipOutputStream z = new java.util.zip.ZipOutputStream(b)) {
      z.putNextEntry(new java.util.zip.ZipEntry("bomb/data.pkl"));
      byte[] zeros = new byte[1 << 20];
      for (long left = inflatedBytes; left > 0; left -= zeros.length) {
        z.write(zeros, 0, (int) Math.min(zeros.length, left));
      }
      z.closeEntry();
      z.putNextEntry(new java.util.zip.ZipEntry("bomb/version"));
      z.write("3\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
      z.closeEntry();
    }
    byte[] zip = b.toByteArray();
    return declaredBytes < 0
        ? zip
        : PickleBytes.withDeclaredSize(zip, "bomb/data.pkl", declaredBytes);
  }

  /** {@code {name: tensor}} of one float32 tensor of {@code n} elements, as torch writes it. */
  public static byte[] stateDict(String name, int n) throws Exception {
    byte[] pickle =
        new PickleBytes()
            .proto()
            .op('}')
            .str(name)
            .tensor("0", n, 0, new long[] {n}, new long[] {1})
            .op('s')
            .stop()
            .bytes();
    return checkpoint(pickle, n);
  }
}
