package io.tensorcast.dataplane.load;

import io.tensorcast.dataplane.source.DigestHasher;
import io.tensorcast.dataplane.source.PublishedDigest.Algorithm;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.store.ContentDigest;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Map.Entry;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Digests of each file's bytes in the store, computed while the bytes arrive rather than after the
 * last one.
 *
 * <p>Each file gets the digest its source publishes for it (SHA-256, SHA-1, MD5, a CRC), which
 * verifies its bytes and is what the store records for it ({@link ContentDigest}); a file whose
 * source publishes none gets a SHA-256, which the store records. These digests are sequential: a
 * file's digest can only take in its bytes in order. So each digest follows the <em>contiguous
 * prefix</em> of the file's stored bytes: {@link #stored} reports a range as final in the store
 * (ranges arrive in any order, from any thread); whenever the prefix grows, the newly contiguous
 * bytes are hashed from the store by a task of the pool, one task per file and algorithm at a time,
 * so the algorithms of one file and the files of an artifact are hashed in parallel while later
 * ranges are still being read. When every algorithm of a file has taken in its last byte, {@code
 * onDigested} gets the file and its digests, on the pool thread.
 *
 * <p>Nothing is kept but the digests' state and the ranges past the prefix: the bytes are read back
 * from the store in windows of {@link SourceDigests#WINDOW} bytes, under the artifact's read lock,
 * through the store's mapping ({@link StoredArtifact#consume}): the pages of bytes stored by this
 * process are mapped here (reserved before a write through the mapping, mapped after a write
 * through the file), so hashing them takes neither a page fault nor a copy (libcrypto hashes the
 * mapping in place). A restarted or resumed load feeds the ranges already in the store, written by
 * an earlier process and not mapped in this one, as {@link #kept}: those are read through the file
 * ({@link StoredArtifact#consumeFromFile}, {@code pread} into one 1 MiB buffer per hashing thread)
 * rather than faulted in page by page.
 *
 * <p>Thread-safe. {@link #close()} stops hashing and waits for the pool: afterwards no task reads
 * the store, so the artifact may be unloaded.
 */
final class PrefixDigester implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(PrefixDigester.class);

  /** The digests of one file's bytes in the store, by algorithm. */
  record FileDigests(SourceFile file, Map<Algorithm, byte[]> digests) {
    /**
     * What the store records for the file, in {@link ContentDigest}'s written form: its SHA-256
     * when it was computed, else the digest of the first algorithm (in {@link Algorithm}'s order).
     */
    String contentDigest() {
      Algorithm a =
          digests.containsKey(Algorithm.SHA256)
              ? Algorithm.SHA256
              : new java.util.TreeSet<>(digests.keySet()).first();
      return new ContentDigest(a, HexFormat.of().formatHex(digests.get(a))).toString();
    }
  }

  /**
   * Each hashing thread's buffer for {@link #kept} bytes, read from the store's file into it
   * ({@link StoredArtifact#consumeFromFile}), not through the mapping. Direct when SHA-256 is
   * native (libcrypto hashes it in place; a heap buffer would cost the JDK's copy through a
   * temporary direct buffer on each {@code pread}), else heap (what {@code MessageDigest} takes
   * without a copy).
   */
  private static final ThreadLocal<java.nio.ByteBuffer> CHUNK =
      ThreadLocal.withInitial(
          () ->
              OpenSslSha256.available()
                  ? java.nio.ByteBuffer.allocateDirect(1 << 20)
                  : java.nio.ByteBuffer.allocate(1 << 20));

  private final StoredArtifact stored;
  private final ExecutorService pool;
  private final Consumer<FileDigests> onDigested;
  private final BiConsumer<SourceFile, RuntimeException> onError;
  private final Map<String, Track> tracks = new HashMap<>();
  private final AtomicLong hashedRecorded = new AtomicLong();
  private volatile boolean closed;

  /**
   * @param threads hashing threads (at least 1)
   * @param onDigested called once per file when all its digests are complete
   * @param onError called when hashing a file failed (e.g. the artifact was unloaded); that file's
   *     digests never complete
   */
  PrefixDigester(
      StoredArtifact stored,
      int threads,
      Consumer<FileDigests> onDigested,
      BiConsumer<SourceFile, RuntimeException> onError) {
    this.stored = stored;
    this.onDigested = onDigested;
    this.onError = onError;
    AtomicInteger n = new AtomicInteger();
    this.pool =
        Executors.newFixedThreadPool(
            Math.max(1, threads),
            r -> {
              Thread t = new Thread(r, "tensorcast-digest-" + n.incrementAndGet());
              t.setDaemon(true);
              return t;
            });
  }

  /**
   * Starts the digests of {@code file}: {@code algorithms}, the digests its source publishes, or
   * SHA-256 when that is empty. Call once per file before its first {@link #stored}; an empty file
   * is digested at once.
   */
  void track(SourceFile file, Set<Algorithm> algorithms) {
    Track t;
    synchronized (tracks) {
      if (tracks.containsKey(file.path())) {
        throw new IllegalArgumentException("file " + file.path() + " is tracked twice");
      }
      t = new Track(file, algorithms);
      tracks.put(file.path(), t);
    }
    if (file.size() == 0) {
      Map<Algorithm, byte[]> digests = new EnumMap<>(Algorithm.class);
      for (Lane lane : t.lanes) {
        digests.put(lane.algorithm, lane.hasher.finish());
      }
      submit(() -> onDigested.accept(new FileDigests(file, digests)), file);
    }
  }

  /**
   * Bytes {@code [offset, offset + length)} of {@code file} are in the store and will not change.
   * Ranges may overlap ranges reported before.
   */
  void stored(SourceFile file, long offset, long length) {
    Track t;
    synchronized (tracks) {
      t = tracks.get(file.path());
    }
    if (t == null) {
      throw new IllegalArgumentException("file " + file.path() + " is not tracked");
    }
    if (offset < 0 || length < 0 || offset + length > file.size()) {
      throw new IndexOutOfBoundsException(
          "range ["
              + offset
              + ", "
              + (offset + length)
              + ") is outside "
              + file.path()
              + " ("
              + file.size()
              + " bytes)");
    }
    List<Lane> start = new ArrayList<>();
    synchronized (t) {
      if (length == 0 || offset + length <= t.contiguous) {
        return;
      }
      t.addRange(offset, offset + length);
      for (Lane lane : t.lanes) {
        if (!lane.running && lane.hashed < t.contiguous) {
          lane.running = true;
          start.add(lane);
        }
      }
    }
    for (Lane lane : start) {
      submit(() -> hash(t, lane), file);
    }
  }

  /**
   * Like {@link #stored}, for bytes an earlier process stored (a resumed load): they are hashed
   * through the store's file, not its mapping, where this process has not mapped their pages.
   */
  void kept(SourceFile file, long offset, long length) {
    Track t;
    synchronized (tracks) {
      t = tracks.get(file.path());
    }
    if (t != null) {
      synchronized (t) {
        t.keptEnd = Math.max(t.keptEnd, offset + length);
      }
    }
    stored(file, offset, length);
  }

  /** Bytes of {@code file} in the contiguous prefix of its stored bytes. */
  long contiguous(SourceFile file) {
    Track t;
    synchronized (tracks) {
      t = tracks.get(file.path());
    }
    synchronized (t) {
      return t.contiguous;
    }
  }

  /**
   * Bytes taken in by the digests the store records so far, over all files (each byte once; any
   * other algorithm of a file hashes the same bytes alongside). Read before and after the last byte
   * is stored, it tells how much hashing the bytes' arrival order left for after the last byte.
   */
  long hashedBytes() {
    return hashedRecorded.get();
  }

  private void submit(Runnable task, SourceFile file) {
    if (closed) {
      return;
    }
    try {
      pool.execute(task);
    } catch (RejectedExecutionException e) {
      if (!closed) {
        onError.accept(file, e);
      }
    }
  }

  /** Hashes the lane's algorithm up to the prefix, until it catches up; finishes the file. */
  private void hash(Track t, Lane lane) {
    SourceFile file = t.file;
    try {
      while (!closed) {
        long from;
        long to;
        long keptEnd;
        synchronized (t) {
          from = lane.hashed;
          to = t.contiguous;
          keptEnd = t.keptEnd;
          if (from >= to) {
            lane.running = false;
            return;
          }
        }
        for (long off = from; off < to && !closed; off += SourceDigests.WINDOW) {
          int n = (int) Math.min(SourceDigests.WINDOW, to - off);
          if (off < keptEnd) {
            stored.consumeFromFile(file.path(), off, n, CHUNK.get(), lane.hasher::update);
          } else {
            stored.consume(file.path(), off, n, lane.hasher::update);
          }
          if (lane == t.lanes.get(0)) {
            hashedRecorded.addAndGet(n);
          }
        }
        if (closed) {
          return;
        }
        Map<Algorithm, byte[]> done = null;
        synchronized (t) {
          lane.hashed = to;
          if (to == file.size()) {
            lane.running = false;
            t.digests.put(lane.algorithm, lane.hasher.finish());
            if (t.digests.size() == t.lanes.size()) {
              done = new EnumMap<>(t.digests);
            }
          }
        }
        if (to == file.size()) {
          if (done != null) {
            onDigested.accept(new FileDigests(file, done));
          }
          return;
        }
      }
    } catch (RuntimeException e) {
      if (!closed) {
        onError.accept(file, e);
      }
    }
  }

  /** Stops hashing and waits until no task reads the store (through interrupts). */
  @Override
  public void close() {
    closed = true;
    pool.shutdownNow();
    boolean interrupted = false;
    while (true) {
      try {
        if (pool.awaitTermination(1, TimeUnit.MINUTES)) {
          break;
        }
        log.warn("still waiting for the digests of {} to stop", stored.artifactId());
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  /** One file: its stored ranges past the contiguous prefix and its digests. */
  private static final class Track {
    final SourceFile file;
    final List<Lane> lanes = new ArrayList<>();
    final Map<Algorithm, byte[]> digests = new EnumMap<>(Algorithm.class);

    /** Stored ranges that start past the prefix: start → end. */
    final TreeMap<Long, Long> ahead = new TreeMap<>();

    long contiguous;

    /** Windows that start below this offset are read through the file ({@link #kept}). */
    long keptEnd;

    Track(SourceFile file, Set<Algorithm> algorithms) {
      this.file = file;
      if (algorithms.isEmpty()) {
        lanes.add(new Lane(Algorithm.SHA256, file.size()));
      }
      for (Algorithm a : new java.util.TreeSet<>(algorithms)) {
        lanes.add(new Lane(a, file.size()));
      }
    }

    /** Adds {@code [start, end)}; merges whatever now continues the prefix into it. */
    void addRange(long start, long end) {
      if (start <= contiguous) {
        contiguous = Math.max(contiguous, end);
      } else {
        Long have = ahead.get(start);
        ahead.put(start, have == null ? end : Math.max(have, end));
      }
      Entry<Long, Long> e;
      while ((e = ahead.firstEntry()) != null && e.getKey() <= contiguous) {
        contiguous = Math.max(contiguous, e.getValue());
        ahead.pollFirstEntry();
      }
    }
  }

  /** One algorithm of one file: its hasher and how far it has hashed. */
  private static final class Lane {
    final Algorithm algorithm;
    final DigestHasher hasher;
    long hashed;
    boolean running;

    Lane(Algorithm algorithm, long size) {
      this.algorithm = algorithm;
      this.hasher = SourceDigests.hasher(algorithm, size);
    }
  }
}
