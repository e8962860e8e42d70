package io.tensorcast.dataplane.store;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.source.DigestHasher;
import io.tensorcast.dataplane.source.PublishedDigest.Algorithm;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Consumer;

/**
 * One artifact held by a {@link PinnedStore}: its files under {@code <root>/<artifactId>/}, each
 * mapped {@code MAP_SHARED} read-write as one contiguous mapping and page-locked per the store's
 * {@link LockPolicy}. Consumers on the node open or mmap {@link #directory()} as a normal local
 * model directory.
 *
 * <p><b>Ranges and windows.</b> Every method takes a byte range {@code [offset, offset + length)}
 * of one file; {@code offset} is a {@code long} (files may exceed 2 GiB), {@code length} an {@code
 * int}. Because each file is a single mapping, any range inside the file is accepted wherever it
 * lies: ranges never have to avoid window boundaries. The store's window size (default 1 GiB) is
 * only the unit in which pages are locked (in parallel) and hashed.
 *
 * <p><b>Buffers and unload.</b> {@link #write}, {@link #read}, {@link #sha256} and {@link
 * #markComplete} hold the artifact's read lock while they touch the mapping, so {@link
 * PinnedStore#unload} waits for them and they fail with {@link IllegalStateException} afterwards.
 * The zero-copy buffers of {@link #writable} and {@link #readOnly} point straight into the mapping
 * and cannot be guarded: using one after the artifact is unloaded or the store closed touches
 * unmapped memory and crashes the JVM. Callers must finish with them before unloading.
 *
 * <p>Thread-safe: different ranges may be written concurrently. Completed files are read-only.
 */
public final class StoredArtifact {
  private final String artifactId;
  private final Path directory;
  private final Path stateFile;
  private final List<StoreFile> files;
  private final Map<String, MappedFile> mapped;
  private final long windowBytes;
  private final long bytesAllocated;
  private final long chargedBytes;
  private final boolean preallocated;
  private final boolean reserveOnWrite;

  private final ReentrantReadWriteLock guard = new ReentrantReadWriteLock();
  private boolean released; // guarded by guard's write lock
  private volatile LockStatus lockStatus;

  /** The {@link ContentDigest} (its written form) of each complete file. */
  private final Map<String, String> digestByPath = new ConcurrentHashMap<>();

  private final Map<String, StoredRanges> storedByPath = new ConcurrentHashMap<>();
  private final java.util.concurrent.atomic.AtomicLong rangesWrittenAt =
      new java.util.concurrent.atomic.AtomicLong(System.nanoTime());

  /** The stored ranges are written to their file at most every 20 ms while they grow. */
  private static final long RANGES_WRITE_INTERVAL_NANOS = 20_000_000L;

  private final Object stateWrite = new Object();

  /** Forces data files and directories to the device before a record claims their bytes. */
  private volatile FileSync fileSync = FileSync.FSYNC;

  /** Paths with ranges recorded since their bytes were last forced to the device. */
  private final java.util.Set<String> unsynced = ConcurrentHashMap.newKeySet();

  /** Whether the directory entries of every file were forced to the device. */
  private volatile boolean directoriesSynced;

  private StoredArtifact(
      String artifactId,
      Path directory,
      Path stateFile,
      List<MappedFile> mappedFiles,
      long windowBytes,
      long chargedBytes,
      boolean reserveOnWrite) {
    this.artifactId = artifactId;
    this.directory = directory;
    this.stateFile = stateFile;
    Map<String, MappedFile> m = new LinkedHashMap<>();
    long total = 0;
    boolean pre = true;
    for (MappedFile f : mappedFiles) {
      m.put(f.file.path(), f);
      total += f.size();
      pre &= f.preallocated;
    }
    this.mapped = m;
    this.files = mappedFiles.stream().map(f -> f.file).toList();
    this.windowBytes = windowBytes;
    this.bytesAllocated = total;
    this.chargedBytes = chargedBytes;
    this.preallocated = pre;
    this.reserveOnWrite = reserveOnWrite;
  }

  // ---------------------------------------------------------------- creation (package-private)

  /**
   * Writes the state file (no file complete), then creates, sizes and maps every file in parallel.
   * On failure removes everything it created.
   *
   * @param reserveOnWrite size the files without reserving their pages; every {@link #writable} and
   *     {@link #write} reserves the pages of its range first ({@code MADV_POPULATE_WRITE}), and a
   *     {@link #openRange} writer's writes allocate them and map them after ({@code
   *     MADV_POPULATE_READ}). False: every page is reserved now ({@code posix_fallocate})
   */
  static StoredArtifact create(
      String artifactId,
      Path directory,
      Path stateFile,
      List<StoreFile> files,
      long windowBytes,
      long chargedBytes,
      boolean reserveOnWrite,
      ExecutorService pool)
      throws StoreException {
    List<MappedFile> done = new ArrayList<>();
    boolean ok = false;
    boolean createdDirectory = false;
    try {
      ArtifactState.writeAtomically(
          stateFile,
          new ArtifactState(
              ArtifactState.FORMAT_VERSION,
              artifactId,
              files.stream()
                  .map(f -> new ArtifactState.FileState(f.path(), f.size(), null))
                  .toList()));
      Files.createDirectory(directory);
      createdDirectory = true;
      for (StoreFile f : files) {
        Files.createDirectories(directory.resolve(f.path()).getParent());
      }
      List<Callable<MappedFile>> tasks = new ArrayList<>();
      for (StoreFile f : files) {
        tasks.add(
            () -> MappedFile.create(artifactId, f, directory.resolve(f.path()), !reserveOnWrite));
      }
      StoreException failure = runAll(pool, tasks, done);
      if (failure != null) {
        throw failure;
      }
      ok = true;
      return new StoredArtifact(
          artifactId, directory, stateFile, done, windowBytes, chargedBytes, reserveOnWrite);
    } catch (IOException e) {
      throw StoreException.ioError(artifactId, "cannot create", directory, e);
    } finally {
      if (!ok) {
        unmapQuietly(done);
        deleteQuietly(stateFile, createdDirectory ? directory : null);
      }
    }
  }

  /**
   * Creates an artifact from staged files moved in whole (renamed on the same file system: the
   * bytes and their mapping stay where they are) and fresh files created as {@link #create} does.
   * Writes the state file first (no file complete). On failure everything created is removed and
   * every staged file already moved is renamed back and left to its owner.
   *
   * @param moveIn staged file per artifact path, for the files that are moved in; the others are
   *     created empty at their size
   */
  static StoredArtifact install(
      String artifactId,
      Path directory,
      Path stateFile,
      List<StoreFile> files,
      Map<String, StagedFile> moveIn,
      long windowBytes,
      long chargedBytes,
      ExecutorService pool)
      throws StoreException {
    List<MappedFile> fresh = new ArrayList<>();
    Map<String, StagedFile> moved = new LinkedHashMap<>();
    boolean ok = false;
    boolean createdDirectory = false;
    try {
      ArtifactState.writeAtomically(
          stateFile,
          new ArtifactState(
              ArtifactState.FORMAT_VERSION,
              artifactId,
              files.stream()
                  .map(f -> new ArtifactState.FileState(f.path(), f.size(), null))
                  .toList()));
      Files.createDirectory(directory);
      createdDirectory = true;
      for (StoreFile f : files) {
        Files.createDirectories(directory.resolve(f.path()).getParent());
      }
      List<Callable<MappedFile>> tasks = new ArrayList<>();
      for (StoreFile f : files) {
        if (!moveIn.containsKey(f.path())) {
          tasks.add(() -> MappedFile.create(artifactId, f, directory.resolve(f.path()), true));
        }
      }
      StoreException failure = runAll(pool, tasks, fresh);
      if (failure != null) {
        throw failure;
      }
      Map<String, MappedFile> byPath = new HashMap<>();
      fresh.forEach(m -> byPath.put(m.file.path(), m));
      for (StoreFile f : files) {
        StagedFile from = moveIn.get(f.path());
        if (from == null) {
          continue;
        }
        if (from.size() != f.size()) {
          throw new StoreException(
              Reason.InvalidSize,
              "artifact "
                  + artifactId
                  + ": file '"
                  + f.path()
                  + "' is listed with "
                  + f.size()
                  + " bytes but its staged file "
                  + from.path()
                  + " has "
                  + from.size());
        }
        Path target = directory.resolve(f.path());
        Path source = from.path();
        from.markMoved();
        try {
          Files.move(source, target, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
          from.unmarkMoved();
          throw e;
        }
        moved.put(f.path(), from);
        byPath.put(f.path(), from.mapped().renamed(f, target));
      }
      List<MappedFile> ordered = new ArrayList<>();
      for (StoreFile f : files) {
        ordered.add(byPath.get(f.path()));
      }
      ok = true;
      // Staged files were written before; the fresh ones are reserved up front like them.
      return new StoredArtifact(
          artifactId, directory, stateFile, ordered, windowBytes, chargedBytes, false);
    } catch (IOException e) {
      throw StoreException.ioError(artifactId, "cannot install into", directory, e);
    } finally {
      if (!ok) {
        for (Map.Entry<String, StagedFile> m : moved.entrySet()) {
          try {
            Files.move(
                directory.resolve(m.getKey()), m.getValue().path(), StandardCopyOption.ATOMIC_MOVE);
          } catch (IOException ignored) {
            // the staged file's bytes are lost with the directory below; its owner closes it
          }
          m.getValue().unmarkMoved();
        }
        unmapQuietly(fresh);
        deleteQuietly(stateFile, createdDirectory ? directory : null);
      }
    }
  }

  /**
   * Lays the artifact held as {@code old} out again as {@code files}, in the same directory: every
   * file of {@code old} with the same path and size is carried over as it is (its mapping, page
   * lock, bytes, recorded digest when complete, and stored ranges with their source version); the
   * other files of {@code old} are unmapped and deleted; the files that are new (or whose size
   * changed) are created empty as {@link #create} does. Then the state file and the stored ranges
   * are written for the new layout. {@code old} is unusable afterwards (as after an unload), and
   * the zero-copy buffers it handed out must no longer be used.
   *
   * @param chargedBytes the new layout's page-rounded size
   * @throws StoreException {@code StoreIoError}, {@code FilesystemFull}; then nothing of either
   *     layout stays mapped (the caller removes the directory)
   */
  static StoredArtifact relayout(
      StoredArtifact old, List<StoreFile> files, long chargedBytes, ExecutorService pool)
      throws StoreException {
    String id = old.artifactId;
    Map<String, MappedFile> carried = new LinkedHashMap<>();
    List<MappedFile> dropped = new ArrayList<>();
    Map<String, String> digests = new HashMap<>();
    Map<String, StoredRanges> ranges = new HashMap<>();
    old.guard.writeLock().lock();
    try {
      old.checkLive();
      old.released = true;
      Map<String, Long> wanted = new HashMap<>();
      files.forEach(f -> wanted.put(f.path(), f.size()));
      for (MappedFile m : old.mapped.values()) {
        Long size = wanted.get(m.file.path());
        if (size != null && size == m.size()) {
          carried.put(m.file.path(), m);
          String digest = old.digestByPath.get(m.file.path());
          if (digest != null) {
            digests.put(m.file.path(), digest);
          }
          StoredRanges r = old.storedByPath.get(m.file.path());
          if (r != null) {
            ranges.put(m.file.path(), r);
          }
        } else {
          dropped.add(m);
        }
      }
    } finally {
      old.guard.writeLock().unlock();
    }
    LockStatus oldLock = old.lockStatus;
    List<MappedFile> fresh = new ArrayList<>();
    boolean ok = false;
    try {
      while (!dropped.isEmpty()) {
        MappedFile m = dropped.remove(dropped.size() - 1);
        if (oldLock != null && oldLock.lockedBytes() > 0 && m.size() > 0) {
          MemoryLockSupport.munlock(m.address, m.size());
        }
        m.unmap();
        Files.deleteIfExists(m.absolutePath);
        deleteEmptyParents(old.directory, m.absolutePath.getParent());
      }
      List<Callable<MappedFile>> tasks = new ArrayList<>();
      for (StoreFile f : files) {
        if (!carried.containsKey(f.path())) {
          Path target = old.directory.resolve(f.path());
          Path parent = target.getParent();
          if (parent != null) {
            Files.createDirectories(parent);
          }
          tasks.add(() -> MappedFile.create(id, f, target, !old.reserveOnWrite));
        }
      }
      StoreException failure = runAll(pool, tasks, fresh);
      if (failure != null) {
        throw failure;
      }
      Map<String, MappedFile> byPath = new HashMap<>(carried);
      fresh.forEach(m -> byPath.put(m.file.path(), m));
      List<MappedFile> ordered = new ArrayList<>();
      for (StoreFile f : files) {
        ordered.add(byPath.get(f.path()));
      }
      StoredArtifact a =
          new StoredArtifact(
              id,
              old.directory,
              old.stateFile,
              ordered,
              old.windowBytes,
              chargedBytes,
              old.reserveOnWrite);
      a.fileSync = old.fileSync;
      old.unsynced.stream().filter(carried::containsKey).forEach(a.unsynced::add);
      a.digestByPath.putAll(digests);
      a.storedByPath.putAll(ranges);
      a.lockStatus = oldLock;
      synchronized (a.stateWrite) {
        ArtifactState.writeAtomically(a.stateFile, a.currentState());
        StoredRanges.write(a.rangesFile(), a.storedByPath);
      }
      ok = true;
      return a;
    } catch (IOException e) {
      throw StoreException.ioError(id, "cannot lay out again", old.directory, e);
    } finally {
      if (!ok) {
        unmapQuietly(fresh);
        unmapQuietly(new ArrayList<>(carried.values()));
        unmapQuietly(dropped);
      }
    }
  }

  /** Deletes {@code dir} and its parents up to (not including) {@code top} while they are empty. */
  private static void deleteEmptyParents(Path top, Path dir) {
    for (Path d = dir; d != null && d.startsWith(top) && !d.equals(top); d = d.getParent()) {
      try {
        Files.delete(d);
      } catch (IOException e) {
        return; // not empty (or gone): its parents are not empty either
      }
    }
  }

  /**
   * Maps the files of a complete artifact found on start and checks each file's bytes against the
   * {@link ContentDigest} its state file recorded, with that digest's algorithm, in parallel.
   *
   * @throws StoreException {@code ChecksumMismatch} if a file's bytes changed, {@code StoreIoError}
   *     if it cannot be mapped; nothing stays mapped
   */
  static StoredArtifact adopt(
      ArtifactState state,
      Path directory,
      Path stateFile,
      long windowBytes,
      long chargedBytes,
      ExecutorService pool)
      throws StoreException {
    return adopt(state, Map.of(), directory, stateFile, windowBytes, chargedBytes, pool);
  }

  /**
   * As {@link #adopt(ArtifactState, Path, Path, long, long, ExecutorService)}, for a copy whose
   * incomplete files have the {@code stored} ranges a load recorded before its process ended: the
   * complete files are re-hashed, the incomplete ones keep their ranges for the next load.
   */
  static StoredArtifact adopt(
      ArtifactState state,
      Map<String, StoredRanges> stored,
      Path directory,
      Path stateFile,
      long windowBytes,
      long chargedBytes,
      ExecutorService pool)
      throws StoreException {
    String id = state.artifactId();
    List<MappedFile> done = new ArrayList<>();
    List<Callable<MappedFile>> tasks = new ArrayList<>();
    for (ArtifactState.FileState f : state.files()) {
      StoreFile sf = new StoreFile(f.path(), f.size());
      tasks.add(() -> MappedFile.mapExisting(id, sf, directory.resolve(f.path())));
    }
    StoreException failure = runAll(pool, tasks, done);
    if (failure != null) {
      unmapQuietly(done);
      throw failure;
    }
    StoredArtifact a =
        new StoredArtifact(id, directory, stateFile, done, windowBytes, chargedBytes, false);
    a.storedByPath.putAll(stored);
    List<Callable<String>> checks = new ArrayList<>();
    for (ArtifactState.FileState f : state.files()) {
      if (!f.complete()) {
        continue; // an incomplete copy: its stored ranges are checked by the load's digests
      }
      checks.add(
          () -> {
            ContentDigest recorded = ContentDigest.parse(f.digest());
            ContentDigest actual = a.digestOf(a.mapped.get(f.path()), recorded.algorithm());
            if (!actual.equals(recorded)) {
              throw new StoreException(
                  Reason.ChecksumMismatch,
                  "artifact "
                      + id
                      + ": file '"
                      + f.path()
                      + "' has "
                      + recorded.algorithm().label()
                      + " "
                      + actual.hex()
                      + " but was completed with "
                      + recorded.hex()
                      + "; its bytes changed after completion");
            }
            a.digestByPath.put(f.path(), actual.toString());
            return actual.toString();
          });
    }
    StoreException bad = runAll(pool, checks, new ArrayList<>());
    if (bad != null) {
      unmapQuietly(done);
      throw bad;
    }
    return a;
  }

  /** Runs the tasks on the pool; collects results into {@code done}; returns the first failure. */
  private static <T> StoreException runAll(
      ExecutorService pool, List<Callable<T>> tasks, List<T> done) {
    List<Future<T>> futures;
    try {
      futures = pool.invokeAll(tasks);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new StoreException(Reason.Interrupted, "interrupted while working on the store", e);
    }
    StoreException first = null;
    for (Future<T> f : futures) {
      try {
        done.add(f.get());
      } catch (ExecutionException e) {
        if (first == null) {
          first =
              e.getCause() instanceof StoreException se
                  ? se
                  : new StoreException(
                      Reason.StoreIoError, String.valueOf(e.getCause()), e.getCause());
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        if (first == null) {
          first =
              new StoreException(Reason.Interrupted, "interrupted while working on the store", e);
        }
      }
    }
    return first;
  }

  // ---------------------------------------------------------------- page-locking (package-private)

  /**
   * Locks every window of every file with {@code mlock}, windows in parallel on the pool. On any
   * failure unlocks what was locked and explains the failure; the artifact is then unlocked.
   */
  LockStatus lockPages(ExecutorService pool) {
    List<long[]> windows = windows();
    List<Callable<Integer>> tasks = new ArrayList<>();
    for (long[] w : windows) {
      tasks.add(() -> MemoryLockSupport.mlock(w[0], w[1]));
    }
    List<Integer> results = new ArrayList<>();
    StoreException interrupted = runAll(pool, tasks, results);
    int firstErr = 0;
    for (int i = 0; i < results.size(); i++) {
      if (results.get(i) != 0 && firstErr == 0) {
        firstErr = results.get(i);
      }
    }
    if (firstErr == 0 && interrupted == null) {
      return LockStatus.locked(bytesAllocated);
    }
    for (long[] w : windows) {
      MemoryLockSupport.munlock(w[0], w[1]);
    }
    if (interrupted != null) {
      return new LockStatus(
          false, 0, Reason.LockFailed, "interrupted while locking: " + interrupted.getMessage());
    }
    return MemoryLockSupport.failure(chargedBytes, firstErr, MemoryLockSupport.facts());
  }

  /**
   * Locks every file's whole mapping with {@code MLOCK_ONFAULT}: no page is touched now; each is
   * locked as it is first mapped (an artifact made with {@code reserveOnWrite}, whose writes map
   * their pages: before a write through the mapping, after one through the file). On failure
   * unlocks what was locked.
   *
   * @return the status, or null when the kernel or C library cannot lock on fault ({@code ENOSYS},
   *     {@code EINVAL}): then lock with {@link #lockPages} instead
   */
  LockStatus lockOnFault() {
    List<MappedFile> locked = new ArrayList<>();
    int err = 0;
    for (MappedFile f : mapped.values()) {
      if (f.size() == 0) {
        continue;
      }
      err = MemoryLockSupport.mlockOnFault(f.address, f.size());
      if (err != 0) {
        break;
      }
      locked.add(f);
    }
    if (err == 0) {
      return new LockStatus(
          true,
          bytesAllocated,
          Reason.Locked,
          bytesAllocated
              + " bytes page-locked with mlock2(MLOCK_ONFAULT): each page is locked as its bytes"
              + " are stored");
    }
    for (MappedFile f : locked) {
      MemoryLockSupport.munlock(f.address, f.size());
    }
    if (err == MemoryLockSupport.ENOSYS || err == MemoryLockSupport.EINVAL) {
      return null;
    }
    return MemoryLockSupport.failure(chargedBytes, err, MemoryLockSupport.facts());
  }

  /** Whether writes reserve the pages of their range first (see {@link #create}). */
  boolean reservesOnWrite() {
    return reserveOnWrite;
  }

  void setLockStatus(LockStatus status) {
    this.lockStatus = status;
  }

  /** How data files and directories are forced to the device ({@link FileSync#forRoot}). */
  void setFileSync(FileSync sync) {
    this.fileSync = java.util.Objects.requireNonNull(sync, "sync");
  }

  /**
   * Forces the bytes of {@code paths} to the device, and once per layout the directory entries that
   * lead to every file (from each file's directory up to the store's root), so that a record
   * written next that claims those bytes is never on the device without them.
   */
  private void forceToDevice(java.util.Collection<String> paths) throws IOException {
    FileSync sync = fileSync;
    if (sync == FileSync.NONE) {
      return;
    }
    for (String p : paths) {
      sync.force(mapped.get(p).absolutePath);
    }
    if (!directoriesSynced && !paths.isEmpty()) {
      java.util.TreeSet<Path> dirs = new java.util.TreeSet<>(java.util.Comparator.reverseOrder());
      for (MappedFile f : mapped.values()) {
        for (Path d = f.absolutePath.getParent();
            d != null && d.startsWith(directory);
            d = d.getParent()) {
          dirs.add(d);
        }
      }
      if (directory.getParent() != null) {
        dirs.add(directory.getParent());
      }
      for (Path d : dirs) {
        sync.force(d);
      }
      directoriesSynced = true;
    }
  }

  /** {address, length} of every window of every non-empty file. */
  private List<long[]> windows() {
    List<long[]> w = new ArrayList<>();
    for (MappedFile f : mapped.values()) {
      for (long off = 0; off < f.size(); off += windowBytes) {
        w.add(new long[] {f.address + off, Math.min(windowBytes, f.size() - off)});
      }
    }
    return w;
  }

  /**
   * Unmaps every file (once), which unlocks its pages (a lock belongs to the mapping: {@code
   * munmap} removes it, and an {@code munlock} first would walk every page twice), then, if {@code
   * deleteFiles}, deletes the state file and the artifact directory. Waits for guarded operations
   * in flight.
   */
  void release(boolean deleteFiles) throws StoreException {
    guard.writeLock().lock();
    try {
      if (!released) {
        released = true;
        ErrnoException first = null;
        for (MappedFile f : mapped.values()) {
          try {
            f.unmap();
          } catch (ErrnoException e) {
            first = first == null ? e : first;
          }
        }
        if (first != null) {
          throw new StoreException(
              Reason.StoreIoError, "artifact " + artifactId + ": " + first.getMessage(), first);
        }
      }
      if (deleteFiles) {
        try {
          Files.deleteIfExists(stateFile);
          Files.deleteIfExists(rangesFile());
          FileTrees.deleteTree(directory);
        } catch (IOException e) {
          throw StoreException.ioError(artifactId, "cannot delete", directory, e);
        }
      }
    } finally {
      guard.writeLock().unlock();
    }
  }

  long chargedBytes() {
    return chargedBytes;
  }

  // ---------------------------------------------------------------- public API

  /** The artifact id (a DNS-1123 label). */
  public String artifactId() {
    return artifactId;
  }

  /** {@code <root>/<artifactId>}: holds exactly the artifact's files, laid out as listed. */
  public Path directory() {
    return directory;
  }

  /** The artifact's files in the order they were allocated. */
  public List<StoreFile> files() {
    return files;
  }

  /** Sum of the files' sizes in bytes. */
  public long bytesAllocated() {
    return bytesAllocated;
  }

  /** Whether the bytes are page-locked, and if not, why. */
  public LockStatus lockStatus() {
    return lockStatus;
  }

  /**
   * Whether every page is reserved before bytes are written into it through the mapping: range by
   * range by each {@link #writable} and {@link #write} ({@code MADV_POPULATE_WRITE}, Linux 5.14),
   * or on older kernels all at allocation with {@code posix_fallocate}. False when the file system
   * supports neither and the store fell back to {@code ftruncate}: pages are then allocated on
   * first write, and a full file system would surface as SIGBUS during a write through the mapping
   * (an {@link #openRange} writer's {@code pwrite} gets {@code ENOSPC} either way).
   */
  public boolean preallocated() {
    return preallocated;
  }

  /**
   * A writable buffer over bytes {@code [offset, offset + length)} of {@code path}: position 0,
   * limit {@code length}, big-endian like every new {@link ByteBuffer}. Zero-copy: writes land in
   * the file. See the class comment on using it after unload. The range's pages are reserved (and
   * locked, under the store's lock policy) before it is returned.
   *
   * @throws IllegalArgumentException if the artifact has no such file
   * @throws IndexOutOfBoundsException if the range is not inside the file
   * @throws IllegalStateException if the file is complete or the artifact was unloaded
   * @throws StoreWriteException if the range's pages cannot be reserved
   */
  public ByteBuffer writable(String path, long offset, int length) {
    guard.readLock().lock();
    try {
      MappedFile f = reservedForWrite(path, offset, length);
      return f.buffer(offset, length);
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * The file {@code path}, open for writing, with bytes {@code [offset, offset + length)} checked
   * to be inside it and their pages reserved (and locked, under the store's lock policy). Callers
   * hold the read lock of {@link #guard}.
   */
  private MappedFile reservedForWrite(String path, long offset, int length) {
    MappedFile f = fileForWrite(path);
    checkRange(f, offset, length);
    reserve(f, offset, length);
    return f;
  }

  /**
   * Copies {@code src}'s remaining bytes into {@code path} starting at {@code offset} and advances
   * {@code src}'s position. Safe against a concurrent unload. The range's pages are reserved (and
   * locked, under the store's lock policy) first.
   *
   * @throws IllegalArgumentException if the artifact has no such file
   * @throws IndexOutOfBoundsException if the range is not inside the file
   * @throws IllegalStateException if the file is complete or the artifact was unloaded
   * @throws StoreWriteException if the range's pages cannot be reserved
   */
  public void write(String path, long offset, ByteBuffer src) {
    guard.readLock().lock();
    try {
      MappedFile f = reservedForWrite(path, offset, src.remaining());
      f.buffer(offset, src.remaining()).put(src);
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * Opens bytes {@code [offset, offset + length)} of {@code path} for writing in order from heap
   * arrays by positional writes to the file ({@code pwrite}) rather than through the mapping; the
   * bytes land in the same pages the mapping shows. Writing through the file copies each byte once,
   * in the kernel, without faulting the pages into this process's page tables one by one, which on
   * a virtualized host costs more than the copy ({@code bench/README.md}, cold load, fourth run).
   * In an artifact whose writes reserve their pages ({@link #reservesOnWrite}), a write allocates
   * its pages itself (a full file system is that write's {@code FilesystemFull}, not a SIGBUS), and
   * every {@link RangeWriter#MAP_BATCH} bytes written are then mapped into the store's mapping in
   * one call ({@code MADV_POPULATE_READ}), which locks them under the store's lock policy and lets
   * the digests read them without a page fault; the pages are not zeroed first, as reserving them
   * for a write through the mapping does ({@code bench/README.md}, cold load, seventeenth run).
   * Otherwise the pages were reserved and locked when the artifact was allocated. Like a {@link
   * #writable} buffer, the writer must not be used after the artifact is unloaded (the bytes would
   * go to a deleted file); close it when the range is done.
   *
   * @throws IllegalArgumentException if the artifact has no such file
   * @throws IndexOutOfBoundsException if the range is not inside the file
   * @throws IllegalStateException if the file is complete or the artifact was unloaded
   * @throws StoreWriteException if the file cannot be opened
   */
  public RangeWriter openRange(String path, long offset, int length) {
    guard.readLock().lock();
    try {
      MappedFile f = fileForWrite(path);
      checkRange(f, offset, length);
      try {
        return new RangeWriter(
            FileChannel.open(f.absolutePath, StandardOpenOption.WRITE), f, offset, length);
      } catch (IOException e) {
        throw new StoreWriteException(
            Reason.StoreIoError,
            "artifact " + artifactId + ": cannot open '" + f.file.path() + "' to write: " + e);
      }
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * {@link MappedFile#mapWritten} under the artifact's read lock: 0 when the artifact was released
   * meanwhile (unloaded, and the load fails on its own; or laid out anew around the same files,
   * where the pages are mapped, and locked, when they are first read).
   */
  private int mapStoredPages(MappedFile f, long offset, long length) {
    guard.readLock().lock();
    try {
      return released ? 0 : f.mapWritten(offset, length);
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * Bytes of one range of a file, written in order by positional writes ({@link #openRange}). Not
   * thread-safe; one per range.
   */
  public final class RangeWriter implements AutoCloseable {
    /** Bytes written between two calls that map them into the store's mapping (see above). */
    static final int MAP_BATCH = 2 << 20;

    private final FileChannel channel;
    private final MappedFile file;
    private final long end;
    private long position;

    /** The range's bytes before this one are mapped (always, without {@link #reserveOnWrite}). */
    private long mappedUpTo;

    private RangeWriter(FileChannel channel, MappedFile file, long offset, int length) {
      this.channel = channel;
      this.file = file;
      this.position = offset;
      this.end = offset + length;
      this.mappedUpTo = reserveOnWrite ? offset : end;
    }

    /**
     * Writes {@code b[off, off + len)} as the range's next bytes.
     *
     * @throws IndexOutOfBoundsException if they would pass the end of the range
     * @throws StoreWriteException if the file cannot be written (the file system is full: {@code
     *     FilesystemFull}; another I/O error: {@code StoreIoError})
     */
    public void write(byte[] b, int off, int len) {
      java.util.Objects.checkFromIndexSize(off, len, b.length);
      if (len > end - position) {
        throw new IndexOutOfBoundsException(
            len + " bytes at " + position + " pass the end of the range at " + end);
      }
      ByteBuffer src = ByteBuffer.wrap(b, off, len);
      try {
        while (src.hasRemaining()) {
          position += channel.write(src, position);
        }
      } catch (IOException e) {
        String m = String.valueOf(e.getMessage());
        throw new StoreWriteException(
            m.contains("No space left")
                ? Reason.FilesystemFull
                : m.contains("Cannot allocate memory")
                    ? Reason.InsufficientMemory
                    : Reason.StoreIoError,
            "artifact "
                + artifactId
                + ": writing bytes at "
                + position
                + " of '"
                + file.file.path()
                + "' failed: "
                + e
                + (m.contains("No space left")
                    ? " (the file system of "
                        + directory
                        + " is full or its size limit is lower than the store's budget)"
                    : ""));
      }
      if (position - mappedUpTo >= MAP_BATCH || position == end) {
        mapWritten();
      }
    }

    /** Maps the bytes written and not mapped yet into the store's mapping (see above). */
    private void mapWritten() {
      if (mappedUpTo >= position) {
        return;
      }
      int err = mapStoredPages(file, mappedUpTo, position - mappedUpTo);
      if (err != 0) {
        throw new StoreWriteException(
            err == MemoryLockSupport.ENOMEM || err == MemoryLockSupport.EAGAIN
                ? Reason.InsufficientMemory
                : Reason.StoreIoError,
            "artifact "
                + artifactId
                + ": cannot map the pages of bytes ["
                + mappedUpTo
                + ", "
                + position
                + ") of '"
                + file.file.path()
                + "' written through the file ("
                + MemoryLockSupport.errnoName(err)
                + ")");
      }
      mappedUpTo = position;
    }

    /** Where the next byte goes in the file. */
    public long position() {
      return position;
    }

    /**
     * Maps what was written and not mapped yet (a range that stopped early), then closes the file.
     *
     * @throws StoreWriteException if those pages cannot be mapped
     */
    @Override
    public void close() {
      try {
        mapWritten();
      } finally {
        try {
          channel.close();
        } catch (IOException ignored) {
          // Positional writes are complete when write returns; closing frees the descriptor only.
        }
      }
    }
  }

  /**
   * A read-only buffer over bytes {@code [offset, offset + length)} of {@code path}, complete or
   * not. Zero-copy; see the class comment on using it after unload.
   *
   * @throws IllegalArgumentException if the artifact has no such file
   * @throws IndexOutOfBoundsException if the range is not inside the file
   * @throws IllegalStateException if the artifact was unloaded
   */
  public ByteBuffer readOnly(String path, long offset, int length) {
    guard.readLock().lock();
    try {
      MappedFile f = file(path);
      checkRange(f, offset, length);
      return f.buffer(offset, length).asReadOnlyBuffer();
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * Copies bytes of {@code path} starting at {@code offset} into {@code dst}'s remaining space and
   * advances its position. Safe against a concurrent unload.
   *
   * @throws IndexOutOfBoundsException if {@code [offset, offset + dst.remaining())} is not inside
   *     the file
   */
  public void read(String path, long offset, ByteBuffer dst) {
    guard.readLock().lock();
    try {
      MappedFile f = file(path);
      checkRange(f, offset, dst.remaining());
      dst.put(f.buffer(offset, dst.remaining()));
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * Hands a read-only view of bytes {@code [offset, offset + length)} of {@code path} to {@code
   * reader} while holding the artifact's read lock, so an unload waits until it returns (unlike
   * {@link #readOnly}, whose buffer must not outlive the artifact). For hashing a file's bytes in
   * place.
   *
   * @throws IllegalArgumentException if the artifact has no such file
   * @throws IndexOutOfBoundsException if the range is not inside the file
   * @throws IllegalStateException if the artifact was unloaded
   */
  public void consume(String path, long offset, int length, Consumer<ByteBuffer> reader) {
    guard.readLock().lock();
    try {
      MappedFile f = file(path);
      checkRange(f, offset, length);
      reader.accept(f.buffer(offset, length).asReadOnlyBuffer());
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * Like {@link #consume}, but the bytes are read from the file ({@code pread}) into {@code chunk},
   * a buffer of the caller (direct: one copy, by the kernel; heap: the JDK copies through a
   * temporary direct buffer), and handed to {@code reader} one chunk at a time (each a view of
   * {@code chunk}, position 0); the artifact's read lock is held throughout. For hashing bytes that
   * an earlier process stored: reading them through the file takes no page faults in this one,
   * whose mapping does not have their pages yet (bytes written here by an {@link #openRange} writer
   * or into a {@link #writable} buffer are mapped already, and {@link #consume} reads them without
   * a copy).
   *
   * @throws IllegalArgumentException if the artifact has no such file
   * @throws IndexOutOfBoundsException if the range is not inside the file
   * @throws IllegalStateException if the artifact was unloaded
   * @throws java.io.UncheckedIOException if the file cannot be read
   */
  public void consumeFromFile(
      String path, long offset, int length, ByteBuffer chunk, Consumer<ByteBuffer> reader) {
    if (chunk.isReadOnly() || chunk.capacity() == 0) {
      throw new IllegalArgumentException("chunk must be a non-empty writable buffer");
    }
    guard.readLock().lock();
    try {
      MappedFile f = file(path);
      checkRange(f, offset, length);
      try (FileChannel channel = FileChannel.open(f.absolutePath, StandardOpenOption.READ)) {
        long at = offset;
        long end = offset + length;
        while (at < end) {
          chunk.clear().limit((int) Math.min(chunk.capacity(), end - at));
          while (chunk.hasRemaining()) {
            int n = channel.read(chunk, at + chunk.position());
            if (n < 0) {
              throw new java.io.EOFException(
                  "artifact "
                      + artifactId
                      + ": '"
                      + path
                      + "' ended at "
                      + (at + chunk.position())
                      + " although it has "
                      + f.size()
                      + " bytes");
            }
          }
          chunk.flip();
          at += chunk.remaining();
          reader.accept(chunk);
        }
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(
            "artifact " + artifactId + ": reading '" + path + "' from the store failed: " + e, e);
      }
    } finally {
      guard.readLock().unlock();
    }
  }

  /** Lowercase hex SHA-256 of the file's current bytes, computed over the mapping. */
  public String sha256(String path) {
    guard.readLock().lock();
    try {
      return digestOf(file(path), Algorithm.SHA256).hex();
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * Marks {@code path} complete: computes its SHA-256 over the mapping, records it in the state
   * file (atomically) and makes the file read-only for {@link #writable} and {@link #write}. Only
   * complete artifacts survive a restart of the store. Marking a complete file again keeps the
   * digest it was completed with.
   *
   * @return the file's lowercase hex SHA-256 (computed when it was completed with another digest)
   */
  public String markComplete(String path) throws StoreException {
    return markComplete(path, null);
  }

  /**
   * As {@link #markComplete(String)}, but first checks the bytes against {@code expectedSha256}
   * (hex, any case; null to skip), e.g. the Hub's LFS linked ETag.
   *
   * @throws StoreException {@code ChecksumMismatch} with both hashes; the file stays incomplete
   */
  public String markComplete(String path, String expectedSha256) throws StoreException {
    String recorded = complete(path, expectedSha256, null);
    ContentDigest d = ContentDigest.parse(recorded);
    return d.isSha256() ? d.hex() : sha256(path);
  }

  /**
   * Marks {@code path} complete with a digest its writer computed over its bytes in the store after
   * the last write (e.g. as the bytes arrived), without hashing the file again: recorded in the
   * state file, and the file becomes read-only. The caller vouches that no byte changed since; a
   * restarted store re-hashes the file with the digest's algorithm before adopting it.
   *
   * @param digestOfStoredBytes the {@link ContentDigest} of the file's bytes in the store, in its
   *     written form (hex of any case for SHA-256, {@code <algorithm>:<hex>} otherwise)
   * @return the recorded digest's written form (the earlier one if the file was complete already)
   * @throws IllegalArgumentException if {@code digestOfStoredBytes} is not a content digest
   */
  public String markCompleteHashed(String path, String digestOfStoredBytes) throws StoreException {
    ContentDigest digest;
    try {
      digest = ContentDigest.parse(digestOfStoredBytes);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(e.getMessage() + " for file '" + path + "'", e);
    }
    file(path);
    return complete(path, null, digest.toString());
  }

  private String complete(String path, String expectedSha256, String computed)
      throws StoreException {
    String recorded = digestByPath.get(path);
    String actual = recorded != null ? recorded : computed != null ? computed : sha256(path);
    String actualSha256 =
        expectedSha256 == null || ContentDigest.parse(actual).isSha256() ? actual : sha256(path);
    if (expectedSha256 != null && !expectedSha256.equalsIgnoreCase(actualSha256)) {
      throw new StoreException(
          Reason.ChecksumMismatch,
          "artifact "
              + artifactId
              + ": file '"
              + path
              + "' has sha256 "
              + actualSha256
              + " but "
              + expectedSha256.toLowerCase()
              + " was expected; the file stays incomplete");
    }
    if (recorded != null) {
      return recorded;
    }
    synchronized (stateWrite) {
      guard.readLock().lock();
      try {
        checkLive();
        try {
          forceToDevice(List.of(path));
        } catch (IOException e) {
          throw StoreException.ioError(
              artifactId, "cannot force to the device", directory.resolve(path), e);
        }
        digestByPath.putIfAbsent(path, actual);
        ArtifactState.writeAtomically(stateFile, currentState());
      } catch (IOException e) {
        digestByPath.remove(path, actual);
        throw StoreException.ioError(artifactId, "cannot write", stateFile, e);
      } finally {
        guard.readLock().unlock();
      }
    }
    return digestByPath.get(path);
  }

  /**
   * Records that bytes {@code [offset, offset + length)} of {@code path} are in the store, read
   * from the source object {@code version} (its ETag or other identity; null when the source has
   * none). Ranges recorded under another version are forgotten first. A later load of the same
   * files resumes from these ranges ({@link #storedRanges}) instead of reading them again; its
   * digest check still covers every byte.
   */
  public void recordStored(String path, String version, long offset, int length) {
    checkRange(file(path), offset, length);
    unsynced.add(path); // before the range: a ranges file that lists it forces the file first
    storedByPath
        .compute(path, (p, r) -> r == null || !r.isVersion(version) ? new StoredRanges(version) : r)
        .add(offset, offset + length);
    long last = rangesWrittenAt.get();
    long now = System.nanoTime();
    if (now - last >= RANGES_WRITE_INTERVAL_NANOS && rangesWrittenAt.compareAndSet(last, now)) {
      try {
        writeStoredRanges();
      } catch (StoreException e) {
        // Only an offer to a later process; the ranges stay recorded in memory.
      }
    }
  }

  /**
   * Writes the recorded ranges to {@code <root>/.tensorcast/<artifactId>.stored}, so that a store
   * opened after this process ends (killed included) adopts this incomplete copy and a load resumes
   * from them. Written by {@link #recordStored} at most every 20 ms and whenever a load stops; the
   * file only ever lists ranges whose bytes are in the store's files (it may miss the last ones).
   *
   * @throws StoreException {@code StoreIoError} when the file cannot be written
   */
  public void writeStoredRanges() throws StoreException {
    synchronized (stateWrite) {
      guard.readLock().lock();
      try {
        checkLive();
        Map<String, StoredRanges> snapshot = new LinkedHashMap<>();
        storedByPath.forEach((p, r) -> snapshot.put(p, r.copy()));
        List<String> toForce = new ArrayList<>();
        for (String p : snapshot.keySet()) {
          if (unsynced.remove(p)) {
            toForce.add(p);
          }
        }
        try {
          forceToDevice(toForce);
        } catch (IOException e) {
          unsynced.addAll(toForce);
          throw e;
        }
        StoredRanges.write(rangesFile(), snapshot);
      } catch (IOException e) {
        throw StoreException.ioError(artifactId, "cannot write", rangesFile(), e);
      } finally {
        guard.readLock().unlock();
      }
    }
  }

  private Path rangesFile() {
    return StoredRanges.pathFor(stateFile.getParent(), artifactId);
  }

  /**
   * The ranges of {@code path} recorded by {@link #recordStored} under {@code version}, as sorted,
   * disjoint {@code [start, end)} pairs; empty when none were recorded or they belong to another
   * version of the object.
   */
  public List<long[]> storedRanges(String path, String version) {
    file(path);
    StoredRanges r = storedByPath.get(path);
    return r == null || !r.isVersion(version) ? List.of() : r.ranges();
  }

  /**
   * The source version the bytes of {@code path} were recorded under ({@link #recordStored}), or
   * empty when none were recorded.
   */
  public Optional<String> storedVersion(String path) {
    file(path);
    StoredRanges r = storedByPath.get(path);
    return r == null ? Optional.empty() : Optional.ofNullable(r.version());
  }

  /**
   * Makes {@code path} writable again and forgets its recorded ranges: its source object changed,
   * so the file is read again whole. The state file records it incomplete.
   *
   * @throws StoreException {@code StoreIoError} if the state file cannot be written
   */
  public void reopen(String path) throws StoreException {
    file(path);
    storedByPath.remove(path);
    synchronized (stateWrite) {
      guard.readLock().lock();
      try {
        checkLive();
        if (digestByPath.remove(path) != null) {
          ArtifactState.writeAtomically(stateFile, currentState());
        }
      } catch (IOException e) {
        throw StoreException.ioError(artifactId, "cannot write", stateFile, e);
      } finally {
        guard.readLock().unlock();
      }
    }
  }

  /** Whether {@code path} was marked complete. */
  public boolean isComplete(String path) {
    file(path);
    return digestByPath.containsKey(path);
  }

  /** Whether every file was marked complete. */
  public boolean isComplete() {
    return digestByPath.size() == mapped.size();
  }

  /**
   * The {@link ContentDigest} recorded when {@code path} was marked complete, in its written form;
   * empty while it is not complete.
   */
  public Optional<String> completedDigest(String path) {
    file(path);
    return Optional.ofNullable(digestByPath.get(path));
  }

  @Override
  public String toString() {
    return "StoredArtifact["
        + artifactId
        + ", "
        + files.size()
        + " files, "
        + bytesAllocated
        + " bytes]";
  }

  // ---------------------------------------------------------------- helpers

  private ArtifactState currentState() {
    return new ArtifactState(
        ArtifactState.FORMAT_VERSION,
        artifactId,
        files.stream()
            .map(f -> new ArtifactState.FileState(f.path(), f.size(), digestByPath.get(f.path())))
            .toList());
  }

  private ContentDigest digestOf(MappedFile f, Algorithm algorithm) {
    DigestHasher h = DigestHasher.of(algorithm, f.size());
    for (long off = 0; off < f.size(); off += windowBytes) {
      h.update(f.buffer(off, (int) Math.min(windowBytes, f.size() - off)));
    }
    return new ContentDigest(algorithm, HexFormat.of().formatHex(h.finish()));
  }

  private void checkLive() {
    if (released) {
      throw new IllegalStateException(
          "artifact " + artifactId + " was unloaded or its store closed; its mappings are gone");
    }
  }

  private MappedFile file(String path) {
    checkLive();
    MappedFile f = mapped.get(path);
    if (f == null) {
      throw new IllegalArgumentException(
          "artifact "
              + artifactId
              + " has no file '"
              + StorePaths.printable(String.valueOf(path))
              + "'");
    }
    return f;
  }

  private MappedFile fileForWrite(String path) {
    MappedFile f = file(path);
    if (digestByPath.containsKey(path)) {
      throw new IllegalStateException(
          "file '"
              + path
              + "' of artifact "
              + artifactId
              + " is complete; complete files are"
              + " read-only");
    }
    return f;
  }

  /** Reserves (and, locked on fault, locks) the pages of a range before it is written. */
  private void reserve(MappedFile f, long offset, int length) {
    if (!reserveOnWrite) {
      return;
    }
    int err = f.reserve(offset, length);
    if (err == 0) {
      return;
    }
    String range =
        "artifact "
            + artifactId
            + ": cannot reserve the pages of bytes ["
            + offset
            + ", "
            + (offset + length)
            + ") of '"
            + f.file.path()
            + "' ("
            + MemoryLockSupport.errnoName(err)
            + ")";
    if (err == MemoryLockSupport.EFAULT) {
      throw new StoreWriteException(
          Reason.FilesystemFull,
          range
              + ": the file system of "
              + directory
              + " is full or its size limit is lower than the store's budget");
    }
    if (err == MemoryLockSupport.ENOMEM || err == MemoryLockSupport.EAGAIN) {
      throw new StoreWriteException(
          Reason.InsufficientMemory,
          range + ": out of memory (the memory cgroup's limit, or the node's memory)");
    }
    throw new StoreWriteException(Reason.StoreIoError, range);
  }

  private void checkRange(MappedFile f, long offset, int length) {
    if (offset < 0 || length < 0 || offset > f.size() - length) {
      throw new IndexOutOfBoundsException(
          "range ["
              + offset
              + ", "
              + (offset + length)
              + ") is outside file '"
              + f.file.path()
              + "' of artifact "
              + artifactId
              + ", which has "
              + f.size()
              + " bytes");
    }
  }

  private static void unmapQuietly(List<MappedFile> files) {
    for (MappedFile f : files) {
      try {
        f.unmap();
      } catch (ErrnoException ignored) {
        // best effort on a failure path; the original failure is what the caller reports
      }
    }
  }

  private static void deleteQuietly(Path stateFile, Path directory) {
    try {
      Files.deleteIfExists(stateFile);
      if (directory != null) {
        FileTrees.deleteTree(directory);
      }
    } catch (IOException ignored) {
      // best effort on a failure path; the next start removes what is left (no complete state)
    }
  }
}
