package io.tensorcast.dataplane.store;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * A page-locked file of the store that belongs to no artifact yet: a writer's segment, filled
 * through the put API (or by the writer itself through a shared directory) and later either moved
 * into an artifact whole by {@link PinnedStore#install} (no copy) or copied from and deleted.
 *
 * <p>Created by {@link PinnedStore#stage}: sized with {@code posix_fallocate} (the data plane
 * touches the pages first, so they are charged to its memory cgroup, not the writer's), mapped
 * {@code MAP_SHARED} read-write, page-locked per the store's {@link LockPolicy}, and charged to the
 * store's budget until {@link #close()} (which unlocks, unmaps, deletes the file and returns the
 * bytes) or until it is moved into an artifact, which then owns mapping, lock and charge.
 *
 * <p>Thread-safe: ranges may be written concurrently; {@link #close()} waits for guarded calls. The
 * buffers of {@link #writable} and {@link #readOnly} are not guarded (as in {@link
 * StoredArtifact}): callers finish with them before closing.
 */
public final class StagedFile implements AutoCloseable {
  private final PinnedStore store;
  private final MappedFile mapped;
  private final long charged;
  private final LockStatus lockStatus;
  private final Object guard = new Object();
  private boolean closed; // guarded by guard
  private boolean moved; // guarded by guard
  private int users; // guarded by guard

  StagedFile(PinnedStore store, MappedFile mapped, long charged, LockStatus lockStatus) {
    this.store = store;
    this.mapped = mapped;
    this.charged = charged;
    this.lockStatus = lockStatus;
  }

  /** The file's absolute path (it moves when installed into an artifact). */
  public Path path() {
    return mapped.absolutePath;
  }

  /** Size in bytes. */
  public long size() {
    return mapped.size();
  }

  /** Whether its pages are locked, and if not, why. */
  public LockStatus lockStatus() {
    return lockStatus;
  }

  /** Bytes charged to the store's budget (the size rounded up to whole pages). */
  long charged() {
    return charged;
  }

  MappedFile mapped() {
    return mapped;
  }

  /**
   * A writable buffer over {@code [offset, offset + length)}: position 0, limit {@code length}.
   * Zero-copy.
   *
   * @throws IndexOutOfBoundsException if the range is not inside the file
   * @throws IllegalStateException after {@link #close()} or once moved
   */
  public ByteBuffer writable(long offset, int length) {
    enter();
    try {
      check(offset, length);
      return mapped.buffer(offset, length);
    } finally {
      leave();
    }
  }

  /** Copies {@code src}'s remaining bytes to {@code offset}; advances {@code src}. */
  public void write(long offset, ByteBuffer src) {
    enter();
    try {
      check(offset, src.remaining());
      mapped.buffer(offset, src.remaining()).put(src);
    } finally {
      leave();
    }
  }

  /** A read-only buffer over {@code [offset, offset + length)}. Zero-copy. */
  public ByteBuffer readOnly(long offset, int length) {
    enter();
    try {
      check(offset, length);
      return mapped.buffer(offset, length).asReadOnlyBuffer();
    } finally {
      leave();
    }
  }

  /** Copies bytes from {@code offset} into {@code dst}'s remaining space; advances {@code dst}. */
  public void read(long offset, ByteBuffer dst) {
    enter();
    try {
      check(offset, dst.remaining());
      dst.put(mapped.buffer(offset, dst.remaining()));
    } finally {
      leave();
    }
  }

  /** Lowercase hex SHA-256 of the file's current bytes. */
  public String sha256() {
    enter();
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      long window = 1L << 30;
      for (long off = 0; off < size(); off += window) {
        md.update(mapped.buffer(off, (int) Math.min(window, size() - off)));
      }
      return HexFormat.of().formatHex(md.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every Java platform", e);
    } finally {
      leave();
    }
  }

  /**
   * Marks the file moved: from now on the artifact it was moved into owns mapping, lock and charge,
   * and {@link #close()} does nothing. Waits for guarded calls in flight.
   *
   * @throws IllegalStateException if closed or moved already
   */
  void markMoved() {
    synchronized (guard) {
      if (closed || moved) {
        throw new IllegalStateException(
            "staged file " + path() + " was " + (moved ? "moved" : "closed") + " already");
      }
      while (users > 0) {
        try {
          guard.wait();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException("interrupted while moving " + path(), e);
        }
      }
      moved = true;
    }
  }

  /** Undoes {@link #markMoved()} after the rename into an artifact failed. */
  void unmarkMoved() {
    synchronized (guard) {
      moved = false;
    }
  }

  /** Whether it was closed or moved into an artifact. */
  public boolean isClosed() {
    synchronized (guard) {
      return closed || moved;
    }
  }

  /**
   * Unlocks, unmaps and deletes the file and returns its bytes to the budget. Waits for guarded
   * calls in flight. Idempotent; does nothing once the file was moved into an artifact.
   */
  @Override
  public void close() {
    synchronized (guard) {
      if (closed || moved) {
        return;
      }
      while (users > 0) {
        try {
          guard.wait();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
      closed = true;
    }
    if (lockStatus.lockedBytes() > 0) {
      MemoryLockSupport.munlock(mapped.address, mapped.size());
    }
    try {
      mapped.unmap();
    } catch (ErrnoException e) {
      // the file is deleted below; an unmapped region leaks only address space until exit
    }
    try {
      Files.deleteIfExists(mapped.absolutePath);
    } catch (java.io.IOException e) {
      // a leftover staged file is removed by the next cleanup of its directory
    }
    store.unstaged(charged);
  }

  private void enter() {
    synchronized (guard) {
      if (closed || moved) {
        throw new IllegalStateException(
            "staged file "
                + path()
                + " was "
                + (moved ? "moved into an artifact" : "closed")
                + "; its mapping is not this object's any more");
      }
      users++;
    }
  }

  private void leave() {
    synchronized (guard) {
      users--;
      if (users == 0) {
        guard.notifyAll();
      }
    }
  }

  private void check(long offset, int length) {
    if (offset < 0 || length < 0 || offset > size() - length) {
      throw new IndexOutOfBoundsException(
          "range ["
              + offset
              + ", "
              + (offset + length)
              + ") is outside staged file "
              + path()
              + ", which has "
              + size()
              + " bytes");
    }
  }

  @Override
  public String toString() {
    return "StagedFile[" + path() + ", " + size() + " bytes]";
  }
}
