package io.tensorcast.dataplane.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.source.Backoff;
import io.tensorcast.dataplane.source.SourceException;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(30)
class ThrottleWaitTest {
  private static final Backoff NO_WAIT = new Backoff(Duration.ZERO, Duration.ZERO);

  private static SourceException throttled(Duration retryAfter) {
    return new SourceException(
        Reason.Throttled, "HEAD s3://b/m/x: throttled (HTTP 429 SlowDown)", true, retryAfter, null);
  }

  private static ThrottleGate gate(Backoff backoff, Duration budget) {
    return new ThrottleGate(backoff, budget);
  }

  @Test
  void aRequestRefusedMoreOftenThanItsAttemptsIsAskedAgainUntilItIsAnswered() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    AtomicInteger waits = new AtomicInteger();
    ThrottleGate gate = gate(NO_WAIT, Duration.ofMinutes(1));
    String answer =
        ThrottleWait.source(
            gate,
            "s3://b/m/: ",
            () -> {
              if (calls.incrementAndGet() <= 20) {
                throw throttled(calls.get() % 2 == 0 ? Duration.ZERO : null);
              }
              return "listed";
            },
            waits::incrementAndGet);
    assertThat(answer).isEqualTo("listed");
    assertThat(calls).hasValue(21);
    assertThat(waits).hasValue(20);
    assertThat(gate.refusals()).isEqualTo(20);
  }

  @Test
  void anyOtherFailureGoesToTheCallerAtOnceWithItsReason() {
    AtomicInteger calls = new AtomicInteger();
    ThrottleGate gate = gate(NO_WAIT, Duration.ofMinutes(1));
    LoadFailure f =
        catchThrowableOfType(
            LoadFailure.class,
            () ->
                ThrottleWait.source(
                    gate,
                    "s3://b/m/: ",
                    () -> {
                      calls.incrementAndGet();
                      throw new SourceException(
                          Reason.SourceUnavailable, "listing: HTTP 500", true);
                    },
                    () -> {}));
    assertThat(calls).hasValue(1);
    assertThat(f.reason()).isEqualTo(Reason.SourceUnavailable);
    assertThat(f.getMessage()).isEqualTo("s3://b/m/: listing: HTTP 500");
    assertThat(gate.refusals()).isZero();
  }

  @Test
  void aWaitPastTheLoadsBudgetFailsWithTheLastRefusalAndItsRetryAfter() {
    AtomicInteger calls = new AtomicInteger();
    LoadFailure f =
        catchThrowableOfType(
            LoadFailure.class,
            () ->
                ThrottleWait.call(
                    gate(NO_WAIT, Duration.ofSeconds(30)),
                    () -> {
                      calls.incrementAndGet();
                      throw new LoadFailure(
                          Reason.Throttled,
                          "x.safetensors: throttled",
                          throttled(Duration.ofSeconds(31)));
                    },
                    () -> {}));
    assertThat(calls).hasValue(1);
    assertThat(f.reason()).isEqualTo(Reason.Throttled);
    assertThat(f.getMessage())
        .isEqualTo(
            "x.safetensors: throttled; the source throttled this load (HTTP 429 or 503"
                + " SlowDown) for longer than its throttling budget of 30.0 s in total"
                + " (1 refusals, 0.0 s paused; --throttle-budget)");
    assertThat(ThrottleWait.retryAfter(f)).isEqualTo(Duration.ofSeconds(31));
  }

  @Test
  void aRequestIsNotSentWhileAnotherRequestOfTheLoadHoldsTheGateClosed() throws Exception {
    ThrottleGate gate = gate(NO_WAIT, Duration.ofMinutes(1));
    // Another request of the load was refused with "Retry-After: 0.3 s" just now.
    long opens = System.nanoTime() + gate.refused(Duration.ofMillis(300)).toNanos();
    AtomicLong sentAt = new AtomicLong();
    String answer =
        ThrottleWait.call(
            gate,
            () -> {
              sentAt.set(System.nanoTime());
              return "digest";
            },
            () -> {});
    assertThat(answer).isEqualTo("digest");
    assertThat(sentAt.get()).isGreaterThanOrEqualTo(opens);
  }

  @Test
  void anAdmittedRequestStartsTheNextPauseAtTheBaseDelayAgain() throws Exception {
    Backoff backoff = new Backoff(Duration.ofMillis(20), Duration.ofSeconds(10));
    ThrottleGate gate = gate(backoff, Duration.ofMinutes(1));
    AtomicInteger calls = new AtomicInteger();
    ThrottleWait.call(
        gate,
        () -> {
          if (calls.incrementAndGet() <= 5) {
            throw new LoadFailure(Reason.Throttled, "throttled", throttled(null));
          }
          return "answered";
        },
        () -> {});
    assertThat(calls).hasValue(6);
    // Five refusals in a row grew the pause to up to 20 ms × 2^4; the answer reset it, so the next
    // refusal pauses at most the base delay.
    assertThat(gate.refused(null)).isLessThanOrEqualTo(Duration.ofMillis(20));
  }

  @Test
  void anInterruptedWaitEndsTheCallAsInterrupted() {
    Thread.currentThread().interrupt();
    LoadFailure f =
        catchThrowableOfType(
            LoadFailure.class,
            () ->
                ThrottleWait.call(
                    gate(
                        new Backoff(Duration.ofSeconds(5), Duration.ofSeconds(5)),
                        Duration.ofMinutes(1)),
                    () -> {
                      throw new LoadFailure(Reason.Throttled, "throttled", throttled(null));
                    },
                    () -> {}));
    assertThat(f.reason()).isEqualTo(Reason.Interrupted);
    assertThat(Thread.interrupted()).isTrue();
  }
}
