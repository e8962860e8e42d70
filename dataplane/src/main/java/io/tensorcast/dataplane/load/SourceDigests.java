package io.tensorcast.dataplane.load;

import io.tensorcast.dataplane.source.Crc64Nvme;
import io.tensorcast.dataplane.source.PublishedDigest;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;
import java.util.zip.Checksum;

/** Computes a source's digest algorithm over a file's bytes, at once or as they arrive. */
final class SourceDigests {
  /** Bytes hashed per view of the mapping. */
  static final int WINDOW = 8 << 20;

  private SourceDigests() {}

  /** One digest being computed over a file's bytes in order. Not thread-safe. */
  interface Hasher {
    /** Hashes {@code bytes}' remaining bytes (the next bytes of the file) and consumes them. */
    void update(ByteBuffer bytes);

    /** The digest of everything updated so far; CRCs as big-endian bytes, as S3 encodes them. */
    byte[] finish();
  }

  /**
   * A hasher of {@code algorithm} for a file of {@code size} bytes (git's blob id hashes a header
   * with the size first).
   */
  static Hasher hasher(PublishedDigest.Algorithm algorithm, long size) {
    return switch (algorithm) {
      case SHA256 -> {
        Hasher nativeSha256 = OpenSslSha256.create();
        yield nativeSha256 != null ? nativeSha256 : digest("SHA-256", null);
      }
      case SHA1 -> digest("SHA-1", null);
      case MD5 -> digest("MD5", null);
      case GIT_BLOB_SHA1 ->
          digest("SHA-1", ("blob " + size + "\0").getBytes(StandardCharsets.US_ASCII));
      case CRC32 -> crc(new CRC32(), 4);
      case CRC32C -> crc(new CRC32C(), 4);
      case CRC64NVME -> crc(Crc64Nvme.create(), 8);
    };
  }

  /**
   * The digest of {@code path}'s {@code size} bytes in {@code stored} with {@code algorithm}; CRCs
   * as big-endian bytes (4 for CRC-32/CRC-32C, 8 for CRC-64/NVME), as S3 encodes them.
   */
  static byte[] compute(
      StoredArtifact stored, String path, long size, PublishedDigest.Algorithm algorithm) {
    Hasher h = hasher(algorithm, size);
    for (long off = 0; off < size; off += WINDOW) {
      stored.consume(path, off, (int) Math.min(WINDOW, size - off), h::update);
    }
    return h.finish();
  }

  private static Hasher digest(String name, byte[] prefix) {
    MessageDigest md;
    try {
      md = MessageDigest.getInstance(name);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(name + " is required of every Java platform", e);
    }
    if (prefix != null) {
      md.update(prefix);
    }
    return new Hasher() {
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

  private static Hasher crc(Checksum crc, int bytes) {
    return new Hasher() {
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
