package io.tensorcast.dataplane.source;

import io.tensorcast.api.Reason;
import java.time.Duration;
import java.util.Optional;

/**
 * A source failed. {@link #reason()} says why, in the vocabulary of the status and conditions
 * ({@link Reason}: e.g. {@code BucketNotFound}, {@code AccessDenied}, {@code SourceUnavailable}).
 *
 * <p>Reasons used by the sources of this package:
 *
 * <ul>
 *   <li>{@code InvalidSourceUri}, {@code InvalidSourceOptions} — the URI or its options cannot be
 *       used (e.g. {@code oss://} without region or endpoint, or with path-style); fix the spec.
 *   <li>{@code RepoNotFound}, {@code RevisionNotFound}, {@code EntryNotFound}, {@code GatedRepo},
 *       {@code Unauthorized} — Hugging Face Hub answers (its {@code X-Error-Code}, or 401).
 *   <li>{@code SourceNotFound}, {@code BucketNotFound}, {@code ObjectNotFound} — something named
 *       does not exist.
 *   <li>{@code AccessDenied} — credentials wrong or without permission (HTTP 403).
 *   <li>{@code CredentialsNotFound} — no credentials anywhere the client looks (S3/OSS).
 *   <li>{@code UnsafePath} — a listed name is absolute, has {@code ..}/{@code .}/empty segments or
 *       backslashes, or a local file is a symbolic link or not a regular file.
 *   <li>{@code ObjectChanged} — the object is no longer the one listed (ETag or size differ); the
 *       artifact must be resolved again.
 *   <li>{@code RangeNotHonored}, {@code InvalidResponse} — the server answered a ranged read with
 *       other bytes than asked (200 with the whole object, wrong {@code Content-Range} or length).
 *   <li>{@code SourceUnavailable}, {@code Throttled} — retryable: 5xx, 429/503 SlowDown, timeouts,
 *       connection errors.
 * </ul>
 */
public class SourceException extends Exception {
  private static final long serialVersionUID = 1L;

  private final Reason reason;
  private final boolean retryable;
  private final Duration retryAfter;

  /**
   * @param reason why, for the status and conditions
   * @param message what failed, naming the file/key and the rule broken
   * @param retryable whether the same request may succeed when tried again
   * @param retryAfter how long the server asked to wait before trying again ({@code Retry-After}),
   *     or {@code null} when it did not say
   * @param cause the underlying failure, or {@code null}
   */
  public SourceException(
      Reason reason, String message, boolean retryable, Duration retryAfter, Throwable cause) {
    super(message, cause);
    this.reason = reason;
    this.retryable = retryable;
    this.retryAfter = retryAfter;
  }

  public SourceException(Reason reason, String message, boolean retryable, Throwable cause) {
    this(reason, message, retryable, null, cause);
  }

  public SourceException(Reason reason, String message, boolean retryable) {
    this(reason, message, retryable, null, null);
  }

  /** Why, for the status and conditions. */
  public Reason reason() {
    return reason;
  }

  /** Whether the same request may succeed when tried again (5xx, timeouts, throttling). */
  public boolean retryable() {
    return retryable;
  }

  /** The wait the server asked for before a retry (HTTP {@code Retry-After}), if it gave one. */
  public Optional<Duration> retryAfter() {
    return Optional.ofNullable(retryAfter);
  }
}
