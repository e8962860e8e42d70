package io.tensorcast.operator.status;

import static io.tensorcast.api.wire.DataPlaneStatus.Phase.Failed;
import static io.tensorcast.api.wire.DataPlaneStatus.Phase.Loading;
import static io.tensorcast.api.wire.DataPlaneStatus.Phase.Pending;
import static io.tensorcast.api.wire.DataPlaneStatus.Phase.Ready;
import static io.tensorcast.api.wire.DataPlaneStatus.Phase.Resolving;
import static io.tensorcast.operator.testing.Fixtures.MI;
import static io.tensorcast.operator.testing.Fixtures.artifact;
import static io.tensorcast.operator.testing.Fixtures.node;
import static io.tensorcast.operator.testing.Fixtures.pod;
import static io.tensorcast.operator.testing.Fixtures.report;
import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.Reason;
import io.tensorcast.api.v1alpha1.ArtifactNodeStatus;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.operator.desired.NodeSelection;
import io.tensorcast.operator.status.StatusAggregator.Failure;
import io.tensorcast.operator.status.StatusAggregator.Input;
import io.tensorcast.operator.status.StatusAggregator.Resolution;
import io.tensorcast.operator.testing.Fixtures.PodState;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

class StatusAggregatorTest {
  private static final long SIZE = 8 * MI;
  private static final long OVERHEAD = 256 * MI;
  private static final Instant T0 = Instant.parse("2026-01-01T00:00:00Z");
  private static final Instant T1 = Instant.parse("2026-01-01T00:01:00Z");
  private static final NodeSelection.Candidate A = node("a").rdmaResource(1).candidate();
  private static final NodeSelection.Candidate B = node("b").rdmaResource(1).candidate();

  private ModelArtifact artifact;

  @BeforeEach
  void setUp() {
    artifact = artifact("ns", "m", 1, "s3://bucket/m/");
    artifact.getSpec().getPlacement().setReplicas(2);
  }

  private NodeSelection.Result selection() {
    return NodeSelection.select(
        List.of(node("a").rdmaResource(1).build(), node("b").rdmaResource(1).build()),
        new NodeSelection.Request(
            2, RdmaPolicy.Required, Map.of(), List.of(), SIZE + OVERHEAD, "", Set.of()));
  }

  private static Set<String> names(Pod... pods) {
    return java.util.Arrays.stream(pods)
        .map(p -> p.getMetadata().getName())
        .collect(Collectors.toSet());
  }

  private ModelArtifactStatus aggregate(
      List<Pod> pods, Map<String, DataPlaneStatus> reports, Set<String> upToDate, Instant now) {
    Optional<Resolution> res = StatusAggregator.resolution(artifact, pods, reports);
    return StatusAggregator.aggregate(
        new Input(artifact, pods, reports, upToDate, res, selection(), Optional.empty(), now));
  }

  private static Condition condition(ModelArtifactStatus s, String type) {
    return s.getConditions().stream()
        .filter(c -> type.equals(c.getType()))
        .findFirst()
        .orElseThrow();
  }

  private static void assertCondition(
      ModelArtifactStatus s, String type, String status, String reason) {
    Condition c = condition(s, type);
    assertThat(c.getStatus()).as(type + ".status").isEqualTo(status);
    assertThat(c.getReason()).as(type + ".reason").isEqualTo(reason);
  }

  @Test
  void nothingRunningYetIsPendingAndUnresolved() {
    ModelArtifactStatus s = aggregate(List.of(), Map.of(), Set.of(), T0);

    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Pending);
    assertThat(s.getObservedGeneration()).isEqualTo(1L);
    assertThat(s.getReady()).isEqualTo("0/2");
    assertThat(s.getProgress()).isNull();
    assertThat(s.getTotalBytes()).isNull();
    assertCondition(s, "Resolved", "False", "Resolving");
    assertCondition(s, "Scheduled", "False", "PodsPending");
    assertCondition(s, "Loaded", "False", "Loading");
    assertCondition(s, "Ready", "False", "ReplicasNotReady");
    assertCondition(s, "Degraded", "False", "Healthy");
    assertThat(s.getConditions())
        .allSatisfy(
            c -> {
              assertThat(c.getLastTransitionTime()).isEqualTo("2026-01-01T00:00:00Z");
              assertThat(c.getObservedGeneration()).isEqualTo(1L);
            });
  }

  @Test
  void aResolvingPodMakesTheArtifactResolving() {
    Pod resolver = pod(artifact, A, OptionalLong.empty(), PodState.RUNNING);
    Map<String, DataPlaneStatus> reports =
        Map.of(name(resolver), report(artifact, Resolving, 0, 0, 0, null, null));

    ModelArtifactStatus s = aggregate(List.of(resolver), reports, Set.of(), T0);

    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Resolving);
    assertThat(condition(s, "Resolved").getMessage())
        .isEqualTo("pod " + name(resolver) + " on node a is listing the source");
    assertThat(s.getNodes())
        .extracting(ArtifactNodeStatus::getPhase)
        .containsExactly(ArtifactPhase.Resolving);
  }

  @Test
  void sizeComesFromTheFirstPodThatListedFilesAndProgressOnlyFromUpToDatePods() {
    Pod resolver = pod(artifact, A, OptionalLong.empty(), PodState.RUNNING); // undersized, on a
    Pod sized = pod(artifact, B, OptionalLong.of(SIZE), PodState.RUNNING);
    Map<String, DataPlaneStatus> reports = new HashMap<>();
    reports.put(name(resolver), report(artifact, Loading, 3, SIZE, SIZE, null, null));
    reports.put(name(sized), report(artifact, Loading, 3, SIZE, SIZE / 2, null, null));

    ModelArtifactStatus s = aggregate(List.of(resolver, sized), reports, names(sized), T0);

    assertThat(s.getTotalBytes()).isEqualTo(SIZE);
    assertThat(s.getSize()).isEqualTo("8.0 MiB");
    assertThat(s.getFiles()).isEqualTo(3);
    assertThat(s.getTensors()).isEqualTo(9);
    assertThat(s.getResolvedRevision()).isEqualTo("listing-sha256:0123456789abcdef");
    // Only the up-to-date pod counts: SIZE/2 of 2*SIZE.
    assertThat(s.getProgress()).isEqualTo("25%");
    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Loading);
    assertCondition(s, "Resolved", "True", "SourceResolved");
    assertThat(condition(s, "Resolved").getMessage())
        .isEqualTo(
            "3 file(s), 9 tensor(s), 8.0 MiB (8388608 bytes), revision"
                + " listing-sha256:0123456789abcdef");
    assertThat(condition(s, "Loaded").getMessage())
        .isEqualTo("25% loaded (4194304 of 16777216 bytes over 2 replica(s))");
    assertThat(s.getNodes()).extracting(ArtifactNodeStatus::getNode).containsExactly("a", "b");
  }

  @Test
  void sourceAndPeerBytesArePerNodeAndTheSourceTotalSumsTheCurrentPods() {
    Pod pa = pod(artifact, A, OptionalLong.of(SIZE), PodState.READY);
    Pod pb = pod(artifact, B, OptionalLong.of(SIZE), PodState.READY);
    Pod old = pod(artifact, B, OptionalLong.of(SIZE), PodState.TERMINATING);
    old.getMetadata().setName("old-pod");
    Map<String, DataPlaneStatus> reports =
        Map.of(
            name(pa),
            withSourceAndPeers(report(artifact, Ready, 3, SIZE, SIZE, null, null), 5 * MI, 3 * MI),
            name(pb),
            withSourceAndPeers(report(artifact, Ready, 3, SIZE, SIZE, null, null), 3 * MI, 5 * MI),
            "old-pod",
            withSourceAndPeers(report(artifact, Ready, 3, SIZE, SIZE, null, null), SIZE, 0));

    ModelArtifactStatus s = aggregate(List.of(pa, pb, old), reports, names(pa, pb), T0);

    assertThat(s.getNodes())
        .extracting(e -> e.getNode() + ":" + e.getBytesFromSource() + "/" + e.getBytesFromPeers())
        .containsExactly("a:" + 5 * MI + "/" + 3 * MI, "b:" + 3 * MI + "/" + 5 * MI);
    assertThat(s.getBytesFromSource()).isEqualTo(SIZE);
    assertThat(aggregate(List.of(), Map.of(), Set.of(), T0).getBytesFromSource()).isNull();
  }

  private static DataPlaneStatus withSourceAndPeers(DataPlaneStatus r, long source, long peers) {
    return r.toBuilder()
        .bytesFromSource(source)
        .bytesFromPeers(peers)
        .peerEpoch("epoch-1")
        .peers(1)
        .build();
  }

  @Test
  void allReplicasReadyIsReadyWithEveryConditionTrue() {
    Pod pa = pod(artifact, A, OptionalLong.of(SIZE), PodState.READY);
    Pod pb = pod(artifact, B, OptionalLong.of(SIZE), PodState.READY);
    Map<String, DataPlaneStatus> reports =
        Map.of(
            name(pa), report(artifact, Ready, 3, SIZE, SIZE, null, null),
            name(pb), report(artifact, Ready, 3, SIZE, SIZE, null, null));

    ModelArtifactStatus s = aggregate(List.of(pa, pb), reports, names(pa, pb), T0);

    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Ready);
    assertThat(s.getReady()).isEqualTo("2/2");
    assertThat(s.getReadyReplicas()).isEqualTo(2);
    assertThat(s.getReadyNodes()).containsExactly("a", "b");
    assertThat(s.getProgress()).isEqualTo("100%");
    assertCondition(s, "Resolved", "True", "SourceResolved");
    assertCondition(s, "Scheduled", "True", "NodesSelected");
    assertCondition(s, "Loaded", "True", "AllBytesLoaded");
    assertCondition(s, "Ready", "True", "AllReplicasReady");
    assertCondition(s, "Degraded", "False", "Healthy");
    assertThat(condition(s, "Scheduled").getMessage()).isEqualTo("nodes a, b");
    assertThat(s.getNodes())
        .allSatisfy(n -> assertThat(n.getReadyTime()).isEqualTo("2026-01-01T00:00:05Z"));
  }

  @Test
  void allBytesPresentButOneCopyNotVerifiedIsNotOneHundredPercent() {
    Pod pa = pod(artifact, A, OptionalLong.of(SIZE), PodState.READY);
    Pod pb = pod(artifact, B, OptionalLong.of(SIZE), PodState.RUNNING);
    Map<String, DataPlaneStatus> reports =
        Map.of(
            name(pa), report(artifact, Ready, 3, SIZE, SIZE, null, null),
            name(pb), report(artifact, DataPlaneStatus.Phase.Verifying, 3, SIZE, SIZE, null, null));

    ModelArtifactStatus s = aggregate(List.of(pa, pb), reports, names(pa, pb), T0);

    assertThat(s.getProgress()).isEqualTo("99%");
    assertThat(s.getReady()).isEqualTo("1/2");
    assertThat(s.getReadyNodes()).as("only where the copy is verified").containsExactly("a");
    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Loading);
  }

  @Test
  void theVerificationSummaryCountsLevelsAndNamesTheFilesVerifiedByReaderHashesOnly() {
    Pod pa = pod(artifact, A, OptionalLong.of(SIZE), PodState.READY);
    Pod pb = pod(artifact, B, OptionalLong.of(SIZE), PodState.RUNNING);
    List<DataPlaneStatus.FileStatus> files = new java.util.ArrayList<>();
    files.add(
        new DataPlaneStatus.FileStatus(
            "model.safetensors",
            SIZE - 100,
            true,
            "ab",
            DataPlaneStatus.Verification.SourceDigest,
            "CRC64NVME (full-object checksum)"));
    for (int i = 11; i >= 0; i--) {
      files.add(
          new DataPlaneStatus.FileStatus(
              String.format("tok/%02d.json", i),
              1,
              true,
              "cd",
              DataPlaneStatus.Verification.ReaderPieceHashes,
              "file:///m publishes no digest for its files"));
    }
    DataPlaneStatus ready = withFiles(report(artifact, Ready, 13, SIZE, SIZE, null, null), files);
    Map<String, DataPlaneStatus> reports =
        Map.of(
            name(pa),
            ready,
            name(pb),
            report(artifact, DataPlaneStatus.Phase.Loading, 13, SIZE, 10, null, null));

    ModelArtifactStatus s = aggregate(List.of(pa, pb), reports, names(pa, pb), T0);

    assertThat(s.getVerification().getSourceDigest()).isEqualTo(1);
    assertThat(s.getVerification().getReaderPieceHashes()).isEqualTo(12);
    assertThat(s.getVerification().getReaderPieceHashesFiles())
        .containsExactly(
            "tok/00.json",
            "tok/01.json",
            "tok/02.json",
            "tok/03.json",
            "tok/04.json",
            "tok/05.json",
            "tok/06.json",
            "tok/07.json",
            "tok/08.json",
            "tok/09.json");
    // The Ready pod unreachable for a round: the summary stands, nothing is written.
    artifact.setStatus(s);
    ModelArtifactStatus next =
        aggregate(List.of(pa, pb), Map.of(name(pb), reports.get(name(pb))), names(pa, pb), T1);
    assertThat(next.getVerification()).isEqualTo(s.getVerification());
    // No pod Ready yet: no summary.
    artifact.setStatus(null);
    assertThat(
            aggregate(List.of(pb), Map.of(name(pb), reports.get(name(pb))), names(pb), T0)
                .getVerification())
        .isNull();
  }

  private static DataPlaneStatus withFiles(
      DataPlaneStatus r, List<DataPlaneStatus.FileStatus> files) {
    return r.toBuilder()
        .files(files.size())
        .filesComplete(files.size())
        .fileStatuses(files)
        .build();
  }

  @Test
  void steadyStateProducesAnEqualStatusSoNothingIsWritten() {
    Pod pa = pod(artifact, A, OptionalLong.of(SIZE), PodState.READY);
    Pod pb = pod(artifact, B, OptionalLong.of(SIZE), PodState.READY);
    Map<String, DataPlaneStatus> reports =
        Map.of(
            name(pa), report(artifact, Ready, 3, SIZE, SIZE, null, null),
            name(pb), report(artifact, Ready, 3, SIZE, SIZE, null, null));
    ModelArtifactStatus first = aggregate(List.of(pa, pb), reports, names(pa, pb), T0);
    artifact.setStatus(first);

    ModelArtifactStatus second = aggregate(List.of(pa, pb), reports, names(pa, pb), T1);
    // One pod unreachable this round: its last entry stands while it runs.
    ModelArtifactStatus third =
        aggregate(List.of(pa, pb), Map.of(name(pa), reports.get(name(pa))), names(pa, pb), T1);

    assertThat(second).isEqualTo(first);
    assertThat(third).isEqualTo(first);
  }

  @Test
  void lastTransitionTimeMovesOnlyWhenTheStatusOfAConditionChanges() {
    Pod pa = pod(artifact, A, OptionalLong.of(SIZE), PodState.RUNNING);
    Pod pb = pod(artifact, B, OptionalLong.of(SIZE), PodState.RUNNING);
    Map<String, DataPlaneStatus> loading =
        Map.of(
            name(pa), report(artifact, Loading, 3, SIZE, 10, null, null),
            name(pb), report(artifact, Loading, 3, SIZE, 20, null, null));
    artifact.setStatus(aggregate(List.of(pa, pb), loading, names(pa, pb), T0));
    Map<String, DataPlaneStatus> ready =
        Map.of(
            name(pa), report(artifact, Ready, 3, SIZE, SIZE, null, null),
            name(pb), report(artifact, Ready, 3, SIZE, SIZE, null, null));

    ModelArtifactStatus s = aggregate(List.of(pa, pb), ready, names(pa, pb), T1);

    assertThat(condition(s, "Resolved").getLastTransitionTime()).isEqualTo("2026-01-01T00:00:00Z");
    assertThat(condition(s, "Degraded").getLastTransitionTime()).isEqualTo("2026-01-01T00:00:00Z");
    assertThat(condition(s, "Ready").getLastTransitionTime()).isEqualTo("2026-01-01T00:01:00Z");
    assertThat(condition(s, "Loaded").getLastTransitionTime()).isEqualTo("2026-01-01T00:01:00Z");
  }

  @Test
  void losingAReplicaAfterReadyIsDegradedUntilReadyAgain() {
    Pod pa = pod(artifact, A, OptionalLong.of(SIZE), PodState.READY);
    Pod pb = pod(artifact, B, OptionalLong.of(SIZE), PodState.READY);
    DataPlaneStatus ready = report(artifact, Ready, 3, SIZE, SIZE, null, null);
    artifact.setStatus(
        aggregate(List.of(pa, pb), Map.of(name(pa), ready, name(pb), ready), names(pa, pb), T0));
    Pod replacement = pod(artifact, B, OptionalLong.of(SIZE), PodState.RUNNING);
    Map<String, DataPlaneStatus> partial =
        Map.of(
            name(pa), ready, name(replacement), report(artifact, Loading, 3, SIZE, 0, null, null));

    ModelArtifactStatus lost =
        aggregate(List.of(pa, replacement), partial, names(pa, replacement), T1);
    artifact.setStatus(lost);
    ModelArtifactStatus stillLost =
        aggregate(List.of(pa, replacement), partial, names(pa, replacement), T1);
    artifact.setStatus(stillLost);
    ModelArtifactStatus back =
        aggregate(
            List.of(pa, replacement),
            Map.of(name(pa), ready, name(replacement), ready),
            names(pa, replacement),
            T1);

    assertCondition(lost, "Degraded", "True", "ReplicaLost");
    assertThat(lost.getReady()).isEqualTo("1/2");
    assertCondition(stillLost, "Degraded", "True", "ReplicaLost");
    assertCondition(back, "Degraded", "False", "Healthy");
    assertThat(back.getPhase()).isEqualTo(ArtifactPhase.Ready);
  }

  @Test
  void aPodReportingFailedFailsTheArtifactWithItsReasonAndFile() {
    Pod resolver = pod(artifact, A, OptionalLong.empty(), PodState.RUNNING);
    DataPlaneStatus failed =
        report(
            artifact,
            Failed,
            0,
            0,
            0,
            "InvalidSafetensors",
            "broken.safetensors: header length 1000 exceeds the file size 88");
    Map<String, DataPlaneStatus> reports = Map.of(name(resolver), failed);

    Optional<Failure> f =
        StatusAggregator.podFailure(
            artifact, List.of(resolver), reports, Optional.empty(), OVERHEAD);
    ModelArtifactStatus s =
        StatusAggregator.aggregate(
            new Input(
                artifact, List.of(resolver), reports, Set.of(), Optional.empty(), null, f, T0));

    assertThat(f).isPresent();
    assertThat(f.get().reason()).isEqualTo("InvalidSafetensors");
    assertThat(f.get().beforeResolve()).isTrue();
    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Failed);
    assertCondition(s, "Ready", "False", "InvalidSafetensors");
    assertCondition(s, "Resolved", "False", "InvalidSafetensors");
    assertThat(condition(s, "Ready").getMessage())
        .isEqualTo(
            "node a (pod "
                + name(resolver)
                + "): broken.safetensors: header length 1000 exceeds the file size 88");
    assertThat(s.getNodes()).isEmpty();
  }

  @ParameterizedTest
  @EnumSource(
      value = Reason.class,
      names = {"InvalidIndex", "InvalidTorchCheckpoint", "InvalidSafetensors"})
  void aFileRefusedByTheDataPlaneFailsTheArtifactWithThatReason(Reason refused) {
    String reason = refused.name();
    Pod resolver = pod(artifact, A, OptionalLong.empty(), PodState.RUNNING);
    String message =
        "model.safetensors.index.json: is not JSON: line 3, column 1 holds the git merge-conflict"
            + " marker \"<<<<<<< HEAD\" [rule merge-conflict]";
    Map<String, DataPlaneStatus> reports =
        Map.of(name(resolver), report(artifact, Failed, 0, 0, 0, reason, message));

    Optional<Failure> f =
        StatusAggregator.podFailure(
            artifact, List.of(resolver), reports, Optional.empty(), OVERHEAD);
    ModelArtifactStatus s =
        StatusAggregator.aggregate(
            new Input(
                artifact, List.of(resolver), reports, Set.of(), Optional.empty(), null, f, T0));
    artifact.setStatus(s);

    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Failed);
    assertCondition(s, "Ready", "False", reason);
    assertCondition(s, "Resolved", "False", reason);
    assertThat(condition(s, "Ready").getMessage())
        .isEqualTo("node a (pod " + name(resolver) + "): " + message);
    assertThat(StatusAggregator.recordedFailure(artifact).map(Failure::reason)).contains(reason);
  }

  /**
   * The data plane reads the bytes while the headers are validated, so it reports the listing
   * (Loading, files and bytes) before a header can fail: the artifact still did not resolve.
   */
  @Test
  void aHeaderThatFailsAfterTheListingWasReportedLeavesTheArtifactUnresolved() {
    Pod resolver = pod(artifact, A, OptionalLong.of(SIZE), PodState.RUNNING);
    Map<String, DataPlaneStatus> loading =
        Map.of(name(resolver), report(artifact, Loading, 3, SIZE, SIZE / 2, null, null));
    artifact.setStatus(aggregate(List.of(resolver), loading, names(resolver), T0));
    assertCondition(artifact.getStatus(), "Resolved", "True", "SourceResolved");

    String message = "shards/abuse.safetensors: header length 1000 exceeds the file size 88";
    Map<String, DataPlaneStatus> failed =
        Map.of(
            name(resolver),
            report(artifact, Failed, 3, SIZE, SIZE / 2, "InvalidSafetensors", message));
    Optional<Resolution> res = StatusAggregator.resolution(artifact, List.of(resolver), failed);
    Optional<Failure> f =
        StatusAggregator.podFailure(artifact, List.of(resolver), failed, res, OVERHEAD);
    ModelArtifactStatus s =
        StatusAggregator.aggregate(
            new Input(artifact, List.of(resolver), failed, Set.of(), res, null, f, T0));

    assertThat(res).as("the listing is known").isPresent();
    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Failed);
    assertCondition(s, "Ready", "False", "InvalidSafetensors");
    assertCondition(s, "Resolved", "False", "InvalidSafetensors");
  }

  private static final String OUTAGE =
      "s3://bucket/m/: listing s3://bucket/m/: the store failed (HTTP 503 SlowDown: Reduce your"
          + " request rate)";

  /**
   * What a pod waiting to load again reports: Pending, the reason, the message with a countdown.
   */
  private DataPlaneStatus waitingToRetry(String reason, Duration left, int nextAttempt) {
    return report(
        artifact,
        Pending,
        0,
        0,
        0,
        reason,
        DataPlaneStatus.retryMessage(OUTAGE, left, nextAttempt));
  }

  @Test
  void aPodWaitingToRetryATransientFailureIsNotAFailureAndItsReasonIsOnReady() {
    Pod pa = pod(artifact, A, OptionalLong.of(SIZE), PodState.RUNNING);
    Pod pb = pod(artifact, B, OptionalLong.of(SIZE), PodState.RUNNING);
    Map<String, DataPlaneStatus> reports =
        Map.of(
            name(pa), waitingToRetry("Throttled", Duration.ofSeconds(40), 3),
            name(pb), report(artifact, Loading, 3, SIZE, SIZE / 2, null, null));

    Optional<Resolution> res = StatusAggregator.resolution(artifact, List.of(pa, pb), reports);
    assertThat(StatusAggregator.podFailure(artifact, List.of(pa, pb), reports, res, OVERHEAD))
        .isEmpty();
    ModelArtifactStatus s = aggregate(List.of(pa, pb), reports, names(pa, pb), T0);

    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Loading);
    assertCondition(s, "Resolved", "True", "SourceResolved");
    assertCondition(s, "Ready", "False", "Throttled");
    assertThat(condition(s, "Ready").getMessage())
        .isEqualTo(
            "0/2 replicas ready; node a (pod "
                + name(pa)
                + "): "
                + OUTAGE
                + "; retrying (attempt 3)");
    assertCondition(s, "Loaded", "False", "Loading");
    assertThat(s.getNodes())
        .filteredOn(e -> e.getPod().equals(name(pa)))
        .singleElement()
        .satisfies(
            e -> {
              assertThat(e.getPhase()).isEqualTo(ArtifactPhase.Pending);
              assertThat(e.getMessage())
                  .isEqualTo("Throttled: " + OUTAGE + "; retrying (attempt 3)");
            });
    artifact.setStatus(s);
    assertThat(StatusAggregator.recordedFailure(artifact)).isEmpty();
  }

  @Test
  void pollsThatDifferOnlyInTheCountdownGiveAnEqualStatusSoNothingIsWritten() {
    Pod pa = pod(artifact, A, OptionalLong.of(SIZE), PodState.RUNNING);
    Pod pb = pod(artifact, B, OptionalLong.of(SIZE), PodState.READY);
    DataPlaneStatus ready = report(artifact, Ready, 3, SIZE, SIZE, null, null);
    ModelArtifactStatus first =
        aggregate(
            List.of(pa, pb),
            Map.of(
                name(pa),
                waitingToRetry("SourceUnavailable", Duration.ofSeconds(40), 3),
                name(pb),
                ready),
            names(pa, pb),
            T0);
    artifact.setStatus(first);

    ModelArtifactStatus second =
        aggregate(
            List.of(pa, pb),
            Map.of(
                name(pa),
                waitingToRetry("SourceUnavailable", Duration.ofMillis(12_400), 3),
                name(pb),
                ready),
            names(pa, pb),
            T1);
    assertThat(second).isEqualTo(first);

    // The next attempt failed too: one write, the condition keeps its transition time.
    ModelArtifactStatus third =
        aggregate(
            List.of(pa, pb),
            Map.of(
                name(pa),
                waitingToRetry("SourceUnavailable", Duration.ofSeconds(80), 4),
                name(pb),
                ready),
            names(pa, pb),
            T1);
    assertThat(third).isNotEqualTo(first);
    assertThat(condition(third, "Ready").getMessage()).endsWith("; retrying (attempt 4)");
    assertThat(condition(third, "Ready").getLastTransitionTime()).isEqualTo("2026-01-01T00:00:00Z");
  }

  @Test
  void aResolverWaitingToRetryLeavesTheArtifactResolvingWithTheReason() {
    Pod resolver = pod(artifact, A, OptionalLong.empty(), PodState.RUNNING);
    Map<String, DataPlaneStatus> reports =
        Map.of(name(resolver), waitingToRetry("SourceUnavailable", Duration.ofSeconds(10), 2));

    assertThat(
            StatusAggregator.podFailure(
                artifact, List.of(resolver), reports, Optional.empty(), OVERHEAD))
        .isEmpty();
    ModelArtifactStatus s = aggregate(List.of(resolver), reports, Set.of(), T0);

    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Resolving);
    assertCondition(s, "Resolved", "False", "SourceUnavailable");
    assertThat(condition(s, "Resolved").getMessage())
        .isEqualTo("pod " + name(resolver) + " on node a: " + OUTAGE + "; retrying (attempt 2)");
    assertCondition(s, "Ready", "False", "SourceUnavailable");
  }

  @Test
  void aRetryWhileLoadingStaysOutOfTheConditions() {
    Pod pa = pod(artifact, A, OptionalLong.of(SIZE), PodState.RUNNING);
    Map<String, DataPlaneStatus> reports =
        Map.of(
            name(pa),
            report(
                artifact,
                Loading,
                3,
                SIZE,
                SIZE / 4,
                "Retrying",
                "a.safetensors at byte 5: attempt 1 failed (x); retrying in 200 ms"));

    ModelArtifactStatus s = aggregate(List.of(pa), reports, names(pa), T0);

    assertCondition(s, "Ready", "False", "ReplicasNotReady");
    assertThat(s.getNodes().get(0).getMessage()).isNull();
  }

  @Test
  void theUndersizedResolverRunningOutOfMemoryIsNotAFailure() {
    Pod resolver = pod(artifact, A, OptionalLong.empty(), PodState.RUNNING);
    DataPlaneStatus oom =
        report(artifact, Failed, 3, SIZE + OVERHEAD, 0, "InsufficientMemory", "budget too small");
    Map<String, DataPlaneStatus> reports = Map.of(name(resolver), oom);
    Optional<Resolution> res = StatusAggregator.resolution(artifact, List.of(resolver), reports);
    Pod sized =
        pod(artifact, A, res.map(r -> OptionalLong.of(r.totalBytes())).get(), PodState.RUNNING);

    assertThat(StatusAggregator.podFailure(artifact, List.of(resolver), reports, res, OVERHEAD))
        .isEmpty();
    assertThat(
            StatusAggregator.podFailure(
                artifact, List.of(sized), Map.of(name(sized), oom), res, OVERHEAD))
        .map(Failure::reason)
        .contains("InsufficientMemory");
  }

  @Test
  void reportsOfOtherGenerationsAndOtherArtifactIdsAreIgnored() {
    ModelArtifact old = artifact("ns", "m", 0, "s3://bucket/m/");
    Pod oldPod = pod(old, A, OptionalLong.of(SIZE), PodState.RUNNING);
    Pod pb = pod(artifact, B, OptionalLong.of(SIZE), PodState.RUNNING);
    Map<String, DataPlaneStatus> reports =
        Map.of(
            name(oldPod), report(old, Failed, 0, 0, 0, "BucketNotFound", "gone"),
            name(pb), report(old, Failed, 0, 0, 0, "BucketNotFound", "stale id"));

    assertThat(
            StatusAggregator.podFailure(
                artifact, List.of(oldPod, pb), reports, Optional.empty(), OVERHEAD))
        .isEmpty();
  }

  @Test
  void recordedFailureIsRememberedForPodFailuresOnly() {
    Failure bucket = new Failure("BucketNotFound", "node a: bucket 'nope' does not exist", true);
    artifact.setStatus(
        StatusAggregator.aggregate(
            new Input(
                artifact,
                List.of(),
                Map.of(),
                Set.of(),
                Optional.empty(),
                null,
                Optional.of(bucket),
                T0)));

    assertThat(StatusAggregator.recordedFailure(artifact)).contains(bucket);

    // Scaling is not a new spec for the copies: the failure stays.
    artifact.getMetadata().setGeneration(2L);
    artifact.getSpec().getPlacement().setReplicas(3);
    assertThat(StatusAggregator.recordedFailure(artifact)).contains(bucket);

    // A new source is.
    artifact.getMetadata().setGeneration(3L);
    artifact.getSpec().getSource().setUri("s3://other/model/");
    assertThat(StatusAggregator.recordedFailure(artifact)).isEmpty();

    artifact.getMetadata().setGeneration(1L);
    artifact.setStatus(
        StatusAggregator.aggregate(
            new Input(
                artifact,
                List.of(),
                Map.of(),
                Set.of(),
                Optional.empty(),
                null,
                Optional.of(new Failure("InvalidSpec", "invalid spec: x", true)),
                T0)));
    assertThat(StatusAggregator.recordedFailure(artifact)).isEmpty();
  }

  @Test
  void resolutionIsReadFromTheStatusOfTheSameGenerationOnly() {
    Pod pa = pod(artifact, A, OptionalLong.of(SIZE), PodState.READY);
    Map<String, DataPlaneStatus> reports =
        Map.of(name(pa), report(artifact, Loading, 3, SIZE, 1, null, null));
    artifact.setStatus(aggregate(List.of(pa), reports, names(pa), T0));

    Optional<Resolution> sameGen = StatusAggregator.resolution(artifact, List.of(), Map.of());
    artifact.getMetadata().setGeneration(2L);
    artifact.getSpec().getPlacement().setReplicas(5);
    Optional<Resolution> scaled = StatusAggregator.resolution(artifact, List.of(), Map.of());
    artifact.getMetadata().setGeneration(3L);
    artifact.getSpec().getSource().setRevision("v2");
    Optional<Resolution> nextGen = StatusAggregator.resolution(artifact, List.of(), Map.of());

    Resolution expected = new Resolution(SIZE, 3, 9, "listing-sha256:0123456789abcdef");
    assertThat(sameGen).contains(expected);
    assertThat(scaled).as("replicas alone keep the copy generation").contains(expected);
    assertThat(nextGen).isEmpty();
  }

  @Test
  void unschedulablePodsAndMissingSecretsAreNamed() {
    Pod pending = pod(artifact, A, OptionalLong.of(SIZE), PodState.UNSCHEDULED);
    Pod noSecret =
        new io.fabric8.kubernetes.api.model.PodBuilder(
                pod(artifact, B, OptionalLong.of(SIZE), PodState.RUNNING))
            .editStatus()
            .withPhase("Pending")
            .withPodIP(null)
            .addNewContainerStatus()
            .withName("dataplane")
            .withNewState()
            .withNewWaiting()
            .withReason("CreateContainerConfigError")
            .withMessage("secret \"store-creds\" not found")
            .endWaiting()
            .endState()
            .endContainerStatus()
            .endStatus()
            .build();
    artifact.setStatus(new ModelArtifactStatus());
    artifact.getStatus().setObservedGeneration(1L);
    artifact.getStatus().setTotalBytes(SIZE);
    artifact
        .getStatus()
        .setConditions(
            List.of(
                new Condition(
                    "2026-01-01T00:00:00Z", "", 1L, "SourceResolved", "True", "Resolved")));

    ModelArtifactStatus s =
        aggregate(List.of(pending, noSecret), Map.of(), names(pending, noSecret), T0);

    assertCondition(s, "Scheduled", "False", "PodsPending");
    assertThat(condition(s, "Scheduled").getMessage())
        .isEqualTo(
            "1 of 2 pods bound to their node; pod "
                + name(pending)
                + ": 0/3 nodes are available: 3 Insufficient memory.");
    assertCondition(s, "Ready", "False", "CredentialsNotFound");
    assertThat(condition(s, "Ready").getMessage()).contains("secret \"store-creds\" not found");
    assertThat(s.getNodes())
        .extracting(ArtifactNodeStatus::getMessage)
        .containsExactly(
            "pod "
                + name(pending)
                + " not scheduled: 0/3 nodes are available: 3 Insufficient memory.",
            "pod " + name(noSecret) + ": secret \"store-creds\" not found");
    assertCondition(s, "Stalled", "True", "CredentialsNotFound");
  }

  /** A resolving pod on node a whose container is in {@code state}, with {@code last} before. */
  private Pod troubled(
      io.fabric8.kubernetes.api.model.ContainerState state,
      io.fabric8.kubernetes.api.model.ContainerStateTerminated last,
      int restarts) {
    return new io.fabric8.kubernetes.api.model.PodBuilder(
            pod(artifact, A, OptionalLong.empty(), PodState.RUNNING))
        .editStatus()
        .withContainerStatuses(
            new io.fabric8.kubernetes.api.model.ContainerStatusBuilder()
                .withName("dataplane")
                .withReady(false)
                .withRestartCount(restarts)
                .withState(state)
                .withNewLastState()
                .withTerminated(last)
                .endLastState()
                .build())
        .endStatus()
        .build();
  }

  private static io.fabric8.kubernetes.api.model.ContainerState waiting(
      String reason, String message) {
    return new io.fabric8.kubernetes.api.model.ContainerStateBuilder()
        .withNewWaiting()
        .withReason(reason)
        .withMessage(message)
        .endWaiting()
        .build();
  }

  private static io.fabric8.kubernetes.api.model.ContainerStateTerminated terminated(
      String reason, int exitCode, String message) {
    return new io.fabric8.kubernetes.api.model.ContainerStateTerminatedBuilder()
        .withReason(reason)
        .withExitCode(exitCode)
        .withMessage(message)
        .build();
  }

  private ModelArtifactStatus aggregateOne(Pod p, NodeSelection.Result sel) {
    return StatusAggregator.aggregate(
        new Input(
            artifact, List.of(p), Map.of(), Set.of(), Optional.empty(), sel, Optional.empty(), T0));
  }

  @Test
  void aCrashLoopingPodIsNotListingTheSourceItsLastTerminationIsNamedAndItStalls() {
    artifact.getSpec().getPlacement().setReplicas(1);
    Pod p =
        troubled(
            waiting("CrashLoopBackOff", "back-off 40s restarting failed container=dataplane"),
            terminated("Error", 2, "error: --uri: unsupported scheme 'ftp'\n"),
            3);

    ModelArtifactStatus s = aggregateOne(p, selection());

    String expected =
        "pod "
            + name(p)
            + " on node a: container dataplane CrashLoopBackOff: back-off 40s restarting failed"
            + " container=dataplane; last termination: Error, exit code 2: error: --uri:"
            + " unsupported scheme 'ftp'";
    assertCondition(s, "Resolved", "False", "CrashLoopBackOff");
    assertThat(condition(s, "Resolved").getMessage()).isEqualTo(expected);
    assertCondition(s, "Ready", "False", "CrashLoopBackOff");
    assertThat(condition(s, "Ready").getMessage()).isEqualTo("0/1 replicas ready; " + expected);
    assertCondition(s, "Stalled", "True", "CrashLoopBackOff");
    assertThat(s.getNodes()).extracting(ArtifactNodeStatus::getMessage).containsExactly(expected);
  }

  @Test
  void anOomKilledPodNamesItsMemoryLimit() {
    artifact.getSpec().getPlacement().setReplicas(1);
    Pod p =
        troubled(
            waiting("CrashLoopBackOff", "back-off 10s"), terminated("OOMKilled", 137, null), 1);

    ModelArtifactStatus s = aggregateOne(p, selection());

    assertCondition(s, "Ready", "False", "OOMKilled");
    assertThat(condition(s, "Ready").getMessage())
        .isEqualTo(
            "0/1 replicas ready; pod "
                + name(p)
                + " on node a: container dataplane was killed for exceeding its memory limit of "
                + io.tensorcast.operator.desired.ByteSize.human(
                    io.tensorcast.operator.desired.PodPlan.memoryRequest(p))
                + " (restarts: 1); last termination: OOMKilled, exit code 137");
    assertCondition(s, "Stalled", "True", "OOMKilled");
  }

  @ParameterizedTest
  @ValueSource(strings = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName"})
  void imagePullErrorsReachTheConditionsWithTheKubeletsReasonAndMessage(String reason) {
    artifact.getSpec().getPlacement().setReplicas(1);
    Pod p =
        troubled(
            waiting(reason, "Back-off pulling image \"registry.invalid/tensorcast:0\""), null, 0);

    ModelArtifactStatus s = aggregateOne(p, selection());

    assertCondition(s, "Ready", "False", reason);
    assertThat(condition(s, "Ready").getMessage())
        .isEqualTo(
            "0/1 replicas ready; pod "
                + name(p)
                + " on node a: container dataplane "
                + reason
                + ": Back-off pulling image \"registry.invalid/tensorcast:0\"");
    assertCondition(s, "Stalled", "True", reason);
  }

  @Test
  void anEvictedPodIsNamedAndDoesNotStall() {
    artifact.getSpec().getPlacement().setReplicas(1);
    Pod p =
        new io.fabric8.kubernetes.api.model.PodBuilder(
                pod(artifact, A, OptionalLong.of(SIZE), PodState.RUNNING))
            .editStatus()
            .withPhase("Failed")
            .withReason("Evicted")
            .withMessage("The node was low on resource: memory.")
            .endStatus()
            .build();

    ModelArtifactStatus s = aggregateOne(p, selection());

    assertCondition(s, "Ready", "False", "Evicted");
    assertThat(condition(s, "Ready").getMessage())
        .isEqualTo(
            "0/1 replicas ready; pod "
                + name(p)
                + " on node a was evicted: The node was low on resource: memory.; it is replaced");
    assertCondition(s, "Stalled", "False", "Progressing");
  }

  @Test
  void aPodOnALostNodeIsNamedNotKeptAsReady() {
    artifact.getSpec().getPlacement().setReplicas(1);
    Pod p = pod(artifact, A, OptionalLong.of(SIZE), PodState.READY);
    ModelArtifactStatus before = new ModelArtifactStatus();
    ArtifactNodeStatus e = new ArtifactNodeStatus();
    e.setNode("a");
    e.setPod(name(p));
    e.setPhase(ArtifactPhase.Ready);
    before.setNodes(List.of(e));
    artifact.setStatus(before);
    NodeSelection.Result lost =
        NodeSelection.select(
            List.of(node("a").notReady().build(), node("b").build()),
            new NodeSelection.Request(
                1, RdmaPolicy.Disabled, Map.of(), List.of(), SIZE + OVERHEAD, "", Set.of()));

    ModelArtifactStatus s = aggregateOne(p, lost);

    assertThat(s.getReadyReplicas()).isZero();
    assertCondition(s, "Ready", "False", "NodeNotReady");
    assertThat(condition(s, "Ready").getMessage())
        .isEqualTo(
            "0/1 replicas ready; pod "
                + name(p)
                + " on node a: the node is not Ready (its kubelet stopped reporting); the copy"
                + " there cannot be reached and is placed on another node");
  }

  @Test
  void replicasNoNodesCanTakeStallSoWaitingStops() {
    artifact.getSpec().getPlacement().setReplicas(3);
    NodeSelection.Result two =
        NodeSelection.select(
            List.of(node("a").build(), node("b").build()),
            new NodeSelection.Request(
                3, RdmaPolicy.Disabled, Map.of(), List.of(), SIZE + OVERHEAD, "", Set.of()));
    Pod p = pod(artifact, A, OptionalLong.of(SIZE), PodState.READY);

    ModelArtifactStatus s = aggregateOne(p, two);

    assertCondition(s, "Stalled", "True", "InsufficientNodes");
    assertThat(condition(s, "Stalled").getMessage())
        .isEqualTo("0/3 replicas ready; " + two.message());
  }

  @Test
  void readyIsNotStalledAndAFailureIs() {
    artifact.getSpec().getPlacement().setReplicas(1);
    Pod p = pod(artifact, A, OptionalLong.of(SIZE), PodState.READY);
    Map<String, DataPlaneStatus> reports =
        Map.of(name(p), report(artifact, Ready, 3, SIZE, SIZE, null, null));

    ModelArtifactStatus ready = aggregate(List.of(p), reports, names(p), T0);
    ModelArtifactStatus failed =
        StatusAggregator.aggregate(
            new Input(
                artifact,
                List.of(p),
                Map.of(),
                Set.of(),
                Optional.empty(),
                selection(),
                Optional.of(new Failure("SourceNotFound", "prefix m/ lists no file", true)),
                T0));

    assertCondition(ready, "Stalled", "False", "AllReplicasReady");
    assertCondition(failed, "Stalled", "True", "SourceNotFound");
    assertThat(condition(failed, "Stalled").getMessage()).isEqualTo("prefix m/ lists no file");
  }

  @Test
  void aFailureTheOperatorRetriesIsFailedButNotStalled() {
    ModelArtifactStatus failed =
        StatusAggregator.aggregate(
            new Input(
                artifact,
                List.of(),
                Map.of(),
                Set.of(),
                Optional.empty(),
                selection(),
                Optional.of(
                    new Failure("BucketNotFound", "bucket b does not exist", true)
                        .retrying(
                            "loading again at 2026-12-01T22:00:30Z after 1 failed attempt(s)")),
                T0));

    assertThat(failed.getPhase()).isEqualTo(ArtifactPhase.Failed);
    assertCondition(failed, "Ready", "False", "BucketNotFound");
    assertThat(condition(failed, "Ready").getMessage()).isEqualTo("bucket b does not exist");
    assertCondition(failed, "Stalled", "False", "BucketNotFound");
    assertThat(condition(failed, "Stalled").getMessage())
        .isEqualTo(
            "bucket b does not exist; loading again at 2026-12-01T22:00:30Z after 1 failed"
                + " attempt(s)");
  }

  private static String name(Pod p) {
    return p.getMetadata().getName();
  }
}
