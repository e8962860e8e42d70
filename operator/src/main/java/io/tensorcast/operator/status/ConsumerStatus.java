package io.tensorcast.operator.status;

import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.Reason;
import io.tensorcast.api.v1alpha1.Conditions;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.operator.consumers.Consumer;
import io.tensorcast.operator.consumers.ConsumerHold;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Adds what consumers do to a status: {@code status.consumers} and the {@code InUse} condition,
 * whose message names the consumer pods (at most {@value #MAX_NAMED}, then a count), the copies
 * kept for them and, during deletion, what the deletion waits for. Pure; the condition's {@code
 * lastTransitionTime} moves only when its status does.
 */
public final class ConsumerStatus {

  /** Pods named in the message before "and N more". */
  static final int MAX_NAMED = 10;

  private ConsumerStatus() {}

  /**
   * @param status the status to complete (its conditions list is replaced by a copy)
   * @param previous the conditions of the stored status (for lastTransitionTime)
   * @param generation the generation the status describes
   * @param consumers the artifact's consumers
   * @param held data-plane pods kept for consumers, by node
   * @param deleting whether the artifact is being deleted
   */
  public static ModelArtifactStatus apply(
      ModelArtifactStatus status,
      List<Condition> previous,
      long generation,
      List<Consumer> consumers,
      Map<String, Pod> held,
      boolean deleting,
      Instant now) {
    status.setConsumers(consumers.size());
    ConditionSet c = new ConditionSet(previous, generation, now);
    String pods = names(consumers);
    if (deleting && !consumers.isEmpty()) {
      c.set(
          Conditions.IN_USE,
          Conditions.TRUE,
          Reason.DeletionWaitsForConsumers,
          "deletion waits for "
              + consumers.size()
              + " consumer pod(s) to go: "
              + pods
              + "; delete them or scale their workloads down");
    } else if (!held.isEmpty()) {
      List<String> kept = new ArrayList<>();
      held.forEach(
          (node, pod) ->
              kept.add(
                  "node "
                      + node
                      + " (pod "
                      + pod.getMetadata().getName()
                      + ", generation "
                      + ConsumerHold.generationOf(pod)
                      + ")"));
      c.set(
          Conditions.IN_USE,
          Conditions.TRUE,
          Reason.CopyKeptForConsumers,
          "copies kept for running consumers until they are gone: "
              + String.join(", ", kept)
              + "; consumer pods: "
              + pods);
    } else if (!consumers.isEmpty()) {
      c.set(
          Conditions.IN_USE,
          Conditions.TRUE,
          Reason.ConsumerPods,
          consumers.size() + " consumer pod(s): " + pods);
    } else {
      c.set(
          Conditions.IN_USE,
          Conditions.FALSE,
          Reason.NoConsumers,
          "no pod uses this artifact through a csi.tensorcast.io volume");
    }
    Condition inUse = c.build().get(0);
    List<Condition> conditions =
        new ArrayList<>(status.getConditions() == null ? List.of() : status.getConditions());
    conditions.removeIf(x -> Conditions.IN_USE.equals(x.getType()));
    conditions.add(inUse);
    status.setConditions(conditions);
    return status;
  }

  private static String names(List<Consumer> consumers) {
    List<String> out = new ArrayList<>();
    for (int i = 0; i < consumers.size() && i < MAX_NAMED; i++) {
      out.add(consumers.get(i).describe());
    }
    if (consumers.size() > MAX_NAMED) {
      out.add("and " + (consumers.size() - MAX_NAMED) + " more");
    }
    return String.join(", ", out);
  }
}
