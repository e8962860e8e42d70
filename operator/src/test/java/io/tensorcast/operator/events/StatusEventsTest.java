package io.tensorcast.operator.events;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.ConditionBuilder;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.operator.events.StatusEvents.StatusEvent;
import java.util.List;
import org.junit.jupiter.api.Test;

class StatusEventsTest {

  @Test
  void aPhaseChangeGivesTheReasonAndMessageOfThePhasesCondition() {
    List<Condition> loading =
        List.of(
            c("Resolved", "True", "SourceResolved", "7 files, 1.2 MiB"),
            c("Loaded", "False", "Loading", "40% loaded (1 of 2 bytes over 1 replica(s))"),
            c("Ready", "False", "ReplicasNotReady", "0/1 replicas ready"));
    assertThat(StatusEvents.of(ArtifactPhase.Resolving, List.of(), ArtifactPhase.Loading, loading))
        .containsExactly(
            new StatusEvent("Normal", "Loading", "40% loaded (1 of 2 bytes over 1 replica(s))"));

    List<Condition> ready = List.of(c("Ready", "True", "AllReplicasReady", "1/1 replicas ready"));
    assertThat(StatusEvents.of(ArtifactPhase.Loading, loading, ArtifactPhase.Ready, ready))
        .containsExactly(new StatusEvent("Normal", "AllReplicasReady", "1/1 replicas ready"));
  }

  @Test
  void failedIsAWarningWithTheFailureReason() {
    List<Condition> failed =
        List.of(
            c("Ready", "False", "BucketNotFound", "bucket b does not exist"),
            c("Stalled", "False", "BucketNotFound", "bucket b does not exist; loading again"));
    assertThat(StatusEvents.of(ArtifactPhase.Resolving, List.of(), ArtifactPhase.Failed, failed))
        .containsExactly(new StatusEvent("Warning", "BucketNotFound", "bucket b does not exist"));
  }

  @Test
  void progressWithinAPhaseGivesNoEvent() {
    List<Condition> a = List.of(c("Loaded", "False", "Loading", "10% loaded"));
    List<Condition> b = List.of(c("Loaded", "False", "Loading", "90% loaded"));
    assertThat(StatusEvents.of(ArtifactPhase.Loading, a, ArtifactPhase.Loading, b)).isEmpty();
  }

  @Test
  void stallingWithoutAPhaseChangeIsAWarningOncePerReason() {
    List<Condition> before = List.of(c("Stalled", "False", "Progressing", "making progress"));
    List<Condition> crash = List.of(c("Stalled", "True", "CrashLoopBackOff", "pod p: exit code 1"));
    assertThat(StatusEvents.of(ArtifactPhase.Resolving, before, ArtifactPhase.Resolving, crash))
        .containsExactly(new StatusEvent("Warning", "CrashLoopBackOff", "pod p: exit code 1"));
    List<Condition> again =
        List.of(c("Stalled", "True", "CrashLoopBackOff", "pod p: exit code 1, restarted"));
    assertThat(StatusEvents.of(ArtifactPhase.Resolving, crash, ArtifactPhase.Resolving, again))
        .isEmpty();
  }

  @Test
  void aTransientSourceFailureIsAWarningWhenItStarts() {
    List<Condition> before = List.of(c("Ready", "False", "ReplicasNotReady", "0/1"));
    List<Condition> outage =
        List.of(c("Ready", "False", "SourceUnavailable", "0/1; HTTP 500; retrying (attempt 2)"));
    assertThat(StatusEvents.of(ArtifactPhase.Resolving, before, ArtifactPhase.Resolving, outage))
        .containsExactly(
            new StatusEvent("Warning", "SourceUnavailable", "0/1; HTTP 500; retrying (attempt 2)"));
    List<Condition> next =
        List.of(c("Ready", "False", "SourceUnavailable", "0/1; HTTP 500; retrying (attempt 3)"));
    assertThat(StatusEvents.of(ArtifactPhase.Resolving, outage, ArtifactPhase.Resolving, next))
        .isEmpty();
  }

  private static Condition c(String type, String status, String reason, String message) {
    return new ConditionBuilder()
        .withType(type)
        .withStatus(status)
        .withReason(reason)
        .withMessage(message)
        .build();
  }
}
