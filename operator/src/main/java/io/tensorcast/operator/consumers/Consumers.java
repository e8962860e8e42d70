package io.tensorcast.operator.consumers;

import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.ConsumerVolumes;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.operator.desired.PodPlan;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * Who uses a ModelArtifact. Pure.
 *
 * <p>The rule (the same as Kubernetes' "storage object in use protection" for
 * PersistentVolumeClaims): a <em>consumer</em> of artifact {@code ns/name} is a pod of namespace
 * {@code ns}, whatever its state short of {@code Succeeded} or {@code Failed}, that has a {@value
 * ConsumerVolumes#DRIVER} volume naming {@code name} ({@link ConsumerVolumes#modelArtifactsNamed}).
 * While consumers exist the artifact's deletion waits (its finalizer stays). A consumer
 * <em>holds</em> its node's copy once one of its containers has started ({@link
 * Consumer#started()}): that copy's data-plane pod is not deleted or replaced — not for a new
 * generation, a changed pod spec or a failure — until no started consumer is left on the node
 * ({@link ConsumerHold}).
 */
public final class Consumers {

  private Consumers() {}

  /**
   * Whether {@code pod} is a consumer of some artifact of its namespace (it names one and has not
   * ended).
   */
  public static boolean isConsumer(Pod pod) {
    return !PodPlan.ended(pod) && !ConsumerVolumes.modelArtifactsNamed(pod).isEmpty();
  }

  /** The consumers of {@code artifact} among {@code pods}, sorted by name. */
  public static List<Consumer> of(ModelArtifact artifact, Collection<Pod> pods) {
    String ns = artifact.getMetadata().getNamespace();
    String name = artifact.getMetadata().getName();
    return pods.stream()
        .filter(p -> ns.equals(p.getMetadata().getNamespace()))
        .filter(p -> !PodPlan.ended(p))
        .filter(p -> ConsumerVolumes.modelArtifactsNamed(p).contains(name))
        .map(Consumer::of)
        .sorted(Comparator.comparing(Consumer::name))
        .toList();
  }

  /** Started consumers by node. */
  public static Map<String, List<Consumer>> startedByNode(List<Consumer> consumers) {
    return consumers.stream()
        .filter(c -> c.started() && !c.node().isEmpty())
        .collect(Collectors.groupingBy(Consumer::node));
  }

  /** The nodes with a started consumer. */
  public static Set<String> holdingNodes(List<Consumer> consumers) {
    return startedByNode(consumers).keySet();
  }
}
