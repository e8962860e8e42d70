package io.tensorcast.dataplane.load;

import io.tensorcast.api.Reason;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.FileStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.source.PublishedDigest;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.store.ContentDigest;
import io.tensorcast.dataplane.store.LockStatus;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Mutable progress of one load, written by the loader's threads and read by the control endpoint
 * and metrics. Counters are atomics; the rest changes under the monitor, so {@link #snapshot()} is
 * consistent.
 */
final class LoadState implements ReadProgressListener, StoreFiller.FillProgress {
  private final String artifactId;
  private final String source;
  private final AtomicLong bytesLoaded = new AtomicLong();
  private final AtomicLong retries = new AtomicLong();
  private final AtomicLong fromPeers = new AtomicLong();
  private volatile boolean adopted;

  private Phase phase = Phase.Pending;
  private Reason reason;
  private String message;
  private String revision;
  private long bytesTotal;
  private long tensors;
  private DataPlaneStatus.LockInfo lock;
  private String directory;
  private String readyTime;
  private final Map<String, FileStatus> files = new LinkedHashMap<>();

  LoadState(String artifactId, String source) {
    this.artifactId = artifactId;
    this.source = source;
  }

  synchronized void phase(Phase p) {
    this.phase = p;
  }

  synchronized Phase phase() {
    return phase;
  }

  synchronized void resolved(
      List<SourceFile> list,
      Map<String, SafetensorsHeader> headers,
      long torchTensors,
      String revision) {
    this.revision = revision;
    long total = 0;
    for (SourceFile f : list) {
      files.put(f.path(), new FileStatus(f.path(), f.size(), false, null));
      total += f.size();
    }
    this.bytesTotal = total;
    this.tensors =
        headers.values().stream().mapToLong(h -> h.tensors().size()).sum() + torchTensors;
  }

  /** The tensors the headers and checkpoint structures declare, once read (after the listing). */
  synchronized void tensors(long count) {
    this.tensors = count;
  }

  synchronized void locked(LockStatus s, String dir) {
    this.lock = ArtifactLoader.lockInfo(s);
    this.directory = dir;
  }

  @Override
  public void bytesDelivered(SourceFile file, long offset, int count) {
    bytesLoaded.addAndGet(count);
  }

  @Override
  public void retrying(RetryEvent event) {
    retries.incrementAndGet();
    synchronized (this) {
      this.reason = Reason.Retrying;
      this.message =
          event.file().path()
              + " at byte "
              + event.resumeAt()
              + ": attempt "
              + event.failedAttempt()
              + " failed ("
              + event.cause()
              + "); retrying in "
              + event.delay().toMillis()
              + " ms";
    }
  }

  @Override
  public void fromSource(int count) {
    bytesLoaded.addAndGet(count);
  }

  @Override
  public void fromPeers(int count) {
    fromPeers.addAndGet(count);
    bytesLoaded.addAndGet(count);
  }

  /** Bytes read from the source that are store bytes now. */
  long bytesFromSource() {
    return adopted ? 0 : bytesLoaded.get() - fromPeers.get();
  }

  /** Bytes received from peers that are store bytes now. */
  long bytesFromPeers() {
    return fromPeers.get();
  }

  /** The store already held the whole artifact: loaded without reading from the source. */
  void adopted(long bytes) {
    bytesLoaded.set(bytes);
    adopted = true;
  }

  /** Bytes an earlier load left in the store, which this one keeps instead of reading again. */
  @Override
  public void kept(long bytes) {
    bytesLoaded.addAndGet(bytes);
  }

  /**
   * The source changed under an earlier load of this artifact (a file added, removed or replaced by
   * one of another size): this load reads only what changed. Shown as the reason while it loads.
   */
  synchronized void sourceChanged(String message) {
    this.reason = Reason.SourceChanged;
    this.message = message;
  }

  /** A header read was retried. */
  void retried() {
    retries.incrementAndGet();
  }

  long retries() {
    return retries.get();
  }

  /** Bytes of the store locked in memory, as the last lock outcome reported; 0 before. */
  synchronized long lockedBytes() {
    return lock == null ? 0 : lock.lockedBytes();
  }

  long bytesLoaded() {
    return bytesLoaded.get();
  }

  synchronized long bytesTotal() {
    return bytesTotal;
  }

  /**
   * A file is verified and complete.
   *
   * @param recorded the {@link ContentDigest} the store recorded for it, in its written form; the
   *     status shows it as the file's {@code sha256} when it is one
   * @param digest the source's digest it was checked against, or {@link PublishedDigest#none} with
   *     why there was none (then the readers' piece hashes are what verified it)
   */
  synchronized void fileComplete(String path, String recorded, PublishedDigest digest) {
    ContentDigest c = ContentDigest.parse(recorded);
    String sha256 = c.isSha256() ? c.hex() : null;
    FileStatus f = files.get(path);
    files.put(
        path,
        new FileStatus(
            path,
            f.size(),
            true,
            sha256,
            digest.present()
                ? DataPlaneStatus.Verification.SourceDigest
                : DataPlaneStatus.Verification.ReaderPieceHashes,
            digest.description(),
            c.named()));
  }

  synchronized void ready(Instant at) {
    this.phase = Phase.Ready;
    this.readyTime = at.toString();
    this.reason = null;
    this.message = null;
  }

  synchronized void failed(Reason reason, String message) {
    this.phase = Phase.Failed;
    this.reason = reason;
    this.message = message;
    // The store's copy was released: nothing is loaded any more.
    bytesLoaded.set(0);
    fromPeers.set(0);
    files.replaceAll((k, v) -> new FileStatus(v.path(), v.size(), false, null));
    if (lock != null) {
      lock = new DataPlaneStatus.LockInfo(false, 0, lock.reason(), lock.message());
    }
  }

  synchronized DataPlaneStatus snapshot() {
    List<FileStatus> fs = new ArrayList<>(files.values());
    int complete = (int) fs.stream().filter(FileStatus::complete).count();
    long peers = fromPeers.get();
    long loaded = bytesLoaded.get();
    return DataPlaneStatus.builder(artifactId, phase)
        .reason(reason)
        .message(message)
        .source(source)
        .resolvedRevision(revision)
        .files(fs.size())
        .filesComplete(complete)
        .tensors(tensors)
        .bytesTotal(bytesTotal)
        .bytesLoaded(loaded)
        .bytesFromSource(adopted ? 0 : loaded - peers)
        .bytesFromPeers(peers)
        .lock(lock)
        .storeDirectory(directory)
        .readyTime(readyTime)
        .fileStatuses(fs)
        .build();
  }
}
