package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Quantity;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * What to do to an artifact's pods to reach the desired ones. Pure: compares objects, never calls
 * the API server.
 *
 * <p>Rules:
 *
 * <ul>
 *   <li>An existing pod <em>matches</em> a desired one when it targets the same node ({@link
 *       DataPlanePod#ANNOTATION_NODE}), is of the same generation ({@link
 *       DataPlanePod#LABEL_GENERATION}) and spec digest ({@link
 *       DataPlanePod#ANNOTATION_SPEC_HASH}), asks for exactly the desired memory (a resolving pod
 *       of overhead only is replaced once the size is known, and no pod keeps more than size plus
 *       overhead), is not being deleted and has not ended (phase {@code Failed} or {@code
 *       Succeeded}). A matching pod is kept: it is never rewritten.
 *   <li>Every other pod is deleted: older generations, changed specs, pods too small for the
 *       resolved size, pods on nodes no longer chosen, duplicates.
 *   <li>At most one pod of an artifact per node at any time: a desired pod is created only once
 *       every other pod of the artifact on that node is gone (data-plane pods of one artifact share
 *       a store root there, which a store locks exclusively, and memory is counted once).
 * </ul>
 *
 * @param keep the matching pod of each desired node, by node name
 * @param create pods to create
 * @param delete pods to delete (none of them already being deleted)
 * @param waitingFor nodes whose desired pod waits for an older pod to go away
 */
public record PodPlan(
    Map<String, Pod> keep, List<Pod> create, List<Pod> delete, Set<String> waitingFor) {

  /**
   * Plans the changes.
   *
   * @param desired desired pods, at most one per node, built by {@link DataPlanePod#desired}
   * @param existing the artifact's pods as the cache holds them
   */
  public static PodPlan plan(List<Pod> desired, List<Pod> existing) {
    Map<String, Pod> keep = new LinkedHashMap<>();
    List<Pod> create = new ArrayList<>();
    Set<Pod> delete = new LinkedHashSet<>();
    Set<String> waiting = new LinkedHashSet<>();
    Set<String> desiredNodes = new LinkedHashSet<>();
    for (Pod d : desired) {
      String node = node(d);
      desiredNodes.add(node);
      List<Pod> onNode = existing.stream().filter(e -> node.equals(node(e))).toList();
      Pod kept = onNode.stream().filter(e -> matches(e, d)).findFirst().orElse(null);
      for (Pod e : onNode) {
        if (e != kept && !terminating(e)) {
          delete.add(e);
        }
      }
      if (kept != null) {
        keep.put(node, kept);
      } else if (onNode.isEmpty()) {
        create.add(d);
      } else {
        waiting.add(node);
      }
    }
    for (Pod e : existing) {
      if (!desiredNodes.contains(node(e)) && !terminating(e)) {
        delete.add(e);
      }
    }
    return new PodPlan(keep, List.copyOf(create), List.copyOf(delete), waiting);
  }

  /** A plan that deletes every pod that is not already being deleted. */
  public static PodPlan deleteAll(List<Pod> existing) {
    return new PodPlan(
        Map.of(), List.of(), existing.stream().filter(p -> !terminating(p)).toList(), Set.of());
  }

  /** Whether nothing is to be created or deleted and nothing is waited for. */
  public boolean settled() {
    return create.isEmpty() && delete.isEmpty() && waitingFor.isEmpty();
  }

  /** The node a data-plane pod targets: its annotation, else its binding. */
  public static String node(Pod pod) {
    Map<String, String> a = pod.getMetadata().getAnnotations();
    String node = a == null ? null : a.get(DataPlanePod.ANNOTATION_NODE);
    if (node == null && pod.getSpec() != null) {
      node = pod.getSpec().getNodeName();
    }
    return node == null ? "" : node;
  }

  /** Whether the pod has a deletion timestamp. */
  public static boolean terminating(Pod pod) {
    return pod.getMetadata().getDeletionTimestamp() != null;
  }

  /** Whether the pod's phase is Failed or Succeeded (its containers will not run again). */
  public static boolean ended(Pod pod) {
    String phase = pod.getStatus() == null ? null : pod.getStatus().getPhase();
    return "Failed".equals(phase) || "Succeeded".equals(phase);
  }

  /** Memory request of the data-plane container in bytes, 0 when absent. */
  public static long memoryRequest(Pod pod) {
    return pod.getSpec().getContainers().stream()
        .filter(c -> DataPlanePod.CONTAINER.equals(c.getName()))
        .findFirst()
        .map(c -> c.getResources() == null ? null : c.getResources().getRequests())
        .map(r -> r.get("memory"))
        .map(PodPlan::bytesOrZero)
        .orElse(0L);
  }

  private static long bytesOrZero(Quantity q) {
    try {
      return ByteSize.bytes(q);
    } catch (IllegalArgumentException e) {
      return 0;
    }
  }

  /** Whether {@code existing} can stand for {@code desired}. */
  static boolean matches(Pod existing, Pod desired) {
    return !terminating(existing)
        && !ended(existing)
        && Objects.equals(label(existing), label(desired))
        && Objects.equals(hash(existing), hash(desired))
        && memoryRequest(existing) == memoryRequest(desired);
  }

  private static String label(Pod p) {
    Map<String, String> l = p.getMetadata().getLabels();
    return l == null ? null : l.get(DataPlanePod.LABEL_GENERATION);
  }

  private static String hash(Pod p) {
    Map<String, String> a = p.getMetadata().getAnnotations();
    return a == null ? null : a.get(DataPlanePod.ANNOTATION_SPEC_HASH);
  }
}
