package io.tensorcast.csi.artifacts;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/** A version counter that threads can wait on; the waiting part of an {@link ArtifactSource}. */
public final class ChangeSignal {
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  private long version; // guarded by lock

  /** The current version. */
  public long version() {
    lock.lock();
    try {
      return version;
    } finally {
      lock.unlock();
    }
  }

  /** Bumps the version and wakes every waiter. */
  public void changed() {
    lock.lock();
    try {
      version++;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /** Wakes every waiter without a change. */
  public void wake() {
    lock.lock();
    try {
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /** See {@link ArtifactSource#awaitChange}. */
  public void await(long seen, Duration max) throws InterruptedException {
    long nanos = max.toNanos();
    lock.lock();
    try {
      if (version == seen && nanos > 0) {
        changed.await(nanos, TimeUnit.NANOSECONDS);
      }
    } finally {
      lock.unlock();
    }
  }
}
