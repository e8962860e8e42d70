package io.tensorcast.dataplane.load;

import io.tensorcast.dataplane.source.DigestHasher;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * One SHA-256 over a buffer, for callers outside this package (the peer swarms' piece checks):
 * libcrypto's ({@link OpenSslSha256}) where it is usable, else {@code MessageDigest}'s — the same
 * choice the load's digests make.
 */
public final class Sha256 {
  private Sha256() {}

  /** The SHA-256 of {@code bytes}' remaining bytes, which it consumes. */
  public static byte[] of(ByteBuffer bytes) {
    DigestHasher h = OpenSslSha256.create();
    if (h != null) {
      h.update(bytes);
      return h.finish();
    }
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      md.update(bytes);
      return md.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Whether {@link #of} hashes with libcrypto on this system. */
  public static boolean isNative() {
    return OpenSslSha256.available();
  }
}
