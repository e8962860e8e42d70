package io.tensorcast.operator.desired;

import static io.tensorcast.operator.testing.Fixtures.GI;
import static io.tensorcast.operator.testing.Fixtures.MI;
import static io.tensorcast.operator.testing.Fixtures.node;
import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.Taint;
import io.fabric8.kubernetes.api.model.Toleration;
import io.fabric8.kubernetes.api.model.TolerationBuilder;
import io.tensorcast.api.Reason;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.operator.desired.NodeSelection.Exclusion;
import io.tensorcast.operator.desired.NodeSelection.Request;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class NodeSelectionTest {

  private static Request request(int replicas, RdmaPolicy rdma) {
    return new Request(replicas, rdma, Map.of(), List.of(), 0, "", Set.of());
  }

  private static final List<Node> TWO_RDMA_ONE_PLAIN =
      List.of(
          node("a-rdma-resource").rdmaResource(2).build(),
          node("b-plain").build(),
          node("c-rdma-label").rdmaLabel().build());

  @Test
  void requiredChoosesOnlyRdmaCapableNodesByResourceOrLabel() {
    NodeSelection.Result r =
        NodeSelection.select(TWO_RDMA_ONE_PLAIN, request(2, RdmaPolicy.Required));

    assertThat(r.chosenNames()).containsExactly("a-rdma-resource", "c-rdma-label");
    assertThat(r.satisfied()).isTrue();
    assertThat(r.reason()).isEqualTo(Reason.NodesSelected);
    assertThat(r.excluded()).containsOnlyKeys(Exclusion.NOT_RDMA_CAPABLE);
    assertThat(r.chosen().get(0).rdmaResource()).isTrue();
    assertThat(r.chosen().get(1).rdmaResource()).isFalse();
    assertThat(r.chosen().get(1).rdmaCapable()).isTrue();
  }

  @Test
  void artifactsSpreadByMemoryOtherArtifactsAlreadyRequested() {
    List<Node> twins =
        List.of(
            node("a").rdmaLabel().memory("4Gi").build(),
            node("b").rdmaLabel().memory("4Gi").build());
    Request req =
        new Request(
            1,
            RdmaPolicy.Required,
            Map.of(),
            List.of(),
            300 * MI,
            "artifact 44.0 MiB + overhead 256.0 MiB",
            Set.of(),
            Map.of("a", Map.of("ns/other", GI)),
            List.of());

    NodeSelection.Result r = NodeSelection.select(twins, req);

    assertThat(r.chosenNames()).containsExactly("b");
  }

  @Test
  void aNodeFilledByOtherArtifactsIsExcludedForMemory() {
    Request req =
        new Request(
            1,
            RdmaPolicy.Disabled,
            Map.of(),
            List.of(),
            300 * MI,
            "artifact 44.0 MiB + overhead 256.0 MiB",
            Set.of(),
            Map.of("full", Map.of("ns/big", 600 * MI, "ns/small", 300 * MI)),
            List.of());

    NodeSelection.Result r = NodeSelection.select(List.of(node("full").memory("1Gi").build()), req);

    assertThat(r.chosen()).isEmpty();
    assertThat(r.excluded()).containsOnlyKeys(Exclusion.INSUFFICIENT_MEMORY);
    // Free memory, not allocatable, against the need, and who holds the rest (largest first).
    assertThat(r.message())
        .isEqualTo(
            "0 of 1 nodes are eligible for 1 replica: 1 with too little free memory (most free:"
                + " node full "
                + ByteSize.exact(124 * MI)
                + " free = "
                + ByteSize.exact(GI)
                + " allocatable - "
                + ByteSize.exact(900 * MI)
                + " requested by the data-plane pods of ns/big ("
                + ByteSize.exact(600 * MI)
                + "), ns/small ("
                + ByteSize.exact(300 * MI)
                + ") < "
                + ByteSize.exact(300 * MI)
                + " needed per node = artifact 44.0 MiB + overhead 256.0 MiB) [full]");
  }

  /**
   * Scaling down keeps Ready copies before ones still loading, and among Ready copies the ones
   * Ready longest.
   */
  @Test
  void scalingDownKeepsTheCopiesReadyLongest() {
    List<Node> nodes =
        List.of(node("a").build(), node("b").build(), node("c").build(), node("d").build());
    Request one =
        new Request(
            1,
            RdmaPolicy.Disabled,
            Map.of(),
            List.of(),
            0,
            "",
            Set.of("a", "b", "c"),
            Map.of(),
            List.of("c", "b"));
    Request two =
        new Request(
            2,
            RdmaPolicy.Disabled,
            Map.of(),
            List.of(),
            0,
            "",
            Set.of("a", "b", "c"),
            Map.of(),
            List.of("c", "b"));

    assertThat(NodeSelection.select(nodes, one).chosenNames()).containsExactly("c");
    assertThat(NodeSelection.select(nodes, two).chosenNames()).containsExactly("c", "b");
  }

  @Test
  void requiredWithoutRdmaNodesChoosesNoneAndSaysWhy() {
    List<Node> plain = List.of(node("n1").build(), node("n2").build(), node("n3").build());

    NodeSelection.Result r = NodeSelection.select(plain, request(2, RdmaPolicy.Required));

    assertThat(r.chosen()).isEmpty();
    assertThat(r.satisfied()).isFalse();
    assertThat(r.reason()).isEqualTo(Reason.InsufficientNodes);
    assertThat(r.message())
        .isEqualTo(
            "0 of 3 nodes are eligible for 2 replicas: 3 not RDMA-capable (no tensorcast.io/rdma in"
                + " allocatable, no label tensorcast.io/rdma=true; spec.placement.rdma is Required:"
                + " Preferred or Disabled uses them too) [n1, n2, n3]");
    assertThat(r.noNodeHasEnoughMemory()).isFalse();
  }

  @Test
  void preferredTakesRdmaNodesFirstThenOthers() {
    List<Node> nodes =
        List.of(
            node("a-plain").build(), node("b-plain").build(), node("z-rdma").rdmaLabel().build());

    NodeSelection.Result r = NodeSelection.select(nodes, request(2, RdmaPolicy.Preferred));

    assertThat(r.chosenNames()).containsExactly("z-rdma", "a-plain");
  }

  @Test
  void disabledIgnoresRdma() {
    NodeSelection.Result r =
        NodeSelection.select(TWO_RDMA_ONE_PLAIN, request(3, RdmaPolicy.Disabled));

    assertThat(r.chosenNames()).containsExactly("a-rdma-resource", "b-plain", "c-rdma-label");
  }

  static Stream<Arguments> exclusions() {
    return Stream.of(
        Arguments.of(node("x").cordoned().build(), Exclusion.CORDONED, "1 cordoned"),
        Arguments.of(node("x").notReady().build(), Exclusion.NOT_READY, "1 not Ready"),
        Arguments.of(
            node("x").build(),
            Exclusion.SELECTOR_MISMATCH,
            "1 not matching spec.placement.nodeSelector (e.g. lacks pool=gpu)"),
        Arguments.of(
            node("x").label("pool", "gpu").taint("dedicated", "infer", "NoSchedule").build(),
            Exclusion.TAINT_NOT_TOLERATED,
            "1 with a taint not tolerated by spec.placement.tolerations (e.g."
                + " dedicated=infer:NoSchedule)"),
        Arguments.of(
            node("x").label("pool", "gpu").taint("dedicated", "infer", "NoExecute").build(),
            Exclusion.TAINT_NOT_TOLERATED,
            "dedicated=infer:NoExecute"),
        Arguments.of(
            node("x").label("pool", "gpu").memory("200Mi").build(),
            Exclusion.INSUFFICIENT_MEMORY,
            "1 with too little free memory (most free: node x 200.0 MiB (209715200 bytes) free"
                + " (allocatable; no other Tensorcast pod requests memory there) < 300.0 MiB"
                + " (314572800 bytes) needed per node = artifact 44.0 MiB + overhead 256.0 MiB)"));
  }

  @ParameterizedTest
  @MethodSource("exclusions")
  void excludesANodeForTheFirstRuleItBreaksAndNamesIt(
      Node node, Exclusion expected, String messagePart) {
    Request req =
        new Request(
            1,
            RdmaPolicy.Disabled,
            Map.of("pool", "gpu"),
            List.of(),
            300 * MI,
            "artifact 44.0 MiB + overhead 256.0 MiB",
            Set.of());

    NodeSelection.Result r = NodeSelection.select(List.of(node), req);

    assertThat(r.chosen()).isEmpty();
    assertThat(r.excluded()).containsOnlyKeys(expected);
    assertThat(r.message()).startsWith("0 of 1 nodes are eligible for 1 replica: ");
    assertThat(r.message()).contains(messagePart);
    assertThat(r.reason())
        .isEqualTo(
            expected == Exclusion.INSUFFICIENT_MEMORY
                ? Reason.InsufficientMemory
                : Reason.InsufficientNodes);
    assertThat(r.noNodeHasEnoughMemory()).isEqualTo(expected == Exclusion.INSUFFICIENT_MEMORY);
  }

  @Test
  void preferNoScheduleTaintsDoNotExclude() {
    Node n = node("x").taint("soft", "", "PreferNoSchedule").build();

    assertThat(NodeSelection.select(List.of(n), request(1, RdmaPolicy.Disabled)).satisfied())
        .isTrue();
  }

  @Test
  void toleratedTaintDoesNotExclude() {
    Node n = node("x").taint("nvidia.com/gpu", "present", "NoSchedule").build();
    Toleration exists =
        new TolerationBuilder().withKey("nvidia.com/gpu").withOperator("Exists").build();
    Request req = new Request(1, RdmaPolicy.Disabled, Map.of(), List.of(exists), 0, "", Set.of());

    assertThat(NodeSelection.select(List.of(n), req).chosenNames()).containsExactly("x");
  }

  static Stream<Arguments> tolerations() {
    return Stream.of(
        Arguments.of(tol("k", "Equal", "v", "NoSchedule"), true),
        Arguments.of(tol("k", "Equal", "w", "NoSchedule"), false),
        Arguments.of(tol("k", null, "v", null), true),
        Arguments.of(tol("k", "Exists", null, null), true),
        Arguments.of(tol("k", "Exists", null, "NoExecute"), false),
        Arguments.of(tol("other", "Exists", null, null), false),
        Arguments.of(tol(null, "Exists", null, null), true),
        Arguments.of(tol(null, "Equal", "v", null), false));
  }

  private static Toleration tol(String key, String op, String value, String effect) {
    return new TolerationBuilder()
        .withKey(key)
        .withOperator(op)
        .withValue(value)
        .withEffect(effect)
        .build();
  }

  @ParameterizedTest
  @MethodSource("tolerations")
  void tolerationMatchingFollowsKubernetes(Toleration t, boolean tolerates) {
    Taint taint = new Taint("NoSchedule", "k", null, "v");

    assertThat(NodeSelection.tolerates(t, taint)).isEqualTo(tolerates);
  }

  @Test
  void spreadsAcrossZones() {
    List<Node> nodes =
        List.of(
            node("a1").zone("a").build(),
            node("a2").zone("a").build(),
            node("b1").zone("b").build(),
            node("b2").zone("b").build());

    NodeSelection.Result r = NodeSelection.select(nodes, request(2, RdmaPolicy.Disabled));

    assertThat(r.chosenNames()).containsExactly("a1", "b1");
  }

  @Test
  void keepsNodesThatAlreadyHoldAPodEvenAgainstZoneSpread() {
    List<Node> nodes =
        List.of(
            node("a1").zone("a").build(),
            node("a2").zone("a").build(),
            node("b1").zone("b").build());
    Request req =
        new Request(2, RdmaPolicy.Disabled, Map.of(), List.of(), 0, "", Set.of("a2", "a1"));

    NodeSelection.Result r = NodeSelection.select(nodes, req);

    assertThat(r.chosenNames()).containsExactly("a1", "a2");
  }

  @Test
  void fillsWhatItCanWhenTooFewNodesAreEligible() {
    List<Node> nodes = List.of(node("big").build(), node("small").memory("1Gi").build());
    Request req =
        new Request(2, RdmaPolicy.Disabled, Map.of(), List.of(), 2 * GI, "artifact", Set.of());

    NodeSelection.Result r = NodeSelection.select(nodes, req);

    assertThat(r.chosenNames()).containsExactly("big");
    assertThat(r.satisfied()).isFalse();
    assertThat(r.noNodeHasEnoughMemory()).isFalse();
    assertThat(r.reason()).isEqualTo(Reason.InsufficientMemory);
    assertThat(r.message())
        .startsWith("1 of 2 nodes are eligible for 2 replicas: 1 with too little");
  }

  @Test
  void candidateReadsHostnameAndMemory() {
    NodeSelection.Candidate c =
        NodeSelection.Candidate.of(node("n").memory("3Gi").zone("z").build());

    assertThat(c.hostname()).contains("n");
    assertThat(c.allocatableMemoryBytes()).isEqualTo(3 * GI);
    assertThat(c.zone()).isEqualTo("z");
    assertThat(NodeSelection.Candidate.of(node("m").withoutHostnameLabel().build()).hostname())
        .isEmpty();
  }
}
