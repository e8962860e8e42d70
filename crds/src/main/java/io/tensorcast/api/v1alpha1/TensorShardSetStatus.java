package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.crd.generator.annotation.PrinterColumn;
import io.fabric8.kubernetes.api.model.Condition;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The observed state of a {@link TensorShardSet}: discovered facts only, written by the operator
 * through the status subresource, backed by what the data-plane pods report of their rank files.
 * {@code ranksReady}, {@code sizePerRank} and {@code fetchAmplification} are preformatted strings
 * for the printer columns and repeat facts held in the typed fields.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class TensorShardSetStatus {

  @PrinterColumn(name = "PHASE")
  @JsonPropertyDescription("Summary state: Pending, Resolving, Loading, Ready or Failed.")
  private ArtifactPhase phase;

  @JsonPropertyDescription("metadata.generation of the spec this status describes.")
  private Long observedGeneration;

  @JsonPropertyDescription(
      "Conditions of types Resolved, Scheduled, Loaded, Ready and Degraded, with"
          + " CamelCase reasons; lastTransitionTime changes only when status changes.")
  private List<Condition> conditions = new ArrayList<>();

  @JsonPropertyDescription(
      "What the source resolved to for this generation (the Hugging Face commit sha,"
          + " or a digest of the S3/OSS listing).")
  private String resolvedRevision;

  @PrinterColumn(name = "PARALLELISM")
  @JsonPropertyDescription(
      "The layout's axis sizes in canonical order, sizes of 1 left out, e.g. ep:2,tp:4.")
  private String parallelism;

  @JsonPropertyDescription(
      "Which rules cut the tensors: spec.rules, or the built-in set chosen from"
          + " config.json architectures (e.g. built-in Llama for LlamaForCausalLM).")
  private String ruleSet;

  @JsonPropertyDescription("Number of ranks: dp \u00d7 pp \u00d7 ep \u00d7 tp.")
  private Integer worldSize;

  @JsonPropertyDescription("Ranks whose rank file is complete and verified on their node.")
  private Integer readyRanks;

  @PrinterColumn(name = "RANKS READY")
  @JsonPropertyDescription("readyRanks/worldSize for people, e.g. 3/4.")
  private String ranksReady;

  @JsonPropertyDescription(
      "Size of the largest rank file, bytes (ranks differ when experts or stages are" + " owned).")
  private Long bytesPerRank;

  @PrinterColumn(name = "SIZE PER RANK")
  @JsonPropertyDescription(
      "Rank file size for people, e.g. 1.2 GiB, or the smallest and largest, e.g."
          + " 1.1-1.3 GiB.")
  private String sizePerRank;

  @JsonPropertyDescription(
      "Tensor bytes of every rank file of the current pods, summed over ranks.")
  private Long bytesNeeded;

  @JsonPropertyDescription(
      "Tensor bytes those pods read from the source or from ModelArtifact copies to"
          + " fill them (headers and config.json not counted).")
  private Long bytesFetched;

  @PrinterColumn(name = "AMPLIFICATION", priority = 1)
  @JsonPropertyDescription(
      "bytesFetched / bytesNeeded with three decimals, e.g. 1.000; below 1 when ranks"
          + " on one node share tensors they both hold.")
  private String fetchAmplification;

  @JsonPropertyDescription("One entry per rank, in rank order, once its node is known.")
  private List<ShardRankStatus> ranks = new ArrayList<>();

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

  public String getParallelism() {
    return parallelism;
  }

  public void setParallelism(String parallelism) {
    this.parallelism = parallelism;
  }

  public String getRuleSet() {
    return ruleSet;
  }

  public void setRuleSet(String ruleSet) {
    this.ruleSet = ruleSet;
  }

  public Integer getWorldSize() {
    return worldSize;
  }

  public void setWorldSize(Integer worldSize) {
    this.worldSize = worldSize;
  }

  public Integer getReadyRanks() {
    return readyRanks;
  }

  public void setReadyRanks(Integer readyRanks) {
    this.readyRanks = readyRanks;
  }

  public String getRanksReady() {
    return ranksReady;
  }

  public void setRanksReady(String ranksReady) {
    this.ranksReady = ranksReady;
  }

  public Long getBytesPerRank() {
    return bytesPerRank;
  }

  public void setBytesPerRank(Long bytesPerRank) {
    this.bytesPerRank = bytesPerRank;
  }

  public String getSizePerRank() {
    return sizePerRank;
  }

  public void setSizePerRank(String sizePerRank) {
    this.sizePerRank = sizePerRank;
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

  public String getFetchAmplification() {
    return fetchAmplification;
  }

  public void setFetchAmplification(String fetchAmplification) {
    this.fetchAmplification = fetchAmplification;
  }

  public List<ShardRankStatus> getRanks() {
    return ranks;
  }

  public void setRanks(List<ShardRankStatus> ranks) {
    this.ranks = ranks;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof TensorShardSetStatus that
        && Objects.equals(phase, that.phase)
        && Objects.equals(observedGeneration, that.observedGeneration)
        && Objects.equals(conditions, that.conditions)
        && Objects.equals(resolvedRevision, that.resolvedRevision)
        && Objects.equals(parallelism, that.parallelism)
        && Objects.equals(ruleSet, that.ruleSet)
        && Objects.equals(worldSize, that.worldSize)
        && Objects.equals(readyRanks, that.readyRanks)
        && Objects.equals(ranksReady, that.ranksReady)
        && Objects.equals(bytesPerRank, that.bytesPerRank)
        && Objects.equals(sizePerRank, that.sizePerRank)
        && Objects.equals(bytesNeeded, that.bytesNeeded)
        && Objects.equals(bytesFetched, that.bytesFetched)
        && Objects.equals(fetchAmplification, that.fetchAmplification)
        && Objects.equals(ranks, that.ranks);
  }

  @Override
  public int hashCode() {
    return Objects.hash(
        phase,
        observedGeneration,
        conditions,
        resolvedRevision,
        parallelism,
        ruleSet,
        worldSize,
        readyRanks,
        ranksReady,
        bytesPerRank,
        sizePerRank,
        bytesNeeded,
        bytesFetched,
        fetchAmplification,
        ranks);
  }
}
