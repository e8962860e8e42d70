package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The limiter's rules on a fake clock: a simulated origin delivers {@code min(perConnection × in
 * flight, total)} bytes per second, and the test holds exactly as many permits as the limit allows,
 * in steps of 100 ms.
 */
@Timeout(10)
class ConcurrencyLimiterTest {
  private static final Duration WINDOW = Duration.ofMillis(500);
  private static final long STEP_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
  private static final long MB = 1_000_000;

  private final AtomicLong now = new AtomicLong(1_000_000_000L);

  /** The permits the simulated reader holds. */
  private int held;

  private ConcurrencyLimiter adaptive(int initial, int max) {
    return ConcurrencyLimiter.adaptive(initial, max, WINDOW, now::get);
  }

  /**
   * Runs {@code steps} steps of 100 ms against an origin giving each request {@code perConnection}
   * B/s, all of them together at most {@code total} B/s, and refusing (429) every request above
   * {@code refuseAbove} in flight.
   */
  private void drive(
      ConcurrencyLimiter l, int steps, long perConnection, long total, int refuseAbove)
      throws InterruptedException {
    for (int i = 0; i < steps; i++) {
      while (held < l.limit()) {
        assertThat(l.acquire()).isTrue();
        held++;
      }
      while (held > l.limit()) {
        l.release(false);
        held--;
      }
      while (held > refuseAbove) {
        l.release(true);
        held--;
      }
      now.addAndGet(STEP_NANOS);
      l.delivered(Math.min(perConnection * held, total) / 10);
    }
  }

  @Test
  void growsToItsMaxAgainstAnOriginWhoseSingleConnectionsAreSlow() throws Exception {
    ConcurrencyLimiter l = adaptive(4, 64);
    drive(l, 40, 2 * MB, Long.MAX_VALUE, Integer.MAX_VALUE);
    assertThat(l.limit()).isEqualTo(64);
    assertThat(l.peakLimit()).isEqualTo(64);
    drive(l, 100, 2 * MB, Long.MAX_VALUE, Integer.MAX_VALUE);
    assertThat(l.limit()).as("never above max").isEqualTo(64);
  }

  @Test
  void stopsGrowingWhereMoreConnectionsBringNoMoreBytes() throws Exception {
    // 2 MB/s per connection, 32 MB/s in total: 16 in flight is the best.
    ConcurrencyLimiter l = adaptive(4, 64);
    drive(l, 200, 2 * MB, 32 * MB, Integer.MAX_VALUE);
    assertThat(l.limit()).isBetween(16, 20);
    assertThat(l.peakLimit()).isEqualTo(32);
    assertThat(l.throttleSignals()).isZero();
  }

  @Test
  void halvesOncePerWindowOnThrottlingAndNeverGoesBelowOne() throws Exception {
    ConcurrencyLimiter l = adaptive(16, 64);
    for (int i = 0; i < 3; i++) {
      assertThat(l.acquire()).isTrue();
    }
    l.release(true);
    l.release(true);
    assertThat(l.limit()).as("two refusals in one window are one signal").isEqualTo(8);
    now.addAndGet(WINDOW.toNanos());
    l.release(true);
    assertThat(l.limit()).isEqualTo(4);
    for (int i = 0; i < 5; i++) {
      now.addAndGet(WINDOW.toNanos());
      assertThat(l.acquire()).isTrue();
      l.release(true);
    }
    assertThat(l.limit()).isEqualTo(1);
    assertThat(l.throttleSignals()).isEqualTo(8);
    assertThat(l.decreases()).isEqualTo(7);
  }

  @Test
  void settlesBelowTheLimitOfAnOriginThatRefusesAboveEightInFlight() throws Exception {
    ConcurrencyLimiter l = adaptive(4, 64);
    drive(l, 300, 2 * MB, Long.MAX_VALUE, 8);
    assertThat(l.limit()).isBetween(4, 8);
    long refused = l.throttleSignals();
    // A fixed 16 is refused 8 times a step, 3,000 times in 300 steps (after which its readers
    // retry); the adaptive one a few times per probe.
    assertThat(refused).isPositive().isLessThan(100);
  }

  @Test
  void aFixedLimiterNeverChanges() throws Exception {
    ConcurrencyLimiter l = ConcurrencyLimiter.fixed(16);
    for (int i = 0; i < 16; i++) {
      assertThat(l.acquire()).isTrue();
    }
    l.release(true);
    assertThat(l.limit()).isEqualTo(16);
    assertThat(l.throttleSignals()).isEqualTo(1);
    assertThat(l.isAdaptive()).isFalse();
  }

  @Test
  void doesNotGrowWhileItsPermitsAreNotAllTaken() throws Exception {
    ConcurrencyLimiter l = adaptive(4, 64);
    assertThat(l.acquire()).isTrue();
    for (int i = 0; i < 50; i++) {
      now.addAndGet(STEP_NANOS);
      l.delivered(2 * MB / 10);
    }
    assertThat(l.limit()).isEqualTo(4);
  }

  @Test
  void aWaiterGetsAPermitWhenOneIsReleasedAndNoneAfterClose() throws Exception {
    ConcurrencyLimiter l = adaptive(1, 4);
    assertThat(l.acquire()).isTrue();
    CompletableFuture<Boolean> second = CompletableFuture.supplyAsync(l::acquireUnlessInterrupted);
    assertThat(second).isNotDone();
    l.release(false);
    assertThat(second.get(5, TimeUnit.SECONDS)).isTrue();
    CompletableFuture<Boolean> third = CompletableFuture.supplyAsync(l::acquireUnlessInterrupted);
    l.close();
    assertThat(third.get(5, TimeUnit.SECONDS)).isFalse();
    assertThat(l.acquire()).isFalse();
  }

  @Test
  void anInterruptedWaiterGetsNoPermitAndKeepsItsInterruptFlag() throws Exception {
    ConcurrencyLimiter l = adaptive(1, 4);
    assertThat(l.acquire()).isTrue();
    CompletableFuture<boolean[]> waiter = new CompletableFuture<>();
    Thread t =
        new Thread(
            () -> {
              boolean got = l.acquireUnlessInterrupted();
              waiter.complete(new boolean[] {got, Thread.currentThread().isInterrupted()});
            });
    t.start();
    await().atMost(Duration.ofSeconds(5)).until(() -> t.getState() == Thread.State.TIMED_WAITING);
    t.interrupt();
    assertThat(waiter.get(5, TimeUnit.SECONDS)).containsExactly(false, true);
    l.release(false);
    assertThat(l.acquireUnlessInterrupted()).as("the interrupted waiter took no permit").isTrue();
  }

  @Test
  void refusesBadSettingsAndAReleaseWithoutPermit() {
    assertThatThrownBy(() -> adaptive(0, 4)).hasMessageContaining("initial must be between 1");
    assertThatThrownBy(() -> adaptive(5, 4)).hasMessageContaining("max 4, got 5");
    assertThatThrownBy(() -> ConcurrencyLimiter.fixed(0))
        .hasMessageContaining("max must be at least 1, got 0");
    ConcurrencyLimiter l = adaptive(2, 4);
    assertThatThrownBy(() -> l.release(false)).isInstanceOf(IllegalStateException.class);
  }
}
