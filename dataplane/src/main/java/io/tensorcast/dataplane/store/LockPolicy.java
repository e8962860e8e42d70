package io.tensorcast.dataplane.store;

/**
 * What {@link PinnedStore} does about page-locking ({@code mlock(2)}) an artifact's mapped files.
 * The ModelArtifact's {@code spec.memory.pinned} chooses between {@link #REQUIRED} and {@link
 * #DISABLED}; {@link #BEST_EFFORT} is for nodes where locking is wanted but may be refused.
 */
public enum LockPolicy {
  /**
   * Every byte must be page-locked. If it cannot be, {@link PinnedStore#allocate} fails with a
   * {@link MemoryLockException} and leaves nothing behind.
   */
  REQUIRED,
  /**
   * Try to page-lock; if that fails the artifact is still allocated, unlocked, and {@link
   * StoredArtifact#lockStatus()} says why ({@code locked=false} with the reason).
   */
  BEST_EFFORT,
  /** Do not page-lock. {@link LockStatus#reason()} is {@code LockingDisabled}. */
  DISABLED
}
