package io.tensorcast.dataplane.store;

import io.tensorcast.dataplane.source.PublishedDigest.Algorithm;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * The digest a file was completed with, recorded in the state file and re-checked when a restarted
 * store adopts the file: the SHA-256 of its bytes, or the digest its source publishes for it (an S3
 * or OSS full-object checksum, a single-part ETag's MD5, a Hub git blob id) when that digest
 * verified every byte of it. Written as lowercase hex for SHA-256 (what every record held before
 * other algorithms were recorded) and as {@code <algorithm>:<hex>} otherwise, e.g. {@code
 * crc64nvme:ae8b14860a799888}.
 *
 * @param algorithm the digest's algorithm
 * @param hex its value, lowercase hex (CRCs big-endian, as S3 encodes them)
 */
public record ContentDigest(Algorithm algorithm, String hex) {
  private static final Pattern HEX = Pattern.compile("[0-9a-f]+");

  public ContentDigest {
    if (algorithm == null || hex == null) {
      throw new IllegalArgumentException("a content digest needs an algorithm and a value");
    }
    hex = hex.toLowerCase(Locale.ROOT);
    int expected = hexLength(algorithm);
    if (hex.length() != expected || !HEX.matcher(hex).matches()) {
      throw new IllegalArgumentException(
          "not a " + algorithm.label() + " value (" + expected + " hex digits): '" + hex + "'");
    }
  }

  /** A SHA-256 given as hex (any case). */
  public static ContentDigest sha256(String hex) {
    return new ContentDigest(Algorithm.SHA256, hex);
  }

  /**
   * Parses {@link #toString()}'s form: 64 hex digits for SHA-256, {@code <algorithm>:<hex>} for the
   * others.
   *
   * @throws IllegalArgumentException naming what is wrong with {@code text}
   */
  public static ContentDigest parse(String text) {
    if (text == null) {
      throw new IllegalArgumentException("no content digest");
    }
    int colon = text.indexOf(':');
    if (colon < 0) {
      return sha256(text);
    }
    String name = text.substring(0, colon);
    for (Algorithm a : Algorithm.values()) {
      if (token(a).equals(name)) {
        return new ContentDigest(a, text.substring(colon + 1));
      }
    }
    throw new IllegalArgumentException(
        "unknown digest algorithm '" + name + "' in content digest '" + text + "'");
  }

  /** Whether this is a SHA-256 of the file's bytes. */
  public boolean isSha256() {
    return algorithm == Algorithm.SHA256;
  }

  /** Lowercase hex for SHA-256, {@code <algorithm>:<hex>} otherwise. */
  @Override
  public String toString() {
    return isSha256() ? hex : token(algorithm) + ":" + hex;
  }

  /** {@code <algorithm>:<hex>} for every algorithm, SHA-256 too: for people to read. */
  public String named() {
    return token(algorithm) + ":" + hex;
  }

  /** The algorithm's name in the written form: its label with dashes for spaces. */
  static String token(Algorithm a) {
    return a.label().replace(' ', '-');
  }

  private static int hexLength(Algorithm a) {
    return switch (a) {
      case SHA256 -> 64;
      case SHA1, GIT_BLOB_SHA1 -> 40;
      case MD5 -> 32;
      case CRC64NVME -> 16;
      case CRC32, CRC32C -> 8;
    };
  }
}
