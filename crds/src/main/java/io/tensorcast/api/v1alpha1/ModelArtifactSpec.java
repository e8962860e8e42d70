package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Default;
import io.fabric8.generator.annotation.Required;
import java.util.Objects;

/**
 * The desired state of a {@link ModelArtifact}: what to load, onto which nodes, held how. Written
 * by users or GitOps only; the operator never writes it. Field initialisers equal the CRD defaults
 * (the nested objects default to {@code {}} so that their own defaults apply).
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class ModelArtifactSpec {

  @Required
  @JsonPropertyDescription("Where the artifact's bytes come from.")
  private SourceSpec source;

  @Default("ModelWeights")
  @JsonPropertyDescription(
      "What the artifact holds: ModelWeights, KVCache or RLCheckpoint. With source.writers it"
          + " decides how versions are handled: an RLCheckpoint's readers follow the newest"
          + " version (step N replaces N-1 only once complete); a KVCache's versions are"
          + " snapshots saved under their key (spec.save, required) and loaded back by key with a"
          + " ModelArtifact whose uri is the saved location; ModelWeights are written once and"
          + " held by the readers.")
  private ArtifactKind kind = ArtifactKind.ModelWeights;

  @Default("{}")
  @JsonPropertyDescription("Which nodes hold a copy, and how many.")
  private PlacementSpec placement = new PlacementSpec();

  @Default("{}")
  @JsonPropertyDescription("How the copy is held in host memory.")
  private MemorySpec memory = new MemorySpec();

  @Default("{}")
  @JsonPropertyDescription("How bytes travel from the source to the nodes.")
  private DistributionSpec distribution = new DistributionSpec();

  @JsonPropertyDescription(
      "Where the sealed versions of a written artifact (source.writers) are saved; absent: not"
          + " saved. Required for a written KVCache.")
  private SaveSpec save;

  @JsonPropertyDescription(
      "How the versions of a written artifact (source.writers) succeed each other on the nodes.")
  private VersionsSpec versions;

  public SourceSpec getSource() {
    return source;
  }

  public void setSource(SourceSpec source) {
    this.source = source;
  }

  public ArtifactKind getKind() {
    return kind;
  }

  public void setKind(ArtifactKind kind) {
    this.kind = kind;
  }

  public PlacementSpec getPlacement() {
    return placement;
  }

  public void setPlacement(PlacementSpec placement) {
    this.placement = placement;
  }

  public MemorySpec getMemory() {
    return memory;
  }

  public void setMemory(MemorySpec memory) {
    this.memory = memory;
  }

  public SaveSpec getSave() {
    return save;
  }

  public void setSave(SaveSpec save) {
    this.save = save;
  }

  public VersionsSpec getVersions() {
    return versions;
  }

  public void setVersions(VersionsSpec versions) {
    this.versions = versions;
  }

  public DistributionSpec getDistribution() {
    return distribution;
  }

  public void setDistribution(DistributionSpec distribution) {
    this.distribution = distribution;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ModelArtifactSpec that
        && Objects.equals(source, that.source)
        && kind == that.kind
        && Objects.equals(placement, that.placement)
        && Objects.equals(memory, that.memory)
        && Objects.equals(distribution, that.distribution)
        && Objects.equals(save, that.save)
        && Objects.equals(versions, that.versions);
  }

  @Override
  public int hashCode() {
    return Objects.hash(source, kind, placement, memory, distribution, save, versions);
  }
}
