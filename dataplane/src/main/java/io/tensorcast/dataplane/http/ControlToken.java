package io.tensorcast.dataplane.http;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.Base64;

/**
 * A bearer token of the control endpoint, read from a file as Kubernetes mounts a Secret key, or
 * generated. A file is re-read when its modification time changes, so rotating the Secret rotates
 * the token without a restart (the kubelet updates mounted Secrets in place; environment variables
 * would not change). Comparison is constant-time, also in length (both sides are hashed first).
 */
public final class ControlToken {
  /** Fewest characters a token may have. */
  public static final int MIN_LENGTH = 16;

  private static final SecureRandom RANDOM = new SecureRandom();

  private final Path file;
  private FileTime seen;
  private byte[] digest;
  private String value;

  /**
   * @param file file holding the token; surrounding white space is ignored
   * @throws UncheckedIOException if the file cannot be read
   * @throws IllegalArgumentException if the token is shorter than {@value #MIN_LENGTH} characters
   */
  public ControlToken(Path file) {
    this.file = file;
    reload();
  }

  private ControlToken(String value) {
    this.file = null;
    set(value, "a generated token");
  }

  /** A fixed token. */
  public static ControlToken of(String value) {
    return new ControlToken(value);
  }

  /** A random token: 32 bytes from a {@link SecureRandom}, URL-safe base64 (43 characters). */
  public static ControlToken random() {
    byte[] b = new byte[32];
    RANDOM.nextBytes(b);
    return new ControlToken(Base64.getUrlEncoder().withoutPadding().encodeToString(b));
  }

  /** The file it is read from, or null. */
  public Path file() {
    return file;
  }

  /** The token's current value (to hand a generated token to its user). */
  public synchronized String value() {
    return value;
  }

  private synchronized void reload() {
    try {
      FileTime mtime = Files.getLastModifiedTime(file);
      if (mtime.equals(seen)) {
        return;
      }
      set(Files.readString(file, StandardCharsets.UTF_8).strip(), file.toString());
      seen = mtime;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read control token " + file, e);
    }
  }

  private synchronized void set(String v, String where) {
    if (v.length() < MIN_LENGTH) {
      throw new IllegalArgumentException(
          "control token in "
              + where
              + " is "
              + v.length()
              + " characters; need at least "
              + MIN_LENGTH);
    }
    value = v;
    digest = sha256(v.getBytes(StandardCharsets.UTF_8));
  }

  /** Whether {@code presented} (the part after {@code Bearer }) is this token. */
  public boolean matches(String presented) {
    if (file != null) {
      try {
        reload();
      } catch (RuntimeException e) {
        // keep the last good token if the file is briefly absent during a Secret update
      }
    }
    byte[] p = sha256(presented.getBytes(StandardCharsets.UTF_8));
    synchronized (this) {
      return MessageDigest.isEqual(p, digest);
    }
  }

  /** Whether an {@code Authorization} header value carries this token. */
  public boolean accepts(String authorization) {
    String presented = ControlAuth.bearer(authorization);
    return presented != null && matches(presented);
  }

  private static byte[] sha256(byte[] b) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(b);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
