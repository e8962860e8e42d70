package io.tensorcast.operator.desired;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.NodeBuilder;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;

class ReadyNodeLabelsTest {
  static final String KEY = "modelartifact.tensorcast.io/team-a.llama";

  static Node node(String name, Map<String, String> labels) {
    return new NodeBuilder()
        .withNewMetadata()
        .withName(name)
        .withLabels(labels)
        .endMetadata()
        .build();
  }

  @Test
  void labelsExactlyTheReadyNodesWithTheGeneration() {
    List<Node> nodes =
        List.of(
            node("n1", Map.of()),
            node("n2", Map.of(KEY, "1")),
            node("n3", Map.of(KEY, "2")),
            node("n4", Map.of(KEY, "2", "other", "x")));

    Map<String, Optional<String>> changes =
        ReadyNodeLabels.changes(nodes, KEY, "2", Set.of("n1", "n2", "n3"));

    assertThat(changes)
        .containsExactly(
            Map.entry("n1", Optional.of("2")),
            Map.entry("n2", Optional.of("2")),
            Map.entry("n4", Optional.empty()));
    assertThat(ReadyNodeLabels.changes(nodes, KEY, "2", Set.of("n3"))).doesNotContainKey("n3");
    assertThat(ReadyNodeLabels.isReadyNodeLabel(KEY)).isTrue();
    assertThat(ReadyNodeLabels.isReadyNodeLabel("tensorcast.io/rdma")).isFalse();
  }
}
