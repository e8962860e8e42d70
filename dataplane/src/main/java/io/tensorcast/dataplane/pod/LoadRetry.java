package io.tensorcast.dataplane.pod;

import io.tensorcast.dataplane.source.Backoff;
import java.time.Duration;
import java.util.Objects;

/**
 * How {@link DataPlaneServer} waits before loading again after a load failed on a transient source
 * error ({@link io.tensorcast.dataplane.load.LoadFailure#isTransient()}): the data plane's {@link
 * Backoff}, at least the source's {@code Retry-After}; exponential as Kubernetes does for
 * CrashLoopBackOff and ImagePullBackOff, without a limit on the number of attempts while the pod
 * lives.
 *
 * <p>The wait after the {@code n}-th failed load is {@code backoff × 2^(n-1)}, at most {@code
 * maxBackoff}, then jittered to a uniformly random value in {@code [d/2, d]} so that the pods of
 * one artifact, failed by the same outage, do not all come back in the same second.
 *
 * @param backoff wait after the first failed load (before jitter); positive; default 10 s ({@code
 *     --load-retry-backoff})
 * @param maxBackoff longest wait (before jitter); at least {@code backoff}; default 5 min ({@code
 *     --load-retry-max-backoff})
 */
public record LoadRetry(Duration backoff, Duration maxBackoff) {

  /** 10 s doubling to 5 min. */
  public static final LoadRetry DEFAULTS =
      new LoadRetry(Duration.ofSeconds(10), Duration.ofMinutes(5));

  public LoadRetry {
    Objects.requireNonNull(backoff, "backoff");
    Objects.requireNonNull(maxBackoff, "maxBackoff");
    if (backoff.isNegative() || backoff.isZero()) {
      throw new IllegalArgumentException("--load-retry-backoff must be positive, got " + backoff);
    }
    if (maxBackoff.compareTo(backoff) < 0) {
      throw new IllegalArgumentException(
          "--load-retry-max-backoff ("
              + maxBackoff
              + ") must be at least --load-retry-backoff ("
              + backoff
              + ")");
    }
  }

  /**
   * The wait before the next load, without jitter.
   *
   * @param failures failed loads so far (≥ 1)
   */
  public Duration ceiling(int failures) {
    if (failures < 1) {
      throw new IllegalArgumentException("failures must be at least 1, got " + failures);
    }
    return schedule().ceiling(failures);
  }

  private Backoff schedule() {
    return new Backoff(backoff, maxBackoff);
  }

  /**
   * The jittered wait before the next load: uniformly random in {@code [ceiling/2, ceiling]}.
   *
   * @param failures failed loads so far (≥ 1)
   */
  public Duration delay(int failures) {
    return schedule().delay(failures);
  }

  /**
   * The jittered wait, never shorter than the {@code Retry-After} the source sent with the failure
   * (however long: the load waits as the server asked).
   *
   * @param retryAfter the source's {@code Retry-After}, or null
   */
  public Duration delay(int failures, Duration retryAfter) {
    return schedule().delay(failures, retryAfter);
  }
}
