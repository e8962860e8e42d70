package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Max;
import io.fabric8.generator.annotation.Min;
import java.util.Objects;

/**
 * How a written artifact's versions succeed each other on the nodes ({@code spec.versions}). Field
 * initialisers equal the CRD defaults.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class VersionsSpec {

  /** Versions a node keeps when {@code retain} is absent. */
  public static final int DEFAULT_RETAIN = 2;

  @Min(1)
  @Max(16)
  @JsonPropertyDescription(
      "Versions a node keeps. A reader replaces version N-1 with N only once N is complete on it,"
          + " so with 2 (the default) consumers always have one to read; older ones are freed."
          + " An RLCheckpoint needs at least 2. Absent: 2.")
  private Integer retain;

  public Integer getRetain() {
    return retain;
  }

  public void setRetain(Integer retain) {
    this.retain = retain;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof VersionsSpec that && Objects.equals(retain, that.retain);
  }

  @Override
  public int hashCode() {
    return Objects.hash(retain);
  }
}
