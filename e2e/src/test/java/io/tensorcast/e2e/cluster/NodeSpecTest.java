package io.tensorcast.e2e.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class NodeSpecTest {

  @Test
  void builderKeepsDefaultsAndAddsExtendedResources() {
    NodeSpec spec =
        NodeSpec.builder("gpu-1", "127.0.1.1")
            .label("zone", "a")
            .allocatable("tensorcast.io/rdma", "1")
            .taint("dedicated", "ml", "NoSchedule")
            .build();
    assertThat(spec.allocatable())
        .containsEntry("tensorcast.io/rdma", "1")
        .containsEntry("memory", "32Gi")
        .containsEntry("pods", "110");
    assertThat(spec.taints())
        .singleElement()
        .satisfies(t -> assertThat(t.getKey()).isEqualTo("dedicated"));
  }

  @Test
  void addressMustBeIpv4Loopback() {
    assertThatThrownBy(() -> NodeSpec.builder("n", "10.0.0.1").build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("address \"10.0.0.1\"")
        .hasMessageContaining("127.0.0.0/8");
    assertThatThrownBy(() -> NodeSpec.builder("n", "localhost").build())
        .hasMessageContaining("literal IPv4 loopback");
  }

  @Test
  void nameAndQuantitiesAreValidated() {
    assertThatThrownBy(() -> NodeSpec.builder("Node_1", "127.0.1.1").build())
        .hasMessageContaining("NodeSpec.name \"Node_1\" must be a DNS-1123 subdomain");
    assertThatThrownBy(
            () -> NodeSpec.builder("n", "127.0.1.1").allocatable("memory", "lots").build())
        .hasMessageContaining("allocatable \"memory\" = \"lots\" is not a Kubernetes quantity");
  }
}
