package io.tensorcast.operator.consumers;

import io.fabric8.kubernetes.api.model.ContainerStatus;
import io.fabric8.kubernetes.api.model.Pod;
import java.util.List;

/**
 * One pod that uses a ModelArtifact through a {@code csi.tensorcast.io} volume.
 *
 * @param name the pod's name (in the artifact's namespace)
 * @param node the node it is bound to, or empty while unscheduled
 * @param started whether any of its containers has started (phase {@code Running}, or a container
 *     status that is or was running): the kubelet starts containers only after every volume is
 *     mounted, so such a pod holds the copy of its node
 */
public record Consumer(String name, String node, boolean started) {

  /** The consumer view of {@code pod}. */
  public static Consumer of(Pod pod) {
    String node = pod.getSpec() == null ? null : pod.getSpec().getNodeName();
    return new Consumer(pod.getMetadata().getName(), node == null ? "" : node, started(pod));
  }

  static boolean started(Pod pod) {
    if (pod.getStatus() == null) {
      return false;
    }
    if ("Running".equals(pod.getStatus().getPhase())) {
      return true;
    }
    List<ContainerStatus> statuses = pod.getStatus().getContainerStatuses();
    if (statuses == null) {
      return false;
    }
    for (ContainerStatus cs : statuses) {
      if (Boolean.TRUE.equals(cs.getStarted())
          || (cs.getRestartCount() != null && cs.getRestartCount() > 0)
          || (cs.getState() != null
              && (cs.getState().getRunning() != null || cs.getState().getTerminated() != null))) {
        return true;
      }
    }
    return false;
  }

  /** {@code name (node n)} or {@code name (not scheduled)}, for condition messages. */
  public String describe() {
    return name + (node.isEmpty() ? " (not scheduled)" : " (node " + node + ")");
  }
}
