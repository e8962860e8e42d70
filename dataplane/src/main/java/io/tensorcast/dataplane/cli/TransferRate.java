package io.tensorcast.dataplane.cli;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.OptionalLong;

/**
 * The rate of a transfer over its last {@code window} (bytes per second), and the time left that
 * follows from that rate: what {@code aws s3 cp} and {@code hf download} show, rather than the
 * average since the start, which a slow start (listing, waiting for peers) keeps wrong for the
 * whole transfer.
 *
 * <p>Fed with {@link #record(long, long)} (a monotonic time in nanoseconds and the bytes done so
 * far); keeps the samples of the last window plus the one just before it, so the rate spans the
 * whole window once the transfer is that old. Bytes done going down (a retried load starting over)
 * restarts the window. Thread-safe.
 */
public final class TransferRate {
  /** The window {@code dataplane load} and the demo use. */
  public static final Duration DEFAULT_WINDOW = Duration.ofSeconds(8);

  private final long windowNanos;
  private final ArrayDeque<long[]> samples = new ArrayDeque<>();

  /**
   * @param window how far back the rate looks; positive
   */
  public TransferRate(Duration window) {
    if (window.isZero() || window.isNegative()) {
      throw new IllegalArgumentException("window must be positive, got " + window);
    }
    this.windowNanos = window.toNanos();
  }

  /**
   * Adds a sample.
   *
   * @param nanos a monotonic time ({@link System#nanoTime()} or a test clock), not decreasing
   * @param bytesDone bytes transferred so far
   */
  public synchronized void record(long nanos, long bytesDone) {
    long[] last = samples.peekLast();
    if (last != null && bytesDone < last[1]) {
      samples.clear();
    }
    samples.addLast(new long[] {nanos, bytesDone});
    while (samples.size() > 2) {
      long[] first = samples.pollFirst();
      long[] second = samples.peekFirst();
      if (second[0] > nanos - windowNanos) {
        samples.addFirst(first);
        break;
      }
    }
  }

  /** Bytes per second over the window; 0 before two samples at different times. */
  public synchronized double bytesPerSecond() {
    if (samples.size() < 2) {
      return 0;
    }
    long[] first = samples.peekFirst();
    long[] last = samples.peekLast();
    long span = last[0] - first[0];
    return span <= 0 ? 0 : (last[1] - first[1]) * 1e9 / span;
  }

  /**
   * Seconds left to reach {@code bytesTotal} at the window's rate (rounded up); empty while the
   * rate is 0 or the total unknown (0 or less). 0 when done.
   */
  public synchronized OptionalLong secondsLeft(long bytesTotal) {
    long[] last = samples.peekLast();
    if (last == null || bytesTotal <= 0) {
      return OptionalLong.empty();
    }
    long left = bytesTotal - last[1];
    if (left <= 0) {
      return OptionalLong.of(0);
    }
    double rate = bytesPerSecond();
    return rate <= 0 ? OptionalLong.empty() : OptionalLong.of((long) Math.ceil(left / rate));
  }
}
