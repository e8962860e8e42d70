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
  void eachRefusalLowersTheLimitByOneAndOneWindowAtMostHalvesIt() throws Exception {
    ConcurrencyLimiter l = adaptive(16, 16);
    for (int i = 0; i < 16; i++) {
      assertThat(l.acquire()).isTrue();
    }
    measured(l, 32 * MB);
    // 4 of 16 refused: the origin admitted 12 (the old rule halved to 8 at the first refusal).
    for (int i = 0; i < 4; i++) {
      l.release(true);
    }
    assertThat(l.limit()).isEqualTo(12);
    assertThat(l.ceiling()).as("no probe above what the origin admitted").isEqualTo(12);
    // A storm: 8 more refusals in the same window stop at half of the window's first limit.
    for (int i = 0; i < 8; i++) {
      l.release(true);
    }
    assertThat(l.limit()).isEqualTo(8);
    assertThat(l.decreases()).as("one window, one decrease").isEqualTo(1);
    now.addAndGet(WINDOW.toNanos());
    for (int i = 0; i < 4; i++) {
      l.release(true);
    }
    assertThat(l.limit()).isEqualTo(4);
    for (int i = 0; i < 5; i++) {
      now.addAndGet(WINDOW.toNanos());
      assertThat(l.acquire()).isTrue();
      l.release(true);
    }
    assertThat(l.limit()).as("never below one").isEqualTo(1);
    assertThat(l.throttleSignals()).isEqualTo(21);
    assertThat(l.decreases()).isEqualTo(7);
  }

  /** One window in which the permits held deliver {@code rate} B/s: the limiter's first measure. */
  private void measured(ConcurrencyLimiter l, long rate) {
    for (int i = 0; i < 5; i++) {
      now.addAndGet(STEP_NANOS);
      l.delivered(rate / 10);
    }
  }

  @Test
  void aStepIsNotUndoneByTheWindowInWhichItsRequestsWaitedForTheirFirstBytes() throws Exception {
    // Measured on the bench's origin 1 (4 MB/s per connection): 8 in flight gave 31 MB/s; in the
    // window after the step to 16 the 8 new requests spent ~300 ms before their first bytes, 42
    // MB/s (+36 %, +50 % needed), and the old rule stepped back to 8; the next window gave 60.
    ConcurrencyLimiter l = adaptive(8, 16);
    for (int i = 0; i < 8; i++) {
      assertThat(l.acquire()).isTrue();
    }
    measured(l, 32 * MB); // all 8 permits taken: the probe doubles to 16
    assertThat(l.limit()).isEqualTo(16);
    for (int i = 0; i < 8; i++) {
      assertThat(l.acquire()).isTrue();
    }
    for (int i = 0; i < 5; i++) { // the 8 new ones deliver from 300 ms into the window on
      now.addAndGet(STEP_NANOS);
      l.delivered(4 * MB * (i < 3 ? 8 : 16) / 10);
    }
    for (int i = 0; i < 30; i++) { // 3 s at 16 in flight, 64 MB/s
      now.addAndGet(STEP_NANOS);
      l.delivered(64 * MB / 10);
      assertThat(l.limit()).as("after %d00 ms at 16 in flight", i + 1).isEqualTo(16);
    }
  }

  @Test
  void aRefusalBeforeTheFirstMeasurementSetsNoCeilingAndKeepsTheSlowStart() throws Exception {
    // The bench's origin 3: the listing and header reads spent the origin's burst of requests, and
    // 3 of the ranged reads' first 4 requests were refused. The old rule set the ceiling at 2 for
    // 30 s: 8 MB/s where 8 in flight were admitted.
    ConcurrencyLimiter l = adaptive(4, 16);
    for (int i = 0; i < 4; i++) {
      assertThat(l.acquire()).isTrue();
    }
    for (int i = 0; i < 3; i++) {
      l.release(true);
    }
    assertThat(l.limit()).as("each refusal still lowers the limit").isEqualTo(2);
    assertThat(l.ceiling()).isEqualTo(16);
    held = 1;
    // 4 MB/s per request: doubling pays until the ceiling; 16 in flight within 3 s.
    drive(l, 30, 4 * MB, Long.MAX_VALUE, Integer.MAX_VALUE);
    assertThat(l.limit()).isEqualTo(16);
  }

  @Test
  void settlesAtTheLimitOfAnOriginThatRefusesAboveEightWithoutRepeatedRefusalWaves()
      throws Exception {
    // 2 MB/s per connection, refused above 8 in flight: 8 is the origin's saturation point. The
    // old rules halved on each wave and probed back up, a wave every ~5 s (limit 5, 6, 7, 8, 10).
    // Settling is the slow start's wave (16 → 8, a tentative ceiling) and, after its hold, the one
    // refusal of the step to 9 that confirms it.
    ConcurrencyLimiter l = adaptive(4, 64);
    drive(l, 100, 2 * MB, Long.MAX_VALUE, 8);
    assertThat(l.decreases()).as("the slow start's wave and the step above it").isEqualTo(2);
    long wavesToSettle = l.decreases();
    long refusedToSettle = l.throttleSignals();
    int atEight = 0;
    for (int i = 0; i < 200; i++) { // 20 s, within the confirmed ceiling's 30 s
      drive(l, 1, 2 * MB, Long.MAX_VALUE, 8);
      atEight += l.limit() == 8 ? 1 : 0;
    }
    assertThat(atEight).as("steps of 100 ms at the limit 8, of 200").isGreaterThanOrEqualTo(190);
    assertThat(l.decreases()).as("refusal waves after settling").isEqualTo(wavesToSettle);
    assertThat(l.throttleSignals()).isEqualTo(refusedToSettle);
    assertThat(refusedToSettle).isBetween(2L, 17L);
  }

  @Test
  void aFirstCeilingIsTriedAgainOneAtATimeAndConfirmedByARefusalAboveIt() throws Exception {
    // The bench's request-rate origin: the metadata reads left 4 requests of the burst, and the
    // slow start's step to 8 was refused twice. The old rule kept 6 as the ceiling for 30 s, the
    // whole load: 0.64 x fixed 16 in AdaptiveConcurrencySimulationTest's model, 0.72 x in the
    // bench.
    ConcurrencyLimiter l = adaptive(8, 64);
    for (int i = 0; i < 8; i++) {
      assertThat(l.acquire()).isTrue();
    }
    measured(l, 24 * MB);
    assertThat(l.limit()).as("the slow start's step").isEqualTo(16);
    l.release(true);
    l.release(true);
    held = 6;
    assertThat(l.limit()).isEqualTo(14);
    assertThat(l.toString()).contains("ceiling 14, tentative");
    // The origin now serves 2 MB/s per request, 24 MB/s in total (no more bytes above 12 in
    // flight), and refuses above 16: only a refusal stops the steps above the tentative ceiling.
    drive(l, 30, 2 * MB, 24 * MB, 16);
    assertThat(l.limit()).as("the tentative ceiling's hold").isEqualTo(14);
    drive(l, 50, 2 * MB, 24 * MB, 16);
    assertThat(l.limit()).as("15 and 16 kept although they bring no more bytes").isEqualTo(16);
    assertThat(l.toString()).contains("ceiling 16)");
    long waves = l.decreases();
    assertThat(waves).as("the slow start's and the step to 17's").isEqualTo(2);
    drive(l, 200, 2 * MB, 24 * MB, 16);
    assertThat(l.limit()).isEqualTo(16);
    assertThat(l.decreases()).as("confirmed: no probe above it").isEqualTo(waves);
  }

  @Test
  void aCeilingLearnedAgainAfterAConfirmedOneWasForgottenIsNotTentative() throws Exception {
    // 2 MB/s per connection, refused above 8 in flight, for 3 minutes: each forgotten ceiling is
    // learned again by the probe above it, one wave. Taking each new one as tentative again cost a
    // second wave every 30 s (the step above it): 10 waves after settling where 6 are needed.
    ConcurrencyLimiter l = adaptive(4, 64);
    drive(l, 100, 2 * MB, Long.MAX_VALUE, 8);
    long settled = l.decreases();
    drive(l, 1800, 2 * MB, Long.MAX_VALUE, 8);
    assertThat(l.decreases() - settled).as("one wave per forgotten ceiling").isLessThanOrEqualTo(6);
    assertThat(l.toString()).doesNotContain("tentative");
  }

  @Test
  void theCeilingIsForgottenAfterItsWindowsWithoutThrottling() throws Exception {
    ConcurrencyLimiter l = adaptive(4, 64);
    drive(l, 100, 2 * MB, Long.MAX_VALUE, 8);
    assertThat(l.ceiling()).isEqualTo(8);
    assertThat(l.toString()).as("confirmed").contains("ceiling 8)");
    // The origin now takes any number: 30 s (CEILING_WINDOWS) after the refusals the limit grows
    // again; 20 s later it has not.
    drive(l, 200, 2 * MB, Long.MAX_VALUE, 64);
    assertThat(l.limit()).isEqualTo(8);
    assertThat(l.ceiling()).isEqualTo(8);
    drive(l, 150, 2 * MB, Long.MAX_VALUE, 64);
    assertThat(l.ceiling()).isEqualTo(64);
    assertThat(l.limit()).isGreaterThan(16);
  }

  @Test
  void windowsInWhichAPermitWaitedOutAThrottlingPauseAreNotJudged() throws Exception {
    // A saturated origin (8 MB/s whatever the number in flight) and a 2 s throttling pause: the
    // windows of the pause deliver nothing, and a probe measured against them would "pay".
    ConcurrencyLimiter l = adaptive(4, 64);
    for (int i = 0; i < 3; i++) {
      assertThat(l.acquire()).isTrue();
    }
    measured(l, 8 * MB); // 3 of 4 permits taken: no probe
    assertThat(l.acquire()).isTrue();
    l.release(true); // the refusal that closed the gate: 3 left in flight, the limit 3
    int limit = l.limit();
    assertThat(limit).isEqualTo(3);
    for (int i = 0; i < 3; i++) {
      l.pausing();
    }
    for (int i = 0; i < 40; i++) { // 4 s: the hold and more, all paused
      now.addAndGet(STEP_NANOS);
      l.delivered(0);
    }
    assertThat(l.limit()).as("no probe in a pause").isEqualTo(limit);
    for (int i = 0; i < 3; i++) {
      l.resumed();
    }
    // The hold counts judged windows only: still no probe in the first 5 windows after it.
    for (int i = 0; i < 25; i++) {
      now.addAndGet(STEP_NANOS);
      l.delivered(8 * MB / 10);
    }
    assertThat(l.limit()).isEqualTo(limit);
    assertThatThrownBy(l::resumed).isInstanceOf(IllegalStateException.class);
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
