package io.tensorcast.dataplane.store;

import io.tensorcast.api.Reason;

/**
 * The pages of a range could not be reserved before it was written ({@link StoredArtifact#writable}
 * and {@link StoredArtifact#write}): the file system is full ({@link Reason#FilesystemFull}) or
 * memory ran out ({@link Reason#InsufficientMemory}). Unchecked, because writers reach the store
 * through buffer callbacks; the message names the artifact, the file, the range and the error.
 */
public final class StoreWriteException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final Reason reason;

  public StoreWriteException(Reason reason, String message) {
    super(message);
    this.reason = reason;
  }

  /** Why the range could not be written. */
  public Reason reason() {
    return reason;
  }
}
