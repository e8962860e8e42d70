package io.tensorcast.dataplane.http;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;

/**
 * A bearer token read from a file, as Kubernetes mounts a Secret key. The file is re-read when its
 * modification time changes, so rotating the Secret rotates the token without a restart (the
 * kubelet updates mounted Secrets in place; environment variables would not change). Comparison is
 * constant-time.
 */
public final class ControlToken {
  private final Path file;
  private FileTime seen;
  private byte[] token;

  /**
   * @param file file holding the token; surrounding white space is ignored
   * @throws UncheckedIOException if the file cannot be read
   * @throws IllegalArgumentException if the token is shorter than 16 characters
   */
  public ControlToken(Path file) {
    this.file = file;
    reload();
  }

  private synchronized void reload() {
    try {
      FileTime mtime = Files.getLastModifiedTime(file);
      if (mtime.equals(seen)) {
        return;
      }
      String value = Files.readString(file, StandardCharsets.UTF_8).strip();
      if (value.length() < 16) {
        throw new IllegalArgumentException(
            "control token in " + file + " is " + value.length() + " characters; need at least 16");
      }
      token = value.getBytes(StandardCharsets.UTF_8);
      seen = mtime;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read control token " + file, e);
    }
  }

  /** Whether an {@code Authorization} header value carries this token. */
  public boolean accepts(String authorization) {
    if (authorization == null || !authorization.startsWith("Bearer ")) {
      return false;
    }
    try {
      reload();
    } catch (RuntimeException e) {
      // keep the last good token if the file is briefly absent during a Secret update
    }
    byte[] presented = authorization.substring(7).strip().getBytes(StandardCharsets.UTF_8);
    synchronized (this) {
      return MessageDigest.isEqual(presented, token);
    }
  }
}
