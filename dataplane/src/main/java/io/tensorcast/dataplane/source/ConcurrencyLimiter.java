package io.tensorcast.dataplane.source;

import java.time.Duration;
import java.util.Objects;
import java.util.function.LongSupplier;

/**
 * How many source reads may be in flight at once: fixed, or adaptive — following what the origin
 * delivers. Shared by every worker of one read ({@code ParallelRangeReader}, the peer swarm's
 * source reads); each request attempt holds one permit from {@link #acquire} to {@link #release}.
 *
 * <p>The adaptive rules (additive-increase / multiplicative-decrease, with the increase kept only
 * while it pays, as TCP and the AIMD / gradient limiters do):
 *
 * <ul>
 *   <li>Time is cut into windows of {@code window} (500 ms by default); a window's throughput is
 *       the bytes {@link #delivered} in it divided by its length. A window ends at the first call
 *       after its length has passed.
 *   <li><b>Throttled</b> (a request released with {@code throttled}: 429, 503 SlowDown): each
 *       refusal lowers the limit by one at once, down to half the limit of the window's first
 *       refusal at most (never below 1): a wave of N refusals out of L in flight leaves about the L
 *       − N requests the origin admitted, and a storm halves the limit once per window. The limit
 *       so reached is the <b>ceiling</b> no probe passes for the next {@link #CEILING_WINDOWS}
 *       judged windows without throttling (the origin refused the limits above it; after that the
 *       ceiling is forgotten, as the origin's capacity may have changed). The limit then holds for
 *       {@link #HOLD_WINDOWS} judged windows before probing again. Refusals before the limiter's
 *       first judged window without throttling lower the limit the same way but set no ceiling and
 *       no hold, and the slow start goes on: they say the origin was refusing when the read arrived
 *       (the listing and header reads before it, or other clients, spent a request-rate budget),
 *       not which number in flight it serves.
 *   <li>The limiter's first ceiling is <b>tentative</b>: one wave may say only what the origin's
 *       burst allowance had left (an origin limiting requests per second refuses the slow start's
 *       burst of new requests, not the number in flight it serves at its rate). After its hold the
 *       limit steps above it one at a time, up to twice the ceiling, each step kept when it pays or
 *       else after its second window unless refused: the throughput does not undo these steps, as
 *       against a request-rate limit a step's bytes come only as its requests start and end. A
 *       refusal after the hold confirms the ceiling it sets (refusals within the hold are late
 *       answers of the wave that set it). Once a ceiling has been confirmed, every later one is
 *       confirmed at once, the one set after a confirmed ceiling was forgotten included. A climb
 *       above a tentative ceiling that brought no more bytes is kept: the limit stays there, at
 *       most twice the ceiling and never above {@code max}, until a refusal lowers it.
 *   <li><b>Probing</b>: after a window with no throttling in which every permit was taken, the
 *       limit grows — doubling at first (slow start), by {@code max(1, limit / 4)} after the first
 *       probe that did not pay or the first throttling — never above {@code max} nor a confirmed
 *       ceiling. The next window keeps the step when its throughput rose by at least half of the
 *       step's proportion (from 8 to 16 in flight, +100 %, needs ≥ +50 % throughput): an origin
 *       whose single connections are slow scales about linearly and keeps growing; one that is
 *       saturated does not. A step that has not paid in that first window is judged again on the
 *       window after it (the step's new requests spend part of the first one waiting for their
 *       first bytes: ~300 ms each on the bench's origins); when it has not paid there either, the
 *       limit steps back to where it was and holds for {@link #HOLD_WINDOWS} windows before the
 *       next probe.
 *   <li>A window is not judged (no probe, no step back, no count towards a hold or the ceiling)
 *       when nothing was in flight and no permit was waited for (the read had run out of work), or
 *       when a permit holder waited out the origin's throttling pause in it ({@link #pausing} to
 *       {@link #resumed}): its few bytes say nothing about the limit, and a probe measured against
 *       them would seem to pay.
 * </ul>
 *
 * <p>A fixed limiter ({@link #fixed}) never changes its limit. Thread-safe; waiting is
 * interruptible and ends at {@link #close}.
 */
public final class ConcurrencyLimiter {
  /** Default length of one measurement window. */
  public static final Duration DEFAULT_WINDOW = Duration.ofMillis(500);

  /** Limit an adaptive limiter starts at (or {@code max}, when lower). */
  public static final int DEFAULT_INITIAL = 4;

  /** Judged windows a limit holds after throttling or a probe that did not pay. */
  public static final int HOLD_WINDOWS = 6;

  /** Judged windows without throttling after which the ceiling set by throttling is forgotten. */
  public static final int CEILING_WINDOWS = 60;

  private final boolean adaptive;
  private final int max;
  private final long windowNanos;
  private final LongSupplier clock;
  private final Object lock = new Object();

  // guarded by lock
  private int limit;
  private int inFlight;
  private int waiting;
  private int pausing; // permit holders waiting out a throttling pause
  private boolean closed;
  private long windowStart;
  private long windowBytes;
  private boolean windowThrottled;
  private boolean windowBusy;
  private boolean windowPaused;
  private int throttleFloor; // lowest limit the refusals of this window may set
  private int ceiling; // no probe above it; max when none
  private int ceilingWindows; // judged windows left before the ceiling is forgotten
  private boolean tentative; // the ceiling was set by one refusal wave and not refused at since
  private boolean confirmedOnce; // a ceiling has been confirmed: later ones are not tentative
  private int baseLimit; // the limit before the probe under judgement; 0 = none
  private double baseRate;
  private boolean settling; // the step under judgement is in its first judged window
  private boolean measured; // a judged window without throttling has ended
  private int hold;
  private boolean slowStart = true;
  private long throttleSignals;
  private long decreases;
  private int peak;

  private ConcurrencyLimiter(
      boolean adaptive, int initial, int max, Duration window, LongSupplier clock) {
    if (max < 1) {
      throw new IllegalArgumentException("max must be at least 1, got " + max);
    }
    if (initial < 1 || initial > max) {
      throw new IllegalArgumentException(
          "initial must be between 1 and max " + max + ", got " + initial);
    }
    Objects.requireNonNull(window, "window");
    if (window.isNegative() || window.isZero()) {
      throw new IllegalArgumentException("window must be positive, got " + window);
    }
    this.adaptive = adaptive;
    this.max = max;
    this.windowNanos = window.toNanos();
    this.clock = Objects.requireNonNull(clock, "clock");
    this.limit = initial;
    this.peak = initial;
    this.ceiling = max;
    this.windowStart = clock.getAsLong();
  }

  /** A limiter that always allows {@code limit} in flight. */
  public static ConcurrencyLimiter fixed(int limit) {
    return new ConcurrencyLimiter(false, limit, limit, DEFAULT_WINDOW, System::nanoTime);
  }

  /**
   * An adaptive limiter between 1 and {@code max}, starting at {@code min(max, 4)}, on the system
   * clock with 500 ms windows.
   */
  public static ConcurrencyLimiter adaptive(int max) {
    return adaptive(Math.min(max, DEFAULT_INITIAL), max, DEFAULT_WINDOW, System::nanoTime);
  }

  /**
   * An adaptive limiter.
   *
   * @param initial the first limit, 1 ≤ initial ≤ max
   * @param max the most in flight ever allowed, ≥ 1
   * @param window length of one measurement window, positive
   * @param clock nanoseconds, monotonic ({@link System#nanoTime} outside tests)
   */
  public static ConcurrencyLimiter adaptive(
      int initial, int max, Duration window, LongSupplier clock) {
    return new ConcurrencyLimiter(true, initial, max, window, clock);
  }

  /** Adaptive when {@code adaptive}, else fixed at {@code max}. */
  public static ConcurrencyLimiter of(boolean adaptive, int max) {
    return adaptive ? adaptive(max) : fixed(max);
  }

  /**
   * Waits for a permit: returns true once fewer than the limit are in flight (the caller then holds
   * one and must {@link #release} it), false when the limiter was closed.
   *
   * @throws InterruptedException when the waiting thread is interrupted
   */
  public boolean acquire() throws InterruptedException {
    synchronized (lock) {
      waiting++;
      try {
        while (!closed && inFlight >= limit) {
          windowBusy = true;
          lock.wait(Math.max(1, windowNanos / 1_000_000));
          roll();
        }
        if (closed) {
          return false;
        }
        inFlight++;
        windowBusy = true;
        roll();
        return true;
      } finally {
        waiting--;
      }
    }
  }

  /**
   * As {@link #acquire}, for a worker that stops when interrupted: an interrupt while waiting
   * returns false, with the thread's interrupt flag set again for the caller's loop to see.
   *
   * @return true once the caller holds a permit (it must {@link #release} it); false when the
   *     limiter was closed or the thread interrupted
   */
  public boolean acquireUnlessInterrupted() {
    try {
      return acquire();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /**
   * Gives back a permit taken by {@link #acquire}.
   *
   * @param throttled whether the origin refused or slowed the request (429, 503 SlowDown)
   */
  public void release(boolean throttled) {
    synchronized (lock) {
      if (inFlight <= 0) {
        throw new IllegalStateException("release without a permit in flight");
      }
      roll();
      inFlight--;
      if (throttled) {
        throttleSignals++;
        if (adaptive) {
          decrease();
        }
      }
      lock.notifyAll();
    }
  }

  /**
   * The caller, holding a permit, starts waiting out a pause that the origin's throttling imposed
   * on the read (the load's throttle gate is closed); {@link #resumed} when it ends. The windows
   * such a wait spans are not judged.
   */
  public void pausing() {
    synchronized (lock) {
      roll();
      pausing++;
      windowPaused = true;
    }
  }

  /** The wait begun by {@link #pausing} has ended. */
  public void resumed() {
    synchronized (lock) {
      if (pausing <= 0) {
        throw new IllegalStateException("resumed without a pause");
      }
      roll();
      pausing--;
    }
  }

  /** Counts {@code bytes} received from the origin now, for the window's throughput. */
  public void delivered(long bytes) {
    synchronized (lock) {
      windowBytes += bytes;
      roll();
    }
  }

  /** Ends every wait: {@link #acquire} returns false from now on. */
  public void close() {
    synchronized (lock) {
      closed = true;
      lock.notifyAll();
    }
  }

  /** The current limit of requests in flight. */
  public int limit() {
    synchronized (lock) {
      roll();
      return limit;
    }
  }

  /** The ceiling set by the last throttling, or {@code max} when there is none (any more). */
  public int ceiling() {
    synchronized (lock) {
      roll();
      return ceiling;
    }
  }

  /** The highest limit so far. */
  public int peakLimit() {
    synchronized (lock) {
      return peak;
    }
  }

  /** Requests released as throttled so far. */
  public long throttleSignals() {
    synchronized (lock) {
      return throttleSignals;
    }
  }

  /** Windows in which throttling lowered the limit. */
  public long decreases() {
    synchronized (lock) {
      return decreases;
    }
  }

  public int max() {
    return max;
  }

  public boolean isAdaptive() {
    return adaptive;
  }

  @Override
  public String toString() {
    synchronized (lock) {
      return (adaptive ? "adaptive" : "fixed")
          + " limit "
          + limit
          + " of max "
          + max
          + (ceiling < max ? " (ceiling " + ceiling + (tentative ? ", tentative)" : ")") : "")
          + " (peak "
          + peak
          + ", "
          + inFlight
          + " in flight, "
          + throttleSignals
          + " throttled)";
    }
  }

  // ---------------------------------------------------------------------- rules (under lock)

  /** One refusal: the limit one lower, at most halved in a window; the ceiling follows it. */
  private void decrease() {
    if (!windowThrottled) {
      windowThrottled = true;
      throttleFloor = Math.max(1, limit / 2);
      decreases++;
      baseLimit = 0;
      settling = false;
      if (measured) {
        // The first ceiling is tentative; a refusal after its hold (not a late answer of the wave
        // that set it) confirms the next one, and from then on every ceiling is confirmed.
        tentative = !confirmedOnce && (ceiling >= max || tentative && hold > 0);
        confirmedOnce = !tentative;
        slowStart = false;
        hold = HOLD_WINDOWS;
      }
    }
    limit = Math.max(throttleFloor, limit - 1);
    if (measured) {
      ceiling = limit;
      ceilingWindows = CEILING_WINDOWS;
    }
  }

  /** Ends every window that has passed, judging the first one. */
  private void roll() {
    long now = clock.getAsLong();
    long elapsed = now - windowStart;
    if (elapsed < windowNanos) {
      return;
    }
    double rate = windowBytes * 1e9 / elapsed;
    boolean judged = (windowBusy || inFlight > 0 || waiting > 0) && !windowPaused;
    boolean throttled = windowThrottled;
    windowStart = now;
    windowBytes = 0;
    windowThrottled = false;
    windowBusy = inFlight > 0 || waiting > 0;
    windowPaused = pausing > 0;
    if (!adaptive || !judged || throttled) {
      return;
    }
    measured = true;
    if (ceiling < max && --ceilingWindows <= 0) {
      ceiling = max;
      tentative = false;
    }
    if (baseLimit > 0) {
      double step = (double) (limit - baseLimit) / baseLimit;
      if (rate >= baseRate * (1 + step / 2)) {
        probe(rate);
      } else if (settling) {
        // The step's new requests spent part of the window waiting for their first bytes.
        settling = false;
      } else if (tentative && baseLimit >= ceiling) {
        // Above a tentative ceiling the origin's refusals judge a step, not the throughput: kept
        // after its two windows without one, and the next one taken.
        probe(rate);
      } else {
        limit = baseLimit;
        baseLimit = 0;
        slowStart = false;
        hold = HOLD_WINDOWS;
      }
      return;
    }
    if (hold > 0) {
      hold--;
      return;
    }
    probe(rate);
  }

  private void probe(double rate) {
    int top = Math.min(max, tentative ? 2 * ceiling : ceiling);
    if (limit >= top || waiting == 0 && inFlight < limit) {
      // At the ceiling, or not using what it has: nothing to learn from more.
      baseLimit = 0;
      return;
    }
    baseLimit = limit;
    baseRate = rate;
    int step = slowStart ? limit : Math.max(1, limit / 4);
    if (tentative) {
      step = 1; // above a tentative ceiling (a refusal leaves the limit at it): one at a time
    }
    limit = Math.min(top, limit + step);
    settling = true;
    peak = Math.max(peak, limit);
    lock.notifyAll();
  }
}
