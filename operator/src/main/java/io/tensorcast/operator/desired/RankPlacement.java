package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.Reason;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.v1alpha1.ShardPlacementSpec;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * Assigns a TensorShardSet's ranks to nodes. Pure.
 *
 * <p>Ranks go in blocks of {@code ranksPerNode} consecutive ranks: block {@code i} holds {@code [i
 * × ranksPerNode, min((i + 1) × ranksPerNode, world))}. Without consumer placement the blocks get
 * nodes from {@link NodeSelection} (the rules of a ModelArtifact's placement: selector, taints,
 * RDMA, allocatable memory for the largest block, nodes already holding the set's pods first), in
 * order of choice. With consumer placement, the consumer pod whose rank label is {@code i} decides
 * block {@code i}'s node (its {@code spec.nodeName}); blocks whose pod is missing or not scheduled
 * wait; two blocks on one node share its pod.
 */
public final class RankPlacement {

  private RankPlacement() {}

  /**
   * One node and its ranks.
   *
   * @param node the node
   * @param ranks its ranks, ascending
   * @param bytes what the node stores for them, if known
   */
  public record Slot(NodeSelection.Candidate node, List<Integer> ranks, Optional<Long> bytes) {}

  /**
   * The outcome.
   *
   * @param slots nodes with their ranks, block order
   * @param complete whether every rank has a node
   * @param reason {@link Reason#NodesSelected}, {@link Reason#InsufficientNodes}, {@link
   *     Reason#InsufficientMemory} or {@link Reason#ConsumersNotScheduled}
   * @param message for people
   * @param selection the node selection made (null with consumer placement)
   */
  public record Result(
      List<Slot> slots,
      boolean complete,
      Reason reason,
      String message,
      NodeSelection.Result selection) {}

  /** The blocks of ranks: block i → its ranks. */
  public static List<List<Integer>> blocks(int world, int ranksPerNode) {
    List<List<Integer>> out = new ArrayList<>();
    for (int start = 0; start < world; start += ranksPerNode) {
      List<Integer> b = new ArrayList<>();
      for (int r = start; r < Math.min(world, start + ranksPerNode); r++) {
        b.add(r);
      }
      out.add(b);
    }
    return out;
  }

  /**
   * Places the ranks.
   *
   * @param placement the spec's placement
   * @param world number of ranks
   * @param nodes every node
   * @param consumers pods of the namespace matching the consumer selector (empty without one)
   * @param rankBytes bytes per rank, if resolved
   * @param overhead memory per pod besides the rank files
   * @param unresolvedMemory memory of a pod while the sizes are unknown
   * @param nodesWithPods nodes that hold a pod of the set's current generation now, with its ranks:
   *     a chosen node keeps the block it holds, so blocks never move between nodes for a tie
   * @param committed memory requested on each node by other artifacts' and sets' pods
   */
  public static Result place(
      ShardPlacementSpec placement,
      int world,
      List<Node> nodes,
      List<Pod> consumers,
      Optional<List<Long>> rankBytes,
      long overhead,
      long unresolvedMemory,
      Map<String, List<Integer>> nodesWithPods,
      Map<String, Map<String, Long>> committed) {
    int per = placement.getRanksPerNode() == null ? 8 : placement.getRanksPerNode();
    List<List<Integer>> blocks = blocks(world, per);
    List<Long> blockBytes = new ArrayList<>();
    for (List<Integer> b : blocks) {
      blockBytes.add(rankBytes.map(rb -> b.stream().mapToLong(rb::get).sum()).orElse(-1L));
    }
    if (placement.getConsumers() != null) {
      return byConsumers(placement, blocks, blockBytes, nodes, consumers, overhead, committed);
    }
    long largest = blockBytes.stream().mapToLong(Long::longValue).max().orElse(0);
    long memory = rankBytes.isPresent() ? largest + overhead : unresolvedMemory;
    NodeSelection.Result sel =
        NodeSelection.select(
            nodes,
            new NodeSelection.Request(
                blocks.size(),
                placement.getRdma() == null ? RdmaPolicy.Required : placement.getRdma(),
                placement.getNodeSelector(),
                placement.getTolerations(),
                memory,
                rankBytes.isPresent()
                    ? "largest node's rank files "
                        + ByteSize.human(largest)
                        + " + overhead "
                        + ByteSize.human(overhead)
                    : "overhead " + ByteSize.human(overhead) + " (rank sizes not resolved yet)",
                nodesWithPods.keySet(),
                committed,
                List.of()));
    NodeSelection.Candidate[] holder = new NodeSelection.Candidate[blocks.size()];
    List<NodeSelection.Candidate> free = new ArrayList<>();
    for (NodeSelection.Candidate c : sel.chosen()) {
      int held = blocks.indexOf(nodesWithPods.getOrDefault(c.name(), List.of()));
      if (held >= 0 && holder[held] == null) {
        holder[held] = c;
      } else {
        free.add(c);
      }
    }
    for (int i = 0; i < holder.length && !free.isEmpty(); i++) {
      if (holder[i] == null) {
        holder[i] = free.remove(0);
      }
    }
    List<Slot> slots = new ArrayList<>();
    for (int i = 0; i < holder.length; i++) {
      if (holder[i] != null) {
        long b = blockBytes.get(i);
        slots.add(new Slot(holder[i], blocks.get(i), b < 0 ? Optional.empty() : Optional.of(b)));
      }
    }
    return new Result(slots, sel.satisfied(), sel.reason(), sel.message(), sel);
  }

  private static Result byConsumers(
      ShardPlacementSpec placement,
      List<List<Integer>> blocks,
      List<Long> blockBytes,
      List<Node> nodes,
      List<Pod> consumers,
      long overhead,
      Map<String, Map<String, Long>> committed) {
    String label = placement.getConsumers().getRankLabel();
    Map<Integer, String> nodeOfBlock = new TreeMap<>();
    for (Pod p : consumers) {
      Map<String, String> labels = p.getMetadata().getLabels();
      String v = labels == null ? null : labels.get(label);
      String node = p.getSpec() == null ? null : p.getSpec().getNodeName();
      if (v == null
          || node == null
          || node.isEmpty()
          || PodPlan.terminating(p)
          || PodPlan.ended(p)) {
        continue;
      }
      try {
        int i = Integer.parseInt(v.strip());
        if (i >= 0 && i < blocks.size()) {
          nodeOfBlock.putIfAbsent(i, node);
        }
      } catch (NumberFormatException e) {
        // a pod whose label is not an index decides nothing
      }
    }
    Map<String, NodeSelection.Candidate> byName = new LinkedHashMap<>();
    nodes.forEach(n -> byName.put(n.getMetadata().getName(), NodeSelection.Candidate.of(n)));
    Map<String, List<Integer>> ranksOfNode = new LinkedHashMap<>();
    Map<String, Long> bytesOfNode = new LinkedHashMap<>();
    List<Integer> waiting = new ArrayList<>();
    for (int i = 0; i < blocks.size(); i++) {
      String n = nodeOfBlock.get(i);
      if (n == null || !byName.containsKey(n)) {
        waiting.add(i);
        continue;
      }
      ranksOfNode.computeIfAbsent(n, k -> new ArrayList<>()).addAll(blocks.get(i));
      bytesOfNode.merge(n, blockBytes.get(i), (a, b) -> a < 0 || b < 0 ? -1 : a + b);
    }
    List<Slot> slots = new ArrayList<>();
    List<String> tooSmall = new ArrayList<>();
    for (Map.Entry<String, List<Integer>> e : ranksOfNode.entrySet()) {
      NodeSelection.Candidate c = byName.get(e.getKey());
      long b = bytesOfNode.get(e.getKey());
      if (b >= 0
          && c.allocatableMemoryBytes()
                  - committed.getOrDefault(c.name(), Map.of()).values().stream()
                      .mapToLong(Long::longValue)
                      .sum()
              < b + overhead) {
        tooSmall.add(
            c.name() + " (ranks " + e.getValue() + " need " + ByteSize.exact(b + overhead) + ")");
        continue;
      }
      slots.add(new Slot(c, e.getValue(), b < 0 ? Optional.empty() : Optional.of(b)));
    }
    if (!tooSmall.isEmpty()) {
      return new Result(
          slots,
          false,
          Reason.InsufficientMemory,
          "consumer nodes with too little free allocatable memory: " + String.join("; ", tooSmall),
          null);
    }
    if (!waiting.isEmpty()) {
      return new Result(
          slots,
          false,
          Reason.ConsumersNotScheduled,
          "no scheduled consumer pod with "
              + label
              + " = "
              + waiting
              + " (matching "
              + placement.getConsumers().getMatchLabels()
              + ") yet; ranks of those blocks wait",
          null);
    }
    return new Result(
        slots,
        true,
        Reason.NodesSelected,
        "ranks follow their consumer pods onto " + String.join(", ", ranksOfNode.keySet()),
        null);
  }
}
