package io.tensorcast.e2e.cluster;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.fabric8.kubernetes.api.model.Quantity;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** Pods and nodes for the cluster ITs: real python3 processes, pinned to a test's own nodes. */
final class TestPods {

  /** Image mapped to the host's python3 ({@code argv = python3 ++ command ++ args}). */
  static final String PYTHON_IMAGE = "tensorcast-test/python:3";

  /** Node label that pins a test's pods to that test's nodes. */
  static final String GROUP_LABEL = "tensorcast.io/test-group";

  private TestPods() {}

  static void mapImages(SharedCluster cluster) {
    // Debian's interpreter, not a version-manager shim that may come first on PATH.
    String python =
        java.nio.file.Files.isExecutable(java.nio.file.Path.of("/usr/bin/python3"))
            ? "/usr/bin/python3"
            : "python3";
    cluster.runtime().map("tensorcast-test/python", python);
  }

  /** A node of the test's group with the default allocatable plus {@code extra}. */
  static SimulatedNode addNode(
      SharedCluster cluster, String ns, String suffix, Map<String, String> extra) {
    NodeSpec.Builder b =
        NodeSpec.builder(ns + "-" + suffix, cluster.nextNodeAddress()).label(GROUP_LABEL, ns);
    extra.forEach(b::allocatable);
    return cluster.kubelet().addNode(b.build());
  }

  /**
   * A pod running {@code python3 -m http.server --bind $(POD_IP) <port>} with an HTTP readiness
   * probe every second, pinned to the test's nodes.
   */
  static PodBuilder httpServer(String ns, String name, int port) {
    return new PodBuilder()
        .withNewMetadata()
        .withNamespace(ns)
        .withName(name)
        .endMetadata()
        .withNewSpec()
        .withNodeSelector(Map.of(GROUP_LABEL, ns))
        .withTerminationGracePeriodSeconds(5L)
        .addNewContainer()
        .withName("http")
        .withImage(PYTHON_IMAGE)
        .withArgs("-m", "http.server", "--bind", "$(POD_IP)", String.valueOf(port))
        .addNewEnv()
        .withName("POD_IP")
        .withNewValueFrom()
        .withNewFieldRef()
        .withFieldPath("status.podIP")
        .endFieldRef()
        .endValueFrom()
        .endEnv()
        .addNewPort()
        .withName("http")
        .withContainerPort(port)
        .endPort()
        .withNewReadinessProbe()
        .withNewHttpGet()
        .withPath("/")
        .withNewPort("http")
        .endHttpGet()
        .withPeriodSeconds(1)
        .endReadinessProbe()
        .endContainer()
        .endSpec();
  }

  static PodBuilder requesting(PodBuilder pod, String resource, String quantity) {
    return pod.editSpec()
        .editFirstContainer()
        .withNewResources()
        .withRequests(Map.of(resource, new Quantity(quantity)))
        .withLimits(Map.of(resource, new Quantity(quantity)))
        .endResources()
        .endContainer()
        .endSpec();
  }

  static Optional<PodCondition> condition(Pod pod, String type) {
    if (pod == null || pod.getStatus() == null || pod.getStatus().getConditions() == null) {
      return Optional.empty();
    }
    return pod.getStatus().getConditions().stream()
        .filter(c -> type.equals(c.getType()))
        .findFirst();
  }

  static boolean isReady(Pod pod) {
    return condition(pod, "Ready").map(c -> "True".equals(c.getStatus())).orElse(false);
  }

  static int restartCount(Pod pod) {
    if (pod == null || pod.getStatus() == null || pod.getStatus().getContainerStatuses() == null) {
      return -1;
    }
    List<io.fabric8.kubernetes.api.model.ContainerStatus> s =
        pod.getStatus().getContainerStatuses();
    return s.isEmpty() ? -1 : s.get(0).getRestartCount();
  }
}
