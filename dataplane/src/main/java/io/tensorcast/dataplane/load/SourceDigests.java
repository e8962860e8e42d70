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

/** Computes a source's digest algorithm over a file's bytes in the store. */
final class SourceDigests {
  /** Bytes hashed per view of the mapping. */
  private static final int WINDOW = 8 << 20;

  private SourceDigests() {}

  /**
   * The digest of {@code path}'s {@code size} bytes in {@code stored} with {@code algorithm}; CRCs
   * as big-endian bytes (4 for CRC-32/CRC-32C, 8 for CRC-64/NVME), as S3 encodes them.
   */
  static byte[] compute(
      StoredArtifact stored, String path, long size, PublishedDigest.Algorithm algorithm) {
    return switch (algorithm) {
      case SHA256 -> digest(stored, path, size, "SHA-256", null);
      case SHA1 -> digest(stored, path, size, "SHA-1", null);
      case MD5 -> digest(stored, path, size, "MD5", null);
      case GIT_BLOB_SHA1 ->
          digest(
              stored,
              path,
              size,
              "SHA-1",
              ("blob " + size + "\0").getBytes(StandardCharsets.US_ASCII));
      case CRC32 -> crc(stored, path, size, new CRC32(), 4);
      case CRC32C -> crc(stored, path, size, new CRC32C(), 4);
      case CRC64NVME -> crc(stored, path, size, new Crc64Nvme(), 8);
    };
  }

  private static byte[] digest(
      StoredArtifact stored, String path, long size, String name, byte[] prefix) {
    MessageDigest md;
    try {
      md = MessageDigest.getInstance(name);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(name + " is required of every Java platform", e);
    }
    if (prefix != null) {
      md.update(prefix);
    }
    for (long off = 0; off < size; off += WINDOW) {
      md.update(stored.readOnly(path, off, (int) Math.min(WINDOW, size - off)));
    }
    return md.digest();
  }

  private static byte[] crc(
      StoredArtifact stored, String path, long size, Checksum crc, int bytes) {
    for (long off = 0; off < size; off += WINDOW) {
      crc.update(stored.readOnly(path, off, (int) Math.min(WINDOW, size - off)));
    }
    long v = crc.getValue();
    ByteBuffer b = ByteBuffer.allocate(8).putLong(v);
    byte[] out = new byte[bytes];
    System.arraycopy(b.array(), 8 - bytes, out, 0, bytes);
    return out;
  }
}
