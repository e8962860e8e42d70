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
import io.tensorcast.dataplane.source.Backoff;
import io.tensorcast.dataplane.source.PublishedDigest;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.store.ContentDigest;
import io.tensorcast.dataplane.store.InsufficientMemoryException;
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
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads one artifact from a source into the page-locked store: list → ask the source for each
 * file's published digest, all files in parallel, while the files are admitted (size against the
 * limit and the store's budget, before any file byte is read) and allocated → load (parallel ranged
 * reads straight into the store, or a {@link StoreFiller}) while the safetensors headers and torch
 * checkpoint structures are read and validated within the {@link FormatLimits} and the index files
 * checked against the headers ({@code Metadata}) → verify → Ready. A header or structure that
 * breaks its rules stops the load with its rule, whenever it arrives.
 *
 * <p>Verification runs while the bytes arrive ({@link PrefixDigester}): each file's digest (the
 * source's, or a SHA-256 where the source publishes none) follows the contiguous prefix of its
 * stored bytes, and a file whose last byte is hashed is checked at once — its header or checkpoint
 * structure read again from the store and compared with the one validated from the source, the
 * source unchanged, the digest equal to the source's — and marked complete with that digest. After
 * the last byte only the tail of the hashing remains. A file that fails its check stops the load.
 *
 * <p>When the store already holds a complete copy of exactly the listed files (adopted and
 * re-hashed by {@link PinnedStore} after a restart of the data plane), the headers are validated
 * from that copy and the load is Ready after the listing alone: nothing else is read from the
 * source. A {@link StoreFiller} is then told to offer the copy to others ({@link
 * StoreFiller#serveComplete}: the peer swarm announces and serves every piece).
 *
 * <p>A load that fails on a transient reason ({@link LoadFailure#isTransient}) leaves its copy in
 * the store with the ranges it stored ({@link StoredArtifact#recordStored}). The next load of the
 * same files (paths and sizes) resumes it: from the source alone, complete files and stored ranges
 * of every object whose ETag is unchanged are kept (the ranges hashed again from the store), the
 * rest is read; with a {@link StoreFiller}, the filler is handed the copy and keeps the pieces
 * recorded under the listed ETags (the peer swarm confirms each against its reader's hash). An
 * object that changed under the load ({@code ObjectChanged}) fails it as the transient {@link
 * Reason#SourceChanged}, so the next load lists again and reads only the changed files.
 *
 * <p>Every request of one load to the source — the listing, a file's published digest, header and
 * structure reads, index files, the ranged reads of the data and a {@link StoreFiller}'s source
 * reads — is paced by one {@link ThrottleGate}: a refusal as {@code Throttled} closes it until the
 * server's {@code Retry-After} (or the {@link Backoff}'s delay), no request of the load goes out
 * while it is closed, and the load fails as {@code Throttled} only once it has been closed for
 * longer than {@link ReadOptions#throttleBudget()} in total. Metadata requests refused as throttled
 * are asked again once it opens ({@link ThrottleWait}). What they get is kept in a {@link
 * KeptMetadata} that the loads of one artifact share, so a load after a transient failure asks the
 * source only for what earlier loads did not get (and never uses what was got for another ETag).
 *
 * <p>One instance loads one artifact once. {@link #status()} may be called from any thread at any
 * time; it reports only what the bytes in the store back. On failure the artifact's memory is
 * released and the status keeps the reason.
 */
public final class ArtifactLoader implements Loader {
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
  private final KeptMetadata metadata;
  private final ThrottleGate gate;

  /**
   * The fewest files whose metadata (header or structure reads, published digest) a load resolves
   * at once, whatever {@code --concurrency} says: these requests are small, so their number in
   * flight, not bandwidth, sets how fast they are answered — under a throttling storm too, where
   * they all wait at the load's {@link ThrottleGate} and go out together when it opens.
   */
  public static final int METADATA_CONCURRENCY = 16;

  /**
   * How many files' metadata a load with {@code read} resolves at once: {@code max(concurrency,
   * }{@link #METADATA_CONCURRENCY}{@code )}; a source's connection pool should be at least as
   * large.
   */
  public static int metadataConcurrency(ReadOptions read) {
    return Math.max(read.concurrency(), METADATA_CONCURRENCY);
  }

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
    this(source, store, options, metrics, filler, new KeptMetadata());
  }

  /**
   * @param filler fills the store instead of the parallel ranged read from the source (the
   *     peer-to-peer distribution), or null for the source-only load
   * @param kept what earlier loads of this artifact in this process learnt from the source
   *     (listing, headers, digests), used instead of asking again and added to by this load; one
   *     instance per artifact, passed to each of its loads
   */
  public ArtifactLoader(
      ArtifactSource source,
      PinnedStore store,
      Options options,
      LoadMetrics metrics,
      StoreFiller filler,
      KeptMetadata kept) {
    this.filler = filler;
    this.metadata = Objects.requireNonNull(kept, "kept");
    this.gate =
        new ThrottleGate(
            new Backoff(options.read().backoffBase(), options.read().backoffCap()),
            options.read().throttleBudget());
    this.source = Objects.requireNonNull(source, "source");
    this.store = Objects.requireNonNull(store, "store");
    this.options = Objects.requireNonNull(options, "options");
    this.metrics = Objects.requireNonNull(metrics, "metrics");
    this.state = new LoadState(options.artifactId(), source.describe());
    metrics.bind(state);
  }

  /** A consistent snapshot of where the load is. */
  @Override
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
  @Override
  public DataPlaneStatus load() throws LoadFailure {
    StoredArtifact stored = null;
    Verification verification = null;
    Metadata structures = null;
    try {
      state.phase(Phase.Resolving);
      long resolving = System.nanoTime();
      List<SourceFile> files = listFiles();
      long listed = System.nanoTime();
      // After a restart of this pod the store may have adopted a complete, re-hashed copy of
      // exactly these files: its headers are then read from the store, not from the source.
      StoredArtifact kept = completeCopy(files);
      Map<String, PublishedDigest> keptDigests = kept == null ? null : verifyKept(kept, files);
      if (keptDigests == null) {
        kept = null;
      }
      if (kept != null) {
        return adopt(kept, files, keptDigests);
      }
      long total = files.stream().mapToLong(SourceFile::size).sum();
      String revision = source.resolvedRevision().orElseGet(() -> revisionOf(files));
      state.resolved(files, Map.of(), 0, revision);
      if (filler != null) {
        filler.prepare(files); // the peer transport starts while the digests are read
      }
      // Nothing of this artifact in the store (a cold load): its files are created, mapped and
      // locked while the digests and headers are read.
      Allocation early = store.get(options.artifactId()).isEmpty() ? startAllocation(files) : null;
      // The headers, checkpoint structures and index files are read and validated alongside the
      // bytes: each file's check waits for them, and one that fails them stops the load.
      structures = new Metadata(files);
      // A filler (the peer swarm) starts without them: they are needed only by the checks at the
      // end of each file and by its check of peers' claims, which wait for them.
      Map<String, PublishedDigest> digests = null;
      try {
        if (filler == null) {
          digests = structures.digests(files);
        }
        structures.throwIfFailed();
      } catch (LoadFailure | RuntimeException e) {
        structures.stop();
        if (early != null) {
          early.release(e);
        }
        throw e;
      }

      long digestsRead = System.nanoTime();
      long allocationNanos;
      StoredArtifact resumed = null;
      try {
        if (early != null) {
          stored = early.await();
          allocationNanos = early.nanos;
        } else {
          admit(total);
          resumed = resumableCopy(files);
          if (resumed != null) {
            stored = resumed;
          } else {
            discardStaleCopy();
            stored = allocate(files);
          }
          allocationNanos = System.nanoTime() - digestsRead;
        }
      } catch (LoadFailure e) {
        // A header that breaks its rules is reported before the size or memory the same
        // artifact also exceeds, as when the allocation waited for the headers.
        throw structures.failureOr(e);
      }
      state.locked(stored.lockStatus(), stored.directory().toString());
      log.info(
          "artifact {}: {} files listed in {} ms{}; {} bytes allocated in {}"
              + " ms{} ({}); loading while the headers{} are read",
          options.artifactId(),
          files.size(),
          (listed - resolving) / 1_000_000,
          digests != null
              ? " and their digests read in " + (digestsRead - resolving) / 1_000_000 + " ms"
              : "",
          total,
          allocationNanos / 1_000_000,
          early == null ? "" : digests != null ? " while the digests were read" : " alongside",
          stored.lockStatus().message(),
          digests != null ? "" : " and digests");

      state.phase(Phase.Loading);
      long loading = System.nanoTime();
      verification = new Verification(stored, files, digests);
      structures.then(verification, resolving);
      if (digests == null) {
        structures.digestsThen(verification, files);
      }
      if (filler != null) {
        if (resumed != null) {
          verification.reopenChanged();
        }
        verification.trackAll();
        fillWith(filler, stored, files, verification);
        verification.allStored();
      } else {
        readAll(verification.resume(), verification);
      }
      long lastByte = System.nanoTime();
      long hashedBefore = verification.hashedBytes();
      state.phase(Phase.Verifying);
      verification.await();
      state.ready(Instant.now());
      metadata.forgetListing();
      log.info(
          "artifact {} ready: {} files, {} bytes in {}; bytes in {} ms, verified {} ms after the"
              + " last byte ({} bytes hashed after it)",
          options.artifactId(),
          files.size(),
          total,
          stored.directory(),
          (lastByte - loading) / 1_000_000,
          (System.nanoTime() - lastByte) / 1_000_000,
          verification.hashedBytes() - hashedBefore);
      return state.snapshot();
    } catch (LoadFailure f) {
      LoadFailure g = sourceChanged(f);
      keepListingOnlyIfUnquestioned(g);
      fail(stored, verification, g);
      throw g;
    } catch (RuntimeException e) {
      LoadFailure f = new LoadFailure(Reason.InternalError, String.valueOf(e), e);
      metadata.forgetListing();
      fail(stored, verification, f);
      throw f;
    } finally {
      if (structures != null) {
        structures.stop();
      }
    }
  }

  /**
   * The listing stays kept for the next load only after a failure that says nothing about the
   * source's contents (throttled, unavailable); after any other the next load lists again.
   */
  private void keepListingOnlyIfUnquestioned(LoadFailure f) {
    if (f.reason() != Reason.Throttled && f.reason() != Reason.SourceUnavailable) {
      metadata.forgetListing();
    }
  }

  /** Ready from a complete copy the store adopted: nothing is read from the source. */
  private DataPlaneStatus adopt(
      StoredArtifact kept, List<SourceFile> files, Map<String, PublishedDigest> keptDigests)
      throws LoadFailure {
    Map<String, SafetensorsHeader> headers = headersInStore(kept, files);
    Map<String, TorchCheckpoint> checkpoints = checkpointsInStore(kept, files);
    ShardIndexes.validate(
        files,
        source.filter(),
        headers,
        checkpoints,
        options.limits(),
        f -> bytesInStore(kept, f, 0, Math.toIntExact(f.size())));
    state.resolved(
        files,
        headers,
        checkpoints.values().stream().mapToLong(c -> c.tensors().size()).sum(),
        source.resolvedRevision().orElseGet(() -> revisionOf(files)));
    long total = files.stream().mapToLong(SourceFile::size).sum();
    admit(total);
    state.locked(kept.lockStatus(), kept.directory().toString());
    for (SourceFile f : files) {
      state.fileComplete(
          f.path(), kept.completedDigest(f.path()).orElseThrow(), keptDigests.get(f.path()));
    }
    state.adopted(total);
    if (filler != null) {
      filler.serveComplete(kept, files);
    }
    state.ready(Instant.now());
    metadata.forgetListing();
    log.info(
        "artifact {} already complete in {}; nothing read from the source",
        options.artifactId(),
        kept.directory());
    return state.snapshot();
  }

  private void fillWith(
      StoreFiller f, StoredArtifact stored, List<SourceFile> files, Verification verification)
      throws LoadFailure {
    StoreFiller.FillProgress progress =
        new StoreFiller.FillProgress() {
          @Override
          public void fromSource(int count) {
            state.fromSource(count);
          }

          @Override
          public void fromPeers(int count) {
            state.fromPeers(count);
          }

          @Override
          public void retrying(ReadProgressListener.RetryEvent event) {
            state.retrying(event);
          }

          @Override
          public void kept(long count) {
            state.kept(count);
          }

          @Override
          public void stored(SourceFile file, long offset, int length) {
            verification.storedByFill(file, offset, length);
          }

          @Override
          public void whenDigestsKnown(Runnable then) {
            verification.digestsKnown.thenRun(then);
          }

          @Override
          public boolean publishesDigest(SourceFile file) {
            PublishedDigest d = verification.digest(file);
            return d != null && d.present();
          }

          @Override
          public boolean matchesPublishedDigest(SourceFile file) {
            PublishedDigest d = verification.digest(file);
            return d != null
                && d.present()
                && java.security.MessageDigest.isEqual(
                    SourceDigests.compute(stored, file.path(), file.size(), d.algorithm()),
                    d.value());
          }
        };
    verification.fillStarts();
    try {
      f.fill(source, stored, files, options.read(), gate, progress);
    } catch (InterruptedException e) {
      verification.fillEnded();
      Thread.currentThread().interrupt();
      throw new LoadFailure(Reason.Interrupted, "interrupted while loading", e);
    } catch (LoadFailure | RuntimeException e) {
      // Also unchecked: the structures' interrupt can surface as one (an interruptible channel's
      // ClosedByInterruptException, wrapped) with the interrupt still set. fillEnded clears it,
      // reports the structures' failure, and keeps a later failure from interrupting this thread.
      try {
        verification.fillEnded();
      } catch (LoadFailure structures) {
        if (structures != e) {
          structures.addSuppressed(e);
        }
        throw structures;
      }
      throw e;
    }
    verification.fillEnded();
  }

  /**
   * An object changed under the load ({@code ObjectChanged}): the load is loaded again ({@link
   * Reason#SourceChanged}, transient) against a new listing; files that did not change keep their
   * bytes, the changed ones are read again whole. The same under a filler: the peer swarm keeps
   * only pieces recorded under each file's newly listed version, and a member that listed the new
   * version makes the others check the source and list again ({@code PeerSwarm#otherListing}).
   */
  private LoadFailure sourceChanged(LoadFailure f) {
    if (f.reason() != Reason.ObjectChanged) {
      return f;
    }
    return new LoadFailure(
        Reason.SourceChanged,
        f.getMessage()
            + "; loading again from a new listing: files that did not change keep their bytes",
        f);
  }

  /**
   * The copy an earlier load of this artifact left in the store, to resume; or null. An incomplete
   * copy of exactly these files (paths and sizes) is resumed as it is. A copy of other files (the
   * source changed since it was laid out: an object replaced by one of another size, a file added
   * or removed) that shares files of the same path and size with the listing is laid out again
   * ({@link PinnedStore#relayout}): the shared files keep their bytes and the versions they were
   * read from (so {@link Verification#resume} keeps what is still current), the others are created
   * anew and read whole.
   */
  private StoredArtifact resumableCopy(List<SourceFile> files) throws LoadFailure {
    StoredArtifact a = store.get(options.artifactId()).orElse(null);
    if (a == null) {
      return null;
    }
    List<StoreFile> wanted = files.stream().map(f -> new StoreFile(f.path(), f.size())).toList();
    if (a.files().equals(wanted)) {
      return a.isComplete() ? null : a;
    }
    Set<StoreFile> shared = new HashSet<>(a.files());
    shared.retainAll(wanted);
    if (shared.isEmpty()) {
      return null;
    }
    List<String> changed = new ArrayList<>();
    for (StoreFile f : wanted) {
      if (!shared.contains(f)) {
        changed.add(f.path());
      }
    }
    Set<String> listed = new HashSet<>();
    wanted.forEach(f -> listed.add(f.path()));
    List<String> gone =
        a.files().stream().map(StoreFile::path).filter(p -> !listed.contains(p)).toList();
    StoredArtifact laidOut;
    try {
      laidOut = store.relayout(options.artifactId(), wanted);
    } catch (InsufficientMemoryException e) {
      // The growth does not fit: the copy is dropped and the allocation refused as it would be.
      return null;
    } catch (StoreException e) {
      throw new LoadFailure(e.reason(), e.getMessage(), e);
    }
    String message =
        "the source changed under an earlier load: "
            + (changed.isEmpty() ? "" : "new or resized " + changed)
            + (changed.isEmpty() || gone.isEmpty() ? "" : ", ")
            + (gone.isEmpty() ? "" : "no longer listed " + gone)
            + "; "
            + shared.size()
            + " files listed with the same path and size keep the bytes of their listed version,"
            + " only the rest is read";
    state.sourceChanged(message);
    log.info("artifact {}: {}", options.artifactId(), message);
    return laidOut;
  }

  private void readAll(List<ParallelRangeReader.FileRange> ranges, Verification sink)
      throws LoadFailure {
    if (ranges.isEmpty()) {
      return;
    }
    try {
      ReadResult r =
          new ParallelRangeReader(options.read())
              .readRanges(source, ranges, sink, state, gate, true);
      log.info(
          "read {} bytes in {} ranges with {} requests ({} retries) in {}",
          r.bytes(),
          r.ranges(),
          r.requests(),
          r.retries(),
          r.elapsed());
    } catch (RangeReadException e) {
      // A file that failed its check stops the read; that check is the reason.
      sink.throwIfFailed();
      throw new LoadFailure(e.reason(), e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LoadFailure(Reason.Interrupted, "interrupted while loading", e);
    }
  }

  private void fail(StoredArtifact stored, Verification verification, LoadFailure f) {
    if (verification != null) {
      verification.close(); // no digest reads the store once it is unloaded
    }
    if (stored != null && f.isTransient()) {
      // Kept for the next load, which reads only the ranges that are missing.
      try {
        stored.writeStoredRanges();
      } catch (StoreException | RuntimeException e) {
        f.addSuppressed(e);
      }
      state.failed(f.reason(), f.getMessage());
      log.warn(
          "artifact {} failed: {}: {}; its {} verified or stored bytes are kept for the next load",
          options.artifactId(),
          f.reason(),
          f.getMessage(),
          state.bytesLoaded());
      return;
    }
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

  /**
   * The listing an earlier failed load kept ({@link KeptMetadata}), else the source's, waited out
   * while throttled ({@link ThrottleWait}).
   */
  private List<SourceFile> listFiles() throws LoadFailure {
    Optional<List<SourceFile>> earlier = metadata.listing();
    if (earlier.isPresent()) {
      log.info(
          "artifact {}: {} files as the earlier load listed them (not listed again)",
          options.artifactId(),
          earlier.get().size());
      return earlier.get();
    }
    List<SourceFile> files =
        ThrottleWait.source(gate, source.describe() + ": ", source::list, state::retried);
    if (files.isEmpty()) {
      throw new LoadFailure(
          Reason.EmptyArtifact,
          source.describe() + " has no files (after include/exclude filters); nothing to load");
    }
    incompleteShardLayout(files);
    metadata.listed(files);
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

  /**
   * The safetensors headers and torch checkpoint structures of a load's files (validated), by path.
   */
  private record Parsed(
      Map<String, SafetensorsHeader> headers, Map<String, TorchCheckpoint> checkpoints) {
    long tensors() {
      return headers.values().stream().mapToLong(h -> h.tensors().size()).sum()
          + checkpoints.values().stream().mapToLong(c -> c.tensors().size()).sum();
    }
  }

  /** What one file's structure read found: its header or checkpoint, or neither. */
  private record FileStructure(SafetensorsHeader header, TorchCheckpoint checkpoint) {}

  /**
   * The metadata of one load's files, read from the source on a pool of {@link
   * #metadataConcurrency} threads while the load goes on: first the digest every file's source
   * publishes (S3: a HEAD with {@code If-Match}), which the load waits for, since each digest's
   * algorithm must be known while the bytes arrive; then each file's structure, read and validated
   * alongside the bytes — a safetensors header with two small ranged reads (the 8-byte length
   * prefix, then exactly the JSON: nothing past the header, so members of a swarm read no tensor
   * bytes twice), a torch checkpoint's structure with ranged reads of its zip directory, local
   * headers and pickle (a pickle that needs code is refused, {@code InvalidTorchCheckpoint}) — and
   * the index files checked against the headers. Every file's check waits for the structures; the
   * first structure that fails its rules fails the load ({@link Verification#structuresFailed}).
   */
  private final class Metadata {
    private final ExecutorService pool;
    private final List<CompletableFuture<PublishedDigest>> digests = new ArrayList<>();
    private final CompletableFuture<Parsed> parsed = new CompletableFuture<>();
    private volatile boolean stopped;

    Metadata(List<SourceFile> files) {
      int threads = Math.max(1, Math.min(metadataConcurrency(options.read()), files.size() * 2));
      pool = Executors.newFixedThreadPool(threads, daemon("tensorcast-headers"));
      for (SourceFile f : files) {
        digests.add(async(() -> publishedDigest(f)));
      }
      List<CompletableFuture<FileStructure>> each = new ArrayList<>();
      for (SourceFile f : files) {
        CompletableFuture<FileStructure> s = async(() -> structureOf(f));
        s.whenComplete(
            (r, e) -> {
              if (e != null) {
                parsed.completeExceptionally(e);
              }
            });
        each.add(s);
      }
      CompletableFuture.allOf(each.toArray(CompletableFuture[]::new))
          .thenRunAsync(
              () -> {
                Map<String, SafetensorsHeader> headers = new LinkedHashMap<>();
                Map<String, TorchCheckpoint> checkpoints = new LinkedHashMap<>();
                for (int i = 0; i < files.size(); i++) {
                  FileStructure r = each.get(i).join();
                  if (r.header() != null) {
                    headers.put(files.get(i).path(), r.header());
                  }
                  if (r.checkpoint() != null) {
                    checkpoints.put(files.get(i).path(), r.checkpoint());
                  }
                }
                try {
                  ShardIndexes.validate(
                      files,
                      source.filter(),
                      headers,
                      checkpoints,
                      options.limits(),
                      f ->
                          metadata.wholeFile(
                              f,
                              () ->
                                  HeaderFetcher.fetchBytes(
                                      source,
                                      f,
                                      options.read().maxAttempts(),
                                      state::retried,
                                      gate)));
                  parsed.complete(new Parsed(headers, checkpoints));
                } catch (LoadFailure e) {
                  parsed.completeExceptionally(e);
                } catch (RuntimeException e) {
                  parsed.completeExceptionally(
                      new LoadFailure(Reason.InternalError, String.valueOf(e), e));
                }
              },
              pool)
          .whenComplete(
              (v, e) -> {
                if (e != null) {
                  parsed.completeExceptionally(failureOf(e));
                }
              });
    }

    /** A file's header or checkpoint structure, as an earlier load got it or read now. */
    private FileStructure structureOf(SourceFile f) throws LoadFailure {
      if (f.path().endsWith(".safetensors")) {
        return new FileStructure(metadata.header(f, () -> readHeader(f)), null);
      }
      if (HeaderFetcher.isTorchPath(f.path())) {
        return new FileStructure(
            null,
            metadata
                .checkpoint(
                    f,
                    () ->
                        HeaderFetcher.fetchTorch(
                            source,
                            f,
                            options.limits().torch(),
                            options.read().maxAttempts(),
                            state::retried,
                            gate))
                .orElse(null));
      }
      return new FileStructure(null, null);
    }

    private <T> CompletableFuture<T> async(FileTask<T> task) {
      CompletableFuture<T> out = new CompletableFuture<>();
      try {
        pool.execute(
            () -> {
              if (stopped) {
                out.completeExceptionally(
                    new LoadFailure(Reason.Interrupted, "the load stopped reading metadata"));
                return;
              }
              try {
                out.complete(task.run());
              } catch (LoadFailure e) {
                out.completeExceptionally(e);
              } catch (RuntimeException e) {
                out.completeExceptionally(
                    new LoadFailure(Reason.InternalError, String.valueOf(e), e));
              }
            });
      } catch (java.util.concurrent.RejectedExecutionException e) {
        out.completeExceptionally(
            new LoadFailure(Reason.Interrupted, "the load stopped reading metadata", e));
      }
      return out;
    }

    /** Every file's published digest, by path; the first failure (in file order) fails the load. */
    Map<String, PublishedDigest> digests(List<SourceFile> files) throws LoadFailure {
      Map<String, PublishedDigest> out = new LinkedHashMap<>();
      for (int i = 0; i < files.size(); i++) {
        try {
          out.put(files.get(i).path(), digests.get(i).get());
        } catch (ExecutionException e) {
          throw failureOf(e.getCause());
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new LoadFailure(Reason.Interrupted, "interrupted while reading digests", e);
        }
      }
      return out;
    }

    /**
     * Hands every file's published digest to {@code v} once all are read ({@link
     * Verification#digestsResolved}), or the first failure (in file order), which fails the load as
     * a failed structure does ({@link Verification#structuresFailed}).
     */
    void digestsThen(Verification v, List<SourceFile> files) {
      CompletableFuture.allOf(digests.toArray(CompletableFuture[]::new))
          .whenComplete(
              (r, e) -> {
                Map<String, PublishedDigest> out = new LinkedHashMap<>();
                for (int i = 0; i < files.size(); i++) {
                  CompletableFuture<PublishedDigest> d = digests.get(i);
                  try {
                    out.put(files.get(i).path(), d.join());
                  } catch (java.util.concurrent.CompletionException
                      | java.util.concurrent.CancellationException failed) {
                    v.structuresFailed(failureOf(failed));
                    return;
                  }
                }
                v.digestsResolved(out);
              });
    }

    /** Throws the structures' failure if they already failed. */
    void throwIfFailed() throws LoadFailure {
      if (parsed.isCompletedExceptionally()) {
        try {
          parsed.join();
        } catch (java.util.concurrent.CompletionException
            | java.util.concurrent.CancellationException e) {
          throw failureOf(e);
        }
      }
    }

    /**
     * Hands the structures to {@code v} once read, or their failure; logs when they were read,
     * counted from {@code since}.
     */
    void then(Verification v, long since) {
      parsed.whenComplete(
          (r, e) -> {
            if (e != null) {
              v.structuresFailed(failureOf(e));
              return;
            }
            state.tensors(r.tensors());
            log.info(
                "artifact {}: {} headers and {} checkpoint structures read and validated {} ms"
                    + " after the listing began",
                options.artifactId(),
                r.headers().size(),
                r.checkpoints().size(),
                (System.nanoTime() - since) / 1_000_000);
            v.structuresResolved(r);
          });
    }

    /**
     * The structures' failure, once they are read, with {@code other} suppressed into it; or {@code
     * other} when they are valid. An interrupt (the load cancelled) ends the wait: {@code
     * Interrupted}, the interrupt kept.
     */
    LoadFailure failureOr(LoadFailure other) {
      try {
        parsed.get();
        return other;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        LoadFailure f =
            new LoadFailure(Reason.Interrupted, "interrupted while reading the headers", e);
        f.addSuppressed(other);
        return f;
      } catch (ExecutionException | java.util.concurrent.CancellationException e) {
        LoadFailure f = failureOf(e);
        if (f.reason() == Reason.Interrupted) {
          return other;
        }
        f.addSuppressed(other);
        return f;
      }
    }

    /**
     * The load ended: reads not yet started are not started; reads already running finish, and what
     * they get is kept ({@link KeptMetadata}) for the next load of the artifact, which waits for
     * them instead of asking again. Interrupting them would throw away answers the source already
     * sent and make a load that is loaded again (a transient failure of the bytes while the headers
     * are read alongside) ask for the same metadata twice.
     */
    void stop() {
      stopped = true;
      pool.shutdown();
    }
  }

  /** The {@link LoadFailure} behind a future's failure. */
  private static LoadFailure failureOf(Throwable e) {
    for (Throwable c = e; c != null; c = c.getCause()) {
      if (c instanceof LoadFailure f) {
        return f;
      }
    }
    return new LoadFailure(Reason.InternalError, String.valueOf(e), e);
  }

  /** A per-file metadata read that may fail the load. */
  @FunctionalInterface
  private interface FileTask<T> {
    T run() throws LoadFailure;
  }

  /**
   * The digest the source publishes for {@code f} (S3: a {@code HEAD}), as an earlier load got it
   * or asked now, waited out while throttled.
   */
  private PublishedDigest publishedDigest(SourceFile f) throws LoadFailure {
    return metadata.digest(
        f, () -> ThrottleWait.source(gate, "", () -> source.publishedDigest(f), state::retried));
  }

  /** A per-file read that may fail the load. */
  @FunctionalInterface
  private interface FileRead<T> {
    T read(SourceFile f) throws LoadFailure;
  }

  /**
   * {@code read} of every file, up to {@link #metadataConcurrency} at a time, results in the files'
   * order; the first {@link LoadFailure} fails the whole.
   */
  private <T> List<T> inParallel(List<SourceFile> files, FileRead<T> read) throws LoadFailure {
    if (files.isEmpty()) {
      return List.of();
    }
    int threads = Math.max(1, Math.min(metadataConcurrency(options.read()), files.size()));
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
        source,
        f,
        options.limits().safetensors(),
        options.read().maxAttempts(),
        state::retried,
        gate);
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
   * Starts {@link #admit} and {@link #allocate} of {@code files} on their own thread, for a load
   * that finds nothing of this artifact in the store.
   */
  private Allocation startAllocation(List<SourceFile> files) {
    Allocation a = new Allocation();
    ExecutorService thread = Executors.newSingleThreadExecutor(daemon("tensorcast-allocate"));
    try {
      a.future =
          thread.submit(
              () -> {
                long start = System.nanoTime();
                try {
                  admit(files.stream().mapToLong(SourceFile::size).sum());
                  return allocate(files);
                } finally {
                  a.nanos = System.nanoTime() - start;
                }
              });
    } finally {
      thread.shutdown();
    }
    return a;
  }

  /** An allocation running while the headers are read. */
  private final class Allocation {
    private Future<StoredArtifact> future;
    private volatile long nanos;

    /**
     * The allocated copy; waits for it (uninterruptibly: the allocation is bounded and its memory
     * must not be left behind).
     *
     * @throws LoadFailure the allocation's failure (too large, out of memory, unsafe path)
     */
    StoredArtifact await() throws LoadFailure {
      boolean interrupted = false;
      try {
        while (true) {
          try {
            return future.get();
          } catch (InterruptedException e) {
            interrupted = true;
          } catch (ExecutionException e) {
            if (e.getCause() instanceof LoadFailure f) {
              throw f;
            }
            throw new LoadFailure(Reason.InternalError, String.valueOf(e.getCause()), e.getCause());
          }
        }
      } finally {
        if (interrupted) {
          Thread.currentThread().interrupt();
        }
      }
    }

    /**
     * The headers failed the load first: waits for the allocation and unloads what it made. Its own
     * failure, if any, is suppressed into {@code cause}.
     */
    void release(Throwable cause) {
      try {
        await();
        store.unload(options.artifactId());
      } catch (LoadFailure | StoreException | RuntimeException e) {
        cause.addSuppressed(e);
      }
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
   * store re-hashed it against the digest it recorded, which is the source's when it has one, so
   * only a file recorded with another algorithm is hashed again): the digest per file, or null when
   * a file differs (logged; the copy is then discarded and loaded again).
   */
  private Map<String, PublishedDigest> verifyKept(StoredArtifact kept, List<SourceFile> files)
      throws LoadFailure {
    List<PublishedDigest> digests = inParallel(files, this::publishedDigest);
    Map<String, PublishedDigest> out = new LinkedHashMap<>();
    for (int i = 0; i < files.size(); i++) {
      SourceFile f = files.get(i);
      PublishedDigest d = digests.get(i);
      boolean ok;
      if (!d.present()) {
        ok = true;
      } else {
        ContentDigest recorded = ContentDigest.parse(kept.completedDigest(f.path()).orElseThrow());
        ok =
            recorded.algorithm() == d.algorithm()
                ? recorded.hex().equals(d.valueHex())
                : java.util.Arrays.equals(
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
   * The checks of one load's files as their bytes arrive: the {@link RangeSink} of the ranged read
   * (or told {@link #allStored} after a {@link StoreFiller}), feeding a {@link PrefixDigester}, and
   * the per-file check once a file's digests are complete. The first failed check is kept; it makes
   * the sink refuse further ranges, so the read stops, and {@link #await} throws it.
   */
  private final class Verification implements RangeSink, AutoCloseable {
    private final StoredArtifact stored;
    private final List<SourceFile> files;

    /** Every file's published digest; null until read (a filler's fill starts without them). */
    private volatile Map<String, PublishedDigest> digests;

    /** Completed once {@link #digests} is set. */
    final java.util.concurrent.CompletableFuture<Void> digestsKnown =
        new java.util.concurrent.CompletableFuture<>();

    /**
     * Bytes a filler stored before the digests were known (file, offset, length): hashed once they
     * are, since a file's digesting needs to know its algorithms from its first byte. Guarded by
     * itself; null once the digests are known.
     */
    private List<Object[]> storedEarly = new ArrayList<>();

    /** {@link #trackAll} was called before the digests were known. */
    private boolean trackAllEarly;

    /** The validated headers and checkpoint structures; null until read (checks wait for them). */
    private Parsed parsed;

    /** The thread in {@link StoreFiller#fill}, interrupted when the structures fail; or null. */
    private Thread filling;

    private final PrefixDigester digester;
    private final Map<String, java.util.concurrent.CompletableFuture<Void>> checked =
        new LinkedHashMap<>();
    private final java.util.concurrent.atomic.AtomicReference<LoadFailure> failure =
        new java.util.concurrent.atomic.AtomicReference<>();
    private final List<PrefixDigester.FileDigests> heldChecks = new ArrayList<>();
    private boolean holdingChecks;

    Verification(
        StoredArtifact stored, List<SourceFile> files, Map<String, PublishedDigest> digests) {
      this.stored = stored;
      this.files = files;
      this.digests = digests;
      if (digests != null) {
        storedEarly = null;
        digestsKnown.complete(null);
      }
      for (SourceFile f : files) {
        checked.put(f.path(), new java.util.concurrent.CompletableFuture<>());
      }
      this.digester =
          new PrefixDigester(
              stored,
              Math.min(files.size() * 2, Runtime.getRuntime().availableProcessors()),
              this::check,
              (f, e) ->
                  failed(
                      f,
                      e instanceof IllegalStateException
                          ? new LoadFailure(Reason.Interrupted, f.path() + ": " + e.getMessage(), e)
                          : new LoadFailure(Reason.InternalError, f.path() + ": " + e, e)));
    }

    private void track(SourceFile f) {
      PublishedDigest d = digests.get(f.path());
      digester.track(
          f,
          d.present()
              ? java.util.EnumSet.of(d.algorithm())
              : java.util.EnumSet.noneOf(PublishedDigest.Algorithm.class));
    }

    /**
     * Before a {@link StoreFiller} resumes a copy: a file complete under another version of its
     * object is made writable again (the filler keeps only pieces recorded under the listed one).
     */
    void reopenChanged() throws LoadFailure {
      for (SourceFile f : files) {
        if (stored.isComplete(f.path())
            && !stored.storedVersion(f.path()).equals(Optional.ofNullable(f.etag()))) {
          reopen(f);
        }
      }
    }

    /**
     * Tracks every file: a {@link StoreFiller} fills them all. Files whose digests complete before
     * {@link #allStored} are checked (and marked complete, read-only) only then: until the fill
     * returns, a duplicate copy of a piece may still be written.
     */
    void trackAll() {
      synchronized (heldChecks) {
        holdingChecks = true;
      }
      synchronized (this) {
        if (digests == null) {
          trackAllEarly = true; // digestsResolved tracks them
          return;
        }
      }
      files.forEach(this::track);
    }

    /** {@code file}'s published digest, or null while the digests are not known. */
    PublishedDigest digest(SourceFile file) {
      Map<String, PublishedDigest> d = digests;
      return d == null ? null : d.get(file.path());
    }

    /**
     * Every file's published digest was read (after the fill began): the files are tracked and the
     * bytes stored meanwhile hashed; then whoever waits for them ({@link #digestsKnown}) goes on.
     */
    void digestsResolved(Map<String, PublishedDigest> read) {
      List<Object[]> early;
      synchronized (this) {
        digests = read;
        if (trackAllEarly) {
          files.forEach(this::track);
        }
        early = storedEarly;
        storedEarly = null;
        if (early != null) {
          for (Object[] r : early) {
            digester.stored((SourceFile) r[0], (Long) r[1], (Long) r[2]);
          }
        }
      }
      digestsKnown.complete(null);
    }

    /** Hashes stored bytes now, or once the digests are known. */
    private void storedBytes(SourceFile file, long offset, long length) {
      synchronized (this) {
        if (storedEarly != null) {
          storedEarly.add(new Object[] {file, offset, length});
          return;
        }
      }
      digester.stored(file, offset, length);
    }

    /**
     * Takes what the store already holds of each file under the listed version (left by an earlier
     * load of the same files that failed on a transient error): a complete file of that version
     * stays complete; the stored ranges of an incomplete one are hashed from the store like new
     * ones. A file whose bytes belong to another version of its object is made writable again and
     * read whole. Returns the ranges still to read, at most {@link ReadOptions#rangeSize()} each,
     * in file then offset order.
     */
    List<ParallelRangeReader.FileRange> resume() throws LoadFailure {
      List<ParallelRangeReader.FileRange> missing = new ArrayList<>();
      long kept = 0;
      List<String> changed = new ArrayList<>();
      for (SourceFile f : files) {
        String version = f.etag();
        Optional<String> storedVersion = stored.storedVersion(f.path());
        boolean otherVersion = storedVersion.isPresent() && !storedVersion.get().equals(version);
        if (stored.isComplete(f.path())) {
          if (!otherVersion && storedVersion.isPresent()) {
            state.fileComplete(
                f.path(), stored.completedDigest(f.path()).orElseThrow(), digests.get(f.path()));
            checked.get(f.path()).complete(null);
            kept += f.size();
            continue;
          }
          reopen(f);
        }
        if (otherVersion) {
          changed.add(f.path());
        }
        track(f);
        long at = 0;
        for (long[] r : stored.storedRanges(f.path(), version)) {
          addMissing(missing, f, at, r[0]);
          digester.kept(f, r[0], r[1] - r[0]);
          kept += r[1] - r[0];
          at = r[1];
        }
        addMissing(missing, f, at, f.size());
      }
      if (kept > 0 || !changed.isEmpty()) {
        log.info(
            "artifact {}: resuming with {} bytes kept from the earlier load; {} bytes to read;"
                + " changed at the source and read again: {}",
            options.artifactId(),
            kept,
            missing.stream().mapToLong(ParallelRangeReader.FileRange::length).sum(),
            changed.isEmpty() ? "none" : changed);
      }
      state.kept(kept);
      return missing;
    }

    private void reopen(SourceFile f) throws LoadFailure {
      try {
        stored.reopen(f.path());
      } catch (StoreException e) {
        throw new LoadFailure(e.reason(), e.getMessage(), e);
      }
    }

    private void addMissing(
        List<ParallelRangeReader.FileRange> out, SourceFile f, long from, long to) {
      long size = options.read().rangeSize();
      for (long at = from; at < to; at += size) {
        out.add(new ParallelRangeReader.FileRange(f, at, (int) Math.min(size, to - at)));
      }
    }

    @Override
    public ByteBuffer target(SourceFile file, long offset, int length) {
      LoadFailure f = failure.get();
      if (f != null) {
        throw new IllegalStateException("the load stopped: " + f.getMessage(), f);
      }
      return stored.writable(file.path(), offset, length);
    }

    /** Positional writes to the store's file (see {@link StoredArtifact#openRange}). */
    @Override
    public RangeSink.Writer writer(SourceFile file, long offset, int length) {
      LoadFailure f = failure.get();
      if (f != null) {
        throw new IllegalStateException("the load stopped: " + f.getMessage(), f);
      }
      StoredArtifact.RangeWriter w = stored.openRange(file.path(), offset, length);
      return new RangeSink.Writer() {
        @Override
        public void write(byte[] b, int off, int len) {
          w.write(b, off, len);
        }

        @Override
        public void close() {
          w.close();
        }
      };
    }

    @Override
    public void rangeCompleted(SourceFile file, long offset, int length) {
      stored.recordStored(file.path(), file.etag(), offset, length);
      digester.stored(file, offset, length);
    }

    /** A {@link StoreFiller} stored verified bytes that will not change: hash them now. */
    void storedByFill(SourceFile file, long offset, int length) {
      storedBytes(file, offset, length);
    }

    /** Bytes the digests the store records took in so far. */
    long hashedBytes() {
      return digester.hashedBytes();
    }

    /** Every byte of every file is in the store (a {@link StoreFiller} filled it). */
    void allStored() {
      List<PrefixDigester.FileDigests> held = List.of();
      synchronized (heldChecks) {
        holdingChecks = false;
        if (parsed != null) {
          held = new ArrayList<>(heldChecks);
          heldChecks.clear();
        }
      }
      held.forEach(this::checkNow);
      for (SourceFile f : files) {
        storedBytes(f, 0, f.size());
      }
    }

    /**
     * The headers and checkpoint structures were read and validated: the checks held for them run
     * (unless a {@link StoreFiller} is still filling).
     */
    void structuresResolved(Parsed p) {
      List<PrefixDigester.FileDigests> held = List.of();
      synchronized (heldChecks) {
        parsed = p;
        if (!holdingChecks) {
          held = new ArrayList<>(heldChecks);
          heldChecks.clear();
        }
      }
      held.forEach(this::checkNow);
    }

    /**
     * A header, checkpoint structure or index file failed its rules (or could not be read): the
     * load stops with that failure — the ranged read at its next range, a {@link StoreFiller} by an
     * interrupt of the thread filling.
     */
    void structuresFailed(LoadFailure f) {
      failure.compareAndSet(null, f);
      for (var c : checked.values()) {
        c.completeExceptionally(f);
      }
      synchronized (heldChecks) {
        if (filling != null) {
          filling.interrupt();
        }
      }
    }

    /** The calling thread starts a {@link StoreFiller}'s fill. */
    void fillStarts() throws LoadFailure {
      synchronized (heldChecks) {
        filling = Thread.currentThread();
      }
      throwIfFailed();
    }

    /**
     * The fill returned or threw; clears an interrupt {@link #structuresFailed} sent it, and throws
     * that failure.
     */
    void fillEnded() throws LoadFailure {
      synchronized (heldChecks) {
        filling = null;
      }
      if (failure.get() != null) {
        Thread.interrupted();
        throwIfFailed();
      }
    }

    /** Waits until every file is checked; throws the first failure. */
    void await() throws LoadFailure {
      try {
        java.util.concurrent.CompletableFuture.allOf(
                checked.values().toArray(java.util.concurrent.CompletableFuture[]::new))
            .get();
      } catch (java.util.concurrent.ExecutionException e) {
        throwIfFailed();
        throw new LoadFailure(Reason.InternalError, String.valueOf(e.getCause()), e.getCause());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new LoadFailure(Reason.Interrupted, "interrupted while verifying", e);
      } finally {
        digester.close();
      }
    }

    void throwIfFailed() throws LoadFailure {
      LoadFailure f = failure.get();
      if (f != null) {
        throw f;
      }
    }

    @Override
    public void close() {
      digester.close();
    }

    private void failed(SourceFile file, LoadFailure f) {
      // Its bytes failed a check: the next load reads the file whole.
      try {
        stored.reopen(file.path());
      } catch (StoreException | RuntimeException e) {
        f.addSuppressed(e);
      }
      failure.compareAndSet(null, f);
      checked.get(file.path()).completeExceptionally(f);
    }

    /**
     * On a digest thread: the file's bytes are all hashed; check them and mark it complete (held
     * until {@link #allStored} while a {@link StoreFiller} fills).
     */
    private void check(PrefixDigester.FileDigests d) {
      synchronized (heldChecks) {
        if (holdingChecks || parsed == null) {
          heldChecks.add(d);
          return;
        }
      }
      checkNow(d);
    }

    private void checkNow(PrefixDigester.FileDigests d) {
      SourceFile file = d.file();
      try {
        verify(
            stored,
            file,
            parsed.headers().get(file.path()),
            parsed.checkpoints().get(file.path()),
            digests.get(file.path()),
            d);
        checked.get(file.path()).complete(null);
      } catch (LoadFailure f) {
        failed(file, f);
      } catch (RuntimeException e) {
        failed(file, new LoadFailure(Reason.InternalError, file.path() + ": " + e, e));
      }
    }
  }

  /**
   * Checks one file's bytes in the store: the safetensors header (or torch checkpoint structure) in
   * the store must be the one validated from the source (so the structure check applies to the
   * bytes consumers will read), the source must still hold the listed version, and the digest must
   * equal the source's when it publishes one. Then marks the file complete with the digest the
   * store records ({@link PrefixDigester.FileDigests#contentDigest}).
   */
  private void verify(
      StoredArtifact stored,
      SourceFile file,
      SafetensorsHeader header,
      TorchCheckpoint checkpoint,
      PublishedDigest digest,
      PrefixDigester.FileDigests digests)
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
    try {
      source.checkUnchanged(file);
    } catch (SourceException e) {
      throw new LoadFailure(e.reason(), e.getMessage(), e);
    }
    if (digest.present()) {
      byte[] actual = digests.digests().get(digest.algorithm());
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
    String recorded;
    try {
      recorded = stored.markCompleteHashed(file.path(), digests.contentDigest());
    } catch (StoreException e) {
      throw new LoadFailure(e.reason(), e.getMessage(), e);
    }
    state.fileComplete(file.path(), recorded, digest);
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

  /** The wire form of a store's page-locking outcome. */
  public static DataPlaneStatus.LockInfo lockInfo(LockStatus s) {
    return new DataPlaneStatus.LockInfo(
        s.locked(), s.lockedBytes(), s.reason().name(), s.message());
  }
}
