package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.crd.generator.annotation.PrinterColumn;
import io.fabric8.crd.generator.annotation.SchemaFrom;
import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.model.annotation.LabelSelector;
import io.fabric8.kubernetes.model.annotation.StatusReplicas;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The observed state of a {@link ModelArtifact}: discovered facts only, written by the operator
 * through the status subresource. Numbers are backed by verified bytes on the nodes ("truthful
 * status", ARCHITECTURE.md); {@code ready}, {@code size} and {@code progress} are preformatted
 * strings for the printer columns and repeat facts held in the typed fields.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class ModelArtifactStatus {

  @PrinterColumn(name = "PHASE")
  @JsonPropertyDescription("Summary state: Pending, Resolving, Loading, Ready or Failed.")
  private ArtifactPhase phase;

  @JsonPropertyDescription("metadata.generation of the spec this status describes.")
  private Long observedGeneration;

  @JsonPropertyDescription(
      "The generation whose content the copies hold: the last generation that changed anything"
          + " but spec.placement.replicas. Data-plane pods, the data plane's artifact id"
          + " (<namespace>-<name>-g<copyGeneration>), the peer secret and the node labels belong"
          + " to it, so scaling keeps every Ready copy.")
  private Long copyGeneration;

  @JsonPropertyDescription(
      "Digest of the spec without spec.placement.replicas at copyGeneration (16 hex): a new"
          + " generation with the same digest keeps copyGeneration.")
  private String specDigest;

  @LabelSelector
  @JsonPropertyDescription(
      "Label selector of the artifact's data-plane pods, for the scale subresource (kubectl"
          + " scale, autoscalers).")
  private String selector;

  @SchemaFrom(type = ConditionSchema[].class)
  @JsonPropertyDescription(
      "Conditions of types Resolved, Scheduled, Loaded, Ready, Degraded, Stalled and InUse, with"
          + " CamelCase reasons; lastTransitionTime changes only when status changes. Stalled=True"
          + " means the artifact cannot reach Ready without a change (kstatus reads it as"
          + " Failed).")
  private List<Condition> conditions = new ArrayList<>();

  @JsonPropertyDescription(
      "What the source resolved to for this generation: the Hugging Face commit sha, or for"
          + " S3/OSS a digest of the listed keys and ETags.")
  private String resolvedRevision;

  @JsonPropertyDescription("Number of files in the artifact after include/exclude.")
  private Integer files;

  @JsonPropertyDescription("Number of tensors found in the artifact's safetensors/torch headers.")
  private Integer tensors;

  @JsonPropertyDescription("Size of one full copy in bytes, as resolved from the source.")
  private Long totalBytes;

  @PrinterColumn(name = "SIZE")
  @JsonPropertyDescription("totalBytes for people, in binary units, e.g. 1.2 GiB.")
  private String size;

  @PrinterColumn(name = "FROM-SOURCE", priority = 1)
  @JsonPropertyDescription(
      "Bytes the artifact's current pods read from the source, summed over nodes (each node's"
          + " bytesFromSource). With PeerToPeer about totalBytes however many replicas; with"
          + " SourceOnly about replicas x totalBytes.")
  private Long bytesFromSource;

  @JsonPropertyDescription(
      "Every byte the artifact's current pods received from the source, summed over nodes (each"
          + " node's bytesFromSourceOnWire): bytesFromSource plus what faults and re-reads cost.")
  private Long bytesFromSourceOnWire;

  @JsonPropertyDescription("One entry per node chosen to hold a copy.")
  private List<ArtifactNodeStatus> nodes = new ArrayList<>();

  @StatusReplicas
  @JsonPropertyDescription(
      "Number of copies this status describes: spec.placement.replicas of observedGeneration"
          + " (the scale subresource's status replicas).")
  private Integer replicas;

  @JsonPropertyDescription("Number of nodes whose copy is Ready (every byte present and verified).")
  private Integer readyReplicas;

  @PrinterColumn(name = "READY")
  @JsonPropertyDescription("readyReplicas/replicas for people, e.g. 2/3.")
  private String ready;

  @JsonPropertyDescription(
      "Nodes where this generation's copy is Ready, sorted; each carries the node label"
          + " modelartifact.tensorcast.io/<namespace>.<name> (cut and hashed past 63 characters)"
          + " with the generation as value, for consumers' node affinity.")
  private List<String> readyNodes = new ArrayList<>();

  @PrinterColumn(name = "CONSUMERS", priority = 1)
  @JsonPropertyDescription(
      "Pods of this namespace, not Succeeded or Failed, with a csi.tensorcast.io volume naming"
          + " this artifact (see the InUse condition for their names).")
  private Integer consumers;

  @PrinterColumn(name = "PROGRESS")
  @JsonPropertyDescription(
      "Verified bytes over all nodes divided by replicas x totalBytes, rounded down, e.g. 45%.")
  private String progress;

  @JsonPropertyDescription(
      "How the files of the Ready copies were verified (from a Ready pod's report): counts per"
          + " level, SourceDigest or ReaderPieceHashes, and the files at the weaker level.")
  private ArtifactVerification verification;

  public ArtifactVerification getVerification() {
    return verification;
  }

  public void setVerification(ArtifactVerification verification) {
    this.verification = verification;
  }

  @JsonPropertyDescription(
      "For a written artifact (source.writers): its versions, as its data-plane pods report them.")
  private WrittenVersionsStatus versions;

  @JsonPropertyDescription(
      "Failed attempts of this generation whose cause may go away without a spec change (a"
          + " missing bucket or prefix, refused credentials); reset once the artifact is Ready.")
  private Integer retryAttempts;

  @JsonPropertyDescription(
      "When the operator loads a Failed artifact again by itself (RFC 3339, UTC): after 30 s,"
          + " doubling per attempt up to 10 min. Absent when the failure needs a spec change.")
  private String nextRetryTime;

  @JsonPropertyDescription(
      "The last value of annotation tensorcast.io/retry the operator acted on; a new value"
          + " retries a Failed artifact now.")
  private String retryRequest;

  public Integer getRetryAttempts() {
    return retryAttempts;
  }

  public void setRetryAttempts(Integer retryAttempts) {
    this.retryAttempts = retryAttempts;
  }

  public String getNextRetryTime() {
    return nextRetryTime;
  }

  public void setNextRetryTime(String nextRetryTime) {
    this.nextRetryTime = nextRetryTime;
  }

  public String getRetryRequest() {
    return retryRequest;
  }

  public void setRetryRequest(String retryRequest) {
    this.retryRequest = retryRequest;
  }

  public WrittenVersionsStatus getVersions() {
    return versions;
  }

  public void setVersions(WrittenVersionsStatus versions) {
    this.versions = versions;
  }

  public ArtifactPhase getPhase() {
    return phase;
  }

  public void setPhase(ArtifactPhase phase) {
    this.phase = phase;
  }

  public Long getObservedGeneration() {
    return observedGeneration;
  }

  public void setObservedGeneration(Long observedGeneration) {
    this.observedGeneration = observedGeneration;
  }

  public Long getCopyGeneration() {
    return copyGeneration;
  }

  public void setCopyGeneration(Long copyGeneration) {
    this.copyGeneration = copyGeneration;
  }

  public String getSpecDigest() {
    return specDigest;
  }

  public void setSpecDigest(String specDigest) {
    this.specDigest = specDigest;
  }

  public String getSelector() {
    return selector;
  }

  public void setSelector(String selector) {
    this.selector = selector;
  }

  public List<Condition> getConditions() {
    return conditions;
  }

  public void setConditions(List<Condition> conditions) {
    this.conditions = conditions;
  }

  public String getResolvedRevision() {
    return resolvedRevision;
  }

  public void setResolvedRevision(String resolvedRevision) {
    this.resolvedRevision = resolvedRevision;
  }

  public Integer getFiles() {
    return files;
  }

  public void setFiles(Integer files) {
    this.files = files;
  }

  public Integer getTensors() {
    return tensors;
  }

  public void setTensors(Integer tensors) {
    this.tensors = tensors;
  }

  public Long getTotalBytes() {
    return totalBytes;
  }

  public void setTotalBytes(Long totalBytes) {
    this.totalBytes = totalBytes;
  }

  public String getSize() {
    return size;
  }

  public void setSize(String size) {
    this.size = size;
  }

  public Long getBytesFromSourceOnWire() {
    return bytesFromSourceOnWire;
  }

  public void setBytesFromSourceOnWire(Long bytesFromSourceOnWire) {
    this.bytesFromSourceOnWire = bytesFromSourceOnWire;
  }

  public Long getBytesFromSource() {
    return bytesFromSource;
  }

  public void setBytesFromSource(Long bytesFromSource) {
    this.bytesFromSource = bytesFromSource;
  }

  public List<ArtifactNodeStatus> getNodes() {
    return nodes;
  }

  public void setNodes(List<ArtifactNodeStatus> nodes) {
    this.nodes = nodes;
  }

  public Integer getReplicas() {
    return replicas;
  }

  public void setReplicas(Integer replicas) {
    this.replicas = replicas;
  }

  public Integer getReadyReplicas() {
    return readyReplicas;
  }

  public void setReadyReplicas(Integer readyReplicas) {
    this.readyReplicas = readyReplicas;
  }

  public String getReady() {
    return ready;
  }

  public void setReady(String ready) {
    this.ready = ready;
  }

  public String getProgress() {
    return progress;
  }

  public void setProgress(String progress) {
    this.progress = progress;
  }

  public List<String> getReadyNodes() {
    return readyNodes;
  }

  public void setReadyNodes(List<String> readyNodes) {
    this.readyNodes = readyNodes;
  }

  public Integer getConsumers() {
    return consumers;
  }

  public void setConsumers(Integer consumers) {
    this.consumers = consumers;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ModelArtifactStatus that
        && phase == that.phase
        && Objects.equals(observedGeneration, that.observedGeneration)
        && Objects.equals(copyGeneration, that.copyGeneration)
        && Objects.equals(specDigest, that.specDigest)
        && Objects.equals(selector, that.selector)
        && Objects.equals(conditions, that.conditions)
        && Objects.equals(resolvedRevision, that.resolvedRevision)
        && Objects.equals(files, that.files)
        && Objects.equals(tensors, that.tensors)
        && Objects.equals(totalBytes, that.totalBytes)
        && Objects.equals(size, that.size)
        && Objects.equals(bytesFromSource, that.bytesFromSource)
        && Objects.equals(bytesFromSourceOnWire, that.bytesFromSourceOnWire)
        && Objects.equals(nodes, that.nodes)
        && Objects.equals(replicas, that.replicas)
        && Objects.equals(readyReplicas, that.readyReplicas)
        && Objects.equals(ready, that.ready)
        && Objects.equals(readyNodes, that.readyNodes)
        && Objects.equals(consumers, that.consumers)
        && Objects.equals(progress, that.progress)
        && Objects.equals(verification, that.verification)
        && Objects.equals(versions, that.versions)
        && Objects.equals(retryAttempts, that.retryAttempts)
        && Objects.equals(nextRetryTime, that.nextRetryTime)
        && Objects.equals(retryRequest, that.retryRequest);
  }

  @Override
  public int hashCode() {
    return Objects.hash(
        phase,
        observedGeneration,
        copyGeneration,
        specDigest,
        selector,
        conditions,
        resolvedRevision,
        files,
        tensors,
        totalBytes,
        size,
        bytesFromSource,
        bytesFromSourceOnWire,
        nodes,
        replicas,
        readyReplicas,
        ready,
        readyNodes,
        consumers,
        progress,
        verification,
        versions,
        retryAttempts,
        nextRetryTime,
        retryRequest);
  }
}
