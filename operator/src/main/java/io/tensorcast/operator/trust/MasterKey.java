package io.tensorcast.operator.trust;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.InvalidKeyException;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The operator's master key: the only secret the operator holds. Every per-ModelArtifact value (the
 * peer secret, the read and admin tokens; {@link ArtifactKeys}) is derived from it with
 * HMAC-SHA256, so the operator can create and re-create those Secrets, and present the admin token,
 * without ever reading a Secret from the API server.
 *
 * <p>Key material is the bytes of a file (surrounding white space removed; the Helm chart mounts a
 * Secret holding 64 random characters), at least {@value #MIN_BYTES} bytes. Without a file the
 * operator makes a random key for the life of the process ({@link #random()}): every restart then
 * derives new values, so artifacts' Secrets are rewritten and their pods replaced.
 */
public final class MasterKey {
  private static final SecureRandom RANDOM = new SecureRandom();

  /** Fewest bytes of key material accepted (256 bits when random). */
  public static final int MIN_BYTES = 32;

  private static final String HMAC = "HmacSHA256";

  private final byte[] key;
  private final String source;

  private MasterKey(byte[] key, String source) {
    this.key = key;
    this.source = source;
  }

  /**
   * Reads the key from {@code file}.
   *
   * @throws IllegalArgumentException naming the file when it cannot be read or holds fewer than
   *     {@value #MIN_BYTES} bytes
   */
  public static MasterKey fromFile(Path file) {
    byte[] raw;
    try {
      raw = Files.readAllBytes(file);
    } catch (IOException e) {
      throw new IllegalArgumentException(
          "cannot read the master key file " + file + ": " + e.getMessage(), e);
    }
    byte[] material =
        new String(raw, StandardCharsets.UTF_8).strip().getBytes(StandardCharsets.UTF_8);
    Arrays.fill(raw, (byte) 0);
    if (material.length < MIN_BYTES) {
      throw new IllegalArgumentException(
          "the master key in "
              + file
              + " is "
              + material.length
              + " bytes; at least "
              + MIN_BYTES
              + " are needed (e.g. head -c 48 /dev/urandom | base64)");
    }
    return new MasterKey(material, file.toString());
  }

  /** A random key of 32 bytes, for this process only. */
  public static MasterKey random() {
    byte[] k = new byte[MIN_BYTES];
    RANDOM.nextBytes(k);
    return new MasterKey(k, "random, this process only");
  }

  /** Where the key came from, for logs (never the key). */
  public String source() {
    return source;
  }

  /**
   * A public fingerprint of the key: 16 hex characters of HMAC-SHA256(key, "tensorcast key id").
   * Data-plane pods carry it (so pods made from another key are replaced); it reveals nothing of
   * the key.
   */
  public String id() {
    return HexFormat.of().formatHex(hmac("tensorcast key id")).substring(0, 16);
  }

  /** HMAC-SHA256 of {@code message} (UTF-8) under the key: 32 bytes. */
  byte[] hmac(String message) {
    try {
      Mac mac = Mac.getInstance(HMAC);
      mac.init(new SecretKeySpec(key, HMAC));
      return mac.doFinal(message.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException | InvalidKeyException e) {
      throw new IllegalStateException("HmacSHA256 is not available", e);
    }
  }

  @Override
  public String toString() {
    return "MasterKey[id=" + id() + ", " + source + "]";
  }
}
