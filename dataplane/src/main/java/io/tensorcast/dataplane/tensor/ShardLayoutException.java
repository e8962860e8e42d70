package io.tensorcast.dataplane.tensor;

import java.io.IOException;

/**
 * A stored layout that breaks a rule: invalid {@code manifest.json}, a rank file missing or
 * disagreeing with the manifest, a tensor declared in two files, an invalid safetensors header. The
 * message names the file, the key and the numbers.
 */
public class ShardLayoutException extends IOException {
  private static final long serialVersionUID = 1L;

  /** An exception with the given message. */
  public ShardLayoutException(String message) {
    super(message);
  }

  /** An exception with the given message and cause. */
  public ShardLayoutException(String message, Throwable cause) {
    super(message, cause);
  }
}
