package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import java.util.Objects;

/**
 * One node's copy of an artifact ({@code status.nodes[]}), as its data-plane pod reports it on its
 * control endpoint. Byte counts are bytes verified and present in the page-locked store, never
 * bytes merely requested or allocated; {@code bytesFromSource + bytesFromPeers} may trail {@code
 * bytesLoaded} only by bytes already present from before a pod restart.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class ArtifactNodeStatus {

  @JsonPropertyDescription("Name of the node holding this copy.")
  private String node;

  @JsonPropertyDescription("Name of the data-plane pod on that node, in the artifact's namespace.")
  private String pod;

  @JsonPropertyDescription("State of this node's copy: Pending, Resolving, Loading, Ready, Failed.")
  private ArtifactPhase phase;

  @JsonPropertyDescription("Bytes present and verified in this node's store.")
  private Long bytesLoaded;

  @JsonPropertyDescription("Of those, bytes this pod read from the source.")
  private Long bytesFromSource;

  @JsonPropertyDescription("Of those, bytes this pod received from peers.")
  private Long bytesFromPeers;

  @JsonPropertyDescription(
      "Every byte this pod received from the source since it started, whatever became of it"
          + " (header reads, bytes discarded by a failed load, bytes read again after a retry,"
          + " reads for peers); bytesFromSource counts only the bytes in the store.")
  private Long bytesFromSourceOnWire;

  @JsonPropertyDescription("When this copy became Ready (RFC 3339, UTC); absent while not Ready.")
  private String readyTime;

  @JsonPropertyDescription("Last error or notable event on this node, for people; may be empty.")
  private String message;

  public String getNode() {
    return node;
  }

  public void setNode(String node) {
    this.node = node;
  }

  public String getPod() {
    return pod;
  }

  public void setPod(String pod) {
    this.pod = pod;
  }

  public ArtifactPhase getPhase() {
    return phase;
  }

  public void setPhase(ArtifactPhase phase) {
    this.phase = phase;
  }

  public Long getBytesLoaded() {
    return bytesLoaded;
  }

  public void setBytesLoaded(Long bytesLoaded) {
    this.bytesLoaded = bytesLoaded;
  }

  public Long getBytesFromSource() {
    return bytesFromSource;
  }

  public void setBytesFromSource(Long bytesFromSource) {
    this.bytesFromSource = bytesFromSource;
  }

  public Long getBytesFromSourceOnWire() {
    return bytesFromSourceOnWire;
  }

  public void setBytesFromSourceOnWire(Long bytesFromSourceOnWire) {
    this.bytesFromSourceOnWire = bytesFromSourceOnWire;
  }

  public Long getBytesFromPeers() {
    return bytesFromPeers;
  }

  public void setBytesFromPeers(Long bytesFromPeers) {
    this.bytesFromPeers = bytesFromPeers;
  }

  public String getReadyTime() {
    return readyTime;
  }

  public void setReadyTime(String readyTime) {
    this.readyTime = readyTime;
  }

  public String getMessage() {
    return message;
  }

  public void setMessage(String message) {
    this.message = message;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ArtifactNodeStatus that
        && Objects.equals(node, that.node)
        && Objects.equals(pod, that.pod)
        && phase == that.phase
        && Objects.equals(bytesLoaded, that.bytesLoaded)
        && Objects.equals(bytesFromSource, that.bytesFromSource)
        && Objects.equals(bytesFromSourceOnWire, that.bytesFromSourceOnWire)
        && Objects.equals(bytesFromPeers, that.bytesFromPeers)
        && Objects.equals(readyTime, that.readyTime)
        && Objects.equals(message, that.message);
  }

  @Override
  public int hashCode() {
    return Objects.hash(
        node,
        pod,
        phase,
        bytesLoaded,
        bytesFromSource,
        bytesFromSourceOnWire,
        bytesFromPeers,
        readyTime,
        message);
  }
}
