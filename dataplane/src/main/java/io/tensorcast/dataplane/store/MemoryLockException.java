package io.tensorcast.dataplane.store;

/**
 * Page-locking failed under {@link LockPolicy#REQUIRED}. The reason and message are those of {@link
 * #lockStatus()}; nothing of the artifact is left behind.
 */
public final class MemoryLockException extends StoreException {
  private static final long serialVersionUID = 1L;

  private final transient LockStatus lockStatus;

  MemoryLockException(String artifactId, LockStatus lockStatus) {
    super(
        lockStatus.reason(),
        "artifact " + artifactId + " could not be page-locked: " + lockStatus.message());
    this.lockStatus = lockStatus;
  }

  /** Why locking failed, with the numbers. */
  public LockStatus lockStatus() {
    return lockStatus;
  }
}
