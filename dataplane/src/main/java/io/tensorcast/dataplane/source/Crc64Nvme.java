package io.tensorcast.dataplane.source;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.zip.Checksum;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * CRC-64/NVME, the checksum S3 computes by default for new objects ({@code
 * x-amz-checksum-crc64nvme}): reflected polynomial {@code 0x9A6C9329AC4BC9B5}, initial value and
 * final XOR all ones (the NVM Express base specification's CRC; check value of {@code "123456789"}
 * is {@code 0xAE8B14860A799888}). The AWS SDK's own implementation needs the Common Runtime's
 * native library (see {@link #create()}).
 *
 * <p>Table-driven, sixteen bytes per step ("slicing-by-16": two little-endian longs, sixteen
 * independent lookups in one flat table of 16 × 256 entries). Bytes of a direct buffer (a mapping
 * of the store) are copied in chunks of {@link #CHUNK} bytes into a heap array first: one bulk copy
 * is cheaper than reading each long through the buffer's bounds and scope checks. Not thread-safe.
 *
 * <p>{@link #create()} is what callers use: the AWS Common Runtime's native CRC (carry-less
 * multiply, several GB/s per core) when its library loads on this platform, else this table (about
 * 1 GB/s per core).
 */
public final class Crc64Nvme implements Checksum {
  private static final Logger log = LoggerFactory.getLogger(Crc64Nvme.class);

  /** System property: {@code false} keeps the table even where the native CRC loads. */
  public static final String NATIVE_PROPERTY = "tensorcast.crc64nvme.native";

  /** CRC-64/NVME of the ASCII bytes {@code "123456789"}. */
  static final long CHECK_VALUE = 0xAE8B14860A799888L;

  private static final long POLY = 0x9A6C9329AC4BC9B5L;
  private static final int SLICES = 16;

  /** {@code TABLE[s * 256 + b]}: the CRC of byte {@code b} followed by {@code s} zero bytes. */
  private static final long[] TABLE = table();

  /** Bytes of a direct buffer copied to the heap at a time. */
  static final int CHUNK = 64 * 1024;

  private static final VarHandle LONG_LE =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

  private long crc = -1L;
  private byte[] chunk;

  /** Whether {@link #create()} returns the native CRC; decided once, on first use. */
  private static final class Native {
    static final boolean AVAILABLE = probe();

    private static boolean probe() {
      if (!Boolean.parseBoolean(System.getProperty(NATIVE_PROPERTY, "true"))) {
        log.info("CRC-64/NVME: table-driven ({}=false)", NATIVE_PROPERTY);
        return false;
      }
      namedCRuntime();
      String why = BundledNatives.crtLibraryMismatch();
      if (why == null) {
        why = nativeUnusable();
      }
      if (why == null) {
        log.debug("CRC-64/NVME: native (AWS Common Runtime)");
        return true;
      }
      log.warn(
          "CRC-64/NVME: the AWS Common Runtime's native CRC is not usable here ({}); using the"
              + " table-driven one (about 1 GB/s per core)",
          why);
      return false;
    }
  }

  /** The Common Runtime's system property naming the C library its native code is built for. */
  static final String LIBC_PROPERTY = "aws.crt.libc";

  /**
   * Names the C library this JVM runs on ({@code glibc} or {@code musl}) to the Common Runtime,
   * from the libraries mapped into this process, unless the property is set already. Without it,
   * the Runtime finds out by starting {@code ldd} on the {@code java} executable, twice: a process
   * start and a shell script on every load's first CRC. Nothing is set when neither is mapped.
   */
  static void namedCRuntime() {
    if (System.getProperty(LIBC_PROPERTY) != null) {
      return;
    }
    String libc = mappedCRuntime(java.nio.file.Path.of("/proc/self/maps"));
    if (libc != null) {
      System.setProperty(LIBC_PROPERTY, libc);
    }
  }

  /**
   * {@code musl} or {@code glibc}, from the file names of a {@code /proc/<pid>/maps} listing; null
   * when it cannot be read or names neither.
   */
  static String mappedCRuntime(java.nio.file.Path maps) {
    boolean glibc = false;
    try (java.io.BufferedReader r = java.nio.file.Files.newBufferedReader(maps)) {
      for (String line = r.readLine(); line != null; line = r.readLine()) {
        String name = line.substring(line.lastIndexOf('/') + 1);
        if (name.startsWith("ld-musl-") || name.startsWith("libc.musl-")) {
          return "musl";
        }
        glibc |= name.equals("libc.so.6");
      }
    } catch (java.io.IOException | RuntimeException e) {
      return null;
    }
    return glibc ? "glibc" : null;
  }

  /**
   * Why the native CRC cannot be used on this platform, or null if it loads and computes the check
   * value. The Runtime loads its library from {@code java.library.path} (the launcher puts the copy
   * beside the jar there, checked by {@link BundledNatives}), else extracts the jar's into {@code
   * aws.crt.lib.dir} or {@code java.io.tmpdir}.
   */
  static String nativeUnusable() {
    try {
      CrtCrc64Nvme c = new CrtCrc64Nvme();
      c.update("123456789".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
      long v = c.getValue();
      return v == CHECK_VALUE
          ? null
          : "it computed "
              + Long.toHexString(v)
              + " for the check value "
              + Long.toHexString(CHECK_VALUE);
    } catch (LinkageError | RuntimeException e) {
      return e.toString();
    }
  }

  /**
   * A new CRC-64/NVME: the native one where it loads (see the class comment), else this table's.
   */
  public static Checksum create() {
    return Native.AVAILABLE ? new CrtCrc64Nvme() : new Crc64Nvme();
  }

  /** Whether {@link #create()} returns the native CRC in this process. */
  public static boolean nativeInUse() {
    return Native.AVAILABLE;
  }

  private static long[] table() {
    long[] t = new long[SLICES * 256];
    for (int i = 0; i < 256; i++) {
      long c = i;
      for (int k = 0; k < 8; k++) {
        c = (c & 1) != 0 ? (c >>> 1) ^ POLY : c >>> 1;
      }
      t[i] = c;
    }
    for (int s = 1; s < SLICES; s++) {
      for (int i = 0; i < 256; i++) {
        long prev = t[(s - 1) * 256 + i];
        t[s * 256 + i] = (prev >>> 8) ^ t[(int) (prev & 0xff)];
      }
    }
    return t;
  }

  @Override
  public void update(int b) {
    crc = (crc >>> 8) ^ TABLE[(int) ((crc ^ b) & 0xff)];
  }

  @Override
  public void update(byte[] b, int off, int len) {
    java.util.Objects.checkFromIndexSize(off, len, b.length);
    crc = update(crc, b, off, len);
  }

  @Override
  public void update(ByteBuffer buffer) {
    int n = buffer.remaining();
    if (buffer.hasArray()) {
      int at = buffer.arrayOffset() + buffer.position();
      crc = update(crc, buffer.array(), at, n);
      buffer.position(buffer.limit());
      return;
    }
    if (chunk == null) {
      chunk = new byte[CHUNK];
    }
    long c = crc;
    while (buffer.hasRemaining()) {
      int k = Math.min(CHUNK, buffer.remaining());
      buffer.get(chunk, 0, k);
      c = update(c, chunk, 0, k);
    }
    crc = c;
  }

  private static long update(long c, byte[] b, int off, int len) {
    long[] t = TABLE;
    int i = off;
    int end = off + len;
    while (end - i >= SLICES) {
      long lo = (long) LONG_LE.get(b, i) ^ c;
      long hi = (long) LONG_LE.get(b, i + 8);
      c =
          t[15 * 256 + (int) (lo & 0xff)]
              ^ t[14 * 256 + (int) ((lo >>> 8) & 0xff)]
              ^ t[13 * 256 + (int) ((lo >>> 16) & 0xff)]
              ^ t[12 * 256 + (int) ((lo >>> 24) & 0xff)]
              ^ t[11 * 256 + (int) ((lo >>> 32) & 0xff)]
              ^ t[10 * 256 + (int) ((lo >>> 40) & 0xff)]
              ^ t[9 * 256 + (int) ((lo >>> 48) & 0xff)]
              ^ t[8 * 256 + (int) (lo >>> 56)]
              ^ t[7 * 256 + (int) (hi & 0xff)]
              ^ t[6 * 256 + (int) ((hi >>> 8) & 0xff)]
              ^ t[5 * 256 + (int) ((hi >>> 16) & 0xff)]
              ^ t[4 * 256 + (int) ((hi >>> 24) & 0xff)]
              ^ t[3 * 256 + (int) ((hi >>> 32) & 0xff)]
              ^ t[2 * 256 + (int) ((hi >>> 40) & 0xff)]
              ^ t[256 + (int) ((hi >>> 48) & 0xff)]
              ^ t[(int) (hi >>> 56)];
      i += SLICES;
    }
    while (i < end) {
      c = (c >>> 8) ^ t[(int) ((c ^ b[i++]) & 0xff)];
    }
    return c;
  }

  /** The CRC of the bytes so far. */
  @Override
  public long getValue() {
    return ~crc;
  }

  @Override
  public void reset() {
    crc = -1L;
  }
}
