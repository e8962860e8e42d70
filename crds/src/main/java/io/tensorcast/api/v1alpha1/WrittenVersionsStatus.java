package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The versions of a written artifact, as its data-plane pods report them ({@code status.versions}).
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class WrittenVersionsStatus {

  @JsonPropertyDescription("Newest version sealed by every writer.")
  private String latest;

  @JsonPropertyDescription(
      "Newest version every reader node serves: what consumers read everywhere now.")
  private String serving;

  @JsonPropertyDescription("Writer nodes (nodes where a writer pod runs).")
  private List<String> writerNodes = new ArrayList<>();

  @JsonPropertyDescription("Versions saved to spec.save, newest last (at most 16).")
  private List<SavedVersion> saved = new ArrayList<>();

  /** One saved version. */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  public static class SavedVersion {
    @JsonPropertyDescription("The version's name.")
    private String version;

    @JsonPropertyDescription("Where it was saved; a ModelArtifact with this source loads it.")
    private String uri;

    public SavedVersion() {}

    public SavedVersion(String version, String uri) {
      this.version = version;
      this.uri = uri;
    }

    public String getVersion() {
      return version;
    }

    public void setVersion(String version) {
      this.version = version;
    }

    public String getUri() {
      return uri;
    }

    public void setUri(String uri) {
      this.uri = uri;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof SavedVersion that
          && Objects.equals(version, that.version)
          && Objects.equals(uri, that.uri);
    }

    @Override
    public int hashCode() {
      return Objects.hash(version, uri);
    }
  }

  public String getLatest() {
    return latest;
  }

  public void setLatest(String latest) {
    this.latest = latest;
  }

  public String getServing() {
    return serving;
  }

  public void setServing(String serving) {
    this.serving = serving;
  }

  public List<String> getWriterNodes() {
    return writerNodes;
  }

  public void setWriterNodes(List<String> writerNodes) {
    this.writerNodes = writerNodes;
  }

  public List<SavedVersion> getSaved() {
    return saved;
  }

  public void setSaved(List<SavedVersion> saved) {
    this.saved = saved;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof WrittenVersionsStatus that
        && Objects.equals(latest, that.latest)
        && Objects.equals(serving, that.serving)
        && Objects.equals(writerNodes, that.writerNodes)
        && Objects.equals(saved, that.saved);
  }

  @Override
  public int hashCode() {
    return Objects.hash(latest, serving, writerNodes, saved);
  }
}
