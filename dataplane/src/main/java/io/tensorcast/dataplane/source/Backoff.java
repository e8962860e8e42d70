package io.tensorcast.dataplane.source;

import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The one back-off of the data plane's requests and loads: exponential with jitter, at least what
 * the server asked for with {@code Retry-After}.
 *
 * <p>The wait after the {@code n}-th failed attempt is {@code d = min(base × 2^(n-1), cap)}, drawn
 * uniformly from {@code [d/2, d]} so that clients failed by the same outage spread out; when the
 * server sent {@code Retry-After}, the wait is never shorter than that. A request that the server
 * asks to wait longer than {@code cap} is not retried in place ({@link #honours} is false): its
 * caller gives up with the server's failure, and the next level (the load, {@code
 * --load-retry-backoff}) waits at least the server's time.
 *
 * <p>{@code Retry-After} is read as delta-seconds or an HTTP-date (RFC 9110 §10.2.3) by {@link
 * #parseRetryAfter}.
 *
 * @param base wait after the first failed attempt (before jitter); not negative
 * @param cap longest wait of the schedule (before jitter) and longest {@code Retry-After} honoured
 *     in place; at least {@code base}
 */
public record Backoff(Duration base, Duration cap) {

  public Backoff {
    Objects.requireNonNull(base, "base");
    Objects.requireNonNull(cap, "cap");
    if (base.isNegative()) {
      throw new IllegalArgumentException("back-off base must not be negative, got " + base);
    }
    if (cap.compareTo(base) < 0) {
      throw new IllegalArgumentException(
          "back-off cap " + cap + " must not be below its base " + base);
    }
  }

  /**
   * The wait before the next attempt without jitter: {@code min(base × 2^(failedAttempt-1), cap)}.
   *
   * @param failedAttempt attempts failed so far (≥ 1)
   */
  public Duration ceiling(int failedAttempt) {
    if (failedAttempt < 1) {
      throw new IllegalArgumentException("failedAttempt must be at least 1, got " + failedAttempt);
    }
    long cap = this.cap.toNanos();
    long d = base.toNanos();
    for (int i = 1; i < failedAttempt && d < cap; i++) {
      d = d > cap / 2 ? cap : d * 2;
    }
    return Duration.ofNanos(Math.min(d, cap));
  }

  /**
   * The jittered wait before the next attempt: uniformly random in {@code [ceiling/2, ceiling]}.
   *
   * @param failedAttempt attempts failed so far (≥ 1)
   */
  public Duration delay(int failedAttempt) {
    long d = ceiling(failedAttempt).toNanos();
    return Duration.ofNanos(
        d <= 1 ? d : d / 2 + ThreadLocalRandom.current().nextLong(d - d / 2 + 1));
  }

  /**
   * The jittered wait, raised to the server's {@code Retry-After} when it asked for longer.
   *
   * @param retryAfter what the server asked for, or null
   */
  public Duration delay(int failedAttempt, Duration retryAfter) {
    Duration d = delay(failedAttempt);
    return retryAfter != null && retryAfter.compareTo(d) > 0 ? retryAfter : d;
  }

  /** Whether a request may wait {@code retryAfter} (null: none asked) and be retried in place. */
  public boolean honours(Duration retryAfter) {
    return retryAfter == null || retryAfter.compareTo(cap) <= 0;
  }

  /**
   * A {@code Retry-After} value as a wait from {@code now}: delta-seconds ({@code "120"}) or an
   * HTTP-date ({@code "Wed, 21 Oct 2026 07:28:00 GMT"}; a date in the past is no wait). Empty for
   * null, blank, negative or malformed values.
   */
  public static Optional<Duration> parseRetryAfter(String value, Instant now) {
    if (value == null || value.isBlank()) {
      return Optional.empty();
    }
    String s = value.strip();
    if (s.chars().allMatch(Character::isDigit)) {
      try {
        return Optional.of(Duration.ofSeconds(Long.parseLong(s)));
      } catch (NumberFormatException | ArithmeticException tooLarge) {
        return Optional.empty();
      }
    }
    try {
      Instant at = ZonedDateTime.parse(s, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant();
      Duration d = Duration.between(now, at);
      return Optional.of(d.isNegative() ? Duration.ZERO : d);
    } catch (DateTimeParseException e) {
      return Optional.empty();
    }
  }

  /** {@link #parseRetryAfter(String, Instant)} from the current time. */
  public static Optional<Duration> parseRetryAfter(String value) {
    return parseRetryAfter(value, Instant.now());
  }
}
