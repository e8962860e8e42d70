package io.tensorcast.operator.consumers;

import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.operator.desired.PodPlan;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Keeps data-plane pods whose copy started consumers use: a planned deletion of a pod on a node
 * with a started consumer is taken out of the plan, and the node's desired pod (if any) keeps
 * waiting for it to go. Pure.
 *
 * @param plan the plan without the held deletions
 * @param held the data-plane pods kept for consumers, by node
 */
public record ConsumerHold(PodPlan plan, Map<String, Pod> held) {

  /** Applies the hold of {@code consumers} to {@code plan}. */
  public static ConsumerHold apply(PodPlan plan, List<Consumer> consumers) {
    Set<String> holding = Consumers.holdingNodes(consumers);
    if (holding.isEmpty() || plan.delete().isEmpty()) {
      return new ConsumerHold(plan, Map.of());
    }
    List<Pod> delete = new ArrayList<>();
    Map<String, Pod> held = new LinkedHashMap<>();
    for (Pod p : plan.delete()) {
      String node = PodPlan.node(p);
      if (holding.contains(node)) {
        held.put(node, p);
      } else {
        delete.add(p);
      }
    }
    Set<String> waiting = new LinkedHashSet<>(plan.waitingFor());
    // A desired pod on a held node is created only once the held pod is gone.
    List<Pod> create =
        plan.create().stream().filter(c -> !held.containsKey(PodPlan.node(c))).toList();
    for (Pod c : plan.create()) {
      if (held.containsKey(PodPlan.node(c))) {
        waiting.add(PodPlan.node(c));
      }
    }
    return new ConsumerHold(
        new PodPlan(plan.keep(), create, List.copyOf(delete), waiting), Map.copyOf(held));
  }

  /** Whether nothing is held. */
  public boolean none() {
    return held.isEmpty();
  }

  /** The generation label of a held pod, for messages ({@code ?} when absent). */
  public static String generationOf(Pod p) {
    Map<String, String> l = p.getMetadata().getLabels();
    String g = l == null ? null : l.get(DataPlanePod.LABEL_GENERATION);
    return g == null ? "?" : g;
  }
}
