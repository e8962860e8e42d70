package io.tensorcast.dataplane.store;

import io.tensorcast.api.Reason;

/**
 * The page-locked store refused or failed an operation. {@link #reason()} says why ({@link
 * Reason}); the message names the artifact, the file and the rule.
 *
 * <p>Reasons used: {@code InvalidArtifactId}, {@code InvalidPath}, {@code InvalidSize}, {@code
 * DuplicatePath}, {@code PathConflict}, {@code NoFiles}, {@code ArtifactExists}, {@code
 * InsufficientMemory} ({@link InsufficientMemoryException}), {@code FilesystemFull}, the reasons of
 * {@link LockStatus} ({@link MemoryLockException}), {@code ChecksumMismatch}, {@code StoreIoError},
 * {@code StoreInUse}, {@code StoreClosed}.
 */
public class StoreException extends Exception {
  private static final long serialVersionUID = 1L;

  private final Reason reason;

  public StoreException(Reason reason, String message, Throwable cause) {
    super(message, cause);
    this.reason = reason;
  }

  public StoreException(Reason reason, String message) {
    this(reason, message, null);
  }

  /** Why, for the status and conditions. */
  public Reason reason() {
    return reason;
  }
}
