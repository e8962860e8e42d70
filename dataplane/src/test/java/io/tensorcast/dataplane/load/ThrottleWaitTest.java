package io.tensorcast.dataplane.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.source.Backoff;
import io.tensorcast.dataplane.source.SourceException;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class ThrottleWaitTest {
  private static final Backoff NO_WAIT = new Backoff(Duration.ZERO, Duration.ZERO);

  private static SourceException throttled(Duration retryAfter) {
    return new SourceException(
        Reason.Throttled, "HEAD s3://b/m/x: throttled (HTTP 429 SlowDown)", true, retryAfter, null);
  }

  @Test
  void aRequestRefusedMoreOftenThanItsAttemptsIsAskedAgainUntilItIsAnswered() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    AtomicInteger waits = new AtomicInteger();
    String answer =
        ThrottleWait.source(
            NO_WAIT,
            Duration.ofMinutes(1),
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
  }

  @Test
  void anyOtherFailureGoesToTheCallerAtOnceWithItsReason() {
    AtomicInteger calls = new AtomicInteger();
    LoadFailure f =
        catchThrowableOfType(
            LoadFailure.class,
            () ->
                ThrottleWait.source(
                    NO_WAIT,
                    Duration.ofMinutes(1),
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
  }

  @Test
  void aWaitPastTheBudgetFailsWithTheLastRefusalAndItsRetryAfter() {
    AtomicInteger calls = new AtomicInteger();
    LoadFailure f =
        catchThrowableOfType(
            LoadFailure.class,
            () ->
                ThrottleWait.call(
                    NO_WAIT,
                    Duration.ofSeconds(30),
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
            "x.safetensors: throttled; refused 1 times, for longer than the 30 s a metadata"
                + " request waits out throttling");
    assertThat(ThrottleWait.retryAfter(f)).isEqualTo(Duration.ofSeconds(31));
  }

  @Test
  void anInterruptedWaitEndsTheCallAsInterrupted() {
    Thread.currentThread().interrupt();
    LoadFailure f =
        catchThrowableOfType(
            LoadFailure.class,
            () ->
                ThrottleWait.call(
                    new Backoff(Duration.ofSeconds(5), Duration.ofSeconds(5)),
                    Duration.ofMinutes(1),
                    () -> {
                      throw new LoadFailure(Reason.Throttled, "throttled", throttled(null));
                    },
                    () -> {}));
    assertThat(f.reason()).isEqualTo(Reason.Interrupted);
    assertThat(Thread.interrupted()).isTrue();
  }
}
