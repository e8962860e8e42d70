package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.api.model.Node;
import io.tensorcast.api.ConsumerVolumes;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * The per-artifact node label that tells consumers where a copy is Ready: key {@link
 * ConsumerVolumes#nodeLabelKey} ({@code modelartifact.tensorcast.io/<namespace>.<name>}, cut and
 * hashed past 63 characters), value the generation whose copy is Ready there. Pure: computes the
 * changes, never calls the API server.
 */
public final class ReadyNodeLabels {

  private ReadyNodeLabels() {}

  /**
   * The label changes that make exactly the nodes in {@code ready} carry {@code key=value}.
   *
   * @param nodes the nodes as the cache holds them
   * @return node name → the new value, or an empty Optional to remove the label; nodes already
   *     right are absent
   */
  public static Map<String, Optional<String>> changes(
      Collection<Node> nodes, String key, String value, Set<String> ready) {
    Map<String, Optional<String>> out = new LinkedHashMap<>();
    for (Node n : nodes) {
      String name = n.getMetadata().getName();
      Map<String, String> labels = n.getMetadata().getLabels();
      String has = labels == null ? null : labels.get(key);
      String want = ready.contains(name) ? value : null;
      if (!Objects.equals(has, want)) {
        out.put(name, Optional.ofNullable(want));
      }
    }
    return out;
  }

  /** Whether a label key is one of these per-artifact keys. */
  public static boolean isReadyNodeLabel(String key) {
    return key.startsWith(ConsumerVolumes.NODE_LABEL_PREFIX);
  }
}
