package io.tensorcast.dataplane.load;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.torch.TorchCheckpoint;
import io.tensorcast.dataplane.source.PublishedDigest;
import io.tensorcast.dataplane.source.SourceFile;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;

/**
 * What the resolving of one artifact's loads learnt from the source, kept across the loads of that
 * artifact in one process: a load that fails on a transient reason is loaded again, and the next
 * load asks the source only for what the earlier ones did not get (as it reads only the byte ranges
 * the store lacks).
 *
 * <ul>
 *   <li><b>The listing</b>, kept after a load that failed with {@code Throttled} or {@code
 *       SourceUnavailable} only (the source's contents were not in question); forgotten after any
 *       other outcome — Ready, {@code SourceChanged}, {@code IncompleteArtifact}, ... — so the next
 *       load lists again. A kept listing is safe against an object replaced meanwhile: every ranged
 *       read and {@code HEAD} carries the listed ETag ({@code If-Match}), so the replaced object
 *       fails the load as {@code SourceChanged}, which forgets the listing.
 *   <li><b>Per file</b>, keyed by the whole {@link SourceFile} (path, size, ETag, SHA-256): the
 *       parsed safetensors header, the torch checkpoint structure, the published digest and the
 *       bytes of a small file read whole (an index). A file listed again with another ETag or size
 *       is another key: nothing kept for the old version is used for it. A file listed without an
 *       ETag has no version to key by, and nothing of it is kept. A new listing drops the entries
 *       of files no longer listed.
 * </ul>
 *
 * <p>Memory: one header, structure, digest and index per listed file, each bounded by the {@link
 * io.tensorcast.dataplane.format.FormatLimits} it was read under — what one load holds anyway.
 * Thread-safe.
 */
public final class KeptMetadata {
  private volatile List<SourceFile> listing;
  private final Map<SourceFile, CompletableFuture<SafetensorsHeader>> headers =
      new ConcurrentHashMap<>();
  private final Map<SourceFile, CompletableFuture<Optional<TorchCheckpoint>>> checkpoints =
      new ConcurrentHashMap<>();
  private final Map<SourceFile, CompletableFuture<PublishedDigest>> digests =
      new ConcurrentHashMap<>();
  private final Map<SourceFile, CompletableFuture<byte[]>> wholeFiles = new ConcurrentHashMap<>();

  /** A per-file read from the source. */
  @FunctionalInterface
  interface Read<T> {
    T read() throws LoadFailure;
  }

  /** The listing an earlier load kept, or empty. */
  Optional<List<SourceFile>> listing() {
    return Optional.ofNullable(listing);
  }

  /** Keeps {@code files} as the listing and drops what is kept of files not in it. */
  void listed(List<SourceFile> files) {
    listing = List.copyOf(files);
    Set<SourceFile> now = new HashSet<>(files);
    headers.keySet().retainAll(now);
    checkpoints.keySet().retainAll(now);
    digests.keySet().retainAll(now);
    wholeFiles.keySet().retainAll(now);
  }

  /** The next load lists again. */
  void forgetListing() {
    listing = null;
  }

  SafetensorsHeader header(SourceFile f, Read<SafetensorsHeader> read) throws LoadFailure {
    return kept(headers, f, read);
  }

  Optional<TorchCheckpoint> checkpoint(SourceFile f, Read<Optional<TorchCheckpoint>> read)
      throws LoadFailure {
    return kept(checkpoints, f, read);
  }

  PublishedDigest digest(SourceFile f, Read<PublishedDigest> read) throws LoadFailure {
    return kept(digests, f, read);
  }

  /** The bytes of a small file read whole; the caller must not change them. */
  byte[] wholeFile(SourceFile f, Read<byte[]> read) throws LoadFailure {
    return kept(wholeFiles, f, read);
  }

  /**
   * What is kept of {@code f} in {@code map}, or {@code read}'s result, kept. A read of the same
   * file version already running (an earlier load's, still finishing after that load ended) is
   * waited for rather than asked again; if it fails, this caller reads.
   */
  private static <T> T kept(Map<SourceFile, CompletableFuture<T>> map, SourceFile f, Read<T> read)
      throws LoadFailure {
    if (f.etag().isEmpty()) {
      return read.read();
    }
    while (true) {
      CompletableFuture<T> mine = new CompletableFuture<>();
      CompletableFuture<T> theirs = map.putIfAbsent(f, mine);
      if (theirs == null) {
        try {
          T v = read.read();
          mine.complete(v);
          return v;
        } catch (LoadFailure | RuntimeException | Error e) {
          map.remove(f, mine);
          mine.completeExceptionally(e);
          throw e;
        }
      }
      try {
        return theirs.get();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new LoadFailure(
            Reason.Interrupted, "interrupted while waiting for " + f.path() + "'s metadata", e);
      } catch (ExecutionException e) {
        // The other read failed and is no longer kept: read it here (its failure was its load's).
        map.remove(f, theirs);
      }
    }
  }
}
