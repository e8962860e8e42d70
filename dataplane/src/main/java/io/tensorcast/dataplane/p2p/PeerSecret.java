package io.tensorcast.dataplane.p2p;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Base64;
import java.util.HexFormat;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The artifact's peer secret: the key of the peer handshake ({@link PeerHandshake}), which only the
 * artifact's own data-plane pods hold. Read from a file (a mounted Secret key, {@code
 * --peer-secret-file}) holding base64 text of at least {@value #MIN_BYTES} random bytes.
 *
 * <p>The Secret may be replaced while pods run (rotation): the file is read again when {@link
 * #key()} is asked more than {@link #RECHECK_MILLIS} ms after the last read, and at once after a
 * handshake failed ({@link #recheckNow()}), so an honest member picks the new secret up on its next
 * connection attempt. A file that is briefly absent or unreadable during the kubelet's update keeps
 * the last good key (logged).
 */
public final class PeerSecret {
  private static final Logger log = LoggerFactory.getLogger(PeerSecret.class);

  /** Fewest random bytes a peer secret may hold. */
  public static final int MIN_BYTES = 32;

  /** How long a read of the file is reused before {@link #key()} reads it again. */
  public static final long RECHECK_MILLIS = 1_000;

  private final Path file;
  private byte[] key;
  private long readAt;

  private PeerSecret(Path file, byte[] key) {
    this.file = file;
    this.key = key;
    this.readAt = System.nanoTime();
  }

  /**
   * Reads the secret from {@code file}.
   *
   * @throws IllegalArgumentException naming the file and the rule broken (unreadable, not base64,
   *     fewer than {@value #MIN_BYTES} bytes)
   */
  public static PeerSecret fromFile(Path file) {
    Objects.requireNonNull(file, "file");
    return new PeerSecret(file, read(file));
  }

  /** A fixed secret (no file), e.g. for tests. */
  public static PeerSecret of(byte[] key) {
    if (key.length < MIN_BYTES) {
      throw new IllegalArgumentException(
          "a peer secret needs at least " + MIN_BYTES + " bytes, got " + key.length);
    }
    return new PeerSecret(null, key.clone());
  }

  /** The file it is read from, or null for a fixed secret. */
  public Path file() {
    return file;
  }

  /** The current key; reads the file again when the last read is older than a second. */
  public synchronized byte[] key() {
    if (file != null && System.nanoTime() - readAt > RECHECK_MILLIS * 1_000_000L) {
      readAt = System.nanoTime();
      try {
        byte[] fresh = read(file);
        if (!MessageDigest.isEqual(fresh, key)) {
          log.info(
              "peer secret in {} changed (fingerprint {} -> {}); new handshakes use it",
              file,
              fingerprint(key),
              fingerprint(fresh));
          key = fresh;
        }
      } catch (IllegalArgumentException e) {
        log.warn("keeping the last peer secret: {}", e.getMessage());
      }
    }
    return key.clone();
  }

  /** Makes the next {@link #key()} read the file (after a failed handshake). */
  public synchronized void recheckNow() {
    readAt = System.nanoTime() - RECHECK_MILLIS * 2_000_000L;
  }

  /** First 8 hex digits of the SHA-256 of the current key: names a secret in logs, reveals none. */
  public synchronized String fingerprint() {
    return fingerprint(key);
  }

  private static String fingerprint(byte[] key) {
    try {
      return HexFormat.of()
          .formatHex(MessageDigest.getInstance("SHA-256").digest(key))
          .substring(0, 8);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static byte[] read(Path file) {
    String text;
    try {
      if (Files.size(file) > 4096) {
        throw new IllegalArgumentException(
            "peer secret file " + file + " is larger than 4096 bytes; expected base64 text");
      }
      text = Files.readString(file, StandardCharsets.US_ASCII);
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot read the peer secret file " + file + ": " + e, e);
    }
    return parse(text, file.toString());
  }

  /**
   * Decodes the base64 text of a secret (standard or URL-safe alphabet; white space ignored).
   *
   * @throws IllegalArgumentException naming {@code where} and the rule broken
   */
  static byte[] parse(String text, String where) {
    String compact = text.replaceAll("\\s", "");
    byte[] bytes;
    try {
      bytes =
          compact.indexOf('-') >= 0 || compact.indexOf('_') >= 0
              ? Base64.getUrlDecoder().decode(compact)
              : Base64.getDecoder().decode(compact);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "peer secret in "
              + where
              + " is not base64 text ("
              + e.getMessage()
              + "); write e.g. `head -c 32 /dev/urandom | base64`",
          e);
    }
    if (bytes.length < MIN_BYTES) {
      throw new IllegalArgumentException(
          "peer secret in "
              + where
              + " holds "
              + bytes.length
              + " bytes; at least "
              + MIN_BYTES
              + " random bytes are needed (e.g. `head -c 32 /dev/urandom | base64`)");
    }
    return bytes;
  }
}
