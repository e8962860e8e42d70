package io.tensorcast.dataplane.load;

import io.tensorcast.dataplane.source.SourceFile;
import java.time.Duration;

/**
 * Observes a {@link ParallelRangeReader} read: bytes as they land in the sink, retries, completed
 * ranges. Called concurrently from the reader's workers: implementations must be thread-safe and
 * quick. An exception thrown here fails the read.
 */
public interface ReadProgressListener {

  /** Ignores everything. */
  ReadProgressListener NONE = new ReadProgressListener() {};

  /**
   * {@code count} new bytes of {@code file}, starting at byte {@code offset} of the file, are in
   * the sink. Each byte of the artifact is reported at most once (a resumed request starts at the
   * first byte not yet received), so the sum over a successful read is the artifact's size.
   */
  default void bytesDelivered(SourceFile file, long offset, int count) {}

  /** A request for a range failed and will be tried again after {@code event.delay()}. */
  default void retrying(RetryEvent event) {}

  /** Range {@code [offset, offset + length)} of {@code file} is complete in the sink. */
  default void rangeCompleted(SourceFile file, long offset, int length) {}

  /**
   * One retry of a range.
   *
   * @param file the file
   * @param rangeOffset first byte of the range in the file
   * @param rangeLength bytes in the range
   * @param failedAttempt the attempt (1-based) that just failed
   * @param resumeAt the file offset the next request starts at (the first byte not yet received)
   * @param delay the back-off before the next request
   * @param cause why the attempt failed: a retryable {@code SourceException}, an {@code
   *     IOException}, or an {@code EOFException} for a body that ended early
   */
  record RetryEvent(
      SourceFile file,
      long rangeOffset,
      int rangeLength,
      int failedAttempt,
      long resumeAt,
      Duration delay,
      Throwable cause) {}
}
