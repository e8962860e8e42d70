package io.tensorcast.rdma.labels;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.dsl.base.PatchContext;
import io.fabric8.kubernetes.client.dsl.base.PatchType;
import io.tensorcast.rdma.discovery.RdmaInventory;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps the node's {@linkplain NodeLabels RDMA labels} in line with each sysfs scan. Writes a JSON
 * merge patch of {@code metadata.labels} holding only the keys of {@link NodeLabels#KEYS} (a value,
 * or {@code null} to remove), so no other label or field of the Node is touched. It writes only
 * when the wanted labels differ from what the node has: in steady state it sends nothing. The first
 * scan reads the Node to compare; later scans compare with what was last written.
 *
 * <p>Needs {@code get} and {@code patch} on {@code nodes} (the chart's ClusterRole). Failures (API
 * server unreachable, node missing, forbidden) are logged and retried with the next scan.
 */
public final class NodeLabeler implements Consumer<RdmaInventory> {

  private static final Logger LOG = LoggerFactory.getLogger(NodeLabeler.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  private final KubernetesClient client;
  private final String nodeName;
  private Map<String, String> applied;

  /**
   * @param nodeName the Node to label (from the downward API's {@code spec.nodeName})
   */
  public NodeLabeler(KubernetesClient client, String nodeName) {
    this.client = client;
    this.nodeName = nodeName;
  }

  @Override
  public synchronized void accept(RdmaInventory inventory) {
    Map<String, String> desired = NodeLabels.desired(inventory);
    try {
      if (applied == null) {
        Node node = client.nodes().withName(nodeName).get();
        if (node == null) {
          LOG.warn("node {} not found; cannot set RDMA labels (is NODE_NAME right?)", nodeName);
          return;
        }
        applied = ours(node.getMetadata().getLabels());
      }
      if (desired.equals(applied)) {
        return;
      }
      client
          .nodes()
          .withName(nodeName)
          .patch(PatchContext.of(PatchType.JSON_MERGE), mergePatch(desired));
      LOG.info("node {} RDMA labels {} -> {}", nodeName, applied, desired);
      applied = desired;
    } catch (KubernetesClientException e) {
      applied = null; // re-read the node next time
      LOG.warn(
          "cannot update RDMA labels of node {} (HTTP {}): {}; retrying with the next scan",
          nodeName,
          e.getCode(),
          e.getMessage());
    }
  }

  /** The merge patch body setting {@code desired} and removing our other keys. */
  static String mergePatch(Map<String, String> desired) {
    Map<String, String> labels = new LinkedHashMap<>();
    for (String key : NodeLabels.KEYS) {
      labels.put(key, desired.get(key));
    }
    try {
      return JSON.writeValueAsString(Map.of("metadata", Map.of("labels", labels)));
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  private static Map<String, String> ours(Map<String, String> labels) {
    Map<String, String> ours = new HashMap<>();
    if (labels != null) {
      for (String key : NodeLabels.KEYS) {
        if (labels.containsKey(key)) {
          ours.put(key, labels.get(key));
        }
      }
    }
    return ours;
  }
}
