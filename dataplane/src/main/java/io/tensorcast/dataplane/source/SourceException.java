package io.tensorcast.dataplane.source;

/**
 * A source failed. {@link #reason()} is a CamelCase reason suitable for a Kubernetes condition
 * (e.g. {@code BucketNotFound}, {@code AccessDenied}, {@code SourceUnavailable}).
 */
public class SourceException extends Exception {
  private static final long serialVersionUID = 1L;

  private final String reason;
  private final boolean retryable;

  public SourceException(String reason, String message, boolean retryable, Throwable cause) {
    super(message, cause);
    this.reason = reason;
    this.retryable = retryable;
  }

  public SourceException(String reason, String message, boolean retryable) {
    this(reason, message, retryable, null);
  }

  /** CamelCase reason for conditions. */
  public String reason() {
    return reason;
  }

  /** Whether the same request may succeed when tried again (5xx, timeouts, throttling). */
  public boolean retryable() {
    return retryable;
  }
}
