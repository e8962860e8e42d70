package io.tensorcast.dataplane.store;

import com.sun.jna.Pointer;
import io.tensorcast.api.Reason;
import java.nio.ByteBuffer;
import java.nio.file.Path;

/**
 * One file of an artifact mapped {@code MAP_SHARED} read-write as a single contiguous mapping of
 * its whole size (none for an empty file). Not thread-safe by itself: {@link StoredArtifact} guards
 * it.
 */
final class MappedFile {
  final StoreFile file;
  final Path absolutePath;

  /** Start of the mapping; 0 for an empty file. */
  final long address;

  /**
   * Whether the file's pages are reserved before bytes are written into them: all at creation with
   * {@code posix_fallocate}, or range by range before each write ({@link #reserve}); false for the
   * {@code ftruncate} fallback on a file system without {@code posix_fallocate}.
   */
  final boolean preallocated;

  private MappedFile(StoreFile file, Path absolutePath, long address, boolean preallocated) {
    this.file = file;
    this.absolutePath = absolutePath;
    this.address = address;
    this.preallocated = preallocated;
  }

  /**
   * Creates the file (it must not exist), sizes it and maps it.
   *
   * @param reserveNow size it with {@code posix_fallocate} so that a tmpfs reserves its pages now
   *     (a full file system fails here with {@code FilesystemFull} rather than as a SIGBUS on a
   *     later write through the mapping), falling back to {@code ftruncate} when the file system
   *     does not support it; false: size it with {@code ftruncate}, the writer reserves each range
   *     with {@link #reserve} before writing it
   */
  static MappedFile create(String artifactId, StoreFile file, Path absolutePath, boolean reserveNow)
      throws StoreException {
    int fd;
    try {
      fd = MemoryLockSupport.createExclusive(absolutePath);
    } catch (ErrnoException e) {
      throw new StoreException(
          Reason.StoreIoError,
          "artifact " + artifactId + ": cannot create file: " + e.getMessage(),
          e);
    }
    try {
      boolean preallocated = true;
      if (file.size() > 0 && !reserveNow) {
        MemoryLockSupport.ftruncate(fd, file.size(), absolutePath);
      } else if (file.size() > 0) {
        int err = MemoryLockSupport.fallocate(fd, file.size());
        if (err == MemoryLockSupport.ENOSPC) {
          throw new StoreException(
              Reason.FilesystemFull,
              "artifact "
                  + artifactId
                  + ": no space left for file '"
                  + file.path()
                  + "' ("
                  + file.size()
                  + " bytes) on the file system of "
                  + absolutePath
                  + " (posix_fallocate: ENOSPC); the tmpfs is full or its size limit is lower"
                  + " than the store's budget");
        }
        if (err == MemoryLockSupport.EOPNOTSUPP || err == MemoryLockSupport.EINVAL) {
          preallocated = false;
          MemoryLockSupport.ftruncate(fd, file.size(), absolutePath);
        } else if (err != 0) {
          throw new ErrnoException("posix_fallocate(" + absolutePath + ")", err);
        }
      }
      long address =
          file.size() == 0 ? 0 : MemoryLockSupport.mmapShared(fd, file.size(), absolutePath);
      return new MappedFile(file, absolutePath, address, preallocated);
    } catch (ErrnoException e) {
      throw new StoreException(
          Reason.StoreIoError, "artifact " + artifactId + ": " + e.getMessage(), e);
    } finally {
      MemoryLockSupport.close(fd); // the mapping keeps the file open
    }
  }

  /** Maps an existing file of exactly {@code file.size()} bytes (re-adoption after a restart). */
  static MappedFile mapExisting(String artifactId, StoreFile file, Path absolutePath)
      throws StoreException {
    if (file.size() == 0) {
      return new MappedFile(file, absolutePath, 0, true);
    }
    int fd;
    try {
      fd = MemoryLockSupport.openExisting(absolutePath);
    } catch (ErrnoException e) {
      throw new StoreException(
          Reason.StoreIoError, "artifact " + artifactId + ": " + e.getMessage(), e);
    }
    try {
      return new MappedFile(
          file, absolutePath, MemoryLockSupport.mmapShared(fd, file.size(), absolutePath), true);
    } catch (ErrnoException e) {
      throw new StoreException(
          Reason.StoreIoError, "artifact " + artifactId + ": " + e.getMessage(), e);
    } finally {
      MemoryLockSupport.close(fd);
    }
  }

  long size() {
    return file.size();
  }

  /**
   * Allocates and maps the pages of bytes {@code [offset, offset + length)} writable now ({@code
   * MADV_POPULATE_WRITE}); under {@code MLOCK_ONFAULT} they are locked as they are. The caller
   * checked bounds.
   *
   * @return 0, or the error number ({@code EFAULT}: the file system is full; {@code ENOMEM})
   */
  int reserve(long offset, int length) {
    return length == 0
        ? 0
        : MemoryLockSupport.populateWrite(address + pageStart(offset), pagesTo(offset, length));
  }

  /**
   * Maps the pages of bytes {@code [offset, offset + length)}, written through the file before,
   * into the mapping now ({@code MADV_POPULATE_READ}); under {@code MLOCK_ONFAULT} they are locked
   * as they are. The caller checked bounds.
   *
   * @return 0, or the error number ({@code ENOMEM})
   */
  int mapWritten(long offset, long length) {
    return length == 0
        ? 0
        : MemoryLockSupport.populateRead(address + pageStart(offset), pagesTo(offset, length));
  }

  /** The offset of the page that holds byte {@code offset}. */
  private static long pageStart(long offset) {
    long page = MemoryLockSupport.pageSize();
    return offset / page * page;
  }

  /** Bytes from {@code offset}'s page start to the end of the range (the file's end at most). */
  private long pagesTo(long offset, long length) {
    return Math.min(size(), offset + length) - pageStart(offset);
  }

  /**
   * The same mapping under a new name: the file was renamed (same file system, same inode), so the
   * mapping stays valid and only its bookkeeping changes.
   */
  MappedFile renamed(StoreFile newFile, Path newPath) {
    if (newFile.size() != file.size()) {
      throw new IllegalArgumentException(
          "a renamed file keeps its size: " + file.size() + " != " + newFile.size());
    }
    return new MappedFile(newFile, newPath, address, preallocated);
  }

  /** A direct buffer over bytes {@code [offset, offset + length)}; the caller checked bounds. */
  ByteBuffer buffer(long offset, int length) {
    if (length == 0) {
      return ByteBuffer.allocateDirect(0);
    }
    return new Pointer(address).getByteBuffer(offset, length);
  }

  void unmap() throws ErrnoException {
    if (address != 0) {
      MemoryLockSupport.munmap(address, file.size(), absolutePath);
    }
  }
}
