package io.tensorcast.dataplane.store;

import io.tensorcast.api.Reason;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The page-locked store: artifacts laid out as-is under a root on a memory-backed file system
 * (default {@code /dev/shm/tensorcast}), one directory per artifact, every file created at its
 * final size, mapped {@code MAP_SHARED} and locked per the {@link LockPolicy}, within a byte
 * budget. Consumer processes on the node open or mmap {@code <root>/<artifactId>/} as a normal
 * local model directory.
 *
 * <p><b>Pages as bytes land.</b> Allocating an artifact reserves its budget but no pages, and the
 * mappings are locked with {@code mlock2(MLOCK_ONFAULT)}, so every page is locked as it is mapped.
 * A write through the mapping reserves the pages of its range first ({@code MADV_POPULATE_WRITE},
 * so a full file system is an error of that write, not a SIGBUS). A load writes its ranges through
 * the file instead ({@link StoredArtifact#openRange}): {@code pwrite} allocates the pages (a full
 * file system is its {@code ENOSPC}) without zeroing them first, and the written pages are then
 * mapped in bulk ({@code MADV_POPULATE_READ}), which locks them: one kernel copy, and no page
 * faults of the loading process. Loading thus starts without touching the artifact's memory first,
 * and the cost of allocating and locking pages is spread over the writes. On kernels without {@code
 * MADV_POPULATE_WRITE} (before Linux 5.14) or {@code MLOCK_ONFAULT} (before 4.4) every page is
 * reserved with {@code posix_fallocate} and locked with {@code mlock} when the artifact is
 * allocated.
 *
 * <p><b>Layout.</b> {@code <root>/<artifactId>/<path>} holds exactly the artifact's files. The
 * store's own bookkeeping lives in {@code <root>/.tensorcast/}: a state file {@code
 * <artifactId>.json} per artifact (its files and the {@link ContentDigest} of each complete one,
 * replaced atomically) and {@code store.lock}, an exclusive file lock held while the store is open,
 * so two stores (in one process or two) never share a root.
 *
 * <p><b>Budget.</b> An artifact is charged its file sizes each rounded up to whole pages (what a
 * tmpfs really uses). {@link #allocate} refuses an artifact that does not fit {@code budget - in
 * use} with {@link InsufficientMemoryException} before it creates anything; {@link #unload} returns
 * the bytes.
 *
 * <p><b>Start: clean up.</b> Opening a store scans its root. An artifact is <em>adopted</em> —
 * re-mapped, every file's recorded digest recomputed over the mapping and compared with the state
 * file, locked per the policy, charged to the budget — only if its state file is readable, every
 * file in it is complete, and the directory holds exactly those files (regular files, same sizes,
 * nothing else). Adopting saves reloading a model after a data-plane restart: tmpfs pages outlive
 * the process. An artifact with incomplete files is adopted too when a load recorded its stored
 * ranges ({@code .tensorcast/<id>.stored}, see {@link StoredArtifact#writeStoredRanges}): its
 * complete files are re-hashed, the incomplete ones keep those ranges, and the next load resumes
 * from them ({@code Resumable}). Everything else that is the store's is removed: directories named
 * like an artifact id without a state file or with incomplete files and no stored ranges, state
 * files without a directory, temporary state files, artifacts whose bytes changed, artifacts that
 * cannot be locked under {@link LockPolicy#REQUIRED}, and (with a fixed budget) artifacts that no
 * longer fit, adopted in id order. Entries that are not directories named like an artifact id are
 * left alone and reported. {@link #recovery()} lists every decision.
 *
 * <p><b>Memory accounting.</b> tmpfs pages are charged to the memory cgroup of the process that
 * first touches them and outlive it, and deleting a file that is still mapped frees nothing; so
 * {@link #unload} unlocks and unmaps before it deletes, and a data-plane container's memory limit
 * must cover the artifacts it holds.
 *
 * <p>Thread-safe. No process-global state: several stores with different roots may live in one JVM.
 */
public final class PinnedStore implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(PinnedStore.class);

  /** {@code /dev/shm/tensorcast}: a directory on the node's memory-backed {@code /dev/shm}. */
  public static final Path DEFAULT_ROOT = Path.of("/dev/shm/tensorcast");

  /** 1 GiB: the default unit in which pages are locked and hashed. */
  public static final long DEFAULT_WINDOW_BYTES = 1L << 30;

  /** Name of the store's bookkeeping directory under the root. */
  public static final String STATE_DIR = ".tensorcast";

  /** Name of the directory under the root where writers' staged files live ({@link #stage}). */
  public static final String WRITES_DIR = ".writes";

  private static final String LOCK_FILE = "store.lock";
  private static final AtomicInteger POOL_IDS = new AtomicInteger();

  private final Path root;
  private final Path stateDir;
  private final LockPolicy policy;
  private final long windowBytes;
  private final long budgetBytes;
  private final Optional<MemoryBudget> detectedBudget;
  private final ExecutorService pool;
  private final boolean reserveOnWrite;
  private final FileChannel lockChannel;
  private final List<RecoveryAction> recovery;
  private volatile FileSync fileSync;

  private final Object lock = new Object();
  private final Map<String, StoredArtifact> artifacts = new LinkedHashMap<>(); // guarded by lock
  private final Map<String, Long> pending = new HashMap<>(); // guarded by lock
  private long inUseBytes; // guarded by lock; artifacts + pending
  private boolean closed; // guarded by lock

  /**
   * Opens a store with a fixed budget and 1 GiB windows; see {@link #PinnedStore(Path, long,
   * LockPolicy, long)}.
   */
  public PinnedStore(Path root, long budgetBytes, LockPolicy policy) throws StoreException {
    this(root, budgetBytes, policy, DEFAULT_WINDOW_BYTES);
  }

  /**
   * Opens a store: creates {@code root} if needed, takes its lock, and adopts or removes what an
   * earlier store left there (see the class comment).
   *
   * @param root the store's directory, on a memory-backed file system for page-locked serving;
   *     dedicated to this store
   * @param budgetBytes the most bytes (page-rounded file sizes) the store holds at once, adopted
   *     artifacts included; {@code > 0}
   * @param policy whether to page-lock
   * @param windowBytes unit of parallel locking and of hashing: a positive multiple of the page
   *     size, at most 1 GiB
   * @throws StoreException {@code StoreInUse} if another store holds {@code root}; {@code
   *     StoreIoError} if it cannot be read or created
   */
  public PinnedStore(Path root, long budgetBytes, LockPolicy policy, long windowBytes)
      throws StoreException {
    this(
        root,
        OptionalLong.of(budgetBytes),
        policy,
        windowBytes,
        MemoryLockSupport.populateWriteSupported());
  }

  /**
   * As {@link #PinnedStore(Path, long, LockPolicy, long)}, choosing whether pages are reserved and
   * locked as bytes land ({@code reserveOnWrite}, the default where the kernel supports it) or all
   * when an artifact is allocated (the fallback of older kernels), so that tests can run both.
   */
  PinnedStore(
      Path root, long budgetBytes, LockPolicy policy, long windowBytes, boolean reserveOnWrite)
      throws StoreException {
    this(root, OptionalLong.of(budgetBytes), policy, windowBytes, reserveOnWrite);
  }

  /**
   * Opens a store whose budget is measured: after recovery, the bytes of adopted artifacts plus
   * {@link MemoryBudget#detect(Path)} of {@code root} (the least of the memory cgroup's headroom,
   * {@code MemAvailable} and the file system's free space). {@link #detectedBudget()} tells which
   * bound it.
   */
  public static PinnedStore open(Path root, LockPolicy policy) throws StoreException {
    return new PinnedStore(
        root,
        OptionalLong.empty(),
        policy,
        DEFAULT_WINDOW_BYTES,
        MemoryLockSupport.populateWriteSupported());
  }

  private PinnedStore(
      Path root, OptionalLong budget, LockPolicy policy, long windowBytes, boolean reserveOnWrite)
      throws StoreException {
    if (policy == null) {
      throw new IllegalArgumentException("policy is required");
    }
    if (budget.isPresent() && budget.getAsLong() <= 0) {
      throw new IllegalArgumentException("budgetBytes must be > 0, got " + budget.getAsLong());
    }
    long page = MemoryLockSupport.pageSize();
    if (windowBytes <= 0 || windowBytes % page != 0 || windowBytes > (1L << 30)) {
      throw new IllegalArgumentException(
          "windowBytes must be a positive multiple of the page size ("
              + page
              + " bytes) and at most 1 GiB, got "
              + windowBytes);
    }
    this.root = root.toAbsolutePath().normalize();
    this.stateDir = this.root.resolve(STATE_DIR);
    this.policy = policy;
    this.windowBytes = windowBytes;
    this.reserveOnWrite = reserveOnWrite;
    FileChannel channel = null;
    ExecutorService threads = null;
    boolean ok = false;
    try {
      Files.createDirectories(stateDir);
      this.fileSync = FileSync.forRoot(this.root);
      channel = lockRoot();
      threads = newPool();
      this.lockChannel = channel;
      this.pool = threads;
      this.recovery = List.copyOf(recover(budget));
      if (budget.isPresent()) {
        this.budgetBytes = budget.getAsLong();
        this.detectedBudget = Optional.empty();
      } else {
        MemoryBudget detected = MemoryBudget.detect(this.root);
        this.detectedBudget = Optional.of(detected);
        this.budgetBytes = inUseBytes + detected.bytes();
        log.info("store {}: budget {} bytes ({})", this.root, budgetBytes, detected.description());
      }
      ok = true;
    } catch (IOException e) {
      throw new StoreException(
          Reason.StoreIoError, "cannot open store at " + this.root + ": " + e.getMessage(), e);
    } finally {
      if (!ok) {
        for (StoredArtifact a : artifacts.values()) {
          try {
            a.release(false);
          } catch (StoreException ignored) {
            // failing to open; the next open starts over
          }
        }
        if (threads != null) {
          threads.shutdownNow();
        }
        closeQuietly(channel);
      }
    }
  }

  private FileChannel lockRoot() throws IOException, StoreException {
    Path lockFile = stateDir.resolve(LOCK_FILE);
    FileChannel ch =
        FileChannel.open(lockFile, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
    FileLock l;
    try {
      l = ch.tryLock();
    } catch (OverlappingFileLockException e) {
      l = null;
    }
    if (l == null) {
      ch.close();
      throw new StoreException(
          Reason.StoreInUse,
          "another store holds "
              + root
              + " (lock on "
              + lockFile
              + "); one store per root: stop the other data plane or use another root");
    }
    return ch;
  }

  private ExecutorService newPool() {
    int n = Math.max(1, Runtime.getRuntime().availableProcessors());
    int id = POOL_IDS.incrementAndGet();
    AtomicInteger threadIds = new AtomicInteger();
    return Executors.newFixedThreadPool(
        n,
        r -> {
          Thread t = new Thread(r, "pinned-store-" + id + "-" + threadIds.incrementAndGet());
          t.setDaemon(true);
          return t;
        });
  }

  // ---------------------------------------------------------------- recovery

  private List<RecoveryAction> recover(OptionalLong budget) throws IOException {
    List<RecoveryAction> actions = new ArrayList<>();
    Map<String, Path> states = new TreeMap<>();
    try (Stream<Path> entries = Files.list(stateDir)) {
      for (Path p : (Iterable<Path>) entries.sorted()::iterator) {
        String name = p.getFileName().toString();
        if (name.equals(LOCK_FILE)) {
          continue;
        }
        String id = name.endsWith(".json") ? name.substring(0, name.length() - 5) : null;
        String rangesOf =
            name.endsWith(StoredRanges.SUFFIX)
                ? name.substring(0, name.length() - StoredRanges.SUFFIX.length())
                : null;
        if (id != null && StorePaths.isValidArtifactId(id) && Files.isRegularFile(p)) {
          states.put(id, p);
        } else if (rangesOf != null
            && StorePaths.isValidArtifactId(rangesOf)
            && Files.isRegularFile(p)) {
          continue; // the stored ranges of an incomplete copy: kept or removed with it below
        } else {
          FileTrees.deleteTree(p);
          actions.add(removed(name, "StrayStateFile", "removed " + p + ": not a state file"));
        }
      }
    }
    TreeSet<String> dirs = new TreeSet<>();
    try (Stream<Path> entries = Files.list(root)) {
      for (Path p : (Iterable<Path>) entries.sorted()::iterator) {
        String name = p.getFileName().toString();
        if (name.equals(STATE_DIR) || name.equals(WRITES_DIR)) {
          continue;
        }
        if (StorePaths.isValidArtifactId(name) && Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
          dirs.add(name);
        } else {
          actions.add(
              new RecoveryAction(
                  name,
                  RecoveryAction.Action.IGNORED,
                  "NotAnArtifact",
                  "left alone: "
                      + p
                      + " is not a directory named like an artifact id; the root should be"
                      + " dedicated to the store"));
        }
      }
    }
    for (Map.Entry<String, Path> s : states.entrySet()) {
      if (!dirs.contains(s.getKey())) {
        Files.deleteIfExists(s.getValue());
        actions.add(
            removed(s.getKey(), "NoArtifactDirectory", "removed state file without directory"));
      }
    }
    for (String id : dirs) {
      Path dir = root.resolve(id);
      Path statePath = states.get(id);
      if (statePath == null) {
        FileTrees.deleteTree(dir);
        actions.add(removed(id, "NoStateFile", "removed " + dir + ": it has no state file"));
        continue;
      }
      ArtifactState state;
      try {
        state = ArtifactState.read(statePath, id);
      } catch (IOException e) {
        removeArtifactFiles(id);
        actions.add(removed(id, "UnreadableStateFile", e.getMessage()));
        continue;
      }
      long incomplete = state.files().stream().filter(f -> !f.complete()).count();
      Map<String, Long> sizes = new HashMap<>();
      state.files().forEach(f -> sizes.put(f.path(), f.size()));
      Map<String, StoredRanges> stored =
          StoredRanges.read(StoredRanges.pathFor(stateDir, id), sizes);
      if (incomplete > 0 && stored.isEmpty()) {
        removeArtifactFiles(id);
        actions.add(
            removed(
                id,
                "IncompleteFiles",
                incomplete
                    + " of "
                    + state.files().size()
                    + " files were not complete (e.g. '"
                    + state.files().stream().filter(f -> !f.complete()).findFirst().get().path()
                    + "'); removed"));
        continue;
      }
      String difference = differenceFromState(dir, state);
      if (difference != null) {
        removeArtifactFiles(id);
        actions.add(removed(id, "FilesChanged", difference + "; removed"));
        continue;
      }
      actions.add(adopt(state, stored, budget));
    }
    for (String id : rangesFilesWithoutArtifact()) {
      Files.deleteIfExists(StoredRanges.pathFor(stateDir, id));
    }
    for (RecoveryAction a : actions) {
      log.info("store {}: {} {} ({}): {}", root, a.action(), a.name(), a.reason(), a.message());
    }
    return actions;
  }

  /** Ranges files whose artifact was not adopted. */
  private List<String> rangesFilesWithoutArtifact() throws IOException {
    List<String> out = new ArrayList<>();
    try (Stream<Path> entries = Files.list(stateDir)) {
      for (Path p : (Iterable<Path>) entries::iterator) {
        String name = p.getFileName().toString();
        if (name.endsWith(StoredRanges.SUFFIX)) {
          String id = name.substring(0, name.length() - StoredRanges.SUFFIX.length());
          if (!artifacts.containsKey(id)) {
            out.add(id);
          }
        }
      }
    }
    return out;
  }

  private RecoveryAction adopt(
      ArtifactState state, Map<String, StoredRanges> stored, OptionalLong budget)
      throws IOException {
    String id = state.artifactId();
    List<StoreFile> files =
        state.files().stream().map(f -> new StoreFile(f.path(), f.size())).toList();
    long charged;
    try {
      charged = chargedBytes(files);
    } catch (StoreException e) {
      removeArtifactFiles(id);
      return removed(id, e.reason().name(), e.getMessage() + "; removed");
    }
    if (budget.isPresent() && inUseBytes + charged > budget.getAsLong()) {
      removeArtifactFiles(id);
      return removed(
          id,
          "OverBudget",
          "complete, but its "
              + charged
              + " bytes do not fit the budget of "
              + budget.getAsLong()
              + " bytes with "
              + inUseBytes
              + " bytes already adopted; removed");
    }
    StoredArtifact a;
    try {
      a =
          StoredArtifact.adopt(
              state,
              stored,
              root.resolve(id),
              ArtifactState.pathFor(stateDir, id),
              windowBytes,
              charged,
              pool);
    } catch (StoreException e) {
      removeArtifactFiles(id);
      return removed(id, e.reason().name(), e.getMessage() + "; removed");
    }
    LockStatus status = lock(a, charged);
    if (policy == LockPolicy.REQUIRED && !status.locked()) {
      try {
        a.release(true);
      } catch (StoreException e) {
        throw new IOException(e.getMessage(), e);
      }
      return removed(id, status.reason().name(), status.message() + "; removed");
    }
    a.setLockStatus(status);
    a.setFileSync(fileSync);
    artifacts.put(id, a);
    inUseBytes += charged;
    boolean complete = a.isComplete();
    return new RecoveryAction(
        id,
        RecoveryAction.Action.ADOPTED,
        complete ? "Complete" : "Resumable",
        "adopted "
            + files.size()
            + " files, "
            + a.bytesAllocated()
            + (complete
                ? " bytes, digests verified; "
                : " bytes, incomplete: the complete files' digests verified, the stored ranges of"
                    + " the others kept for the next load to resume; ")
            + status.reason()
            + ": "
            + status.message());
  }

  /** What differs between the directory and the state's file list, or null if nothing. */
  private static String differenceFromState(Path dir, ArtifactState state) throws IOException {
    Map<String, Long> expected = new HashMap<>();
    state.files().forEach(f -> expected.put(f.path(), f.size()));
    Map<String, Long> found = new HashMap<>();
    List<String> odd = new ArrayList<>();
    Files.walkFileTree(
        dir,
        new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
            String rel = dir.relativize(file).toString();
            if (attrs.isRegularFile()) {
              found.put(rel, attrs.size());
            } else {
              odd.add(rel);
            }
            return FileVisitResult.CONTINUE;
          }
        });
    if (!odd.isEmpty()) {
      return "'" + odd.get(0) + "' is not a regular file";
    }
    for (Map.Entry<String, Long> e : expected.entrySet()) {
      Long size = found.get(e.getKey());
      if (size == null) {
        return "file '" + e.getKey() + "' is missing";
      }
      if (size.longValue() != e.getValue()) {
        return "file '" + e.getKey() + "' has " + size + " bytes, expected " + e.getValue();
      }
    }
    for (String f : found.keySet()) {
      if (!expected.containsKey(f)) {
        return "file '" + f + "' is not one of the artifact's files";
      }
    }
    return null;
  }

  private void removeArtifactFiles(String id) throws IOException {
    Files.deleteIfExists(ArtifactState.pathFor(stateDir, id));
    Files.deleteIfExists(StoredRanges.pathFor(stateDir, id));
    FileTrees.deleteTree(root.resolve(id));
  }

  private static RecoveryAction removed(String name, String reason, String message) {
    return new RecoveryAction(name, RecoveryAction.Action.REMOVED, reason, message);
  }

  // ---------------------------------------------------------------- allocate / unload

  /**
   * Allocates an artifact: checks the id and every path, charges the budget, then creates {@code
   * <root>/<artifactId>/<path>} for every file at its size, maps each file and page-locks per the
   * policy (see the class comment: pages are reserved and locked as the writes land, or here on
   * older kernels). The files are then filled through {@link StoredArtifact#write} or {@link
   * StoredArtifact#writable} and marked complete one by one.
   *
   * @param artifactId DNS-1123 label (lowercase letters, digits, '-', at most 63 characters)
   * @param files the artifact's files: relative '/'-separated paths and sizes in bytes
   * @throws StoreException before anything is created: {@code InvalidArtifactId}, {@code
   *     InvalidPath}, {@code InvalidSize}, {@code DuplicatePath}, {@code PathConflict}, {@code
   *     NoFiles}, {@code ArtifactExists}, {@link InsufficientMemoryException}, and under {@link
   *     LockPolicy#REQUIRED} a {@link MemoryLockException} when {@code RLIMIT_MEMLOCK} without
   *     {@code CAP_IPC_LOCK} cannot cover the artifact; after creating (everything removed again):
   *     {@code FilesystemFull}, {@code StoreIoError}, {@link MemoryLockException}
   */
  public StoredArtifact allocate(String artifactId, List<StoreFile> files) throws StoreException {
    StorePaths.checkArtifactId(artifactId);
    List<StoreFile> checked = StorePaths.checkFiles(artifactId, files);
    long charged = chargedBytes(checked);
    reserve(artifactId, charged);
    StoredArtifact created = null;
    boolean ok = false;
    try {
      LockStatus precheck = precheckLock(artifactId, charged);
      Path dir = root.resolve(artifactId);
      if (Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
        throw new StoreException(
            Reason.ArtifactExists,
            "artifact "
                + artifactId
                + ": "
                + dir
                + " exists but is not held by this store; something else writes into the root");
      }
      created =
          StoredArtifact.create(
              artifactId,
              dir,
              ArtifactState.pathFor(stateDir, artifactId),
              checked,
              windowBytes,
              charged,
              reserveOnWrite,
              pool);
      if (!created.preallocated()) {
        log.warn(
            "artifact {}: posix_fallocate is not supported on the file system of {}; sized with"
                + " ftruncate, pages are allocated on first write",
            artifactId,
            root);
      }
      LockStatus status = precheck != null ? precheck : lock(created, charged);
      if (policy == LockPolicy.REQUIRED && !status.locked()) {
        throw new MemoryLockException(artifactId, status);
      }
      created.setLockStatus(status);
      created.setFileSync(fileSync);
      synchronized (lock) {
        if (closed) {
          throw new StoreException(Reason.StoreClosed, "the store at " + root + " was closed");
        }
        pending.remove(artifactId);
        artifacts.put(artifactId, created);
      }
      ok = true;
      return created;
    } finally {
      if (!ok) {
        if (created != null) {
          created.release(true);
        }
        synchronized (lock) {
          pending.remove(artifactId);
          inUseBytes -= charged;
        }
      }
    }
  }

  /**
   * Stages a file that belongs to no artifact yet (a writer's segment): checks the path, charges
   * the budget, creates the file at {@code size} (pages reserved with {@code posix_fallocate}),
   * maps it and page-locks it per the policy. Fill it, then {@link #install} it into an artifact or
   * close it.
   *
   * @param file absolute path under {@link #writesDirectory()} (its parent must exist; the file
   *     must not); on the store's file system, so that {@link #install} can move it without a copy
   * @param size bytes, {@code >= 0}
   * @throws StoreException {@code InvalidPath} if {@code file} is not under the writes directory;
   *     {@link InsufficientMemoryException} before anything is created; after creating (removed
   *     again): {@code FilesystemFull}, {@code StoreIoError}, and under {@link LockPolicy#REQUIRED}
   *     {@link MemoryLockException}
   */
  public StagedFile stage(Path file, long size) throws StoreException {
    Path abs = file.toAbsolutePath().normalize();
    Path writes = writesDirectory();
    if (!abs.startsWith(writes) || abs.equals(writes)) {
      throw new StoreException(
          Reason.InvalidPath,
          "staged file " + abs + " must be under the store's writes directory " + writes);
    }
    if (size < 0) {
      throw new StoreException(
          Reason.InvalidSize, "staged file " + abs + ": negative size " + size);
    }
    StoreFile sf = new StoreFile(abs.getFileName().toString(), size);
    long charged = chargedBytes(List.of(sf));
    String owner = "staged file " + abs.getFileName();
    synchronized (lock) {
      checkOpen();
      if (charged > budgetBytes - inUseBytes) {
        throw new InsufficientMemoryException(owner, charged, budgetBytes, inUseBytes);
      }
      inUseBytes += charged;
    }
    MappedFile mapped = null;
    boolean ok = false;
    try {
      LockStatus status = precheckLock(owner, charged);
      mapped = MappedFile.create(owner, sf, abs, true);
      if (status == null) {
        status = lockOne(mapped, charged);
      }
      if (policy == LockPolicy.REQUIRED && !status.locked()) {
        throw new MemoryLockException(owner, status);
      }
      ok = true;
      return new StagedFile(this, mapped, charged, status);
    } finally {
      if (!ok) {
        if (mapped != null) {
          MemoryLockSupport.munlock(mapped.address, mapped.size());
          try {
            mapped.unmap();
          } catch (ErrnoException ignored) {
            // failing already; the file is deleted below
          }
          try {
            Files.deleteIfExists(abs);
          } catch (IOException ignored) {
            // a leftover is removed with its writes directory
          }
        }
        unstaged(charged);
      }
    }
  }

  private LockStatus lockOne(MappedFile f, long charged) {
    if (policy == LockPolicy.DISABLED) {
      return LockStatus.disabled();
    }
    if (f.size() == 0) {
      return LockStatus.locked(0);
    }
    int err = MemoryLockSupport.mlock(f.address, f.size());
    if (err == 0) {
      return LockStatus.locked(f.size());
    }
    return MemoryLockSupport.failure(charged, err, MemoryLockSupport.facts());
  }

  /** A staged file was closed: its bytes go back to the budget. */
  void unstaged(long charged) {
    synchronized (lock) {
      inUseBytes -= charged;
    }
  }

  /**
   * {@code <root>/.writes}: where writers' staged files live ({@link #stage}). Not an artifact id
   * (it starts with a dot), so recovery leaves it to its owner, the data plane's write service,
   * which empties it on start.
   */
  public Path writesDirectory() {
    return root.resolve(WRITES_DIR);
  }

  /**
   * One file of an artifact being installed.
   *
   * @param path the file's path in the artifact
   * @param size its size in bytes
   * @param from the staged file moved in whole as this file (same size), or null to create the file
   *     empty at {@code size}, to be filled through {@link StoredArtifact#write}
   */
  public record InstallFile(String path, long size, StagedFile from) {
    public InstallFile {
      java.util.Objects.requireNonNull(path, "path");
      if (from != null && from.size() != size) {
        throw new IllegalArgumentException(
            "file '" + path + "': staged file has " + from.size() + " bytes, not " + size);
      }
    }
  }

  /**
   * Allocates an artifact whose files are partly staged files moved in whole (renamed, no copy;
   * their mapping, lock and budget charge pass to the artifact) and partly new files, as {@link
   * #allocate} creates them. Only the new files are charged anew. The files are then filled (the
   * new ones) and marked complete as usual.
   *
   * @throws StoreException as {@link #allocate}, plus {@code InvalidPath} if a staged file is
   *     closed or moved already; on failure the staged files stay with their owner, unchanged
   */
  public StoredArtifact install(String artifactId, List<InstallFile> files) throws StoreException {
    StorePaths.checkArtifactId(artifactId);
    List<StoreFile> checked =
        StorePaths.checkFiles(
            artifactId, files.stream().map(f -> new StoreFile(f.path(), f.size())).toList());
    Map<String, StagedFile> moveIn = new LinkedHashMap<>();
    List<StoreFile> freshFiles = new ArrayList<>();
    long movedCharge = 0;
    for (InstallFile f : files) {
      if (f.from() == null) {
        freshFiles.add(new StoreFile(f.path(), f.size()));
        continue;
      }
      if (f.from().isClosed()) {
        throw new StoreException(
            Reason.InvalidPath,
            "artifact "
                + artifactId
                + ": staged file "
                + f.from().path()
                + " for '"
                + f.path()
                + "' is closed or moved already");
      }
      moveIn.put(f.path(), f.from());
      movedCharge += f.from().charged();
    }
    long freshCharge = chargedBytes(freshFiles);
    reserve(artifactId, freshCharge);
    StoredArtifact created = null;
    boolean ok = false;
    try {
      Path dir = root.resolve(artifactId);
      if (Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
        throw new StoreException(
            Reason.ArtifactExists,
            "artifact "
                + artifactId
                + ": "
                + dir
                + " exists but is not held by this store; something else writes into the root");
      }
      long charged = freshCharge + movedCharge;
      created =
          StoredArtifact.install(
              artifactId,
              dir,
              ArtifactState.pathFor(stateDir, artifactId),
              checked,
              moveIn,
              windowBytes,
              charged,
              pool);
      LockStatus status = lock(created, charged);
      if (policy == LockPolicy.REQUIRED && !status.locked()) {
        throw new MemoryLockException(artifactId, status);
      }
      created.setLockStatus(status);
      created.setFileSync(fileSync);
      synchronized (lock) {
        if (closed) {
          throw new StoreException(Reason.StoreClosed, "the store at " + root + " was closed");
        }
        pending.remove(artifactId);
        // The moved files' charge was the staged files'; it is the artifact's now.
        artifacts.put(artifactId, created);
      }
      ok = true;
      return created;
    } finally {
      if (!ok) {
        if (created != null) {
          // Lock failure after the move: the staged bytes are lost with the artifact; the staged
          // files are marked moved, so their owners' close does nothing and the charge goes here.
          created.release(true);
          synchronized (lock) {
            inUseBytes -= movedCharge;
          }
        }
        synchronized (lock) {
          pending.remove(artifactId);
          inUseBytes -= freshCharge;
        }
      }
    }
  }

  /**
   * Lays an artifact the store holds out again as {@code files}, keeping what did not change: every
   * file with the same path and size keeps its bytes, its mapping and page lock, its recorded
   * digest when complete and its stored ranges with the source version they were read from ({@link
   * StoredArtifact#recordStored}); files not listed any more, or listed with another size, are
   * deleted; new ones are created empty at their size, as {@link #allocate} creates them. The
   * budget is charged the difference. For a load whose source changed under it (an object replaced
   * by one of another size, a file added or removed): only what changed is read again.
   *
   * <p>The artifact's {@link StoredArtifact} object is replaced by the returned one; the old one
   * behaves as unloaded (its zero-copy buffers must not be used any more).
   *
   * @param files the new layout: relative '/'-separated paths and sizes in bytes
   * @throws StoreException before anything changes: {@code ArtifactNotFound} when the store does
   *     not hold the artifact, the path checks of {@link #allocate}, {@code ArtifactBusy}, {@link
   *     InsufficientMemoryException} when the growth does not fit the budget (the artifact stays as
   *     it was); after changing ({@code StoreIoError}, {@code FilesystemFull}, under {@link
   *     LockPolicy#REQUIRED} {@link MemoryLockException}): the artifact is unloaded
   */
  public StoredArtifact relayout(String artifactId, List<StoreFile> files) throws StoreException {
    StorePaths.checkArtifactId(artifactId);
    List<StoreFile> checked = StorePaths.checkFiles(artifactId, files);
    long charged = chargedBytes(checked);
    StoredArtifact old;
    long growth;
    synchronized (lock) {
      checkNotBusy(artifactId);
      old = artifacts.get(artifactId);
      if (old == null) {
        throw new StoreException(
            Reason.ArtifactNotFound,
            "artifact " + artifactId + " is not held by this store; nothing to lay out again");
      }
      growth = Math.max(0, charged - old.chargedBytes());
      if (growth > budgetBytes - inUseBytes) {
        throw new InsufficientMemoryException(artifactId, growth, budgetBytes, inUseBytes);
      }
      artifacts.remove(artifactId);
      pending.put(artifactId, charged);
      inUseBytes += growth;
    }
    long held = old.chargedBytes() + growth; // what is charged for the artifact meanwhile
    StoredArtifact created = null;
    boolean ok = false;
    try {
      created = StoredArtifact.relayout(old, checked, charged, pool);
      LockStatus status = lock(created, charged);
      if (policy == LockPolicy.REQUIRED && !status.locked()) {
        throw new MemoryLockException(artifactId, status);
      }
      created.setLockStatus(status);
      synchronized (lock) {
        if (closed) {
          throw new StoreException(Reason.StoreClosed, "the store at " + root + " was closed");
        }
        pending.remove(artifactId);
        inUseBytes -= held - charged;
        artifacts.put(artifactId, created);
      }
      ok = true;
      return created;
    } finally {
      if (!ok) {
        try {
          if (created != null) {
            created.release(true);
          } else {
            removeArtifactFiles(artifactId);
          }
        } catch (StoreException | IOException e) {
          log.warn("artifact {}: removing after a failed relayout: {}", artifactId, e.getMessage());
        }
        synchronized (lock) {
          pending.remove(artifactId);
          inUseBytes -= held;
        }
      }
    }
  }

  /** Under {@link #lock}: {@code StoreClosed} once the store is closed. */
  private void checkOpen() throws StoreException {
    if (closed) {
      throw new StoreException(Reason.StoreClosed, "the store at " + root + " is closed");
    }
  }

  /**
   * Under {@link #lock}: {@code StoreClosed} once the store is closed, {@code ArtifactBusy} while
   * {@code artifactId} is still being allocated.
   */
  private void checkNotBusy(String artifactId) throws StoreException {
    checkOpen();
    if (pending.containsKey(artifactId)) {
      throw new StoreException(
          Reason.ArtifactBusy, "artifact " + artifactId + " is still being allocated");
    }
  }

  private void reserve(String artifactId, long charged) throws StoreException {
    synchronized (lock) {
      checkOpen();
      if (artifacts.containsKey(artifactId) || pending.containsKey(artifactId)) {
        throw new StoreException(
            Reason.ArtifactExists,
            "artifact " + artifactId + " is already allocated in this store; unload it first");
      }
      if (charged > budgetBytes - inUseBytes) {
        throw new InsufficientMemoryException(artifactId, charged, budgetBytes, inUseBytes);
      }
      pending.put(artifactId, charged);
      inUseBytes += charged;
    }
  }

  /**
   * Without {@code CAP_IPC_LOCK}, checks {@code RLIMIT_MEMLOCK} before creating anything: under
   * REQUIRED refuses, under BEST_EFFORT returns the unlocked status to use instead of locking.
   */
  private LockStatus precheckLock(String artifactId, long charged) throws MemoryLockException {
    if (policy == LockPolicy.DISABLED) {
      return LockStatus.disabled();
    }
    MemoryLockSupport.Facts facts = MemoryLockSupport.facts();
    if (facts.allows(charged)) {
      return null;
    }
    LockStatus s = MemoryLockSupport.failure(charged, 0, facts);
    if (policy == LockPolicy.REQUIRED) {
      throw new MemoryLockException(artifactId, s);
    }
    return s;
  }

  private LockStatus lock(StoredArtifact a, long charged) {
    if (policy == LockPolicy.DISABLED) {
      return LockStatus.disabled();
    }
    if (!MemoryLockSupport.facts().allows(charged)) {
      return MemoryLockSupport.failure(charged, 0, MemoryLockSupport.facts());
    }
    long t0 = System.nanoTime();
    LockStatus s = a.reservesOnWrite() ? a.lockOnFault() : null;
    if (s == null) {
      s = a.lockPages(pool);
    }
    log.debug(
        "artifact {}: mlock of {} bytes took {} ms: {}",
        a.artifactId(),
        a.bytesAllocated(),
        (System.nanoTime() - t0) / 1_000_000,
        s.reason());
    return s;
  }

  /**
   * Unloads an artifact: unlocks and unmaps its files (waiting for guarded reads and writes in
   * flight), deletes its state file, its files and its directory, and returns its bytes to the
   * budget. Afterwards nothing of the artifact remains under the root. Idempotent: unloading an
   * unknown id removes any leftover directory or state file of that id and otherwise does nothing.
   *
   * @throws StoreException {@code InvalidArtifactId}; {@code StoreClosed} after {@link #close()}
   *     (closing keeps the files for the next store); {@code ArtifactBusy} while the artifact is
   *     being allocated; {@code StoreIoError} if deleting fails (the artifact then stays listed and
   *     unload may be retried)
   */
  public void unload(String artifactId) throws StoreException {
    StorePaths.checkArtifactId(artifactId);
    StoredArtifact a;
    synchronized (lock) {
      checkNotBusy(artifactId);
      a = artifacts.get(artifactId);
    }
    if (a == null) {
      try {
        removeArtifactFiles(artifactId);
      } catch (IOException e) {
        throw new StoreException(
            Reason.StoreIoError,
            "artifact " + artifactId + ": cannot delete: " + e.getMessage(),
            e);
      }
      return;
    }
    a.release(true);
    synchronized (lock) {
      if (artifacts.remove(artifactId, a)) {
        inUseBytes -= a.chargedBytes();
      }
    }
  }

  // ---------------------------------------------------------------- queries

  /** The artifact with this id, if the store holds it (allocation finished). */
  public Optional<StoredArtifact> get(String artifactId) {
    synchronized (lock) {
      return Optional.ofNullable(artifacts.get(artifactId));
    }
  }

  /** A snapshot of the artifacts the store holds, by id, in allocation (or adoption) order. */
  public Map<String, StoredArtifact> artifacts() {
    synchronized (lock) {
      return Collections.unmodifiableMap(new LinkedHashMap<>(artifacts));
    }
  }

  /** The store's root directory (absolute). */
  public Path root() {
    return root;
  }

  /**
   * Replaces how data files and directories are forced to the device before the state and stored
   * ranges records that claim their bytes are written (by default {@link FileSync#forRoot}); for
   * artifacts allocated, installed or laid out again from now on.
   */
  void fileSync(FileSync sync) {
    this.fileSync = java.util.Objects.requireNonNull(sync, "sync");
  }

  /** The lock policy. */
  public LockPolicy policy() {
    return policy;
  }

  /** The budget in bytes. */
  public long budgetBytes() {
    return budgetBytes;
  }

  /** Bytes charged to artifacts held or being allocated (page-rounded file sizes). */
  public long bytesInUse() {
    synchronized (lock) {
      return inUseBytes;
    }
  }

  /** {@code budget - in use}; may be 0, never negative. */
  public long bytesFree() {
    synchronized (lock) {
      return Math.max(0, budgetBytes - inUseBytes);
    }
  }

  /** How the budget was measured, for a store made with {@link #open(Path, LockPolicy)}. */
  public Optional<MemoryBudget> detectedBudget() {
    return detectedBudget;
  }

  /** What the store did with each entry it found under its root when it was opened. */
  public List<RecoveryAction> recovery() {
    return recovery;
  }

  /** The bytes an artifact is charged: every file's size rounded up to whole pages. */
  static long chargedBytes(List<StoreFile> files) throws StoreException {
    long page = MemoryLockSupport.pageSize();
    long total = 0;
    try {
      for (StoreFile f : files) {
        long pages = f.size() / page + (f.size() % page == 0 ? 0 : 1);
        total = Math.addExact(total, Math.multiplyExact(pages, page));
      }
    } catch (ArithmeticException e) {
      throw new StoreException(
          Reason.InvalidSize, "the artifact's total size overflows 2^63 bytes");
    }
    return total;
  }

  /**
   * Closes the store: unlocks and unmaps every artifact but leaves the files and state files, so
   * the next store on this root adopts the complete ones. Releases the root's lock. Idempotent.
   */
  @Override
  public void close() {
    List<StoredArtifact> held;
    synchronized (lock) {
      if (closed) {
        return;
      }
      closed = true;
      held = new ArrayList<>(artifacts.values());
      artifacts.clear();
      for (StoredArtifact a : held) {
        inUseBytes -= a.chargedBytes();
      }
    }
    for (StoredArtifact a : held) {
      try {
        a.release(false);
      } catch (StoreException e) {
        log.warn("store {}: closing artifact {}: {}", root, a.artifactId(), e.getMessage());
      }
    }
    pool.shutdownNow();
    closeQuietly(lockChannel);
  }

  private static void closeQuietly(FileChannel ch) {
    if (ch != null) {
      try {
        ch.close();
      } catch (IOException ignored) {
        // releasing the lock; nothing else to do
      }
    }
  }

  @Override
  public String toString() {
    return "PinnedStore[" + root + ", " + policy + ", budget " + budgetBytes + " bytes]";
  }
}
