package io.tensorcast.operator.reconciler;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.NodeBuilder;
import java.util.Map;
import org.junit.jupiter.api.Test;

class NodeFactsTest {

  static Node node(Map<String, String> labels) {
    return new NodeBuilder()
        .withNewMetadata()
        .withName("n1")
        .withLabels(labels)
        .endMetadata()
        .build();
  }

  @Test
  void theOperatorsOwnReadyLabelsAreNotFactsOfNodeSelection() {
    Node before = node(Map.of("zone", "a"));
    Node labelled = node(Map.of("zone", "a", "modelartifact.tensorcast.io/team-a.llama", "3"));
    Node moved = node(Map.of("zone", "b", "modelartifact.tensorcast.io/team-a.llama", "3"));

    assertThat(NodeFacts.of(labelled)).isEqualTo(NodeFacts.of(before));
    assertThat(NodeFacts.of(moved)).isNotEqualTo(NodeFacts.of(labelled));
  }
}
