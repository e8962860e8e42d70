package io.tensorcast.dataplane.load;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.source.SourceFile;

/**
 * A {@link ParallelRangeReader} read failed: a non-retryable source error, attempts exhausted, or
 * the sink or listener failed. The message names the source, file, range, attempts, bytes received
 * and the last cause.
 */
public final class RangeReadException extends Exception {
  private static final long serialVersionUID = 1L;

  private final Reason reason;
  private final transient SourceFile file;
  private final long offset;
  private final int length;
  private final int attempts;
  private final long received;
  private final boolean attemptsExhausted;

  RangeReadException(
      Reason reason,
      String message,
      SourceFile file,
      long offset,
      int length,
      int attempts,
      long received,
      boolean attemptsExhausted,
      Throwable cause) {
    super(message, cause);
    this.reason = reason;
    this.file = file;
    this.offset = offset;
    this.length = length;
    this.attempts = attempts;
    this.received = received;
    this.attemptsExhausted = attemptsExhausted;
  }

  /**
   * Why: the failing {@code SourceException}'s reason ({@code ObjectChanged}, {@code
   * BucketNotFound}, {@code Throttled}, ...), {@code SourceUnavailable} for I/O errors and bodies
   * cut short, {@code SinkFailed} when the sink or listener threw.
   */
  public Reason reason() {
    return reason;
  }

  /** The file whose range failed. */
  public SourceFile file() {
    return file;
  }

  /** First byte of the failed range in the file. */
  public long offset() {
    return offset;
  }

  /** Bytes in the failed range. */
  public int length() {
    return length;
  }

  /** Requests made for the range. */
  public int attempts() {
    return attempts;
  }

  /**
   * Bytes of the range received before the failure (they are not reported as completed), or -1 when
   * an unexpected failure left it unknown.
   */
  public long received() {
    return received;
  }

  /** Whether every allowed attempt failed with retryable errors. */
  public boolean attemptsExhausted() {
    return attemptsExhausted;
  }
}
