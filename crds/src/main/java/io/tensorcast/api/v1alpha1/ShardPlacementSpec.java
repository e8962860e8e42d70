package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Default;
import io.fabric8.generator.annotation.Max;
import io.fabric8.generator.annotation.Min;
import io.fabric8.kubernetes.api.model.Toleration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Where the ranks of a TensorShardSet go ({@code spec.placement}): either the operator picks nodes
 * for blocks of {@code ranksPerNode} consecutive ranks (node selection as for a ModelArtifact), or,
 * with {@code consumers}, the consumer pods decide: the block of ranks of pod index {@code i} (its
 * {@code rankLabel}) goes to the node that pod is scheduled on.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class ShardPlacementSpec {

  @Min(1)
  @Max(ParallelismSpec.MAX_SIZE)
  @Default("8")
  @JsonPropertyDescription(
      "Consecutive ranks held by one node (its GPUs): node block i holds ranks [i × ranksPerNode,"
          + " (i + 1) × ranksPerNode). Default 8.")
  private Integer ranksPerNode = 8;

  @JsonInclude(JsonInclude.Include.NON_EMPTY)
  @JsonPropertyDescription(
      "Node labels a node must carry to hold ranks (same meaning as a pod's nodeSelector).")
  private Map<String, String> nodeSelector = new LinkedHashMap<>();

  @JsonInclude(JsonInclude.Include.NON_EMPTY)
  @JsonPropertyDescription("Taints the data-plane pods tolerate, copied to each pod.")
  private List<Toleration> tolerations = new ArrayList<>();

  @Default("Required")
  @JsonPropertyDescription(
      "RDMA need of the chosen nodes: Required (only nodes with the tensorcast.io/rdma resource"
          + " or label), Preferred or Disabled. Default Required.")
  private RdmaPolicy rdma = RdmaPolicy.Required;

  @JsonPropertyDescription(
      "Place the ranks where consumer pods run instead of choosing nodes: the pods of this"
          + " namespace matching selector, each holding the block of ranks of its rankLabel.")
  private ConsumerPlacement consumers;

  public Integer getRanksPerNode() {
    return ranksPerNode;
  }

  public void setRanksPerNode(Integer ranksPerNode) {
    this.ranksPerNode = ranksPerNode;
  }

  public Map<String, String> getNodeSelector() {
    return nodeSelector;
  }

  public void setNodeSelector(Map<String, String> nodeSelector) {
    this.nodeSelector = nodeSelector;
  }

  public List<Toleration> getTolerations() {
    return tolerations;
  }

  public void setTolerations(List<Toleration> tolerations) {
    this.tolerations = tolerations;
  }

  public RdmaPolicy getRdma() {
    return rdma;
  }

  public void setRdma(RdmaPolicy rdma) {
    this.rdma = rdma;
  }

  public ConsumerPlacement getConsumers() {
    return consumers;
  }

  public void setConsumers(ConsumerPlacement consumers) {
    this.consumers = consumers;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ShardPlacementSpec that
        && Objects.equals(ranksPerNode, that.ranksPerNode)
        && Objects.equals(nodeSelector, that.nodeSelector)
        && Objects.equals(tolerations, that.tolerations)
        && rdma == that.rdma
        && Objects.equals(consumers, that.consumers);
  }

  @Override
  public int hashCode() {
    return Objects.hash(ranksPerNode, nodeSelector, tolerations, rdma, consumers);
  }

  /**
   * The consumer pods whose placement decides where the ranks go ({@code
   * spec.placement.consumers}).
   */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  public static class ConsumerPlacement {

    @JsonPropertyDescription(
        "Labels the consumer pods carry (all must match), e.g. the LeaderWorkerSet's"
            + " leaderworkerset.sigs.k8s.io/name.")
    private Map<String, String> matchLabels = new LinkedHashMap<>();

    @JsonPropertyDescription(
        "Label whose value is the pod's index i (an integer >= 0); the pod's node holds ranks"
            + " [i × ranksPerNode, (i + 1) × ranksPerNode). E.g."
            + " leaderworkerset.sigs.k8s.io/worker-index or apps.kubernetes.io/pod-index.")
    private String rankLabel;

    public Map<String, String> getMatchLabels() {
      return matchLabels;
    }

    public void setMatchLabels(Map<String, String> matchLabels) {
      this.matchLabels = matchLabels;
    }

    public String getRankLabel() {
      return rankLabel;
    }

    public void setRankLabel(String rankLabel) {
      this.rankLabel = rankLabel;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof ConsumerPlacement that
          && Objects.equals(matchLabels, that.matchLabels)
          && Objects.equals(rankLabel, that.rankLabel);
    }

    @Override
    public int hashCode() {
      return Objects.hash(matchLabels, rankLabel);
    }
  }
}
