package io.tensorcast.dataplane.source;

import java.util.Base64;
import java.util.HexFormat;
import java.util.Objects;

/**
 * A digest a source publishes for a whole file, checked against the bytes in the store before the
 * file counts as complete; or, when the source publishes none that can be checked, why not.
 *
 * @param algorithm the digest's algorithm, or null when there is none
 * @param value the digest's bytes (big-endian for CRCs), or null
 * @param description for status and messages: which digest and where it comes from (e.g. {@code
 *     "CRC64NVME (S3 full-object checksum)"}), or why there is none
 */
public record PublishedDigest(Algorithm algorithm, byte[] value, String description) {

  /** Digest algorithms sources publish. */
  public enum Algorithm {
    /** SHA-256 of the content (Hub LFS oid, S3 {@code ChecksumSHA256} of a whole object). */
    SHA256("sha256"),
    /** SHA-1 of the content (S3 {@code ChecksumSHA1} of a whole object). */
    SHA1("sha1"),
    /** Git's blob id: SHA-1 of {@code "blob <size>\0"} followed by the content (Hub git files). */
    GIT_BLOB_SHA1("git blob sha1"),
    /** MD5 of the content (a single-part, unencrypted or SSE-S3 object's ETag). */
    MD5("md5"),
    /** CRC-64/NVME (S3 {@code ChecksumCRC64NVME}). */
    CRC64NVME("crc64nvme"),
    /** CRC-32C, Castagnoli (S3 {@code ChecksumCRC32C} of a whole object). */
    CRC32C("crc32c"),
    /** CRC-32, ISO-HDLC (S3 {@code ChecksumCRC32} of a whole object). */
    CRC32("crc32");

    private final String label;

    Algorithm(String label) {
      this.label = label;
    }

    /** Lowercase name for messages. */
    public String label() {
      return label;
    }
  }

  public PublishedDigest {
    Objects.requireNonNull(description, "description");
    if ((algorithm == null) != (value == null)) {
      throw new IllegalArgumentException("algorithm and value go together");
    }
    value = value == null ? null : value.clone();
  }

  /** No checkable digest, and why (e.g. {@code "file:// sources publish no digest"}). */
  public static PublishedDigest none(String why) {
    return new PublishedDigest(null, null, why);
  }

  /** A digest given as lowercase or uppercase hex. */
  public static PublishedDigest hex(Algorithm algorithm, String hex, String description) {
    return new PublishedDigest(algorithm, HexFormat.of().parseHex(hex.toLowerCase()), description);
  }

  /** A digest given as base64 (S3 checksum headers). */
  public static PublishedDigest base64(Algorithm algorithm, String b64, String description) {
    return new PublishedDigest(algorithm, Base64.getDecoder().decode(b64), description);
  }

  /** Whether there is a digest to check. */
  public boolean present() {
    return algorithm != null;
  }

  /** The value as lowercase hex, or null. */
  public String valueHex() {
    return value == null ? null : HexFormat.of().formatHex(value);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof PublishedDigest d
        && algorithm == d.algorithm
        && java.util.Arrays.equals(value, d.value)
        && description.equals(d.description);
  }

  @Override
  public int hashCode() {
    return Objects.hash(algorithm, description) * 31 + java.util.Arrays.hashCode(value);
  }

  @Override
  public String toString() {
    return present() ? description + " " + valueHex() : "none: " + description;
  }
}
