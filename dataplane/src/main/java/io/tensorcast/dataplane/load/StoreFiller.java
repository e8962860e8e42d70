package io.tensorcast.dataplane.load;

import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.util.List;

/**
 * Puts every byte of an allocated artifact into the store, in place of {@link ArtifactLoader}'s own
 * parallel ranged read from the source: the peer-to-peer distribution implements it. The loader
 * still runs its end-of-load checks (headers re-validated from the store, each file's bytes against
 * the source's digest, source unchanged) afterwards.
 */
public interface StoreFiller {

  /**
   * Fills {@code stored} with the bytes of {@code files}; returns once every byte is in the store.
   *
   * @param source where bytes that no peer supplies are read from
   * @param read the source-read settings (concurrency, attempts, back-off)
   * @param gate the load's throttling gate, shared with its metadata requests: every source read
   *     waits until it is open, and one refused as throttled (429, {@code 503 SlowDown}) closes it
   *     ({@link ThrottleGate#refused}) instead of using up an attempt; the fill fails as {@code
   *     Throttled} once the gate's budget is spent
   * @param progress where bytes are accounted as they become store bytes
   * @throws LoadFailure when a source read fails for good, naming file and range
   * @throws InterruptedException when interrupted; the fill has stopped writing into the store
   */
  void fill(
      ArtifactSource source,
      StoredArtifact stored,
      List<SourceFile> files,
      ReadOptions read,
      ThrottleGate gate,
      FillProgress progress)
      throws LoadFailure, InterruptedException;

  /**
   * {@code files} are listed and {@link #fill} of the same files follows once their digests are
   * read and the copy is allocated: start meanwhile what needs neither (the peer swarm starts its
   * transport and handshakes with its peers). Called by the loader on the thread of the load before
   * the digests and the allocation; must not block for long. The default does nothing.
   */
  default void prepare(List<SourceFile> files) {}

  /**
   * The store already holds a complete copy of {@code files} (adopted and re-hashed by the store
   * after a restart), so nothing is filled: offer it to others, e.g. announce and serve every piece
   * to the peers. Called instead of {@link #fill} by the loader on the thread of the load; must not
   * block for long (slow work goes to a thread of its own, stopped when the filler is closed,
   * before the store unloads the copy). The default does nothing.
   */
  default void serveComplete(StoredArtifact stored, List<SourceFile> files) {}

  /** Accounting of a fill; thread-safe. */
  interface FillProgress {
    /** {@code count} bytes read from the source became store bytes. */
    void fromSource(int count);

    /** {@code count} bytes received from peers (verified) became store bytes. */
    void fromPeers(int count);

    /** A source read is being retried: shown as the status's reason and message. */
    void retrying(ReadProgressListener.RetryEvent event);

    /**
     * {@code count} bytes an earlier fill left in the store were confirmed and are kept: neither
     * read nor fetched again.
     */
    default void kept(long count) {}

    /**
     * Bytes {@code [offset, offset + length)} of {@code file} are in the store, verified, and will
     * not change: the loader hashes them into the file's digests while the fill goes on, instead of
     * after the last byte. Called at most once per piece, from any thread; a fill that never calls
     * it gets every file hashed after {@link #fill} returns. The default does nothing.
     */
    default void stored(SourceFile file, long offset, int length) {}

    /**
     * Runs {@code then} once {@link #publishesDigest} and {@link #matchesPublishedDigest} answer
     * for every file: the loader reads the source's digests while the fill runs, and until they are
     * in, both answer false. At once (on the calling thread) when they are known already; on the
     * thread that read them otherwise; never when the load fails first. The default: at once.
     */
    default void whenDigestsKnown(Runnable then) {
      then.run();
    }

    /**
     * The source publishes a digest for {@code file} that {@link #matchesPublishedDigest} checks.
     * The default: none.
     */
    default boolean publishesDigest(SourceFile file) {
      return false;
    }

    /**
     * Whether {@code file}'s bytes in the store now match the digest the source publishes for it
     * (false when it publishes none); hashes the whole file, on the calling thread. The fill must
     * not write into the file meanwhile.
     */
    default boolean matchesPublishedDigest(SourceFile file) {
      return false;
    }
  }
}
