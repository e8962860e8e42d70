package io.tensorcast.api.wire;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonInclude;
import java.util.List;

/**
 * What a TensorShardSet's data-plane pod reports of its shard work, in {@code shards} of its {@code
 * GET /status} ({@link DataPlaneStatus#shards()}): the plan of the whole layout, resolved once from
 * the source's headers (so the operator can size the pods of the other nodes before they exist),
 * and the progress of this pod's own ranks.
 *
 * @param parallelism axis sizes in canonical order, sizes of 1 left out, e.g. {@code "ep:2,tp:4"}
 * @param ruleSet which rules cut the tensors, for people (e.g. {@code "built-in Llama
 *     (LlamaForCausalLM)"} or {@code "spec.rules (7 rules)"})
 * @param worldSize number of ranks
 * @param rankFileBytes for every rank of the world, in rank order: bytes its node stores for it
 *     (the rank file plus its layout's {@code manifest.json}); empty until resolved
 * @param rankTensorBytes for every rank, in rank order: tensor bytes of its rank file
 * @param metadataBytes bytes read from the source besides tensor data (headers, config.json)
 * @param ranks this pod's ranks
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
@JsonIgnoreProperties(ignoreUnknown = true)
public record ShardReport(
    String parallelism,
    String ruleSet,
    int worldSize,
    List<Long> rankFileBytes,
    List<Long> rankTensorBytes,
    long metadataBytes,
    List<Rank> ranks) {

  public ShardReport {
    rankFileBytes = rankFileBytes == null ? List.of() : List.copyOf(rankFileBytes);
    rankTensorBytes = rankTensorBytes == null ? List.of() : List.copyOf(rankTensorBytes);
    ranks = ranks == null ? List.of() : List.copyOf(ranks);
  }

  /**
   * One rank this pod materialises.
   *
   * @param rank global rank
   * @param coordinates position on every axis, canonical order, e.g. {@code
   *     "dp:0/1,pp:0/1,ep:1/2,tp:3/4"}
   * @param file path of the rank file on the node
   * @param fileBytes size of the rank file
   * @param bytesNeeded tensor bytes of the rank file
   * @param bytesWritten tensor bytes in place in the store so far (≤ bytesNeeded)
   * @param bytesFetched tensor bytes read for this rank (shared reads in proportion)
   * @param bytesFromPeers of those, bytes read from ModelArtifact copies
   * @param requests ranged requests made for it (shared requests in proportion, rounded up)
   * @param complete whether the rank file is complete and verified
   */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  @JsonIgnoreProperties(ignoreUnknown = true)
  public record Rank(
      int rank,
      String coordinates,
      String file,
      long fileBytes,
      long bytesNeeded,
      long bytesWritten,
      long bytesFetched,
      long bytesFromPeers,
      long requests,
      boolean complete) {}
}
