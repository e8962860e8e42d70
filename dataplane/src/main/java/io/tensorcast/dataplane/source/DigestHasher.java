package io.tensorcast.dataplane.source;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;
import java.util.zip.Checksum;

/** One digest being computed over a file's bytes in order. Not thread-safe. */
public interface DigestHasher {
  /** Hashes {@code bytes}' remaining bytes (the next bytes of the file) and consumes them. */
  void update(ByteBuffer bytes);

  /** The digest of everything updated so far; CRCs as big-endian bytes, as S3 encodes them. */
  byte[] finish();

  /**
   * A hasher of {@code algorithm} for a file of {@code size} bytes (git's blob id hashes a header
   * with the size first), on the JDK's digests and CRCs and {@link Crc64Nvme}.
   */
  static DigestHasher of(PublishedDigest.Algorithm algorithm, long size) {
    return switch (algorithm) {
      case SHA256 -> digest("SHA-256", null);
      case SHA1 -> digest("SHA-1", null);
      case MD5 -> digest("MD5", null);
      case GIT_BLOB_SHA1 ->
          digest("SHA-1", ("blob " + size + "\0").getBytes(StandardCharsets.US_ASCII));
      case CRC32 -> crc(new CRC32(), 4);
      case CRC32C -> crc(new CRC32C(), 4);
      case CRC64NVME -> crc(Crc64Nvme.create(), 8);
    };
  }

  private static DigestHasher digest(String name, byte[] prefix) {
    MessageDigest md;
    try {
      md = MessageDigest.getInstance(name);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(name + " is required of every Java platform", e);
    }
    if (prefix != null) {
      md.update(prefix);
    }
    return new DigestHasher() {
      @Override
      public void update(ByteBuffer bytes) {
        md.update(bytes);
      }

      @Override
      public byte[] finish() {
        return md.digest();
      }
    };
  }

  private static DigestHasher crc(Checksum crc, int bytes) {
    return new DigestHasher() {
      @Override
      public void update(ByteBuffer b) {
        crc.update(b);
      }

      @Override
      public byte[] finish() {
        long v = crc.getValue();
        ByteBuffer b = ByteBuffer.allocate(8).putLong(v);
        byte[] out = new byte[bytes];
        System.arraycopy(b.array(), 8 - bytes, out, 0, bytes);
        return out;
      }
    };
  }
}
