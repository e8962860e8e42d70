package io.tensorcast.dataplane.store;

import io.tensorcast.api.Reason;
import java.io.IOException;
import java.nio.file.Path;

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

  /**
   * A {@code StoreIoError} for an I/O failure on one of an artifact's files or directories.
   *
   * @param artifactId the artifact whose file it is
   * @param action what failed, e.g. {@code "cannot write"}
   * @param target the file or directory
   * @param cause the I/O failure; its message ends the exception's message
   * @return "artifact ID: ACTION TARGET: CAUSE-MESSAGE", with {@code cause} as the cause
   */
  static StoreException ioError(String artifactId, String action, Path target, IOException cause) {
    return new StoreException(
        Reason.StoreIoError,
        "artifact " + artifactId + ": " + action + " " + target + ": " + cause.getMessage(),
        cause);
  }

  /** Why, for the status and conditions. */
  public Reason reason() {
    return reason;
  }
}
