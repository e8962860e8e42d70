package io.tensorcast.dataplane.load;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import io.tensorcast.dataplane.source.DigestHasher;
import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * SHA-256 by OpenSSL's libcrypto (its EVP interface, bound with JNA direct mapping), for the load's
 * digests: native code that uses the CPU's SHA extensions from the first byte, where Java's {@code
 * MessageDigest} reaches them only once C2 has compiled its multi-block loop (seconds into a cold
 * load, behind the rest of the JIT's queue on a small machine) and runs 2–3 × slower until then.
 *
 * <p>Bytes of a direct buffer (the digests' read buffer, a mapping) are hashed in place; a heap
 * buffer is copied through a direct chunk of {@link #CHUNK} bytes first. {@link #available()} loads
 * the library once and checks the digest of {@code "abc"}; when it fails (no libcrypto 3 or 1.1 on
 * this system, or {@value #NATIVE_PROPERTY}{@code =false}) the callers use {@code MessageDigest}.
 * The native context is freed by {@link #finish()}, or by a {@link Cleaner} when a hasher is
 * abandoned. Not thread-safe.
 */
final class OpenSslSha256 implements DigestHasher {
  private static final Logger log = LoggerFactory.getLogger(OpenSslSha256.class);

  /** System property: {@code false} keeps {@code MessageDigest} even where libcrypto loads. */
  static final String NATIVE_PROPERTY = "tensorcast.sha256.native";

  /** Bytes of a heap buffer copied to native memory per call. */
  static final int CHUNK = 256 * 1024;

  private static final int DIGEST_LENGTH = 32;
  private static final Cleaner CLEANER = Cleaner.create();

  /** The bound functions; loading the class binds them (or fails). */
  private static final class Lib {
    static {
      NativeLibrary lib = load();
      Native.register(Lib.class, lib);
    }

    private static NativeLibrary load() {
      UnsatisfiedLinkError first = null;
      // The versioned names first: a runtime image has no unversioned development symlink.
      for (String name : new String[] {"libcrypto.so.3", "libcrypto.so.1.1", "crypto"}) {
        try {
          return NativeLibrary.getInstance(name);
        } catch (UnsatisfiedLinkError e) {
          if (first == null) {
            first = e;
          }
        }
      }
      throw first;
    }

    static native long EVP_sha256();

    static native long EVP_MD_CTX_new();

    static native void EVP_MD_CTX_free(long ctx);

    static native int EVP_DigestInit_ex(long ctx, long type, long engine);

    static native int EVP_DigestUpdate(long ctx, long data, long count);

    static native int EVP_DigestFinal_ex(long ctx, long md, long size);
  }

  /** Whether libcrypto's SHA-256 is used; decided once, on first use. */
  private static final class Probe {
    static final boolean AVAILABLE = probe();

    private static boolean probe() {
      if (!Boolean.parseBoolean(System.getProperty(NATIVE_PROPERTY, "true"))) {
        log.debug("SHA-256: MessageDigest ({}=false)", NATIVE_PROPERTY);
        return false;
      }
      String why = unusable();
      if (why == null) {
        log.debug("SHA-256: OpenSSL libcrypto");
        return true;
      }
      log.debug("SHA-256: MessageDigest (OpenSSL's libcrypto is not usable here: {})", why);
      return false;
    }
  }

  /** Frees a native context once. */
  private static final class Context implements Runnable {
    private long ctx;

    Context(long ctx) {
      this.ctx = ctx;
    }

    @Override
    public synchronized void run() {
      if (ctx != 0) {
        Lib.EVP_MD_CTX_free(ctx);
        ctx = 0;
      }
    }
  }

  private final Context context;
  private final Cleaner.Cleanable cleanable;
  private final long ctx;
  private ByteBuffer chunk;
  private boolean finished;

  private OpenSslSha256() {
    long c = Lib.EVP_MD_CTX_new();
    if (c == 0) {
      throw new IllegalStateException("EVP_MD_CTX_new failed");
    }
    this.ctx = c;
    this.context = new Context(c);
    this.cleanable = CLEANER.register(this, context);
    if (Lib.EVP_DigestInit_ex(c, Lib.EVP_sha256(), 0) != 1) {
      cleanable.clean();
      throw new IllegalStateException("EVP_DigestInit_ex(SHA-256) failed");
    }
  }

  /** Whether {@link #create()} returns a native hasher on this system. */
  static boolean available() {
    return Probe.AVAILABLE;
  }

  /**
   * A native SHA-256 hasher, or null when libcrypto is not usable here (see {@link #available()}).
   */
  static DigestHasher create() {
    return available() ? new OpenSslSha256() : null;
  }

  /**
   * Why libcrypto's SHA-256 cannot be used here, or null when it loads and gives the right digest
   * of {@code "abc"}.
   */
  static String unusable() {
    try {
      OpenSslSha256 h = new OpenSslSha256();
      h.update(ByteBuffer.wrap("abc".getBytes(StandardCharsets.US_ASCII)));
      String hex = HexFormat.of().formatHex(h.finish());
      if (!hex.equals("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")) {
        return "the digest of \"abc\" came out as " + hex;
      }
      return null;
    } catch (LinkageError | RuntimeException e) {
      return e.toString();
    }
  }

  @Override
  public void update(ByteBuffer bytes) {
    if (finished) {
      throw new IllegalStateException("the digest was already finished");
    }
    int n = bytes.remaining();
    if (n == 0) {
      return;
    }
    if (bytes.isDirect()) {
      long address = Pointer.nativeValue(Native.getDirectBufferPointer(bytes));
      int result = Lib.EVP_DigestUpdate(ctx, address + bytes.position(), n);
      Reference.reachabilityFence(bytes);
      Reference.reachabilityFence(this);
      check(result, "EVP_DigestUpdate");
      bytes.position(bytes.limit());
      return;
    }
    if (chunk == null) {
      chunk = ByteBuffer.allocateDirect(CHUNK);
    }
    long address = Pointer.nativeValue(Native.getDirectBufferPointer(chunk));
    while (bytes.hasRemaining()) {
      int k = Math.min(CHUNK, bytes.remaining());
      chunk.clear();
      chunk.put(bytes.slice(bytes.position(), k));
      bytes.position(bytes.position() + k);
      int result = Lib.EVP_DigestUpdate(ctx, address, k);
      Reference.reachabilityFence(this);
      check(result, "EVP_DigestUpdate");
    }
  }

  @Override
  public byte[] finish() {
    if (finished) {
      throw new IllegalStateException("the digest was already finished");
    }
    finished = true;
    try {
      ByteBuffer out = ByteBuffer.allocateDirect(DIGEST_LENGTH);
      long address = Pointer.nativeValue(Native.getDirectBufferPointer(out));
      check(Lib.EVP_DigestFinal_ex(ctx, address, 0), "EVP_DigestFinal_ex");
      byte[] digest = new byte[DIGEST_LENGTH];
      out.get(0, digest);
      return digest;
    } finally {
      cleanable.clean();
    }
  }

  private static void check(int result, String call) {
    if (result != 1) {
      throw new IllegalStateException(call + " failed (OpenSSL returned " + result + ")");
    }
  }
}
