package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Default;
import io.fabric8.generator.annotation.Required;
import io.fabric8.generator.annotation.Size;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The desired state of a {@link TensorShardSet}: which artifact, in which parallel layout, cut by
 * which rules, onto which nodes. Exactly one of {@code artifactRef} and {@code source} (checked by
 * the operator: the CRD schema of Kubernetes 1.20 cannot say it). Written by users or GitOps only.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class TensorShardSetSpec {

  @JsonPropertyDescription(
      "A ModelArtifact of this namespace whose source, credentials and filters are used; the"
          + " TensorShardSet waits until it is Ready and may read byte ranges from its copies."
          + " Exactly one of artifactRef and source.")
  private ArtifactRef artifactRef;

  @JsonPropertyDescription(
      "Where the bytes come from, as a ModelArtifact's spec.source. Exactly one of artifactRef and"
          + " source.")
  private SourceSpec source;

  @Required
  @JsonPropertyDescription("Sizes of the parallel axes tp, pp, dp and ep.")
  private ParallelismSpec parallelism = new ParallelismSpec();

  @JsonInclude(JsonInclude.Include.NON_EMPTY)
  @Size(max = 256)
  @JsonPropertyDescription(
      "How each tensor is cut, first matching rule wins; every tensor must be covered and every"
          + " rule must match a tensor. Empty: the built-in rules for the model's config.json"
          + " architectures (Llama, Qwen2, Mistral; Mixtral, Qwen-MoE, DeepSeek experts), under"
          + " which tensors no rule names are replicated.")
  private List<ShardRule> rules = new ArrayList<>();

  @Default("{}")
  @JsonPropertyDescription("Which nodes hold which ranks.")
  private ShardPlacementSpec placement = new ShardPlacementSpec();

  @Default("{}")
  @JsonPropertyDescription(
      "How the rank files are held in host memory; limit applies to the bytes of one node's"
          + " ranks.")
  private MemorySpec memory = new MemorySpec();

  public ArtifactRef getArtifactRef() {
    return artifactRef;
  }

  public void setArtifactRef(ArtifactRef artifactRef) {
    this.artifactRef = artifactRef;
  }

  public SourceSpec getSource() {
    return source;
  }

  public void setSource(SourceSpec source) {
    this.source = source;
  }

  public ParallelismSpec getParallelism() {
    return parallelism;
  }

  public void setParallelism(ParallelismSpec parallelism) {
    this.parallelism = parallelism;
  }

  public List<ShardRule> getRules() {
    return rules;
  }

  public void setRules(List<ShardRule> rules) {
    this.rules = rules;
  }

  public ShardPlacementSpec getPlacement() {
    return placement;
  }

  public void setPlacement(ShardPlacementSpec placement) {
    this.placement = placement;
  }

  public MemorySpec getMemory() {
    return memory;
  }

  public void setMemory(MemorySpec memory) {
    this.memory = memory;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof TensorShardSetSpec that
        && Objects.equals(artifactRef, that.artifactRef)
        && Objects.equals(source, that.source)
        && Objects.equals(parallelism, that.parallelism)
        && Objects.equals(rules, that.rules)
        && Objects.equals(placement, that.placement)
        && Objects.equals(memory, that.memory);
  }

  @Override
  public int hashCode() {
    return Objects.hash(artifactRef, source, parallelism, rules, placement, memory);
  }
}
