package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import java.util.Objects;

/**
 * One rank of a TensorShardSet ({@code status.ranks[]}), as the data-plane pod of its node reports
 * it. Byte counts are bytes in the page-locked store or read for it, never bytes merely planned.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class ShardRankStatus {

  @JsonPropertyDescription(
      "Global rank: ((dp \u00d7 pp_size + pp) \u00d7 ep_size + ep) \u00d7 tp_size + tp.")
  private Integer rank;

  @JsonPropertyDescription(
      "The rank's position on every axis in canonical order, e.g."
          + " dp:0/1,pp:0/1,ep:1/2,tp:3/4.")
  private String coordinates;

  @JsonPropertyDescription("Node holding this rank's file.")
  private String node;

  @JsonPropertyDescription("Data-plane pod writing it.")
  private String pod;

  @JsonPropertyDescription("State of the rank file: Pending, Resolving, Loading, Ready, Failed.")
  private ArtifactPhase phase;

  @JsonPropertyDescription("Size of the rank file (header and tensors), bytes.")
  private Long fileBytes;

  @JsonPropertyDescription("Tensor bytes the rank file holds.")
  private Long bytesNeeded;

  @JsonPropertyDescription(
      "Tensor bytes read for this rank from the source or from ModelArtifact copies (a"
          + " read that fills several ranks of the node counts for each in proportion to the"
          + " bytes it gives it).")
  private Long bytesFetched;

  @JsonPropertyDescription("Of bytesFetched, bytes read from ModelArtifact copies on other nodes.")
  private Long bytesFromPeers;

  @JsonPropertyDescription(
      "Ranged requests made for this rank (shared requests counted in proportion,"
          + " rounded up).")
  private Long requests;

  @JsonPropertyDescription("bytesFetched / bytesNeeded with three decimals.")
  private String fetchAmplification;

  @JsonPropertyDescription(
      "Path of the rank file on the node (under the store root, directory"
          + " tensorshardsets/<namespace>.<name>/<id>/).")
  private String file;

  @JsonPropertyDescription("Last error or notable event of this rank, for people; may be empty.")
  private String message;

  public Integer getRank() {
    return rank;
  }

  public void setRank(Integer rank) {
    this.rank = rank;
  }

  public String getCoordinates() {
    return coordinates;
  }

  public void setCoordinates(String coordinates) {
    this.coordinates = coordinates;
  }

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

  public Long getFileBytes() {
    return fileBytes;
  }

  public void setFileBytes(Long fileBytes) {
    this.fileBytes = fileBytes;
  }

  public Long getBytesNeeded() {
    return bytesNeeded;
  }

  public void setBytesNeeded(Long bytesNeeded) {
    this.bytesNeeded = bytesNeeded;
  }

  public Long getBytesFetched() {
    return bytesFetched;
  }

  public void setBytesFetched(Long bytesFetched) {
    this.bytesFetched = bytesFetched;
  }

  public Long getBytesFromPeers() {
    return bytesFromPeers;
  }

  public void setBytesFromPeers(Long bytesFromPeers) {
    this.bytesFromPeers = bytesFromPeers;
  }

  public Long getRequests() {
    return requests;
  }

  public void setRequests(Long requests) {
    this.requests = requests;
  }

  public String getFetchAmplification() {
    return fetchAmplification;
  }

  public void setFetchAmplification(String fetchAmplification) {
    this.fetchAmplification = fetchAmplification;
  }

  public String getFile() {
    return file;
  }

  public void setFile(String file) {
    this.file = file;
  }

  public String getMessage() {
    return message;
  }

  public void setMessage(String message) {
    this.message = message;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ShardRankStatus that
        && Objects.equals(rank, that.rank)
        && Objects.equals(coordinates, that.coordinates)
        && Objects.equals(node, that.node)
        && Objects.equals(pod, that.pod)
        && Objects.equals(phase, that.phase)
        && Objects.equals(fileBytes, that.fileBytes)
        && Objects.equals(bytesNeeded, that.bytesNeeded)
        && Objects.equals(bytesFetched, that.bytesFetched)
        && Objects.equals(bytesFromPeers, that.bytesFromPeers)
        && Objects.equals(requests, that.requests)
        && Objects.equals(fetchAmplification, that.fetchAmplification)
        && Objects.equals(file, that.file)
        && Objects.equals(message, that.message);
  }

  @Override
  public int hashCode() {
    return Objects.hash(
        rank,
        coordinates,
        node,
        pod,
        phase,
        fileBytes,
        bytesNeeded,
        bytesFetched,
        bytesFromPeers,
        requests,
        fetchAmplification,
        file,
        message);
  }
}
