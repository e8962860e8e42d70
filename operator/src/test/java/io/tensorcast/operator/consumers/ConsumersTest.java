package io.tensorcast.operator.consumers;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.tensorcast.api.ConsumerVolumes;
import io.tensorcast.api.Reason;
import io.tensorcast.api.v1alpha1.Conditions;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.operator.desired.PodPlan;
import io.tensorcast.operator.status.ConsumerStatus;
import io.tensorcast.operator.testing.Fixtures;
import io.tensorcast.operator.testing.Fixtures.PodState;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;

/** The in-use rule: who is a consumer, which copies they hold, what the status says. */
class ConsumersTest {
  static final String NS = "team-a";

  /** A consumer pod of {@code artifact} in {@code ns} on {@code node} in {@code phase}. */
  static Pod consumer(String name, String ns, String artifact, String node, String phase) {
    PodBuilder b =
        new PodBuilder()
            .withNewMetadata()
            .withName(name)
            .withNamespace(ns)
            .endMetadata()
            .withNewSpec()
            .withNodeName(node)
            .addNewContainer()
            .withName("server")
            .withImage("vllm/vllm-openai")
            .endContainer()
            .addNewVolume()
            .withName("model")
            .withNewCsi()
            .withDriver(ConsumerVolumes.DRIVER)
            .withReadOnly(true)
            .withVolumeAttributes(Map.of("modelArtifact", artifact))
            .endCsi()
            .endVolume()
            .endSpec();
    if (phase != null) {
      b.withNewStatus().withPhase(phase).endStatus();
    }
    return b.build();
  }

  @Test
  void consumersArePodsOfTheNamespaceNamingTheArtifactThatHaveNotEnded() {
    ModelArtifact llama = Fixtures.artifact(NS, "llama", 1, "s3://b/llama/");
    List<Pod> pods =
        List.of(
            consumer("serve-b", NS, "llama", "n2", "Pending"),
            consumer("serve-a", NS, "llama", "n1", "Running"),
            consumer("unscheduled", NS, "llama", null, null),
            consumer("done", NS, "llama", "n1", "Succeeded"),
            consumer("crashed", NS, "llama", "n1", "Failed"),
            consumer("other-model", NS, "qwen", "n1", "Running"),
            consumer("same-name-elsewhere", "team-b", "llama", "n1", "Running"));

    List<Consumer> consumers = Consumers.of(llama, pods);

    assertThat(consumers)
        .containsExactly(
            new Consumer("serve-a", "n1", true),
            new Consumer("serve-b", "n2", false),
            new Consumer("unscheduled", "", false));
    assertThat(Consumers.holdingNodes(consumers)).containsExactly("n1");
    assertThat(Consumers.isConsumer(pods.get(0))).isTrue();
    assertThat(Consumers.isConsumer(pods.get(3))).isFalse();
  }

  @Test
  void aPendingPodWhoseContainerStartedHoldsItsCopy() {
    Pod p = consumer("p", NS, "llama", "n1", "Pending");
    assertThat(Consumer.of(p).started()).isFalse();
    p.getStatus()
        .setContainerStatuses(
            List.of(
                new io.fabric8.kubernetes.api.model.ContainerStatusBuilder()
                    .withName("server")
                    .withRestartCount(1)
                    .withNewState()
                    .withNewWaiting()
                    .withReason("CrashLoopBackOff")
                    .endWaiting()
                    .endState()
                    .build()));
    assertThat(Consumer.of(p).started()).isTrue();
  }

  @Test
  void aNewGenerationDoesNotReplaceTheCopyOfANodeWithStartedConsumers() {
    ModelArtifact g1 = Fixtures.artifact(NS, "llama", 1, "s3://b/llama/");
    ModelArtifact g2 = Fixtures.artifact(NS, "llama", 2, "s3://b/llama-v2/");
    var n1 = Fixtures.node("n1").candidate();
    var n2 = Fixtures.node("n2").candidate();
    Pod oldOnN1 = Fixtures.pod(g1, n1, OptionalLong.of(1000), PodState.READY);
    Pod oldOnN2 = Fixtures.pod(g1, n2, OptionalLong.of(1000), PodState.READY);
    PodPlan plan =
        PodPlan.plan(
            List.of(
                Fixtures.pod(g2, n1, OptionalLong.of(1000), PodState.UNSCHEDULED),
                Fixtures.pod(g2, n2, OptionalLong.of(1000), PodState.UNSCHEDULED)),
            List.of(oldOnN1, oldOnN2));
    assertThat(plan.delete()).containsExactlyInAnyOrder(oldOnN1, oldOnN2);

    List<Consumer> consumers =
        List.of(new Consumer("serve-a", "n1", true), new Consumer("waiting", "n2", false));
    ConsumerHold hold = ConsumerHold.apply(plan, consumers);

    assertThat(hold.plan().delete()).containsExactly(oldOnN2);
    assertThat(hold.held()).containsExactly(Map.entry("n1", oldOnN1));
    assertThat(hold.plan().waitingFor()).contains("n1");
    assertThat(hold.plan().create()).isEmpty();
    assertThat(ConsumerHold.generationOf(oldOnN1)).isEqualTo("1");

    // The last consumer on n1 is gone: the old copy is replaced.
    assertThat(ConsumerHold.apply(plan, List.of()).plan().delete())
        .containsExactlyInAnyOrder(oldOnN1, oldOnN2);
    // A failure's delete-all is held the same way.
    assertThat(
            ConsumerHold.apply(PodPlan.deleteAll(List.of(oldOnN1, oldOnN2)), consumers)
                .plan()
                .delete())
        .containsExactly(oldOnN2);
  }

  @Test
  void inUseNamesThePodsTheKeptCopiesAndWhatADeletionWaitsFor() {
    Instant t0 = Instant.parse("2026-12-01T10:00:00Z");
    Instant t1 = t0.plusSeconds(60);
    List<Consumer> two =
        List.of(new Consumer("serve-a", "n1", true), new Consumer("serve-b", "", false));

    ModelArtifactStatus none =
        ConsumerStatus.apply(
            new ModelArtifactStatus(), List.of(), 1, List.of(), Map.of(), false, t0);
    assertThat(none.getConsumers()).isZero();
    assertThat(inUse(none))
        .extracting(Condition::getStatus, Condition::getReason, Condition::getLastTransitionTime)
        .containsExactly("False", Reason.NoConsumers.name(), "2026-12-01T10:00:00Z");

    ModelArtifactStatus used =
        ConsumerStatus.apply(
            new ModelArtifactStatus(), none.getConditions(), 1, two, Map.of(), false, t1);
    assertThat(used.getConsumers()).isEqualTo(2);
    assertThat(inUse(used))
        .extracting(Condition::getStatus, Condition::getReason, Condition::getMessage)
        .containsExactly(
            "True",
            Reason.ConsumerPods.name(),
            "2 consumer pod(s): serve-a (node n1), serve-b (not scheduled)");
    assertThat(inUse(used).getLastTransitionTime()).isEqualTo("2026-12-01T10:01:00Z");

    ModelArtifact g1 = Fixtures.artifact(NS, "llama", 1, "s3://b/llama/");
    Pod kept =
        Fixtures.pod(g1, Fixtures.node("n1").candidate(), OptionalLong.of(1), PodState.READY);
    ModelArtifactStatus held =
        ConsumerStatus.apply(
            new ModelArtifactStatus(), used.getConditions(), 2, two, Map.of("n1", kept), false, t1);
    assertThat(inUse(held).getReason()).isEqualTo(Reason.CopyKeptForConsumers.name());
    assertThat(inUse(held).getMessage())
        .isEqualTo(
            "copies kept for running consumers until they are gone: node n1 (pod "
                + kept.getMetadata().getName()
                + ", generation 1); consumer pods: serve-a (node n1), serve-b (not scheduled)");
    assertThat(kept.getMetadata().getLabels().get(DataPlanePod.LABEL_GENERATION)).isEqualTo("1");

    ModelArtifactStatus deleting =
        ConsumerStatus.apply(
            new ModelArtifactStatus(), used.getConditions(), 1, two, Map.of(), true, t1);
    assertThat(inUse(deleting).getReason()).isEqualTo(Reason.DeletionWaitsForConsumers.name());
    assertThat(inUse(deleting).getMessage())
        .isEqualTo(
            "deletion waits for 2 consumer pod(s) to go: serve-a (node n1), serve-b (not"
                + " scheduled); delete them or scale their workloads down");

    List<Consumer> many = new ArrayList<>();
    for (int i = 0; i < 12; i++) {
      many.add(new Consumer("p" + (10 + i), "n1", true));
    }
    assertThat(
            inUse(
                    ConsumerStatus.apply(
                        new ModelArtifactStatus(), List.of(), 1, many, Map.of(), false, t1))
                .getMessage())
        .startsWith("12 consumer pod(s): p10 (node n1),")
        .endsWith("p19 (node n1), and 2 more");
  }

  private static Condition inUse(ModelArtifactStatus s) {
    return s.getConditions().stream()
        .filter(c -> Conditions.IN_USE.equals(c.getType()))
        .findFirst()
        .orElseThrow();
  }
}
