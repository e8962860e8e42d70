package io.tensorcast.operator.status;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.operator.desired.CopyGeneration;
import io.tensorcast.operator.status.FailureRetry.Outcome;
import io.tensorcast.operator.status.StatusAggregator.Failure;
import io.tensorcast.operator.testing.Fixtures;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Optional;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class FailureRetryTest {
  static final Duration INITIAL = Duration.ofSeconds(30);
  static final Duration MAX = Duration.ofMinutes(10);
  static final Instant NOW = Instant.parse("2026-12-01T22:00:00.250Z");
  static final Failure NO_BUCKET = new Failure("BucketNotFound", "bucket b does not exist", true);

  private final ModelArtifact artifact = Fixtures.artifact("ns", "m", 1, "s3://b/m/");

  @Test
  void theWaitDoublesFromThirtySecondsUpToTenMinutes() {
    assertThat(IntStream.rangeClosed(1, 8).mapToObj(n -> FailureRetry.backoff(n, INITIAL, MAX)))
        .containsExactly(
            Duration.ofSeconds(30),
            Duration.ofMinutes(1),
            Duration.ofMinutes(2),
            Duration.ofMinutes(4),
            Duration.ofMinutes(8),
            Duration.ofMinutes(10),
            Duration.ofMinutes(10),
            Duration.ofMinutes(10));
    assertThat(FailureRetry.backoff(Integer.MAX_VALUE, INITIAL, MAX)).isEqualTo(MAX);
  }

  @Test
  void causesThatMayGoAwayAreRetriedAndSpecOrDataFailuresAreNot() {
    for (String r :
        List.of(
            "BucketNotFound",
            "SourceNotFound",
            "EmptyArtifact",
            "AccessDenied",
            "CredentialsNotFound",
            "SourceUnavailable")) {
      assertThat(FailureRetry.retried(r)).as(r).isTrue();
    }
    for (String r :
        List.of(
            "InvalidSpec",
            "InvalidSafetensors",
            "SizeLimitExceeded",
            "InsufficientMemory",
            "NameConflict")) {
      assertThat(FailureRetry.retried(r)).as(r).isFalse();
    }
  }

  @Test
  void aFailedAttemptSchedulesTheNextAtTheBackOffAndSaysSo() {
    FailureRetry.Plan first = plan(Outcome.ATTEMPT_FAILED, NO_BUCKET);
    assertThat(first.attempts()).isEqualTo(1);
    assertThat(first.nextRetryTime()).isEqualTo("2026-12-01T22:00:30Z");
    assertThat(first.failure().orElseThrow().retry())
        .isEqualTo(
            "loading again at 2026-12-01T22:00:30Z after 1 failed attempt(s) (annotate"
                + " tensorcast.io/retry with a new value to retry now)");

    recordFailed(first);
    FailureRetry.Plan second = plan(Outcome.ATTEMPT_FAILED, NO_BUCKET);
    assertThat(second.attempts()).isEqualTo(2);
    assertThat(second.nextRetryTime()).isEqualTo("2026-12-01T22:01:00Z");
  }

  @Test
  void aKeptFailureKeepsItsRetryTimeAndIsDueOnlyOnceItHasCome() {
    recordFailed(plan(Outcome.ATTEMPT_FAILED, NO_BUCKET));

    FailureRetry.Plan kept = plan(Outcome.KEPT, NO_BUCKET);
    assertThat(kept.nextRetryTime()).isEqualTo("2026-12-01T22:00:30Z");
    assertThat(kept.attempts()).isEqualTo(1);
    assertThat(kept.failure().orElseThrow().retry()).contains("22:00:30Z");
    assertThat(FailureRetry.retryNow(artifact, NOW.plusSeconds(29))).isFalse();
    assertThat(FailureRetry.retryNow(artifact, NOW.plusSeconds(30))).isTrue();
  }

  @Test
  void aFailureThatNeedsASpecChangeHasNoRetryTime() {
    Failure bad = new Failure("InvalidSafetensors", "file x: header too long", false);
    FailureRetry.Plan p = plan(Outcome.ATTEMPT_FAILED, bad);
    assertThat(p.nextRetryTime()).isNull();
    assertThat(p.failure()).contains(bad);
    recordFailed(p);
    assertThat(FailureRetry.retryNow(artifact, NOW.plus(Duration.ofDays(1)))).isFalse();
  }

  @Test
  void aNewAnnotationValueRetriesNowOnceAndIsRecorded() {
    recordFailed(plan(Outcome.ATTEMPT_FAILED, NO_BUCKET));
    assertThat(FailureRetry.retryNow(artifact, NOW)).isFalse();

    annotate("1");
    assertThat(FailureRetry.retryNow(artifact, NOW)).isTrue();
    FailureRetry.Plan after = plan(Outcome.NONE, null);
    assertThat(after.retryRequest()).isEqualTo("1");
    assertThat(after.nextRetryTime()).isNull();
    assertThat(after.attempts()).isEqualTo(1);

    ModelArtifactStatus s = status(after, ArtifactPhase.Resolving);
    artifact.setStatus(s);
    assertThat(FailureRetry.requested(artifact)).isFalse();
    annotate("2");
    assertThat(FailureRetry.requested(artifact)).isTrue();
  }

  @Test
  void attemptsAreDroppedOnceReadyAndOnANewCopyGeneration() {
    recordFailed(plan(Outcome.ATTEMPT_FAILED, NO_BUCKET));
    assertThat(status(plan(Outcome.NONE, null), ArtifactPhase.Ready).getRetryAttempts()).isNull();
    assertThat(status(plan(Outcome.NONE, null), ArtifactPhase.Loading).getRetryAttempts())
        .isEqualTo(1);

    FailureRetry.Plan other =
        FailureRetry.plan(
            artifact,
            CopyGeneration.of(artifact).generation() + 1,
            Outcome.ATTEMPT_FAILED,
            Optional.of(NO_BUCKET),
            NOW,
            INITIAL,
            MAX);
    assertThat(other.attempts()).isEqualTo(1);
  }

  private FailureRetry.Plan plan(Outcome outcome, Failure f) {
    return FailureRetry.plan(
        artifact,
        CopyGeneration.of(artifact).generation(),
        outcome,
        Optional.ofNullable(f),
        NOW,
        INITIAL,
        MAX);
  }

  private void recordFailed(FailureRetry.Plan p) {
    artifact.setStatus(status(p, ArtifactPhase.Failed));
  }

  private ModelArtifactStatus status(FailureRetry.Plan p, ArtifactPhase phase) {
    ModelArtifactStatus s = new ModelArtifactStatus();
    s.setPhase(phase);
    s.setCopyGeneration(CopyGeneration.of(artifact).generation());
    p.fill(s);
    return s;
  }

  private void annotate(String value) {
    var a = new HashMap<String, String>();
    a.put(TensorcastConstants.ANNOTATION_RETRY, value);
    artifact.getMetadata().setAnnotations(a);
  }
}
