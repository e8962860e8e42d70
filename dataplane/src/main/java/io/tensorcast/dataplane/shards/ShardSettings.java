package io.tensorcast.dataplane.shards;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * What a TensorShardSet's data-plane pod materialises ({@code dataplane serve --shards ...}).
 *
 * @param parallelism the layout's axis sizes
 * @param ranks the global ranks this pod writes, ascending, each in the world
 * @param rules explicit rules; empty for the built-in set of config.json's architectures
 * @param costs the fetch cost model
 * @param copies ModelArtifact copies to read from before the source ({@code PUT /v1/peers} can
 *     replace them), each a control endpoint address; empty for none
 * @param copyTokenFile bearer token for the copies' {@code /v1/tensors}, or null for none
 * @param copyWait how long to wait for copies from {@code PUT /v1/peers} before reading from the
 *     source alone; zero to not wait
 */
public record ShardSettings(
    Parallelism parallelism,
    List<Integer> ranks,
    List<ShardRules.Spec> rules,
    FetchPlanner.Costs costs,
    List<InetSocketAddress> copies,
    Path copyTokenFile,
    Duration copyWait) {

  /**
   * @throws IllegalArgumentException if no rank is given or a rank is outside the world or repeats
   */
  public ShardSettings {
    Objects.requireNonNull(parallelism, "parallelism");
    ranks = List.copyOf(ranks);
    rules = List.copyOf(rules);
    Objects.requireNonNull(costs, "costs");
    copies = List.copyOf(copies);
    Objects.requireNonNull(copyWait, "copyWait");
    if (ranks.isEmpty()) {
      throw new IllegalArgumentException("--ranks: at least one rank is needed");
    }
    int last = -1;
    for (int r : ranks) {
      if (r <= last || r >= parallelism.worldSize()) {
        throw new IllegalArgumentException(
            "--ranks "
                + ranks
                + ": ranks must be distinct, ascending and in [0, "
                + parallelism.worldSize()
                + ") for "
                + parallelism.describe());
      }
      last = r;
    }
  }
}
