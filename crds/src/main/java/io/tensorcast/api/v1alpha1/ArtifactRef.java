package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Pattern;
import io.fabric8.generator.annotation.Required;
import java.util.Objects;

/** A ModelArtifact of the same namespace ({@code spec.artifactRef} of a TensorShardSet). */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class ArtifactRef {

  @Required
  @Pattern(CredentialsSecretRef.NAME_PATTERN)
  @JsonPropertyDescription("Name of the ModelArtifact, in the TensorShardSet's namespace.")
  private String name;

  public ArtifactRef() {}

  public ArtifactRef(String name) {
    this.name = name;
  }

  public String getName() {
    return name;
  }

  public void setName(String name) {
    this.name = name;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ArtifactRef that && Objects.equals(name, that.name);
  }

  @Override
  public int hashCode() {
    return Objects.hashCode(name);
  }
}
