package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;

class BackoffTest {
  private final Backoff backoff = new Backoff(Duration.ofMillis(200), Duration.ofSeconds(10));

  @Test
  void theCeilingDoublesFromTheBaseUpToTheCap() {
    assertThat(backoff.ceiling(1)).isEqualTo(Duration.ofMillis(200));
    assertThat(backoff.ceiling(2)).isEqualTo(Duration.ofMillis(400));
    assertThat(backoff.ceiling(6)).isEqualTo(Duration.ofMillis(6400));
    assertThat(backoff.ceiling(7)).isEqualTo(Duration.ofSeconds(10));
    assertThat(backoff.ceiling(1000)).isEqualTo(Duration.ofSeconds(10));
    assertThatThrownBy(() -> backoff.ceiling(0)).hasMessageContaining("at least 1, got 0");
  }

  @Test
  void theDelayIsJitteredBetweenHalfAndAllOfTheCeiling() {
    for (int i = 0; i < 200; i++) {
      assertThat(backoff.delay(3)).isBetween(Duration.ofMillis(400), Duration.ofMillis(800));
    }
  }

  @Test
  void aRetryAfterIsNeverWaitedLessAndOnlyUpToTheCapInPlace() {
    for (int i = 0; i < 50; i++) {
      assertThat(backoff.delay(1, Duration.ofSeconds(3))).isEqualTo(Duration.ofSeconds(3));
      assertThat(backoff.delay(7, Duration.ofMillis(1)))
          .isBetween(Duration.ofSeconds(5), Duration.ofSeconds(10));
    }
    assertThat(backoff.delay(1, Duration.ofMinutes(2))).isEqualTo(Duration.ofMinutes(2));
    assertThat(backoff.honours(null)).isTrue();
    assertThat(backoff.honours(Duration.ofSeconds(10))).isTrue();
    assertThat(backoff.honours(Duration.ofSeconds(11))).isFalse();
  }

  @Test
  void retryAfterIsReadAsSecondsOrAnHttpDate() {
    Instant now = Instant.parse("2026-10-21T07:27:00Z");
    assertThat(Backoff.parseRetryAfter("1", now)).contains(Duration.ofSeconds(1));
    assertThat(Backoff.parseRetryAfter(" 120 ", now)).contains(Duration.ofSeconds(120));
    assertThat(Backoff.parseRetryAfter("Wed, 21 Oct 2026 07:28:00 GMT", now))
        .contains(Duration.ofSeconds(60));
    assertThat(Backoff.parseRetryAfter("Wed, 21 Oct 2026 07:00:00 GMT", now))
        .as("a date in the past")
        .contains(Duration.ZERO);
    assertThat(Backoff.parseRetryAfter("-1", now)).isEmpty();
    assertThat(Backoff.parseRetryAfter("soon", now)).isEmpty();
    assertThat(Backoff.parseRetryAfter("", now)).isEmpty();
    assertThat(Backoff.parseRetryAfter(null, now)).isEmpty();
    assertThat(Backoff.parseRetryAfter("99999999999999999999999", now)).isEmpty();
  }

  @Test
  void aCapBelowTheBaseIsRefusedWithBoth() {
    assertThatThrownBy(() -> new Backoff(Duration.ofSeconds(2), Duration.ofSeconds(1)))
        .hasMessageContaining("PT1S")
        .hasMessageContaining("PT2S");
  }
}
