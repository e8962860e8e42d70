package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.crd.generator.annotation.SchemaFrom;
import io.fabric8.generator.annotation.Default;
import io.fabric8.generator.annotation.Max;
import io.fabric8.generator.annotation.Min;
import io.fabric8.generator.annotation.Size;
import io.fabric8.kubernetes.api.model.Toleration;
import io.fabric8.kubernetes.model.annotation.SpecReplicas;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Which nodes hold a copy of the artifact ({@code spec.placement}). Field initialisers equal the
 * CRD defaults, so an object built in Java reads like one defaulted by the API server.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class PlacementSpec {

  /** Most entries of {@code tolerations}. */
  public static final int MAX_TOLERATIONS = 64;

  @JsonInclude(JsonInclude.Include.NON_EMPTY)
  @Size(max = 64)
  @JsonPropertyDescription(
      "Node labels a node must carry to hold a copy (same meaning as a pod's nodeSelector)."
          + " At most 64.")
  private Map<String, String> nodeSelector = new LinkedHashMap<>();

  @JsonInclude(JsonInclude.Include.NON_EMPTY)
  @SchemaFrom(type = TolerationSchema[].class)
  @Size(max = MAX_TOLERATIONS)
  @JsonPropertyDescription(
      "Taints the data-plane pods tolerate, copied to each pod (same shape as a pod's"
          + " tolerations). At most 64.")
  private List<Toleration> tolerations = new ArrayList<>();

  @Min(1)
  @Max(1000)
  @Default("1")
  @SpecReplicas
  @JsonPropertyDescription(
      "Number of nodes that each hold a full copy, 1-1000; default 1. The scale subresource's"
          + " replicas (kubectl scale ma/NAME --replicas=N): changing it adds or removes copies"
          + " on the nodes concerned only, every other copy keeps serving.")
  private Integer replicas = 1;

  @Default("Required")
  @JsonPropertyDescription(
      "RDMA need of the chosen nodes: Required (only nodes with the tensorcast.io/rdma resource"
          + " or label), Preferred (those first) or Disabled. Default Required.")
  private RdmaPolicy rdma = RdmaPolicy.Required;

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

  public Integer getReplicas() {
    return replicas;
  }

  public void setReplicas(Integer replicas) {
    this.replicas = replicas;
  }

  public RdmaPolicy getRdma() {
    return rdma;
  }

  public void setRdma(RdmaPolicy rdma) {
    this.rdma = rdma;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof PlacementSpec that
        && Objects.equals(nodeSelector, that.nodeSelector)
        && Objects.equals(tolerations, that.tolerations)
        && Objects.equals(replicas, that.replicas)
        && rdma == that.rdma;
  }

  @Override
  public int hashCode() {
    return Objects.hash(nodeSelector, tolerations, replicas, rdma);
  }
}
