package io.tensorcast.dataplane.load;

import io.tensorcast.api.Reason;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.format.FormatLimits;
import io.tensorcast.dataplane.format.safetensors.SafetensorsFormatException;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.torch.ByteSource;
import io.tensorcast.dataplane.format.torch.TorchCheckpoint;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.PublishedDigest;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.store.LockStatus;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoreException;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads one artifact from a source into the page-locked store: resolve (list, read and validate
 * safetensors headers and torch checkpoint structures within the {@link FormatLimits}, check index
 * files against them) → admit (size against the limit and the store's budget, before any byte is
 * read) → load (parallel ranged reads straight into the store's mappings) → verify (structure and
 * digests of the bytes in the store) → Ready.
 *
 * <p>When the store already holds a complete copy of exactly the listed files (adopted and
 * re-hashed by {@link PinnedStore} after a restart of the data plane), the headers are validated
 * from that copy and the load is Ready after the listing alone: nothing else is read from the
 * source. A {@link StoreFiller} is then told to offer the copy to others ({@link
 * StoreFiller#serveComplete}: the peer swarm announces and serves every piece).
 *
 * <p>One instance loads one artifact once. {@link #status()} may be called from any thread at any
 * time; it reports only what the bytes in the store back. On failure the artifact's memory is
 * released and the status keeps the reason.
 */
public final class ArtifactLoader {
  private static final Logger log = LoggerFactory.getLogger(ArtifactLoader.class);

  /**
   * What to load and how.
   *
   * @param artifactId store identifier (DNS-1123 label)
   * @param memoryLimitBytes refuse an artifact larger than this; 0 for no limit
   * @param read options of the parallel ranged reader
   * @param limits bounds of the format readers (headers, pickles, zip, index files)
   */
  public record Options(
      String artifactId, long memoryLimitBytes, ReadOptions read, FormatLimits limits) {
    public Options {
      Objects.requireNonNull(artifactId, "artifactId");
      Objects.requireNonNull(read, "read");
      Objects.requireNonNull(limits, "limits");
      if (memoryLimitBytes < 0) {
        throw new IllegalArgumentException("memoryLimitBytes must be >= 0");
      }
    }

    /** With the default {@link FormatLimits}. */
    public Options(String artifactId, long memoryLimitBytes, ReadOptions read) {
      this(artifactId, memoryLimitBytes, read, FormatLimits.DEFAULT);
    }
  }

  private final ArtifactSource source;
  private final PinnedStore store;
  private final Options options;
  private final LoadMetrics metrics;
  private final LoadState state;
  private final StoreFiller filler;

  public ArtifactLoader(
      ArtifactSource source, PinnedStore store, Options options, LoadMetrics metrics) {
    this(source, store, options, metrics, null);
  }

  /**
   * @param filler fills the store instead of the parallel ranged read from the source (the
   *     peer-to-peer distribution), or null for the source-only load
   */
  public ArtifactLoader(
      ArtifactSource source,
      PinnedStore store,
      Options options,
      LoadMetrics metrics,
      StoreFiller filler) {
    this.filler = filler;
    this.source = Objects.requireNonNull(source, "source");
    this.store = Objects.requireNonNull(store, "store");
    this.options = Objects.requireNonNull(options, "options");
    this.metrics = Objects.requireNonNull(metrics, "metrics");
    this.state = new LoadState(options.artifactId(), source.describe());
    metrics.bind(state);
  }

  /** A consistent snapshot of where the load is. */
  public DataPlaneStatus status() {
    return state.snapshot();
  }

  /**
   * Runs the load to completion on the calling thread.
   *
   * @return the final status ({@link Phase#Ready})
   * @throws LoadFailure with a reason and a message naming the file and rule, after the store's
   *     memory for this artifact was released
   */
  public DataPlaneStatus load() throws LoadFailure {
    StoredArtifact stored = null;
    try {
      state.phase(Phase.Resolving);
      long resolving = System.nanoTime();
      List<SourceFile> files = listFiles();
      // After a restart of this pod the store may have adopted a complete, re-hashed copy of
      // exactly these files: its headers are then read from the store, not from the source.
      StoredArtifact kept = completeCopy(files);
      Map<String, PublishedDigest> keptDigests = kept == null ? null : verifyKept(kept, files);
      if (keptDigests == null) {
        kept = null;
      }
      Map<String, SafetensorsHeader> headers =
          kept != null ? headersInStore(kept, files) : readHeaders(files);
      Map<String, TorchCheckpoint> checkpoints =
          kept != null ? checkpointsInStore(kept, files) : readCheckpoints(files);
      StoredArtifact keptCopy = kept;
      ShardIndexes.validate(
          files,
          source.filter(),
          headers,
          checkpoints,
          options.limits(),
          kept != null
              ? f -> bytesInStore(keptCopy, f, 0, Math.toIntExact(f.size()))
              : f ->
                  HeaderFetcher.fetchBytes(
                      source, f, options.read().maxAttempts(), state::retried));
      state.resolved(
          files,
          headers,
          checkpoints.values().stream().mapToLong(c -> c.tensors().size()).sum(),
          source.resolvedRevision().orElseGet(() -> revisionOf(files)));

      long total = files.stream().mapToLong(SourceFile::size).sum();
      admit(total);
      if (kept != null) {
        state.locked(kept.lockStatus(), kept.directory().toString());
        for (SourceFile f : files) {
          state.fileComplete(
              f.path(), kept.completedSha256(f.path()).orElseThrow(), keptDigests.get(f.path()));
        }
        state.adopted(total);
        if (filler != null) {
          filler.serveComplete(kept, files);
        }
        state.ready(Instant.now());
        log.info(
            "artifact {} already complete in {}; nothing read from the source",
            options.artifactId(),
            kept.directory());
        return state.snapshot();
      }
      discardStaleCopy();
      long allocating = System.nanoTime();
      stored = allocate(files);
      state.locked(stored.lockStatus(), stored.directory().toString());
      log.info(
          "artifact {}: {} files listed and their headers read in {} ms; {} bytes allocated in {}"
              + " ms ({})",
          options.artifactId(),
          files.size(),
          (allocating - resolving) / 1_000_000,
          total,
          (System.nanoTime() - allocating) / 1_000_000,
          stored.lockStatus().message());

      state.phase(Phase.Loading);
      StoredArtifact target = stored;
      if (filler != null) {
        fillWith(filler, stored, files);
      } else {
        readAll(
            files,
            new RangeSink() {
              @Override
              public ByteBuffer target(SourceFile file, long offset, int length) {
                return target.writable(file.path(), offset, length);
              }

              @Override
              public void rangeCompleted(SourceFile file, long offset, int length) {}
            });
      }

      state.phase(Phase.Verifying);
      long verifying = System.nanoTime();
      verifyAll(stored, files, headers, checkpoints);
      state.ready(Instant.now());
      log.info(
          "artifact {} ready: {} files, {} bytes in {} (verified in {} ms)",
          options.artifactId(),
          files.size(),
          total,
          stored.directory(),
          (System.nanoTime() - verifying) / 1_000_000);
      return state.snapshot();
    } catch (LoadFailure f) {
      fail(stored, f);
      throw f;
    } catch (RuntimeException e) {
      LoadFailure f = new LoadFailure(Reason.InternalError, String.valueOf(e), e);
      fail(stored, f);
      throw f;
    }
  }

  private void fillWith(StoreFiller f, StoredArtifact stored, List<SourceFile> files)
      throws LoadFailure {
    try {
      f.fill(source, stored, files, options.read(), state);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LoadFailure(Reason.Interrupted, "interrupted while loading", e);
    }
  }

  private void readAll(List<SourceFile> files, RangeSink sink) throws LoadFailure {
    try {
      ReadResult r = new ParallelRangeReader(options.read()).read(source, files, sink, state);
      log.info(
          "read {} bytes in {} ranges with {} requests ({} retries) in {}",
          r.bytes(),
          r.ranges(),
          r.requests(),
          r.retries(),
          r.elapsed());
    } catch (RangeReadException e) {
      throw new LoadFailure(e.reason(), e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LoadFailure(Reason.Interrupted, "interrupted while loading", e);
    }
  }

  private void fail(StoredArtifact stored, LoadFailure f) {
    if (stored != null) {
      try {
        store.unload(options.artifactId());
      } catch (StoreException | RuntimeException e) {
        f.addSuppressed(e);
      }
    }
    state.failed(f.reason(), f.getMessage());
    log.warn("artifact {} failed: {}: {}", options.artifactId(), f.reason(), f.getMessage());
  }

  private List<SourceFile> listFiles() throws LoadFailure {
    List<SourceFile> files;
    try {
      files = source.list();
    } catch (SourceException e) {
      throw new LoadFailure(e.reason(), source.describe() + ": " + e.getMessage(), e);
    }
    if (files.isEmpty()) {
      throw new LoadFailure(
          Reason.EmptyArtifact,
          source.describe() + " has no files (after include/exclude filters); nothing to load");
    }
    incompleteShardLayout(files);
    return files;
  }

  private static final Pattern RANK_FILE = Pattern.compile("(?:.*/)?rank_[0-9]{5}\\.safetensors");

  /**
   * Refuses rank files of a TP shard layout without their {@code manifest.json} in the same
   * directory: the manifest is the layout's commit point (a save writes it last), so without it the
   * layout is half written, and loading the rank files as plain files would serve it anyway.
   */
  private void incompleteShardLayout(List<SourceFile> files) throws LoadFailure {
    Set<String> manifests = new HashSet<>();
    for (SourceFile f : files) {
      if (f.path().equals("manifest.json") || f.path().endsWith("/manifest.json")) {
        manifests.add(f.path().substring(0, f.path().length() - "manifest.json".length()));
      }
    }
    for (SourceFile f : files) {
      if (RANK_FILE.matcher(f.path()).matches()) {
        String dir = f.path().substring(0, f.path().lastIndexOf('/') + 1);
        if (!manifests.contains(dir)) {
          throw new LoadFailure(
              Reason.IncompleteArtifact,
              source.describe()
                  + ": "
                  + f.path()
                  + " is a rank file of a TP shard layout, but "
                  + dir
                  + "manifest.json is missing; a layout is complete only with its manifest,"
                  + " which a save writes last (one may be in progress)");
        }
      }
    }
  }

  /** Reads and validates every safetensors header with two small ranged reads per file. */
  private Map<String, SafetensorsHeader> readHeaders(List<SourceFile> files) throws LoadFailure {
    List<SourceFile> st = files.stream().filter(f -> f.path().endsWith(".safetensors")).toList();
    Map<String, SafetensorsHeader> out = new LinkedHashMap<>();
    List<SafetensorsHeader> headers = inParallel(st, this::readHeader);
    for (int i = 0; i < st.size(); i++) {
      out.put(st.get(i).path(), headers.get(i));
    }
    return out;
  }

  /**
   * Reads and validates every torch checkpoint's structure ({@code .pt}, {@code .pth}, {@code
   * .bin}) with ranged reads of its zip directory, local headers and pickle; a checkpoint whose
   * pickle needs code is refused ({@code InvalidTorchCheckpoint}).
   */
  private Map<String, TorchCheckpoint> readCheckpoints(List<SourceFile> files) throws LoadFailure {
    List<SourceFile> pt = files.stream().filter(f -> HeaderFetcher.isTorchPath(f.path())).toList();
    Map<String, TorchCheckpoint> out = new LinkedHashMap<>();
    List<Optional<TorchCheckpoint>> checkpoints =
        inParallel(
            pt,
            f ->
                HeaderFetcher.fetchTorch(
                    source,
                    f,
                    options.limits().torch(),
                    options.read().maxAttempts(),
                    state::retried));
    for (int i = 0; i < pt.size(); i++) {
      Optional<TorchCheckpoint> c = checkpoints.get(i);
      if (c.isPresent()) {
        out.put(pt.get(i).path(), c.get());
      }
    }
    return out;
  }

  /** A per-file read that may fail the load. */
  @FunctionalInterface
  private interface FileRead<T> {
    T read(SourceFile f) throws LoadFailure;
  }

  /**
   * {@code read} of every file, up to {@code --concurrency} at a time, results in the files' order;
   * the first {@link LoadFailure} fails the whole.
   */
  private <T> List<T> inParallel(List<SourceFile> files, FileRead<T> read) throws LoadFailure {
    if (files.isEmpty()) {
      return List.of();
    }
    int threads = Math.max(1, Math.min(options.read().concurrency(), files.size()));
    ExecutorService pool = Executors.newFixedThreadPool(threads, daemon("tensorcast-headers"));
    try {
      List<Future<T>> futures = new ArrayList<>();
      for (SourceFile f : files) {
        futures.add(pool.submit(() -> read.read(f)));
      }
      List<T> out = new ArrayList<>(files.size());
      for (Future<T> future : futures) {
        out.add(future.get());
      }
      return out;
    } catch (ExecutionException e) {
      if (e.getCause() instanceof LoadFailure f) {
        throw f;
      }
      throw new LoadFailure(Reason.InternalError, String.valueOf(e.getCause()), e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LoadFailure(Reason.Interrupted, "interrupted while reading headers", e);
    } finally {
      pool.shutdownNow();
    }
  }

  /** The torch checkpoints of a complete copy, read and validated from the store's bytes. */
  private Map<String, TorchCheckpoint> checkpointsInStore(
      StoredArtifact stored, List<SourceFile> files) throws LoadFailure {
    Map<String, TorchCheckpoint> out = new LinkedHashMap<>();
    for (SourceFile f : files) {
      if (HeaderFetcher.isTorchPath(f.path())) {
        Optional<TorchCheckpoint> c = checkpointInStore(stored, f);
        if (c.isPresent()) {
          out.put(f.path(), c.get());
        }
      }
    }
    return out;
  }

  private Optional<TorchCheckpoint> checkpointInStore(StoredArtifact stored, SourceFile f)
      throws LoadFailure {
    return HeaderFetcher.readTorch(
        f,
        options.limits().torch(),
        new ByteSource() {
          @Override
          public long size() {
            return f.size();
          }

          @Override
          public void read(long offset, ByteBuffer dst) throws java.io.EOFException {
            if (offset < 0 || offset + dst.remaining() > f.size()) {
              throw new java.io.EOFException(
                  f.path() + ": range " + offset + "+" + dst.remaining() + " outside the file");
            }
            stored.read(f.path(), offset, dst);
          }
        });
  }

  private SafetensorsHeader readHeader(SourceFile f) throws LoadFailure {
    return HeaderFetcher.fetch(
        source, f, options.limits().safetensors(), options.read().maxAttempts(), state::retried);
  }

  private void admit(long total) throws LoadFailure {
    long limit = options.memoryLimitBytes();
    if (limit > 0 && total > limit) {
      throw new LoadFailure(
          Reason.ArtifactTooLarge,
          "artifact is "
              + total
              + " bytes, over the memory limit of "
              + limit
              + " bytes (spec.memory.limit)");
    }
  }

  private StoredArtifact allocate(List<SourceFile> files) throws LoadFailure {
    List<StoreFile> entries = files.stream().map(f -> new StoreFile(f.path(), f.size())).toList();
    try {
      return store.allocate(options.artifactId(), entries);
    } catch (StoreException e) {
      throw new LoadFailure(e.reason(), e.getMessage(), e);
    } catch (IllegalArgumentException e) {
      throw new LoadFailure(Reason.UnsafePath, e.getMessage(), e);
    }
  }

  /**
   * A complete copy of this artifact that the store adopted after a restart, holding exactly the
   * listed files with the listed sizes (the store re-hashed it when adopting), or null.
   */
  private StoredArtifact completeCopy(List<SourceFile> files) {
    StoredArtifact a = store.get(options.artifactId()).orElse(null);
    if (a == null || !a.isComplete()) {
      return null;
    }
    List<StoreFile> wanted = files.stream().map(f -> new StoreFile(f.path(), f.size())).toList();
    return a.files().equals(wanted) ? a : null;
  }

  /**
   * Checks a complete copy adopted after a restart against the source's published digests (the
   * store re-hashed it against its own recorded SHA-256 only): the digest per file, or null when a
   * file differs (logged; the copy is then discarded and loaded again).
   */
  private Map<String, PublishedDigest> verifyKept(StoredArtifact kept, List<SourceFile> files)
      throws LoadFailure {
    List<PublishedDigest> digests =
        inParallel(
            files,
            f -> {
              try {
                return source.publishedDigest(f);
              } catch (SourceException e) {
                throw new LoadFailure(e.reason(), e.getMessage(), e);
              }
            });
    Map<String, PublishedDigest> out = new LinkedHashMap<>();
    for (int i = 0; i < files.size(); i++) {
      SourceFile f = files.get(i);
      PublishedDigest d = digests.get(i);
      boolean ok;
      if (!d.present()) {
        ok = true;
      } else if (d.algorithm() == PublishedDigest.Algorithm.SHA256) {
        ok = d.valueHex().equalsIgnoreCase(kept.completedSha256(f.path()).orElse(""));
      } else {
        ok =
            java.util.Arrays.equals(
                SourceDigests.compute(kept, f.path(), f.size(), d.algorithm()), d.value());
      }
      if (!ok) {
        log.warn(
            "artifact {}: the copy left in the store has {} that differs from the source's {};"
                + " loading it again",
            options.artifactId(),
            f.path(),
            d.description());
        return null;
      }
      out.put(f.path(), d);
    }
    return out;
  }

  /** Unloads what the store holds under this artifact's id: an incomplete or different copy. */
  private void discardStaleCopy() throws LoadFailure {
    if (store.get(options.artifactId()).isEmpty()) {
      return;
    }
    try {
      store.unload(options.artifactId());
    } catch (StoreException e) {
      throw new LoadFailure(e.reason(), e.getMessage(), e);
    }
  }

  /** The safetensors headers of a complete copy, read and validated from the store's bytes. */
  private Map<String, SafetensorsHeader> headersInStore(
      StoredArtifact stored, List<SourceFile> files) throws LoadFailure {
    Map<String, SafetensorsHeader> out = new LinkedHashMap<>();
    for (SourceFile f : files) {
      if (f.path().endsWith(".safetensors")) {
        out.put(f.path(), headerInStore(stored, f));
      }
    }
    return out;
  }

  /**
   * Parses the safetensors header of {@code file} from its bytes in the store.
   *
   * @throws LoadFailure {@code InvalidSafetensors} naming the file and the rule broken
   */
  private SafetensorsHeader headerInStore(StoredArtifact stored, SourceFile file)
      throws LoadFailure {
    var limits = options.limits().safetensors();
    try {
      if (file.size() < SafetensorsHeader.LENGTH_PREFIX_BYTES) {
        return SafetensorsHeader.parse(
            file.path(), file.size(), bytesInStore(stored, file, 0, (int) file.size()), limits);
      }
      long headerLen =
          SafetensorsHeader.readHeaderLength(
              file.path(),
              bytesInStore(stored, file, 0, SafetensorsHeader.LENGTH_PREFIX_BYTES),
              file.size(),
              limits);
      return SafetensorsHeader.parse(
          file.path(),
          file.size(),
          bytesInStore(
              stored, file, SafetensorsHeader.LENGTH_PREFIX_BYTES, Math.toIntExact(headerLen)),
          limits);
    } catch (SafetensorsFormatException e) {
      throw new LoadFailure(Reason.InvalidSafetensors, e.getMessage(), e);
    }
  }

  private static byte[] bytesInStore(StoredArtifact stored, SourceFile f, long offset, int len) {
    byte[] bytes = new byte[len];
    stored.read(f.path(), offset, ByteBuffer.wrap(bytes));
    return bytes;
  }

  /**
   * Verifies every file, several at once (one SHA-256 per file is sequential; files are not), on at
   * most as many threads as there are processors. Reports the first failure in file order.
   */
  private void verifyAll(
      StoredArtifact stored,
      List<SourceFile> files,
      Map<String, SafetensorsHeader> headers,
      Map<String, TorchCheckpoint> checkpoints)
      throws LoadFailure {
    int threads = Math.min(files.size(), Runtime.getRuntime().availableProcessors());
    if (threads <= 1) {
      for (SourceFile file : files) {
        verify(stored, file, headers.get(file.path()), checkpoints.get(file.path()));
      }
      return;
    }
    // Hashing holds the artifact's read lock, so an unload after a failure waits for it.
    ExecutorService pool = Executors.newFixedThreadPool(threads, daemon("tensorcast-verify"));
    try {
      List<Future<?>> futures = new ArrayList<>();
      for (SourceFile file : files) {
        futures.add(
            pool.submit(
                () -> {
                  verify(stored, file, headers.get(file.path()), checkpoints.get(file.path()));
                  return null;
                }));
      }
      for (Future<?> f : futures) {
        f.get();
      }
    } catch (ExecutionException e) {
      if (e.getCause() instanceof LoadFailure f) {
        throw f;
      }
      if (e.getCause() instanceof RuntimeException r) {
        throw r;
      }
      throw new LoadFailure(Reason.InternalError, String.valueOf(e.getCause()), e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LoadFailure(Reason.Interrupted, "interrupted while verifying", e);
    } finally {
      // No verification may report a file complete after this returns (e.g. after a failure).
      pool.shutdownNow();
      awaitTermination(pool);
    }
  }

  /** Waits for a pool's threads to end, through interrupts; restores the interrupt status. */
  private static void awaitTermination(ExecutorService pool) {
    boolean interrupted = false;
    while (true) {
      try {
        if (pool.awaitTermination(1, java.util.concurrent.TimeUnit.MINUTES)) {
          break;
        }
        log.warn("still waiting for {} to finish", pool);
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Checks one file's bytes in the store: the safetensors header in the store must be the header
   * validated before loading (so the structure check applies to the bytes consumers will read), and
   * the SHA-256 must equal the source's when it gives one.
   */
  private void verify(
      StoredArtifact stored, SourceFile file, SafetensorsHeader header, TorchCheckpoint checkpoint)
      throws LoadFailure {
    if (checkpoint != null) {
      Optional<TorchCheckpoint> again = checkpointInStore(stored, file);
      if (again.isEmpty() || !again.get().equals(checkpoint)) {
        throw new LoadFailure(
            Reason.ObjectChanged,
            file.path()
                + ": the torch checkpoint in the loaded bytes differs from the one read before"
                + " loading; the object changed during the load, resolve the artifact again");
      }
    }
    if (header != null) {
      SafetensorsHeader again = headerInStore(stored, file);
      if (!again.equals(header)) {
        throw new LoadFailure(
            Reason.ObjectChanged,
            file.path()
                + ": the header in the loaded bytes differs from the one read before loading;"
                + " the object changed during the load, resolve the artifact again");
      }
    }
    PublishedDigest digest;
    try {
      source.checkUnchanged(file);
      digest = source.publishedDigest(file);
    } catch (SourceException e) {
      throw new LoadFailure(e.reason(), e.getMessage(), e);
    }
    checkDigest(stored, file, digest);
    String sha;
    try {
      sha =
          stored.markComplete(
              file.path(),
              digest.algorithm() == PublishedDigest.Algorithm.SHA256 ? digest.valueHex() : null);
    } catch (StoreException e) {
      throw new LoadFailure(
          e.reason() == Reason.ChecksumMismatch ? Reason.DigestMismatch : e.reason(),
          e.getMessage() + " (" + digest.description() + ")",
          e);
    }
    state.fileComplete(file.path(), sha, digest);
  }

  /**
   * Checks the bytes of {@code file} in the store against a published digest other than SHA-256
   * (which {@link StoredArtifact#markComplete(String, String)} checks in its own pass).
   *
   * @throws LoadFailure {@code DigestMismatch} naming the file, the digest and both values
   */
  private static void checkDigest(StoredArtifact stored, SourceFile file, PublishedDigest digest)
      throws LoadFailure {
    if (!digest.present() || digest.algorithm() == PublishedDigest.Algorithm.SHA256) {
      return;
    }
    byte[] actual = SourceDigests.compute(stored, file.path(), file.size(), digest.algorithm());
    if (!java.util.Arrays.equals(actual, digest.value())) {
      throw new LoadFailure(
          Reason.DigestMismatch,
          file.path()
              + ": the bytes in the store have "
              + digest.algorithm().label()
              + " "
              + HexFormat.of().formatHex(actual)
              + " but the source publishes "
              + digest.valueHex()
              + " ("
              + digest.description()
              + "); the file stays incomplete");
    }
  }

  /**
   * Identity of what was listed: a digest over (path, size, ETag) of every file. For sources that
   * have revisions of their own (the Hub's commit sha) the source's revision is used instead.
   */
  static String revisionOf(List<SourceFile> files) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      for (SourceFile f : files) {
        md.update(
            (f.path() + "\0" + f.size() + "\0" + f.etag() + "\n").getBytes(StandardCharsets.UTF_8));
      }
      return "listing-sha256:" + HexFormat.of().formatHex(md.digest()).substring(0, 16);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static java.util.concurrent.ThreadFactory daemon(String name) {
    return r -> {
      Thread t = new Thread(r, name);
      t.setDaemon(true);
      return t;
    };
  }

  static DataPlaneStatus.LockInfo lockInfo(LockStatus s) {
    return new DataPlaneStatus.LockInfo(
        s.locked(), s.lockedBytes(), s.reason().name(), s.message());
  }
}
