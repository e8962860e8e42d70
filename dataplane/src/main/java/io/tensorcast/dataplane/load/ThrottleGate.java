package io.tensorcast.dataplane.load;

import io.tensorcast.dataplane.source.Backoff;
import io.tensorcast.dataplane.source.ConcurrencyLimiter;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * The throttling state of one load, shared by every request it makes to the source: the listing,
 * {@code HEAD}s, Hub API calls, safetensors header and torch structure reads, the ranged reads of
 * the data and the source reads of a {@link StoreFiller} (the peer swarm). When the source refuses
 * any of them as throttled (HTTP 429, {@code 503 SlowDown}), none of them sends a new request until
 * the gate opens again: the load backs off together, and the requests that go out when it opens are
 * the probes (a refusal among them closes it again).
 *
 * <ul>
 *   <li>A refusal with {@code Retry-After} closes the gate until that instant (from the moment the
 *       refusal was seen), or for the back-off's jittered base delay when that is longer; one
 *       without it closes the gate for the {@link Backoff}'s jittered delay of the consecutive
 *       refusal waves so far: the base delay after the first, doubled for each wave that follows
 *       without an admitted request in between, never above the cap. A wave is the refusals that
 *       arrive while the gate is closed by its first one: those requests were sent before the gate
 *       closed, together with the one that closed it, so N requests refused at once pause the load
 *       once at the base delay, not for the N-th doubling of it. An admitted request ({@link
 *       #admitted}) resets the count. A refusal never shortens a pause already set.
 *   <li>The time the gate is closed adds up over the read (overlapping pauses counted once); once
 *       it would pass the budget, {@link #refused} says so and the load fails as throttled.
 * </ul>
 *
 * <p>Throttling is thus paced once for the whole load instead of once per request: a refusal does
 * not use up a request's attempts nor grow its own back-off, and N requests refused at once wait
 * one {@code Retry-After}, not N of them one after another. Thread-safe.
 */
public final class ThrottleGate {
  private final Backoff backoff;
  private final long budgetNanos;
  private final LongSupplier clock;

  // guarded by this
  private long openAt;
  private long closedNanos;
  private int consecutive; // refusal waves since the last admitted request
  private long refusals;

  /**
   * A gate on {@link System#nanoTime}.
   *
   * @param backoff pacing of refusals without {@code Retry-After}
   * @param budget the most time the gate may be closed over the load, positive
   */
  public ThrottleGate(Backoff backoff, Duration budget) {
    this(backoff, budget, System::nanoTime);
  }

  /**
   * @param backoff pacing of refusals without {@code Retry-After}
   * @param budget the most time the gate may be closed over the load, positive
   * @param clock nanoseconds, monotonic ({@link System#nanoTime} outside tests)
   */
  ThrottleGate(Backoff backoff, Duration budget, LongSupplier clock) {
    this.backoff = Objects.requireNonNull(backoff, "backoff");
    Objects.requireNonNull(budget, "budget");
    if (budget.isNegative() || budget.isZero()) {
      throw new IllegalArgumentException("throttle budget must be positive, got " + budget);
    }
    this.budgetNanos = budget.toNanos();
    this.clock = Objects.requireNonNull(clock, "clock");
    this.openAt = clock.getAsLong();
  }

  /**
   * Records a refusal seen now and closes the gate as the class comment says.
   *
   * @param retryAfter what the server asked for, or null
   * @return the pause from now until the gate opens, or null when the load has been throttled for
   *     longer than the budget (the gate is left as it was)
   */
  public synchronized Duration refused(Duration retryAfter) {
    long now = clock.getAsLong();
    refusals++;
    if (consecutive == 0 || now >= openAt) {
      consecutive++; // a new wave: a request sent after the last pause, or the first refusal
    }
    Duration wait;
    if (retryAfter == null) {
      wait = backoff.delay(consecutive);
    } else {
      // At least the base delay, so that "Retry-After: 0" does not make a busy loop.
      Duration least = backoff.delay(1);
      wait = retryAfter.compareTo(least) > 0 ? retryAfter : least;
    }
    long until = now + wait.toNanos();
    long added = until - Math.max(openAt, now);
    if (added > 0) {
      if (closedNanos + added > budgetNanos) {
        return null;
      }
      closedNanos += added;
      openAt = until;
    }
    return Duration.ofNanos(Math.max(0, openAt - now));
  }

  /** Records a request the source admitted: the next refusal starts at the base delay again. */
  public synchronized void admitted() {
    consecutive = 0;
  }

  /** The time from now until the gate opens, zero when it is open. */
  public synchronized Duration pause() {
    return Duration.ofNanos(Math.max(0, openAt - clock.getAsLong()));
  }

  /**
   * Waits until the gate is open; false when {@code cancelled} counted down first.
   *
   * @throws InterruptedException when the waiting thread is interrupted
   */
  public boolean await(CountDownLatch cancelled) throws InterruptedException {
    while (true) {
      long left = pause().toNanos();
      if (left <= 0) {
        return cancelled.getCount() > 0;
      }
      if (cancelled.await(left, TimeUnit.NANOSECONDS)) {
        return false;
      }
    }
  }

  /**
   * {@link #await(CountDownLatch)} by a holder of a permit of {@code limiter}, which is told of the
   * wait ({@link ConcurrencyLimiter#pausing}) when the gate is closed, so that it does not judge
   * the windows the pause spans.
   *
   * @throws InterruptedException when the waiting thread is interrupted
   */
  public boolean await(CountDownLatch cancelled, ConcurrencyLimiter limiter)
      throws InterruptedException {
    if (pause().isZero()) {
      return cancelled.getCount() > 0;
    }
    limiter.pausing();
    try {
      return await(cancelled);
    } finally {
      limiter.resumed();
    }
  }

  /**
   * {@link #await()} by a holder of a permit of {@code limiter}, as {@link #await(CountDownLatch,
   * ConcurrencyLimiter)}.
   *
   * @throws InterruptedException when the waiting thread is interrupted
   */
  public void await(ConcurrencyLimiter limiter) throws InterruptedException {
    if (pause().isZero()) {
      return;
    }
    limiter.pausing();
    try {
      await();
    } finally {
      limiter.resumed();
    }
  }

  /**
   * Waits until the gate is open.
   *
   * @throws InterruptedException when the waiting thread is interrupted
   */
  public void await() throws InterruptedException {
    while (true) {
      long left = pause().toNanos();
      if (left <= 0) {
        return;
      }
      TimeUnit.NANOSECONDS.sleep(left);
    }
  }

  /** The time the gate has been closed so far, overlapping pauses counted once. */
  public synchronized Duration throttled() {
    return Duration.ofNanos(closedNanos);
  }

  /** Refusals recorded so far. */
  public synchronized long refusals() {
    return refusals;
  }

  public Duration budget() {
    return Duration.ofNanos(budgetNanos);
  }

  /**
   * Why a request failed when {@link #refused} returned null, e.g. {@code "the source throttled
   * this load (HTTP 429 or 503 SlowDown) for longer than its throttling budget of 300.0 s in total
   * (412 refusals, 299.2 s paused; --throttle-budget)"}.
   */
  public String exhausted() {
    return "the source throttled this load (HTTP 429 or 503 SlowDown) for longer than its"
        + " throttling budget of "
        + seconds(budget())
        + " in total ("
        + refusals()
        + " refusals, "
        + seconds(throttled())
        + " paused; --throttle-budget)";
  }

  private static String seconds(Duration d) {
    return String.format(java.util.Locale.ROOT, "%.1f s", d.toNanos() / 1e9);
  }
}
