package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Required;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * An artifact whose bytes are written by processes on the nodes rather than loaded from a URI
 * ({@code spec.source.writers}): trainer ranks publishing RL checkpoints, prefill servers writing
 * KV-cache snapshots, a job writing the weights it trained. A data-plane pod runs on every node
 * where a writer pod runs and serves it the put API (a unix socket in a directory the writer pod
 * mounts through the CSI driver, and the artifact's write token); each version the writers seal is
 * immutable, and reaches the reader nodes ({@code spec.placement}) peer to peer.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class WritersSpec {

  @Required
  @JsonPropertyDescription(
      "Labels of the pods that write the artifact (e.g. the trainer's ranks), in the"
          + " ModelArtifact's namespace. A data-plane pod runs on every node where a Running pod"
          + " with these labels runs.")
  private Map<String, String> podSelector = new LinkedHashMap<>();

  public Map<String, String> getPodSelector() {
    return podSelector;
  }

  public void setPodSelector(Map<String, String> podSelector) {
    this.podSelector = podSelector;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof WritersSpec that && Objects.equals(podSelector, that.podSelector);
  }

  @Override
  public int hashCode() {
    return Objects.hash(podSelector);
  }
}
