package io.tensorcast.dataplane.load;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.source.SourceException;
import java.time.Duration;
import java.util.Objects;

/**
 * Waits out a source's throttling of one metadata request (a listing, a {@code HEAD}, a Hub API
 * call, a safetensors header or torch structure read, an index file) at the load's {@link
 * ThrottleGate}: the request waits until the gate is open before it is sent; a request refused as
 * {@link Reason#Throttled} (HTTP 429, {@code 503 SlowDown}, with or without {@code Retry-After})
 * closes the gate for every request of the load (never shorter than the server's {@code
 * Retry-After}) and is asked again once it opens, however often it is refused, until the load's
 * throttling budget is spent. Only then does its failure go to the load. Every other failure goes
 * to the caller at once (the request's own retries have run).
 *
 * <p>Requests refused at about the same time thus wait one pause together instead of each sleeping
 * its own back-off one after another, and a request admitted by the source starts the next pause at
 * the base delay again.
 */
final class ThrottleWait {
  /**
   * The throttling budget of a metadata request made outside a load (e.g. {@code dataplane
   * inspect}), with a gate of its own.
   */
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
   * Makes {@code call} once {@code gate} is open, again after each refusal as {@link
   * Reason#Throttled}, until it is not refused.
   *
   * @param onWait called after each refusal (counted as a retry in the load's status)
   * @throws LoadFailure the first failure that is not {@code Throttled}, the last refusal once the
   *     gate's budget is spent (its {@code Retry-After} kept as the cause), or {@code Interrupted}
   */
  static <T> T call(ThrottleGate gate, Call<T> call, Runnable onWait) throws LoadFailure {
    Objects.requireNonNull(gate, "gate");
    while (true) {
      try {
        gate.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new LoadFailure(Reason.Interrupted, "interrupted while throttled");
      }
      LoadFailure f;
      try {
        T out = call.call();
        gate.admitted();
        return out;
      } catch (LoadFailure e) {
        if (e.reason() != Reason.Throttled) {
          throw e;
        }
        f = e;
      }
      if (gate.refused(retryAfter(f)) == null) {
        throw new LoadFailure(Reason.Throttled, f.getMessage() + "; " + gate.exhausted(), f);
      }
      onWait.run();
    }
  }

  /**
   * {@link #call(ThrottleGate, Call, Runnable)} of a source request; its {@link SourceException}
   * becomes a {@link LoadFailure} with the same reason and {@code what: message}.
   */
  static <T> T source(ThrottleGate gate, String what, SourceCall<T> call, Runnable onWait)
      throws LoadFailure {
    return call(
        gate,
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
