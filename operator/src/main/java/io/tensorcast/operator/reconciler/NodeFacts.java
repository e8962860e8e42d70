package io.tensorcast.operator.reconciler;

import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.NodeCondition;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.Taint;
import io.tensorcast.operator.desired.ReadyNodeLabels;
import java.util.List;
import java.util.Map;

/**
 * The parts of a Node that node selection reads. Node updates that leave these equal (heartbeats,
 * image lists, addresses, the operator's own per-artifact ready labels) do not trigger reconciles.
 */
record NodeFacts(
    Boolean unschedulable,
    Map<String, String> labels,
    List<Taint> taints,
    Map<String, Quantity> allocatable,
    String ready) {

  /** The labels without the operator's own {@link ReadyNodeLabels} keys. */
  private static Map<String, String> selectionLabels(Map<String, String> labels) {
    if (labels == null || labels.keySet().stream().noneMatch(ReadyNodeLabels::isReadyNodeLabel)) {
      return labels;
    }
    Map<String, String> out = new java.util.TreeMap<>(labels);
    out.keySet().removeIf(ReadyNodeLabels::isReadyNodeLabel);
    return out;
  }

  static NodeFacts of(Node n) {
    String ready = null;
    if (n.getStatus() != null && n.getStatus().getConditions() != null) {
      for (NodeCondition c : n.getStatus().getConditions()) {
        if ("Ready".equals(c.getType())) {
          ready = c.getStatus();
        }
      }
    }
    return new NodeFacts(
        n.getSpec() == null ? null : n.getSpec().getUnschedulable(),
        selectionLabels(n.getMetadata().getLabels()),
        n.getSpec() == null ? null : n.getSpec().getTaints(),
        n.getStatus() == null ? null : n.getStatus().getAllocatable(),
        ready);
  }
}
