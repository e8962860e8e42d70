package io.tensorcast.dataplane.store;

/**
 * The pages of a range could not be reserved before it was written ({@link StoredArtifact#writable}
 * and {@link StoredArtifact#write}): the file system is full ({@code FilesystemFull}) or memory ran
 * out ({@code InsufficientMemory}). Unchecked, because writers reach the store through buffer
 * callbacks; {@link #reason()} is a CamelCase reason for conditions and the message names the
 * artifact, the file, the range and the error.
 */
public final class StoreWriteException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String reason;

  public StoreWriteException(String reason, String message) {
    super(message);
    this.reason = reason;
  }

  /** CamelCase reason for conditions. */
  public String reason() {
    return reason;
  }
}
