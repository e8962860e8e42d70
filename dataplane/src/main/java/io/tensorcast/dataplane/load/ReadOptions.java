package io.tensorcast.dataplane.load;

import java.time.Duration;
import java.util.Objects;

/**
 * How {@link ParallelRangeReader} reads: range size, parallelism, retries and staging memory.
 *
 * <p>Each field is checked here; whether the staging buffers fit the budget ({@code concurrency ×
 * stagingBufferSize ≤ stagingBudget}) is checked when a reader is constructed, so the fields can be
 * changed one at a time with the {@code with…} methods.
 *
 * @param rangeSize bytes per planned ranged request (the last range of a file may be shorter); 1 B
 *     – 1 GiB; default 8 MiB. A member of a peer swarm reads its source runs in ranges of this size
 *     (their pieces go out to its peers as they land)
 * @param maxRangeSize the largest request a load that reads the source alone makes by asking for
 *     adjacent planned ranges at once, where the origin is fast enough ({@link
 *     ParallelRangeReader}); ≥ rangeSize, ≤ 1 GiB; default 32 MiB ({@link #withRangeSize} sets
 *     both: then every request is one planned range)
 * @param concurrency most requests in flight at once (worker threads); 1–1024; default 16
 * @param maxAttempts most requests made for one range, the first one and every retry or resume
 *     included; 1–100; default 6
 * @param backoffBase delay before the first retry; doubled for each further retry, with jitter
 *     (uniform between half and all of it); ≥ 0; default 200 ms
 * @param backoffCap the longest delay between attempts, also the most a server's {@code
 *     Retry-After} is honoured; ≥ backoffBase; default 10 s
 * @param stagingBufferSize bytes of the per-worker heap buffer that bytes pass through from the
 *     response stream into the sink's buffer; 1 KiB – 64 MiB; default 256 KiB
 * @param stagingBudget the most heap the staging buffers of one read may take, in bytes; default 64
 *     MiB
 * @param adaptiveConcurrency whether the requests in flight follow what the origin delivers (start
 *     at 4, grow while more requests bring more bytes, halve on throttling; never above {@code
 *     concurrency}, never below 1) rather than stay at {@code concurrency}; default true
 * @param throttleBudget the longest one load (or one read outside a load) may be held back by
 *     throttling in total: a request refused as throttled (429, {@code 503 SlowDown}) does not use
 *     up one of {@code maxAttempts}; instead every request of the load waits at its {@link
 *     ThrottleGate} until the server's {@code Retry-After} (or a back-off that grows only while
 *     refusals follow one another), and the load fails as {@code Throttled} once those waits would
 *     pass this budget; positive; default 5 minutes
 */
public record ReadOptions(
    int rangeSize,
    int maxRangeSize,
    int concurrency,
    int maxAttempts,
    Duration backoffBase,
    Duration backoffCap,
    int stagingBufferSize,
    long stagingBudget,
    boolean adaptiveConcurrency,
    Duration throttleBudget) {

  public static final int MIB = 1 << 20;

  /** The longest one read waits out throttling in total by default: 5 minutes. */
  public static final Duration DEFAULT_THROTTLE_BUDGET = Duration.ofMinutes(5);

  /** The defaults listed above. */
  public static final ReadOptions DEFAULTS =
      new ReadOptions(
          8 * MIB,
          32 * MIB,
          16,
          6,
          Duration.ofMillis(200),
          Duration.ofSeconds(10),
          256 * 1024,
          64L * MIB,
          true,
          DEFAULT_THROTTLE_BUDGET);

  /**
   * The options with the default throttling budget; no request merges ranges (see maxRangeSize).
   */
  public ReadOptions(
      int rangeSize,
      int concurrency,
      int maxAttempts,
      Duration backoffBase,
      Duration backoffCap,
      int stagingBufferSize,
      long stagingBudget,
      boolean adaptiveConcurrency) {
    this(
        rangeSize,
        rangeSize,
        concurrency,
        maxAttempts,
        backoffBase,
        backoffCap,
        stagingBufferSize,
        stagingBudget,
        adaptiveConcurrency,
        DEFAULT_THROTTLE_BUDGET);
  }

  /** The options with an adaptive concurrency; no request merges ranges (see maxRangeSize). */
  public ReadOptions(
      int rangeSize,
      int concurrency,
      int maxAttempts,
      Duration backoffBase,
      Duration backoffCap,
      int stagingBufferSize,
      long stagingBudget) {
    this(
        rangeSize,
        concurrency,
        maxAttempts,
        backoffBase,
        backoffCap,
        stagingBufferSize,
        stagingBudget,
        true);
  }

  public ReadOptions {
    if (rangeSize < 1 || rangeSize > 1024 * MIB) {
      throw new IllegalArgumentException(
          "rangeSize must be between 1 byte and 1 GiB, got " + rangeSize);
    }
    if (maxRangeSize < rangeSize || maxRangeSize > 1024 * MIB) {
      throw new IllegalArgumentException(
          "maxRangeSize must be between rangeSize ("
              + rangeSize
              + ") and 1 GiB, got "
              + maxRangeSize);
    }
    if (concurrency < 1 || concurrency > 1024) {
      throw new IllegalArgumentException(
          "concurrency must be between 1 and 1024, got " + concurrency);
    }
    if (maxAttempts < 1 || maxAttempts > 100) {
      throw new IllegalArgumentException(
          "maxAttempts must be between 1 and 100, got " + maxAttempts);
    }
    Objects.requireNonNull(backoffBase, "backoffBase");
    Objects.requireNonNull(backoffCap, "backoffCap");
    if (backoffBase.isNegative()) {
      throw new IllegalArgumentException("backoffBase must not be negative, got " + backoffBase);
    }
    if (backoffCap.compareTo(backoffBase) < 0) {
      throw new IllegalArgumentException(
          "backoffCap " + backoffCap + " must not be below backoffBase " + backoffBase);
    }
    if (stagingBufferSize < 1024 || stagingBufferSize > 64 * MIB) {
      throw new IllegalArgumentException(
          "stagingBufferSize must be between 1 KiB and 64 MiB, got " + stagingBufferSize);
    }
    if (stagingBudget < 1) {
      throw new IllegalArgumentException("stagingBudget must be positive, got " + stagingBudget);
    }
    Objects.requireNonNull(throttleBudget, "throttleBudget");
    if (throttleBudget.isNegative() || throttleBudget.isZero()) {
      throw new IllegalArgumentException("throttleBudget must be positive, got " + throttleBudget);
    }
  }

  /** Heap the staging buffers take: concurrency × stagingBufferSize bytes. */
  public long stagingBytes() {
    return (long) concurrency * stagingBufferSize;
  }

  /**
   * Checks {@code concurrency × stagingBufferSize ≤ stagingBudget}.
   *
   * @throws IllegalArgumentException giving the numbers and what to change
   */
  public void requireStagingWithinBudget() {
    if (stagingBytes() > stagingBudget) {
      throw new IllegalArgumentException(
          "staging buffers need concurrency "
              + concurrency
              + " × stagingBufferSize "
              + stagingBufferSize
              + " B = "
              + stagingBytes()
              + " B, over the stagingBudget of "
              + stagingBudget
              + " B; lower concurrency or stagingBufferSize, or raise stagingBudget");
    }
  }

  /** The same options with requests of a load that reads alone merged up to {@code v} bytes. */
  public ReadOptions withMaxRangeSize(int v) {
    return new ReadOptions(
        rangeSize,
        v,
        concurrency,
        maxAttempts,
        backoffBase,
        backoffCap,
        stagingBufferSize,
        stagingBudget,
        adaptiveConcurrency,
        throttleBudget);
  }

  /** The same options with exactly {@code v} bytes per ranged request: none merged. */
  public ReadOptions withRangeSize(int v) {
    return new ReadOptions(
        v,
        v,
        concurrency,
        maxAttempts,
        backoffBase,
        backoffCap,
        stagingBufferSize,
        stagingBudget,
        adaptiveConcurrency,
        throttleBudget);
  }

  public ReadOptions withConcurrency(int v) {
    return new ReadOptions(
        rangeSize,
        maxRangeSize,
        v,
        maxAttempts,
        backoffBase,
        backoffCap,
        stagingBufferSize,
        stagingBudget,
        adaptiveConcurrency,
        throttleBudget);
  }

  public ReadOptions withMaxAttempts(int v) {
    return new ReadOptions(
        rangeSize,
        maxRangeSize,
        concurrency,
        v,
        backoffBase,
        backoffCap,
        stagingBufferSize,
        stagingBudget,
        adaptiveConcurrency,
        throttleBudget);
  }

  public ReadOptions withBackoff(Duration base, Duration cap) {
    return new ReadOptions(
        rangeSize,
        maxRangeSize,
        concurrency,
        maxAttempts,
        base,
        cap,
        stagingBufferSize,
        stagingBudget,
        adaptiveConcurrency,
        throttleBudget);
  }

  public ReadOptions withStagingBufferSize(int v) {
    return new ReadOptions(
        rangeSize,
        maxRangeSize,
        concurrency,
        maxAttempts,
        backoffBase,
        backoffCap,
        v,
        stagingBudget,
        adaptiveConcurrency,
        throttleBudget);
  }

  /** The same options with a fixed ({@code false}) or adaptive ({@code true}) concurrency. */
  public ReadOptions withAdaptiveConcurrency(boolean v) {
    return new ReadOptions(
        rangeSize,
        maxRangeSize,
        concurrency,
        maxAttempts,
        backoffBase,
        backoffCap,
        stagingBufferSize,
        stagingBudget,
        v,
        throttleBudget);
  }

  /**
   * The same options with another throttling budget.
   *
   * @param v positive
   */
  public ReadOptions withThrottleBudget(Duration v) {
    return new ReadOptions(
        rangeSize,
        maxRangeSize,
        concurrency,
        maxAttempts,
        backoffBase,
        backoffCap,
        stagingBufferSize,
        stagingBudget,
        adaptiveConcurrency,
        v);
  }
}
