package io.tensorcast.dataplane.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.dataplane.source.Backoff;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The gate's pauses and budget on a hand-moved clock; nothing here sleeps. */
class ThrottleGateTest {
  private static final long MS = 1_000_000L;

  private final AtomicLong now = new AtomicLong(1_000 * MS);
  private final Backoff backoff = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(1));

  private ThrottleGate gate(Duration budget) {
    return new ThrottleGate(backoff, budget, now::get);
  }

  @Test
  void aRetryAfterClosesTheGateUntilThatInstantAndALaterRefusalNeverShortensIt() {
    ThrottleGate gate = gate(Duration.ofMinutes(1));
    assertThat(gate.pause()).isZero();

    assertThat(gate.refused(Duration.ofSeconds(2))).isEqualTo(Duration.ofSeconds(2));
    now.addAndGet(500 * MS);
    assertThat(gate.pause()).isEqualTo(Duration.ofMillis(1_500));
    // A refusal asking for less than what is left leaves the instant as it was.
    assertThat(gate.refused(Duration.ofSeconds(1))).isEqualTo(Duration.ofMillis(1_500));
    now.addAndGet(1_500 * MS);
    assertThat(gate.pause()).isZero();
    // Closed 2 s in total, however many refusals asked for overlapping pauses.
    assertThat(gate.throttled()).isEqualTo(Duration.ofSeconds(2));
    assertThat(gate.refusals()).isEqualTo(2);
  }

  @Test
  void withoutRetryAfterThePauseDoublesOnlyWhileRefusalsFollowOneAnother() {
    ThrottleGate gate = gate(Duration.ofMinutes(1));
    // Jittered between half and all of base × 2^(n-1), capped at 1 s.
    long[] ceilings = {100, 200, 400, 800, 1_000, 1_000};
    for (long ceiling : ceilings) {
      Duration pause = gate.refused(null);
      assertThat(pause).isBetween(Duration.ofMillis(ceiling / 2), Duration.ofMillis(ceiling));
      now.addAndGet(pause.toNanos());
    }
    gate.admitted();
    assertThat(gate.refused(null)).isBetween(Duration.ofMillis(50), Duration.ofMillis(100));
  }

  @Test
  void refusalsArrivingWhileTheGateIsClosedAreOneWaveAndDoNotDoubleThePause() {
    ThrottleGate gate = gate(Duration.ofMinutes(1));
    // Eight requests sent together, all refused: one wave, one pause at the base delay (the
    // eighth refusal used to ask for base × 2^7, the cap).
    assertThat(gate.refused(null)).isBetween(Duration.ofMillis(50), Duration.ofMillis(100));
    for (int i = 2; i <= 8; i++) {
      now.addAndGet(MS);
      assertThat(gate.refused(null))
          .as("refusal %d of the wave", i)
          .isLessThanOrEqualTo(Duration.ofMillis(100));
    }
    now.addAndGet(100 * MS); // the gate is open again; what is refused now was sent after it
    assertThat(gate.refused(null))
        .as("the next wave doubles")
        .isBetween(Duration.ofMillis(100), Duration.ofMillis(200));
    assertThat(gate.refusals()).isEqualTo(9);
    assertThat(gate.throttled()).isLessThanOrEqualTo(Duration.ofMillis(307));
  }

  @Test
  void aRetryAfterOfZeroStillPausesForTheBaseDelay() {
    ThrottleGate gate = gate(Duration.ofMinutes(1));
    assertThat(gate.refused(Duration.ZERO))
        .isBetween(Duration.ofMillis(50), Duration.ofMillis(100));
    now.addAndGet(100 * MS);
    // Consecutive refusals with Retry-After do not double it.
    assertThat(gate.refused(Duration.ZERO))
        .isBetween(Duration.ofMillis(50), Duration.ofMillis(100));
  }

  @Test
  void aRefusalThatWouldKeepTheGateClosedPastTheBudgetIsReportedAndChangesNothing() {
    ThrottleGate gate = gate(Duration.ofSeconds(3));
    assertThat(gate.refused(Duration.ofSeconds(2))).isEqualTo(Duration.ofSeconds(2));
    now.addAndGet(2_000 * MS);
    assertThat(gate.refused(Duration.ofSeconds(1))).isEqualTo(Duration.ofSeconds(1));
    now.addAndGet(1_000 * MS);
    assertThat(gate.refused(Duration.ofSeconds(1))).as("4 s over a budget of 3 s").isNull();
    assertThat(gate.pause()).isZero();
    assertThat(gate.throttled()).isEqualTo(Duration.ofSeconds(3));
    assertThat(gate.refusals()).isEqualTo(3);
  }

  @Test
  void anOpenGateLetsThroughAndACancelledReadDoesNotPass() throws Exception {
    ThrottleGate gate = gate(Duration.ofMinutes(1));
    CountDownLatch running = new CountDownLatch(1);
    assertThat(gate.await(running)).isTrue();
    gate.refused(Duration.ofSeconds(30));
    CountDownLatch cancelled = new CountDownLatch(0);
    assertThat(gate.await(cancelled)).isFalse();
  }

  @Test
  void aBudgetMustBePositive() {
    assertThatThrownBy(() -> gate(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("throttle budget must be positive, got PT0S");
  }
}
