package io.tensorcast.dataplane.load;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.source.Backoff;
import io.tensorcast.dataplane.source.SourceException;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * Waits out a source's throttling of one metadata request (a listing, a {@code HEAD}, a safetensors
 * header or torch structure read, an index file): a request refused as {@link Reason#Throttled}
 * (HTTP 429, {@code 503 SlowDown}, with or without {@code Retry-After}) is asked again after the
 * data plane's {@link Backoff} — never sooner than the server's {@code Retry-After} — however often
 * it is refused, until the waits would pass a total budget. Only then does its failure go to the
 * load. Every other failure goes to the caller at once (the request's own retries have run).
 *
 * <p>Without this, a storm that admits one request in four refuses some metadata request on each of
 * its few attempts, and that one request fails a load whose every other request succeeded.
 */
final class ThrottleWait {
  /** The longest one metadata request waits out throttling, in total, before it fails the load. */
  static final Duration BUDGET = Duration.ofMinutes(5);

  /** A request that fails with a {@link LoadFailure}. */
  @FunctionalInterface
  interface Call<T> {
    T call() throws LoadFailure;
  }

  /** A source request that fails with a {@link SourceException}. */
  @FunctionalInterface
  interface SourceCall<T> {
    T call() throws SourceException;
  }

  private ThrottleWait() {}

  /**
   * Makes {@code call} until it is not refused as {@link Reason#Throttled}, waiting {@code
   * backoff.delay(n, Retry-After)} after its {@code n}-th refusal.
   *
   * @param budget the most all waits of this call may add up to; a refusal whose wait would pass it
   *     fails the call with the last refusal as the cause (its {@code Retry-After} kept)
   * @param onWait called before each wait (counted as a retry in the load's status)
   * @throws LoadFailure the first failure that is not {@code Throttled}, the last refusal once the
   *     budget is spent, or {@code Interrupted}
   */
  static <T> T call(Backoff backoff, Duration budget, Call<T> call, Runnable onWait)
      throws LoadFailure {
    Objects.requireNonNull(backoff, "backoff");
    long deadline = System.nanoTime() + budget.toNanos();
    int refused = 0;
    while (true) {
      LoadFailure f;
      try {
        return call.call();
      } catch (LoadFailure e) {
        if (e.reason() != Reason.Throttled) {
          throw e;
        }
        f = e;
      }
      refused++;
      Duration wait = backoff.delay(refused, retryAfter(f));
      if (wait.toNanos() > deadline - System.nanoTime()) {
        throw new LoadFailure(
            Reason.Throttled,
            f.getMessage()
                + "; refused "
                + refused
                + " times, for longer than the "
                + budget.toSeconds()
                + " s a metadata request waits out throttling",
            f);
      }
      onWait.run();
      try {
        TimeUnit.NANOSECONDS.sleep(wait.toNanos());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new LoadFailure(Reason.Interrupted, "interrupted while throttled: " + f.getMessage());
      }
    }
  }

  /**
   * {@link #call(Backoff, Duration, Call, Runnable)} of a source request; its {@link
   * SourceException} becomes a {@link LoadFailure} with the same reason and {@code what: message}.
   */
  static <T> T source(
      Backoff backoff, Duration budget, String what, SourceCall<T> call, Runnable onWait)
      throws LoadFailure {
    return call(
        backoff,
        budget,
        () -> {
          try {
            return call.call();
          } catch (SourceException e) {
            throw new LoadFailure(e.reason(), what + e.getMessage(), e);
          }
        },
        onWait);
  }

  /** The longest {@code Retry-After} among the causes of {@code e}, or null. */
  static Duration retryAfter(Throwable e) {
    Duration longest = null;
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof SourceException se && se.retryAfter().isPresent()) {
        Duration d = se.retryAfter().get();
        longest = longest == null || d.compareTo(longest) > 0 ? d : longest;
      }
    }
    return longest;
  }
}
