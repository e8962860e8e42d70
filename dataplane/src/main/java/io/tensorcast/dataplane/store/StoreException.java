package io.tensorcast.dataplane.store;

/**
 * The page-locked store refused or failed an operation. {@link #reason()} is a CamelCase reason
 * suitable for a Kubernetes condition; the message names the artifact, the file and the rule.
 *
 * <p>Reasons used: {@code InvalidArtifactId}, {@code InvalidPath}, {@code InvalidSize}, {@code
 * DuplicatePath}, {@code PathConflict}, {@code NoFiles}, {@code ArtifactExists}, {@code
 * InsufficientMemory} ({@link InsufficientMemoryException}), {@code FilesystemFull}, the reasons of
 * {@link LockStatus} ({@link MemoryLockException}), {@code ChecksumMismatch}, {@code StoreIoError},
 * {@code StoreInUse}, {@code StoreClosed}.
 */
public class StoreException extends Exception {
  private static final long serialVersionUID = 1L;

  private final String reason;

  public StoreException(String reason, String message, Throwable cause) {
    super(message, cause);
    this.reason = reason;
  }

  public StoreException(String reason, String message) {
    this(reason, message, null);
  }

  /** CamelCase reason for conditions. */
  public String reason() {
    return reason;
  }
}
