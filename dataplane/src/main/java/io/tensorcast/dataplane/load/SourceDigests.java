package io.tensorcast.dataplane.load;

import io.tensorcast.dataplane.source.DigestHasher;
import io.tensorcast.dataplane.source.PublishedDigest;
import io.tensorcast.dataplane.store.StoredArtifact;

/** Computes a source's digest algorithm over a file's bytes, at once or as they arrive. */
final class SourceDigests {
  /** Bytes hashed per view of the mapping. */
  static final int WINDOW = 8 << 20;

  private SourceDigests() {}

  /**
   * A hasher of {@code algorithm} for a file of {@code size} bytes: SHA-256 in libcrypto where it
   * loads ({@link OpenSslSha256}), everything else as {@link DigestHasher#of}.
   */
  static DigestHasher hasher(PublishedDigest.Algorithm algorithm, long size) {
    if (algorithm == PublishedDigest.Algorithm.SHA256) {
      DigestHasher nativeSha256 = OpenSslSha256.create();
      if (nativeSha256 != null) {
        return nativeSha256;
      }
    }
    return DigestHasher.of(algorithm, size);
  }

  /**
   * The digest of {@code path}'s {@code size} bytes in {@code stored} with {@code algorithm}; CRCs
   * as big-endian bytes (4 for CRC-32/CRC-32C, 8 for CRC-64/NVME), as S3 encodes them.
   */
  static byte[] compute(
      StoredArtifact stored, String path, long size, PublishedDigest.Algorithm algorithm) {
    DigestHasher h = hasher(algorithm, size);
    for (long off = 0; off < size; off += WINDOW) {
      stored.consume(path, off, (int) Math.min(WINDOW, size - off), h::update);
    }
    return h.finish();
  }
}
