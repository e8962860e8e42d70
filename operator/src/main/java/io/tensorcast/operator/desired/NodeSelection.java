package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.NodeCondition;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.Taint;
import io.fabric8.kubernetes.api.model.Toleration;
import io.tensorcast.api.Reason;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * Chooses the nodes that hold a copy of an artifact ({@code spec.placement}). Pure: works on the
 * Node objects it is given, never calls the API server.
 *
 * <p>A node is eligible when, checked in this order: it is not cordoned ({@code
 * spec.unschedulable}); its {@code Ready} condition is {@code True}; it carries every label of
 * {@code nodeSelector}; every taint with effect {@code NoSchedule} or {@code NoExecute} is
 * tolerated by {@code tolerations} (Kubernetes toleration matching); with {@code rdma: Required} it
 * is RDMA-capable (allocatable {@value TensorcastConstants#RDMA_RESOURCE} &gt; 0, or label {@code
 * tensorcast.io/rdma=true}); its allocatable memory is at least the memory one data-plane pod asks
 * for.
 *
 * <p>Memory is compared with what is <em>free</em> for Tensorcast on a node: its allocatable memory
 * less what the data-plane pods of other artifacts request there; a refusal names the node with the
 * most free memory, its numbers and the artifacts that hold the rest.
 *
 * <p>Among eligible nodes, the order of choice is: nodes that already hold a pod of this artifact
 * (so a running copy is never moved for a tie), those whose copy is Ready first, longest Ready
 * first (so scaling down removes loading copies before Ready ones, and the newest Ready ones
 * first), then with {@code rdma: Preferred} RDMA-capable nodes before others, then spread across
 * {@code topology.kubernetes.io/zone} (fewest chosen copies in the zone first), then node name. The
 * first chosen node is where the artifact is resolved.
 */
public final class NodeSelection {

  /** Zone label of well-known topology (Kubernetes 1.17+). */
  public static final String ZONE_LABEL = "topology.kubernetes.io/zone";

  /** The deprecated zone label, read when the current one is absent. */
  public static final String LEGACY_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone";

  /** Node label holding the name the kubelet registered; pods pin to nodes through it. */
  public static final String HOSTNAME_LABEL = "kubernetes.io/hostname";

  private static final int NAMES_IN_MESSAGE = 5;

  private NodeSelection() {}

  /**
   * What to choose.
   *
   * @param replicas number of nodes wanted, ≥ 1
   * @param rdma RDMA policy
   * @param nodeSelector labels a node must carry (empty: any)
   * @param tolerations taints that are tolerated
   * @param memoryPerNodeBytes memory request of one data-plane pod, bytes; 0 skips the check
   * @param memoryBasis how {@code memoryPerNodeBytes} was computed, for messages (e.g. {@code
   *     artifact 8.0 MiB + overhead 256.0 MiB})
   * @param nodesWithPods nodes that hold a pod of this artifact now
   * @param committedMemory per node name, the memory (bytes) requested there by data-plane pods of
   *     <em>other</em> artifacts, by artifact ({@code namespace/name}): subtracted from allocatable
   *     memory, so artifacts spread instead of all ranking the same node first, and named when
   *     memory is short
   * @param nodesWithReadyCopies nodes where this artifact's copy is Ready now, longest Ready first
   */
  public record Request(
      int replicas,
      RdmaPolicy rdma,
      Map<String, String> nodeSelector,
      List<Toleration> tolerations,
      long memoryPerNodeBytes,
      String memoryBasis,
      Set<String> nodesWithPods,
      Map<String, Map<String, Long>> committedMemory,
      List<String> nodesWithReadyCopies) {

    /** A request on otherwise empty nodes. */
    public Request(
        int replicas,
        RdmaPolicy rdma,
        Map<String, String> nodeSelector,
        List<Toleration> tolerations,
        long memoryPerNodeBytes,
        String memoryBasis,
        Set<String> nodesWithPods) {
      this(
          replicas,
          rdma,
          nodeSelector,
          tolerations,
          memoryPerNodeBytes,
          memoryBasis,
          nodesWithPods,
          Map.of(),
          List.of());
    }

    /** Allocatable memory of {@code c} less what other artifacts' pods requested there. */
    public long freeMemoryBytes(Candidate c) {
      return c.allocatableMemoryBytes() - committedBytes(c.name());
    }

    /** Memory requested on {@code node} by data-plane pods of other artifacts, bytes. */
    public long committedBytes(String node) {
      return committedMemory.getOrDefault(node, Map.of()).values().stream()
          .mapToLong(Long::longValue)
          .sum();
    }

    public Request {
      if (replicas < 1) {
        throw new IllegalArgumentException("replicas must be >= 1, got " + replicas);
      }
      Objects.requireNonNull(rdma, "rdma");
      nodeSelector = nodeSelector == null ? Map.of() : Map.copyOf(nodeSelector);
      tolerations = tolerations == null ? List.of() : List.copyOf(tolerations);
      memoryBasis = memoryBasis == null ? "" : memoryBasis;
      nodesWithPods = nodesWithPods == null ? Set.of() : Set.copyOf(nodesWithPods);
      committedMemory = committedMemory == null ? Map.of() : Map.copyOf(committedMemory);
      nodesWithReadyCopies =
          nodesWithReadyCopies == null ? List.of() : List.copyOf(nodesWithReadyCopies);
    }
  }

  /** Why a node was not eligible; the first rule it fails. */
  public enum Exclusion {
    CORDONED,
    NOT_READY,
    SELECTOR_MISMATCH,
    TAINT_NOT_TOLERATED,
    NOT_RDMA_CAPABLE,
    INSUFFICIENT_MEMORY
  }

  /**
   * A node as the selection sees it.
   *
   * @param name node name
   * @param hostname value of {@value #HOSTNAME_LABEL}, or empty if the node lacks it
   * @param rdmaResource allocatable {@value TensorcastConstants#RDMA_RESOURCE} &gt; 0
   * @param rdmaCapable {@code rdmaResource} or the RDMA node label
   * @param zone zone label value, "" when absent
   * @param allocatableMemoryBytes allocatable memory, 0 when not reported
   */
  public record Candidate(
      String name,
      Optional<String> hostname,
      boolean rdmaResource,
      boolean rdmaCapable,
      String zone,
      long allocatableMemoryBytes) {

    /** Reads the facts the selection needs from a Node. */
    public static Candidate of(Node node) {
      Map<String, String> labels = labels(node);
      Map<String, Quantity> allocatable = allocatable(node);
      boolean resource = positive(allocatable.get(TensorcastConstants.RDMA_RESOURCE));
      boolean label =
          TensorcastConstants.RDMA_NODE_LABEL_VALUE.equals(
              labels.get(TensorcastConstants.RDMA_NODE_LABEL));
      String zone = labels.getOrDefault(ZONE_LABEL, labels.getOrDefault(LEGACY_ZONE_LABEL, ""));
      return new Candidate(
          node.getMetadata().getName(),
          Optional.ofNullable(labels.get(HOSTNAME_LABEL)),
          resource,
          resource || label,
          zone,
          memoryBytes(allocatable.get("memory")));
    }
  }

  /**
   * The outcome.
   *
   * @param chosen chosen nodes in order of choice; at most {@code replicas}
   * @param replicas number wanted
   * @param nodeCount number of nodes considered
   * @param excluded nodes excluded, by first failing rule, names sorted
   * @param reason {@code NodesSelected}, {@code InsufficientNodes} or {@code InsufficientMemory}
   * @param message for people: which nodes, or why too few, with counts and numbers
   */
  public record Result(
      List<Candidate> chosen,
      int replicas,
      int nodeCount,
      Map<Exclusion, List<String>> excluded,
      Reason reason,
      String message) {

    /** Whether {@code replicas} nodes were chosen. */
    public boolean satisfied() {
      return chosen.size() == replicas;
    }

    /**
     * Whether memory is the reason nothing fits: no node chosen, and some node was excluded only
     * because its allocatable memory is below the pod's request.
     */
    public boolean noNodeHasEnoughMemory() {
      return chosen.isEmpty() && excluded.containsKey(Exclusion.INSUFFICIENT_MEMORY);
    }

    /** Names of the chosen nodes, in order of choice. */
    public List<String> chosenNames() {
      return chosen.stream().map(Candidate::name).toList();
    }
  }

  /**
   * Chooses up to {@code request.replicas()} nodes.
   *
   * @param nodes every node of the cluster (order does not matter)
   * @param request what to choose
   */
  public static Result select(List<Node> nodes, Request request) {
    Map<Exclusion, List<String>> excluded = new EnumMap<>(Exclusion.class);
    Map<Exclusion, String> example = new EnumMap<>(Exclusion.class);
    List<Candidate> eligible = new ArrayList<>();
    Candidate mostFree = null;
    for (Node node : nodes) {
      Candidate c = Candidate.of(node);
      Optional<String> why = exclusion(node, c, request);
      if (why.isEmpty()) {
        eligible.add(c);
        continue;
      }
      Exclusion e = Exclusion.valueOf(why.get().substring(0, why.get().indexOf(':')));
      excluded.computeIfAbsent(e, k -> new ArrayList<>()).add(c.name());
      example.putIfAbsent(e, why.get().substring(why.get().indexOf(':') + 1));
      if (e == Exclusion.INSUFFICIENT_MEMORY
          && (mostFree == null || request.freeMemoryBytes(c) > request.freeMemoryBytes(mostFree))) {
        mostFree = c;
      }
    }
    excluded.values().forEach(l -> l.sort(Comparator.naturalOrder()));
    List<Candidate> chosen = choose(eligible, request);
    int n = nodes.size();
    if (chosen.size() == request.replicas()) {
      return new Result(
          chosen,
          request.replicas(),
          n,
          excluded,
          Reason.NodesSelected,
          "chose "
              + String.join(", ", chosen.stream().map(Candidate::name).toList())
              + " ("
              + eligible.size()
              + " of "
              + n
              + " nodes eligible)");
    }
    List<String> causes = new ArrayList<>();
    for (Map.Entry<Exclusion, List<String>> e : excluded.entrySet()) {
      causes.add(cause(e.getKey(), e.getValue(), example.get(e.getKey()), request, mostFree));
    }
    String message =
        eligible.size()
            + " of "
            + n
            + " nodes are eligible for "
            + request.replicas()
            + (request.replicas() == 1 ? " replica" : " replicas")
            + (causes.isEmpty() ? "" : ": " + String.join("; ", causes));
    Reason reason =
        excluded.containsKey(Exclusion.INSUFFICIENT_MEMORY)
            ? Reason.InsufficientMemory
            : Reason.InsufficientNodes;
    return new Result(chosen, request.replicas(), n, excluded, reason, message);
  }

  /** "RULE:detail" for the first rule the node fails, or empty when eligible. */
  private static Optional<String> exclusion(Node node, Candidate c, Request request) {
    if (node.getSpec() != null && Boolean.TRUE.equals(node.getSpec().getUnschedulable())) {
      return Optional.of(Exclusion.CORDONED + ":");
    }
    if (!ready(node)) {
      return Optional.of(Exclusion.NOT_READY + ":");
    }
    Map<String, String> labels = labels(node);
    for (Map.Entry<String, String> want : request.nodeSelector().entrySet()) {
      if (!want.getValue().equals(labels.get(want.getKey()))) {
        return Optional.of(
            Exclusion.SELECTOR_MISMATCH + ":" + want.getKey() + "=" + want.getValue());
      }
    }
    List<Taint> taints = node.getSpec() == null ? null : node.getSpec().getTaints();
    if (taints != null) {
      for (Taint t : taints) {
        boolean blocking = "NoSchedule".equals(t.getEffect()) || "NoExecute".equals(t.getEffect());
        if (blocking && request.tolerations().stream().noneMatch(tol -> tolerates(tol, t))) {
          return Optional.of(Exclusion.TAINT_NOT_TOLERATED + ":" + describe(t));
        }
      }
    }
    if (request.rdma() == RdmaPolicy.Required && !c.rdmaCapable()) {
      return Optional.of(Exclusion.NOT_RDMA_CAPABLE + ":");
    }
    if (request.memoryPerNodeBytes() > 0
        && request.freeMemoryBytes(c) < request.memoryPerNodeBytes()) {
      return Optional.of(Exclusion.INSUFFICIENT_MEMORY + ":");
    }
    return Optional.empty();
  }

  private static List<Candidate> choose(List<Candidate> eligible, Request request) {
    boolean preferRdma = request.rdma() == RdmaPolicy.Preferred;
    List<Candidate> ranked = new ArrayList<>(eligible);
    ranked.sort(
        Comparator.comparing((Candidate c) -> !request.nodesWithPods().contains(c.name()))
            .thenComparingInt(c -> readyRank(request, c))
            .thenComparing(c -> preferRdma && !c.rdmaCapable())
            .thenComparing(Comparator.comparingLong(request::freeMemoryBytes).reversed())
            .thenComparing(Candidate::name));
    List<Candidate> chosen = new ArrayList<>();
    Map<String, Integer> perZone = new HashMap<>();
    // Running copies stay where they are.
    for (Candidate c : ranked) {
      if (chosen.size() < request.replicas() && request.nodesWithPods().contains(c.name())) {
        chosen.add(c);
        perZone.merge(c.zone(), 1, Integer::sum);
      }
    }
    List<Candidate> rest = new ArrayList<>(ranked);
    rest.removeAll(chosen);
    while (chosen.size() < request.replicas() && !rest.isEmpty()) {
      Candidate best = null;
      for (Candidate c : rest) {
        if (best == null || before(c, best, perZone, preferRdma)) {
          best = c;
        }
      }
      chosen.add(best);
      rest.remove(best);
      perZone.merge(best.zone(), 1, Integer::sum);
    }
    return List.copyOf(chosen);
  }

  /** Position among the nodes with a Ready copy (longest Ready first); after them the others. */
  private static int readyRank(Request request, Candidate c) {
    int i = request.nodesWithReadyCopies().indexOf(c.name());
    return i < 0 ? Integer.MAX_VALUE : i;
  }

  /** Whether {@code a} goes before {@code b}; {@code rest} is already in rank order. */
  private static boolean before(
      Candidate a, Candidate b, Map<String, Integer> perZone, boolean preferRdma) {
    if (preferRdma && a.rdmaCapable() != b.rdmaCapable()) {
      return a.rdmaCapable();
    }
    int za = perZone.getOrDefault(a.zone(), 0);
    int zb = perZone.getOrDefault(b.zone(), 0);
    return za < zb;
  }

  private static String cause(
      Exclusion e, List<String> names, String example, Request request, Candidate mostFree) {
    int k = names.size();
    String text =
        switch (e) {
          case CORDONED -> k + " cordoned (spec.unschedulable)";
          case NOT_READY -> k + " not Ready";
          case SELECTOR_MISMATCH ->
              k + " not matching spec.placement.nodeSelector (e.g. lacks " + example + ")";
          case TAINT_NOT_TOLERATED ->
              k
                  + " with a taint not tolerated by spec.placement.tolerations (e.g. "
                  + example
                  + ")";
          case NOT_RDMA_CAPABLE ->
              k
                  + " not RDMA-capable (no "
                  + TensorcastConstants.RDMA_RESOURCE
                  + " in allocatable, no label "
                  + TensorcastConstants.RDMA_NODE_LABEL
                  + "="
                  + TensorcastConstants.RDMA_NODE_LABEL_VALUE
                  + "; spec.placement.rdma is Required: Preferred or Disabled uses them too)";
          case INSUFFICIENT_MEMORY ->
              k
                  + " with too little free memory (most free: "
                  + freeText(mostFree, request)
                  + " < "
                  + ByteSize.exact(request.memoryPerNodeBytes())
                  + " needed per node"
                  + (request.memoryBasis().isEmpty() ? "" : " = " + request.memoryBasis())
                  + ")";
        };
    String list =
        names.stream().limit(NAMES_IN_MESSAGE).collect(Collectors.joining(", "))
            + (k > NAMES_IN_MESSAGE ? ", ..." : "");
    return text + " [" + list + "]";
  }

  /** Most artifacts named as holders of one node's memory. */
  private static final int HOLDERS_IN_MESSAGE = 5;

  /**
   * "node N 200.0 MiB free = 1.0 GiB allocatable - 824.0 MiB requested by ns/a (412.0 MiB), ns/b
   * (412.0 MiB)", the largest holders first.
   */
  private static String freeText(Candidate c, Request request) {
    long committed = request.committedBytes(c.name());
    String free = "node " + c.name() + " " + ByteSize.exact(request.freeMemoryBytes(c)) + " free";
    if (committed == 0) {
      return free + " (allocatable; no other Tensorcast pod requests memory there)";
    }
    List<Map.Entry<String, Long>> holders =
        request.committedMemory().getOrDefault(c.name(), Map.of()).entrySet().stream()
            .sorted(
                Map.Entry.<String, Long>comparingByValue()
                    .reversed()
                    .thenComparing(Map.Entry.comparingByKey()))
            .toList();
    String named =
        holders.stream()
                .limit(HOLDERS_IN_MESSAGE)
                .map(h -> h.getKey() + " (" + ByteSize.exact(h.getValue()) + ")")
                .collect(Collectors.joining(", "))
            + (holders.size() > HOLDERS_IN_MESSAGE
                ? " and " + (holders.size() - HOLDERS_IN_MESSAGE) + " more"
                : "");
    return free
        + " = "
        + ByteSize.exact(c.allocatableMemoryBytes())
        + " allocatable - "
        + ByteSize.exact(committed)
        + " requested by the data-plane pods of "
        + named;
  }

  /** Kubernetes toleration matching (core/v1 {@code Toleration.ToleratesTaint}). */
  static boolean tolerates(Toleration tol, Taint taint) {
    if (tol.getEffect() != null
        && !tol.getEffect().isEmpty()
        && !tol.getEffect().equals(taint.getEffect())) {
      return false;
    }
    if (tol.getKey() != null && !tol.getKey().isEmpty() && !tol.getKey().equals(taint.getKey())) {
      return false;
    }
    if ("Exists".equals(tol.getOperator())) {
      return true;
    }
    if (tol.getKey() == null || tol.getKey().isEmpty()) {
      return false; // an empty key needs operator Exists
    }
    return Objects.equals(emptyToNull(tol.getValue()), emptyToNull(taint.getValue()));
  }

  private static String emptyToNull(String s) {
    return s == null || s.isEmpty() ? null : s;
  }

  private static String describe(Taint t) {
    return t.getKey()
        + (t.getValue() == null || t.getValue().isEmpty() ? "" : "=" + t.getValue())
        + ":"
        + t.getEffect();
  }

  private static boolean ready(Node node) {
    if (node.getStatus() == null || node.getStatus().getConditions() == null) {
      return false;
    }
    for (NodeCondition c : node.getStatus().getConditions()) {
      if ("Ready".equals(c.getType())) {
        return "True".equals(c.getStatus());
      }
    }
    return false;
  }

  private static Map<String, String> labels(Node node) {
    Map<String, String> l = node.getMetadata().getLabels();
    return l == null ? Map.of() : l;
  }

  private static Map<String, Quantity> allocatable(Node node) {
    if (node.getStatus() == null || node.getStatus().getAllocatable() == null) {
      return new LinkedHashMap<>();
    }
    return node.getStatus().getAllocatable();
  }

  private static boolean positive(Quantity q) {
    if (q == null) {
      return false;
    }
    try {
      return Quantity.getAmountInBytes(q).compareTo(BigDecimal.ZERO) > 0;
    } catch (RuntimeException e) {
      return false;
    }
  }

  private static long memoryBytes(Quantity q) {
    if (q == null) {
      return 0;
    }
    try {
      return Quantity.getAmountInBytes(q).longValue();
    } catch (RuntimeException e) {
      return 0;
    }
  }
}
