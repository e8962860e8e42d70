package io.tensorcast.operator.reconciler;

import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.Pod;
import io.javaoperatorsdk.operator.api.config.informer.InformerEventSourceConfiguration;
import io.javaoperatorsdk.operator.api.reconciler.EventSourceContext;
import io.javaoperatorsdk.operator.processing.event.ResourceID;
import io.javaoperatorsdk.operator.processing.event.source.SecondaryToPrimaryMapper;
import io.javaoperatorsdk.operator.processing.event.source.informer.InformerEventSource;
import java.util.stream.Collectors;

/**
 * The pod and node informers both reconcilers watch, set up in one place.
 *
 * <ul>
 *   <li>{@link #nodes}: every node (cluster scoped); a node's add or delete, or an update that
 *       changes its {@link NodeFacts} (schedulability, labels, taints, allocatable, readiness),
 *       maps to every primary in the cache — node selection of each may change. Updates of anything
 *       else (heartbeats, images) and the operator's own ready labels are ignored.
 *   <li>{@link #pods}: pods of the primaries' namespaces, optionally narrowed by a label selector,
 *       mapped to primaries by the caller's mapper.
 * </ul>
 */
final class EventSources {

  private EventSources() {}

  static <P extends HasMetadata> InformerEventSource<Node, P> nodes(
      String name, Class<P> primary, EventSourceContext<P> context) {
    return new InformerEventSource<>(
        InformerEventSourceConfiguration.from(Node.class, primary)
            .withName(name)
            .withWatchAllNamespaces()
            .withSecondaryToPrimaryMapper(
                (Node n) ->
                    context
                        .getPrimaryCache()
                        .list()
                        .map(ResourceID::fromResource)
                        .collect(Collectors.toSet()))
            .withOnUpdateFilter(
                (Node newer, Node older) -> !NodeFacts.of(newer).equals(NodeFacts.of(older)))
            .build(),
        context);
  }

  /**
   * @param labelSelector label selector of the pods to watch, or null for every pod
   * @param mapper the primaries a pod concerns
   */
  static <P extends HasMetadata> InformerEventSource<Pod, P> pods(
      String name,
      Class<P> primary,
      EventSourceContext<P> context,
      String labelSelector,
      SecondaryToPrimaryMapper<Pod> mapper) {
    var config =
        InformerEventSourceConfiguration.from(Pod.class, primary)
            .withName(name)
            .withSecondaryToPrimaryMapper(mapper);
    if (labelSelector != null) {
      config = config.withLabelSelector(labelSelector);
    }
    return new InformerEventSource<>(config.build(), context);
  }
}
