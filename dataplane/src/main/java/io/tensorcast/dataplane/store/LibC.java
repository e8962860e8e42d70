package io.tensorcast.dataplane.store;

import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.Structure;

/**
 * The few libc calls the store needs, bound with JNA. Constants are the Linux values (identical on
 * x86_64 and aarch64). Calls report failure the libc way (-1 or {@code MAP_FAILED}); read errno
 * with {@link Native#getLastError()} right after the call, on the same thread. {@code
 * posix_fallocate} returns the error number instead of setting errno.
 */
interface LibC extends Library {
  LibC INSTANCE = Native.load("c", LibC.class);

  int O_RDWR = 2;
  int O_CREAT = 0100;
  int O_EXCL = 0200;
  int O_CLOEXEC = 02000000;

  int PROT_READ = 1;
  int PROT_WRITE = 2;
  int MAP_SHARED = 1;
  long MAP_FAILED = -1L;

  int MADV_DONTDUMP = 16;
  int MADV_POPULATE_READ = 22;
  int MADV_POPULATE_WRITE = 23;
  int MLOCK_ONFAULT = 1;
  int MAP_PRIVATE = 2;
  int MAP_ANONYMOUS = 0x20;

  int RLIMIT_MEMLOCK = 8;
  int SC_PAGESIZE = 30;

  /** The kernel's {@code struct rlimit}; {@code -1} means {@code RLIM_INFINITY}. */
  @Structure.FieldOrder({"rlim_cur", "rlim_max"})
  class Rlimit extends Structure {
    public long rlim_cur;
    public long rlim_max;
  }

  int open(String path, int flags, int mode);

  int close(int fd);

  int ftruncate(int fd, long length);

  int posix_fallocate(int fd, long offset, long len);

  Pointer mmap(Pointer addr, long length, int prot, int flags, int fd, long offset);

  int munmap(Pointer addr, long length);

  int mlock(Pointer addr, long len);

  int munlock(Pointer addr, long len);

  int mlock2(Pointer addr, long len, int flags);

  int madvise(Pointer addr, long len, int advice);

  int getrlimit(int resource, Rlimit rlim);

  long sysconf(int name);
}
