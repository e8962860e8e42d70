package io.tensorcast.dataplane.store;

import com.sun.jna.Native;
import com.sun.jna.Pointer;
import io.tensorcast.api.Reason;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/**
 * Native glue for page-locked memory: {@code mmap}/{@code munmap}/{@code mlock}/{@code
 * mlock2}/{@code munlock}/{@code madvise}, {@code posix_fallocate}, {@code
 * getrlimit(RLIMIT_MEMLOCK)} through JNA, the process's {@code CAP_IPC_LOCK} (bit 14 of {@code
 * CapEff} in {@code /proc/self/status}) and errno names. Stateless: every call reads the kernel's
 * current values.
 *
 * <p>The rule being explained (mlock(2), capabilities(7)): a process without {@code CAP_IPC_LOCK}
 * in its <em>effective</em> set may lock at most {@code RLIMIT_MEMLOCK} bytes in total ({@code
 * VmLck}); above that {@code mlock} fails with {@code ENOMEM} ({@code EPERM} when the limit is 0).
 * A capability added to a container reaches the effective set only for a root user (or as an
 * ambient capability), so a non-root data plane is limited by {@code RLIMIT_MEMLOCK} even with
 * {@code IPC_LOCK} added.
 */
public final class MemoryLockSupport {
  /** The capability number of {@code CAP_IPC_LOCK} (linux/capability.h). */
  public static final int CAP_IPC_LOCK = 14;

  static final int EPERM = 1;
  static final int EINTR = 4;
  static final int EFAULT = 14;
  static final int ENOSYS = 38;
  static final int EAGAIN = 11;
  static final int ENOMEM = 12;
  static final int EINVAL = 22;
  static final int ENOSPC = 28;
  static final int EOPNOTSUPP = 95;

  private static final Map<Integer, String> ERRNO_NAMES =
      Map.ofEntries(
          Map.entry(1, "EPERM"),
          Map.entry(2, "ENOENT"),
          Map.entry(4, "EINTR"),
          Map.entry(5, "EIO"),
          Map.entry(9, "EBADF"),
          Map.entry(11, "EAGAIN"),
          Map.entry(12, "ENOMEM"),
          Map.entry(13, "EACCES"),
          Map.entry(14, "EFAULT"),
          Map.entry(16, "EBUSY"),
          Map.entry(17, "EEXIST"),
          Map.entry(19, "ENODEV"),
          Map.entry(20, "ENOTDIR"),
          Map.entry(21, "EISDIR"),
          Map.entry(22, "EINVAL"),
          Map.entry(23, "ENFILE"),
          Map.entry(24, "EMFILE"),
          Map.entry(27, "EFBIG"),
          Map.entry(28, "ENOSPC"),
          Map.entry(30, "EROFS"),
          Map.entry(36, "ENAMETOOLONG"),
          Map.entry(38, "ENOSYS"),
          Map.entry(95, "EOPNOTSUPP"));

  private static final Path PROC_SELF_STATUS = Path.of("/proc/self/status");

  private MemoryLockSupport() {}

  /**
   * What limits page-locking for this process right now.
   *
   * @param softLimitBytes {@code RLIMIT_MEMLOCK} soft limit in bytes; {@link Long#MAX_VALUE} when
   *     unlimited
   * @param hardLimitBytes {@code RLIMIT_MEMLOCK} hard limit in bytes; {@link Long#MAX_VALUE} when
   *     unlimited
   * @param capIpcLock whether {@code CAP_IPC_LOCK} is in the effective capability set
   * @param lockedBytes bytes this process already has locked ({@code VmLck})
   */
  public record Facts(
      long softLimitBytes, long hardLimitBytes, boolean capIpcLock, long lockedBytes) {

    /** Whether locking {@code moreBytes} more is within the rules (not whether memory suffices). */
    public boolean allows(long moreBytes) {
      return capIpcLock
          || softLimitBytes == Long.MAX_VALUE
          || lockedBytes + moreBytes <= softLimitBytes;
    }

    String describeLimit() {
      return "RLIMIT_MEMLOCK is "
          + bytesOrUnlimited(softLimitBytes)
          + " (soft) / "
          + bytesOrUnlimited(hardLimitBytes)
          + " (hard), this process already has "
          + lockedBytes
          + " bytes locked (VmLck), and CAP_IPC_LOCK is "
          + (capIpcLock ? "in effect" : "not in the effective capability set (CapEff)");
    }

    private static String bytesOrUnlimited(long v) {
      return v == Long.MAX_VALUE ? "unlimited" : v + " bytes";
    }
  }

  /** Reads {@code RLIMIT_MEMLOCK}, {@code CapEff} and {@code VmLck} of this process. */
  public static Facts facts() {
    LibC.Rlimit rl = new LibC.Rlimit();
    if (LibC.INSTANCE.getrlimit(LibC.RLIMIT_MEMLOCK, rl) != 0) {
      throw new IllegalStateException(
          "getrlimit(RLIMIT_MEMLOCK) failed with " + errnoName(Native.getLastError()));
    }
    String status = procSelfStatus();
    return new Facts(
        rl.rlim_cur < 0 ? Long.MAX_VALUE : rl.rlim_cur,
        rl.rlim_max < 0 ? Long.MAX_VALUE : rl.rlim_max,
        capIpcLockIn(status),
        vmLckBytesIn(status));
  }

  /** Whether {@code CAP_IPC_LOCK} is in this process's effective capability set. */
  public static boolean hasCapIpcLock() {
    return capIpcLockIn(procSelfStatus());
  }

  /** The system page size in bytes ({@code sysconf(_SC_PAGESIZE)}). */
  public static long pageSize() {
    return PageSize.VALUE;
  }

  /** The symbolic name of an errno value ({@code ENOMEM}, {@code EPERM}, ...), or "errno N". */
  public static String errnoName(int errno) {
    String name = ERRNO_NAMES.get(errno);
    return name != null ? name : "errno " + errno;
  }

  /** Whether bit {@value #CAP_IPC_LOCK} is set in the {@code CapEff:} line of a status text. */
  static boolean capIpcLockIn(String procStatus) {
    String hex = field(procStatus, "CapEff:");
    if (hex == null) {
      return false;
    }
    return (Long.parseUnsignedLong(hex, 16) & (1L << CAP_IPC_LOCK)) != 0;
  }

  /** Bytes of the {@code VmLck:} line ("VmLck: 123 kB"); 0 if absent. */
  static long vmLckBytesIn(String procStatus) {
    String v = field(procStatus, "VmLck:");
    if (v == null) {
      return 0;
    }
    String[] parts = v.split("\\s+");
    long n = Long.parseLong(parts[0]);
    return parts.length > 1 && parts[1].equalsIgnoreCase("kB") ? n * 1024 : n;
  }

  private static String field(String text, String key) {
    for (String line : text.split("\n")) {
      if (line.startsWith(key)) {
        return line.substring(key.length()).trim();
      }
    }
    return null;
  }

  private static String procSelfStatus() {
    try {
      return Files.readString(PROC_SELF_STATUS);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + PROC_SELF_STATUS, e);
    }
  }

  /**
   * Explains why {@code bytesAsked} could not be locked.
   *
   * @param errno the error of the failed {@code mlock}, or 0 when locking was not attempted because
   *     {@code facts} already show it would exceed the limit
   */
  static LockStatus failure(long bytesAsked, int errno, Facts facts) {
    String what =
        errno == 0
            ? "mlock of " + bytesAsked + " bytes was not attempted"
            : "mlock of " + bytesAsked + " bytes failed with " + errnoName(errno);
    boolean limitProblem = !facts.capIpcLock() && (errno == 0 || errno == ENOMEM || errno == EPERM);
    if (limitProblem) {
      long needed = facts.lockedBytes() + bytesAsked;
      return new LockStatus(
          false,
          0,
          Reason.MemlockLimitTooLow,
          what
              + ": "
              + facts.describeLimit()
              + ", so at most "
              + Math.max(0, facts.softLimitBytes() - facts.lockedBytes())
              + " more bytes may be locked. Run the data plane with"
              + " securityContext.capabilities.add: [IPC_LOCK] (as root: a non-root user does not"
              + " get added capabilities in its effective set), or raise the memlock limit to at"
              + " least "
              + needed
              + " bytes (ulimit -l, LimitMEMLOCK=), or load without page-locking"
              + " (spec.memory.pinned: false).");
    }
    return new LockStatus(
        false,
        0,
        Reason.LockFailed,
        what
            + ": "
            + facts.describeLimit()
            + ". The kernel could not lock the pages (EAGAIN: memory pressure; ENOMEM with the"
            + " capability: too many mappings, see vm.max_map_count); free memory or load without"
            + " page-locking (spec.memory.pinned: false).");
  }

  // ---- native calls used by the store (package-private) ----

  /** {@code open(path, O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC, 0644)}: creates a new file. */
  static int createExclusive(Path path) throws ErrnoException {
    int fd =
        LibC.INSTANCE.open(
            path.toString(), LibC.O_RDWR | LibC.O_CREAT | LibC.O_EXCL | LibC.O_CLOEXEC, 0644);
    if (fd < 0) {
      throw new ErrnoException("open(" + path + ")", Native.getLastError());
    }
    return fd;
  }

  /** {@code open(path, O_RDWR|O_CLOEXEC)}: opens an existing file. */
  static int openExisting(Path path) throws ErrnoException {
    int fd = LibC.INSTANCE.open(path.toString(), LibC.O_RDWR | LibC.O_CLOEXEC, 0);
    if (fd < 0) {
      throw new ErrnoException("open(" + path + ")", Native.getLastError());
    }
    return fd;
  }

  static void close(int fd) {
    LibC.INSTANCE.close(fd);
  }

  /** {@code posix_fallocate(fd, 0, length)}; returns 0 or the error number. */
  static int fallocate(int fd, long length) {
    return LibC.INSTANCE.posix_fallocate(fd, 0, length);
  }

  static void ftruncate(int fd, long length, Path path) throws ErrnoException {
    if (LibC.INSTANCE.ftruncate(fd, length) != 0) {
      throw new ErrnoException("ftruncate(" + path + ", " + length + ")", Native.getLastError());
    }
  }

  /** Maps {@code length} bytes of {@code fd} {@code MAP_SHARED} read-write; returns the address. */
  static long mmapShared(int fd, long length, Path path) throws ErrnoException {
    Pointer p =
        LibC.INSTANCE.mmap(null, length, LibC.PROT_READ | LibC.PROT_WRITE, LibC.MAP_SHARED, fd, 0);
    long address = Pointer.nativeValue(p);
    if (address == LibC.MAP_FAILED) {
      throw new ErrnoException("mmap(" + path + ", " + length + " bytes)", Native.getLastError());
    }
    // Model weights have no business in a core dump, whatever coredump_filter says; advisory only.
    LibC.INSTANCE.madvise(p, length, LibC.MADV_DONTDUMP);
    return address;
  }

  static void munmap(long address, long length, Path path) throws ErrnoException {
    if (LibC.INSTANCE.munmap(new Pointer(address), length) != 0) {
      throw new ErrnoException("munmap(" + path + ")", Native.getLastError());
    }
  }

  /** {@code mlock}; returns 0 or the error number. */
  static int mlock(long address, long length) {
    return LibC.INSTANCE.mlock(new Pointer(address), length) == 0 ? 0 : Native.getLastError();
  }

  /**
   * {@code mlock2(address, length, MLOCK_ONFAULT)}: pages of the range are locked as they are first
   * touched instead of all at once now (Linux 4.4); the whole range counts against {@code
   * RLIMIT_MEMLOCK} now. Returns 0 or the error number; {@link #ENOSYS} when the C library has no
   * {@code mlock2}.
   */
  static int mlockOnFault(long address, long length) {
    try {
      return LibC.INSTANCE.mlock2(new Pointer(address), length, LibC.MLOCK_ONFAULT) == 0
          ? 0
          : Native.getLastError();
    } catch (UnsatisfiedLinkError noSymbol) {
      return ENOSYS;
    }
  }

  /**
   * {@code madvise(address, length, MADV_POPULATE_WRITE)}: allocates and maps the pages of the
   * range writable now, with the error a write would otherwise get as {@code SIGBUS} ({@code
   * EFAULT}: the file system is full; {@code ENOMEM}: out of memory) returned instead. Returns 0 or
   * the error number; retried on {@code EINTR}.
   */
  static int populateWrite(long address, long length) {
    return populate(address, length, LibC.MADV_POPULATE_WRITE);
  }

  /**
   * {@code madvise(address, length, MADV_POPULATE_READ)}: maps the range's pages, which exist
   * already (bytes were written to them through the file), into this process's page tables now, in
   * one call instead of a page fault per page on first touch; under {@code MLOCK_ONFAULT} they are
   * locked as they are mapped. Linux 5.14, like {@link #populateWrite}. Returns 0 or the error
   * number; retried on {@code EINTR}.
   */
  static int populateRead(long address, long length) {
    return populate(address, length, LibC.MADV_POPULATE_READ);
  }

  /** {@code madvise(address, length, advice)}, retried on {@code EINTR}: 0 or the error number. */
  private static int populate(long address, long length, int advice) {
    while (true) {
      if (LibC.INSTANCE.madvise(new Pointer(address), length, advice) == 0) {
        return 0;
      }
      int err = Native.getLastError();
      if (err != EINTR) {
        return err;
      }
    }
  }

  /** Whether the kernel knows {@code MADV_POPULATE_WRITE} (Linux 5.14); asked once. */
  static boolean populateWriteSupported() {
    return PopulateWrite.SUPPORTED;
  }

  /** {@code munlock}; returns 0 or the error number. */
  static int munlock(long address, long length) {
    return LibC.INSTANCE.munlock(new Pointer(address), length) == 0 ? 0 : Native.getLastError();
  }

  private static final class PopulateWrite {
    // An unknown advice is EINVAL before the length is looked at; a known one with length 0 is 0.
    static final boolean SUPPORTED = probe();

    private static boolean probe() {
      Pointer p =
          LibC.INSTANCE.mmap(
              null,
              pageSize(),
              LibC.PROT_READ | LibC.PROT_WRITE,
              LibC.MAP_PRIVATE | LibC.MAP_ANONYMOUS,
              -1,
              0);
      if (Pointer.nativeValue(p) == LibC.MAP_FAILED) {
        return false;
      }
      try {
        return LibC.INSTANCE.madvise(p, 0, LibC.MADV_POPULATE_WRITE) == 0;
      } finally {
        LibC.INSTANCE.munmap(p, pageSize());
      }
    }
  }

  private static final class PageSize {
    static final long VALUE = LibC.INSTANCE.sysconf(LibC.SC_PAGESIZE);
  }
}
