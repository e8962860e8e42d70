package io.tensorcast.operator.desired;

import static io.tensorcast.operator.testing.Fixtures.GI;
import static io.tensorcast.operator.testing.Fixtures.KEY_ID;
import static io.tensorcast.operator.testing.Fixtures.artifact;
import static io.tensorcast.operator.testing.Fixtures.config;
import static io.tensorcast.operator.testing.Fixtures.node;
import static io.tensorcast.operator.testing.Fixtures.pod;
import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.operator.testing.Fixtures.PodState;
import java.util.List;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;

class PodPlanTest {
  private static final NodeSelection.Candidate A = node("a").candidate();
  private static final NodeSelection.Candidate B = node("b").candidate();
  private static final OptionalLong SIZE = OptionalLong.of(GI);

  private static ModelArtifact gen(long g) {
    return artifact("ns", "m", g, "s3://bucket/m/");
  }

  private static Pod desired(ModelArtifact a, NodeSelection.Candidate n, OptionalLong size) {
    return DataPlanePod.desired(a, n, size, config(), KEY_ID);
  }

  private static List<String> names(List<Pod> pods) {
    return pods.stream().map(p -> p.getMetadata().getName()).toList();
  }

  @Test
  void createsMissingPods() {
    ModelArtifact a = gen(1);

    PodPlan plan = PodPlan.plan(List.of(desired(a, A, SIZE), desired(a, B, SIZE)), List.of());

    assertThat(names(plan.create()))
        .containsExactly(DataPlanePod.podName(a, "a"), DataPlanePod.podName(a, "b"));
    assertThat(plan.delete()).isEmpty();
    assertThat(plan.settled()).isFalse();
  }

  @Test
  void keepsMatchingPodsWhateverTheirState() {
    ModelArtifact a = gen(1);
    Pod running = pod(a, A, SIZE, PodState.RUNNING);
    Pod unscheduled = pod(a, B, SIZE, PodState.UNSCHEDULED);

    PodPlan plan =
        PodPlan.plan(
            List.of(desired(a, A, SIZE), desired(a, B, SIZE)), List.of(running, unscheduled));

    assertThat(plan.settled()).isTrue();
    assertThat(plan.keep()).containsOnlyKeys("a", "b");
    assertThat(plan.keep().get("a")).isSameAs(running);
  }

  @Test
  void replacesAnUndersizedResolverOnlyAfterItIsGone() {
    ModelArtifact a = gen(1);
    Pod resolver = pod(a, A, OptionalLong.empty(), PodState.READY);

    PodPlan first = PodPlan.plan(List.of(desired(a, A, SIZE)), List.of(resolver));
    Pod terminating = pod(a, A, OptionalLong.empty(), PodState.TERMINATING);
    PodPlan second = PodPlan.plan(List.of(desired(a, A, SIZE)), List.of(terminating));
    PodPlan third = PodPlan.plan(List.of(desired(a, A, SIZE)), List.of());

    assertThat(first.delete()).containsExactly(resolver);
    assertThat(first.create()).isEmpty();
    assertThat(first.waitingFor()).containsExactly("a");
    assertThat(second.delete()).isEmpty();
    assertThat(second.create()).isEmpty();
    assertThat(second.waitingFor()).containsExactly("a");
    assertThat(names(third.create())).containsExactly(resolver.getMetadata().getName());
  }

  /** No pod keeps more memory than its artifact needs: an oversized pod is replaced. */
  @Test
  void replacesAPodThatAskedForMoreThanNeeded() {
    ModelArtifact a = gen(1);
    // Sized for 2 GiB (e.g. by an older operator from spec.memory.limit); the artifact is 1 GiB.
    Pod generous = pod(a, A, OptionalLong.of(2 * GI), PodState.RUNNING);

    PodPlan plan = PodPlan.plan(List.of(desired(a, A, SIZE)), List.of(generous));

    assertThat(plan.delete()).containsExactly(generous);
    assertThat(plan.waitingFor()).containsExactly("a");
  }

  @Test
  void aNewGenerationReplacesOldPodsOneNodeAtATime() {
    ModelArtifact g1 = gen(1);
    ModelArtifact g2 = gen(2);
    Pod oldA = pod(g1, A, SIZE, PodState.READY);
    Pod oldB = pod(g1, B, SIZE, PodState.READY);

    PodPlan plan = PodPlan.plan(List.of(desired(g2, A, OptionalLong.empty())), List.of(oldA, oldB));

    assertThat(plan.delete()).containsExactlyInAnyOrder(oldA, oldB);
    assertThat(plan.create()).isEmpty();
    assertThat(plan.waitingFor()).containsExactly("a");
  }

  @Test
  void deletesPodsOnNodesNoLongerChosenButNotTwice() {
    ModelArtifact a = gen(1);
    Pod onB = pod(a, B, SIZE, PodState.READY);
    Pod onBTerminating = pod(gen(0), B, SIZE, PodState.TERMINATING);

    PodPlan plan = PodPlan.plan(List.of(desired(a, A, SIZE)), List.of(onB, onBTerminating));

    assertThat(plan.delete()).containsExactly(onB);
    assertThat(names(plan.create())).containsExactly(DataPlanePod.podName(a, "a"));
  }

  @Test
  void replacesAnEndedPod() {
    ModelArtifact a = gen(1);
    Pod ended = pod(a, A, SIZE, PodState.ENDED);

    PodPlan plan = PodPlan.plan(List.of(desired(a, A, SIZE)), List.of(ended));

    assertThat(plan.delete()).containsExactly(ended);
    assertThat(plan.waitingFor()).containsExactly("a");
  }

  @Test
  void replacesAPodWhoseSpecChangedWithinAGeneration() {
    ModelArtifact a = gen(1);
    Pod oldImage =
        new io.fabric8.kubernetes.api.model.PodBuilder(pod(a, A, SIZE, PodState.READY))
            .editMetadata()
            .addToAnnotations(DataPlanePod.ANNOTATION_SPEC_HASH, "0000")
            .endMetadata()
            .build();

    PodPlan plan = PodPlan.plan(List.of(desired(a, A, SIZE)), List.of(oldImage));

    assertThat(plan.delete()).containsExactly(oldImage);
  }

  @Test
  void deleteAllSkipsPodsAlreadyGoing() {
    ModelArtifact a = gen(1);
    Pod live = pod(a, A, SIZE, PodState.READY);
    Pod going = pod(a, B, SIZE, PodState.TERMINATING);

    assertThat(PodPlan.deleteAll(List.of(live, going)).delete()).containsExactly(live);
  }
}
