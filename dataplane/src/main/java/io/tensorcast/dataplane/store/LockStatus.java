package io.tensorcast.dataplane.store;

import io.tensorcast.api.Reason;
import java.util.Objects;

/**
 * Whether an artifact's bytes are page-locked, in the shape of a Kubernetes condition.
 *
 * @param locked true only when every byte of every file is locked ({@code lockedBytes} equals the
 *     artifact's size)
 * @param lockedBytes bytes of the artifact's files that are page-locked; 0 when not locked
 * @param reason {@link Reason#Locked}, {@link Reason#LockingDisabled}, {@link
 *     Reason#MemlockLimitTooLow} (no {@code CAP_IPC_LOCK} and {@code RLIMIT_MEMLOCK} below what is
 *     needed), {@link Reason#LockFailed} (the kernel refused for another reason, e.g. {@code
 *     EAGAIN})
 * @param message what happened, with the numbers (bytes asked, {@code RLIMIT_MEMLOCK}, whether
 *     {@code CAP_IPC_LOCK} is in effect) and what to do about it
 */
public record LockStatus(boolean locked, long lockedBytes, Reason reason, String message) {

  public LockStatus {
    Objects.requireNonNull(reason, "reason");
    Objects.requireNonNull(message, "message");
    if (lockedBytes < 0) {
      throw new IllegalArgumentException("negative lockedBytes " + lockedBytes);
    }
  }

  static LockStatus locked(long bytes) {
    return new LockStatus(true, bytes, Reason.Locked, bytes + " bytes page-locked with mlock");
  }

  static LockStatus disabled() {
    return new LockStatus(
        false,
        0,
        Reason.LockingDisabled,
        "page-locking is disabled for this store (LockPolicy.DISABLED)");
  }
}
