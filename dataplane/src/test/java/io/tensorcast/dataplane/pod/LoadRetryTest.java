package io.tensorcast.dataplane.pod;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.cli.ServeArguments;
import io.tensorcast.dataplane.load.LoadFailure;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The back-off between loads after transient failures, and the flags that set it. */
class LoadRetryTest {

  private static ServeSettings parse(String... extra) {
    List<String> args =
        new ArrayList<>(List.of("serve", "--artifact-id", "a", "--uri", "s3://b/p/"));
    args.addAll(List.of(extra));
    return ServeArguments.parse(args, Map.of());
  }

  @Test
  void defaultsAreTenSecondsDoublingToFiveMinutes() {
    LoadRetry r = parse().loadRetry();
    assertThat(r).isEqualTo(LoadRetry.DEFAULTS);
    assertThat(List.of(1, 2, 3, 4, 5, 6, 7, 50, Integer.MAX_VALUE).stream().map(r::ceiling))
        .containsExactly(
            Duration.ofSeconds(10),
            Duration.ofSeconds(20),
            Duration.ofSeconds(40),
            Duration.ofSeconds(80),
            Duration.ofSeconds(160),
            Duration.ofMinutes(5),
            Duration.ofMinutes(5),
            Duration.ofMinutes(5),
            Duration.ofMinutes(5));
  }

  @Test
  void flagsSetBaseAndCap() {
    LoadRetry r =
        parse("--load-retry-backoff", "250ms", "--load-retry-max-backoff", "1s").loadRetry();
    assertThat(r).isEqualTo(new LoadRetry(Duration.ofMillis(250), Duration.ofSeconds(1)));
    assertThat(r.ceiling(3)).isEqualTo(Duration.ofSeconds(1));
  }

  @Test
  void theDelayIsJitteredBetweenHalfAndAllOfTheCeiling() {
    LoadRetry r = new LoadRetry(Duration.ofMillis(100), Duration.ofSeconds(10));
    List<Duration> delays = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      delays.add(r.delay(2));
    }
    assertThat(delays)
        .allSatisfy(d -> assertThat(d).isBetween(Duration.ofMillis(100), Duration.ofMillis(200)));
    assertThat(delays.stream().distinct().count()).as("jittered").isGreaterThan(1);
  }

  @Test
  void badFlagsAreRefusedNamingTheFlag() {
    assertThatThrownBy(() -> parse("--load-retry-backoff", "0s"))
        .hasMessage("--load-retry-backoff must be positive, got PT0S");
    assertThatThrownBy(() -> parse("--load-retry-backoff", "1m", "--load-retry-max-backoff", "30s"))
        .hasMessage(
            "--load-retry-max-backoff (PT30S) must be at least --load-retry-backoff (PT1M)");
    assertThatThrownBy(() -> parse("--load-retry-backoff", "soon"))
        .hasMessage("--load-retry-backoff: 'soon' is not a duration such as 500ms, 10s or 2m");
    assertThatThrownBy(() -> LoadRetry.DEFAULTS.ceiling(0))
        .hasMessage("failures must be at least 1, got 0");
  }

  @Test
  void onlySourceOutagesAndThrottlingAreTransient() {
    assertThat(new LoadFailure(Reason.SourceUnavailable, "x").isTransient()).isTrue();
    assertThat(new LoadFailure(Reason.Throttled, "x").isTransient()).isTrue();
    for (Reason permanent :
        List.of(
            Reason.BucketNotFound,
            Reason.AccessDenied,
            Reason.CredentialsNotFound,
            Reason.InvalidSafetensors,
            Reason.DigestMismatch,
            Reason.ObjectChanged,
            Reason.InsufficientMemory,
            Reason.Interrupted,
            Reason.InternalError)) {
      assertThat(new LoadFailure(permanent, "x").isTransient()).as(permanent.name()).isFalse();
    }
  }
}
