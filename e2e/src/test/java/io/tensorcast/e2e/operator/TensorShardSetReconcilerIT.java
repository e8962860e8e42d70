package io.tensorcast.e2e.operator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.OwnerReference;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Quantity;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ArtifactRef;
import io.tensorcast.api.v1alpha1.MemorySpec;
import io.tensorcast.api.v1alpha1.ParallelismSpec;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.v1alpha1.ShardRankStatus;
import io.tensorcast.api.v1alpha1.ShardRule;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.api.v1alpha1.TensorShardSet;
import io.tensorcast.api.v1alpha1.TensorShardSetSpec;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.ShardReport;
import io.tensorcast.operator.desired.PodPlan;
import io.tensorcast.operator.desired.ShardSetPod;
import io.tensorcast.operator.reconciler.TensorShardSetReconciler;
import io.tensorcast.operator.trust.MasterKey;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The decisions of {@link TensorShardSetReconciler} itself, on a real API server ({@link
 * ReconcilerCluster}): the test plays the kubelet and the data plane (each pod's {@code /status}
 * with its {@code shards} report), so every case takes seconds and asserts what the reconciler
 * wrote: pods per node with their ranks and memory, status phase, per-rank entries, conditions.
 */
@Timeout(120)
class TensorShardSetReconcilerIT extends ReconcilerITBase {
  static final long MIB = 1024L * 1024;
  static final String REVISION = "listing-sha256:0123456789abcdef";
  static final String RULE_SET = "built-in Llama (LlamaForCausalLM)";

  @BeforeAll
  static void start() {
    startOperator(
        (config, dataPlane, clock) ->
            new TensorShardSetReconciler(
                config, MasterKey.random(), dataPlane, clock, new SimpleMeterRegistry()));
  }

  // ------------------------------------------------------------------------------------ cases

  @Test
  void ranksArePlacedInBlocksPerNodeSizedByThePlanAndTheSetTurnsReady() {
    String a = cluster.node(ns, "a", true);
    String b = cluster.node(ns, "b", true);
    TensorShardSet created = client.resource(set("llama", 4, 2)).create();
    assertThat(created.getMetadata().getFinalizers()).isEmpty();

    // Sizes first: one pod, for the first block of ranks, resolves the plan.
    await().atMost(WAIT).until(() -> pods().size() == 1);
    Pod resolver = pods().get(0);
    assertOwnedByTheSet(resolver, created);
    assertThat(ShardSetPod.ranks(resolver)).containsExactly(0, 1);
    assertThat(resolver.getMetadata().getLabels())
        .containsEntry(ShardSetPod.LABEL_SHARD_SET, "llama")
        .doesNotContainKey(TensorcastConstants.LABEL_ARTIFACT);
    assertThat(memoryRequest(resolver))
        .as("before the plan: the overhead alone")
        .isEqualTo(OperatorEnvironment.OVERHEAD);
    TensorShardSet resolving =
        awaitSet("llama", s -> s.getStatus().getPhase() == ArtifactPhase.Resolving);
    assertThat(condition(resolving, "Resolved").getReason()).isEqualTo("Resolving");
    assertThat(get("llama").getMetadata().getFinalizers())
        .containsExactly(TensorcastConstants.FINALIZER);

    // The resolver's data plane reports the plan: 10 MiB per rank file.
    String first = address(resolver, a, b);
    String second = first.equals(a) ? b : a;
    cluster.reports.put(
        first, report(created, DataPlaneStatus.Phase.Loading, List.of(0, 1), false));
    TensorShardSet loading =
        awaitSet("llama", s -> s.getStatus().getPhase() == ArtifactPhase.Loading);
    assertThat(condition(loading, "Resolved").getStatus()).isEqualTo("True");
    assertThat(condition(loading, "Resolved").getMessage())
        .isEqualTo(
            "4 rank files, 40.0 MiB in all, cut by " + RULE_SET + " at revision " + REVISION);

    // Now every block has a pod sized for its node's rank files.
    await()
        .atMost(WAIT)
        .until(
            () ->
                pods().stream().filter(p -> p.getMetadata().getDeletionTimestamp() == null).count()
                    == 2);
    Pod other =
        pods().stream()
            .filter(p -> ShardSetPod.ranks(p).equals(List.of(2, 3)))
            .findFirst()
            .orElseThrow();
    assertThat(address(other, a, b)).isEqualTo(second);
    assertThat(memoryRequest(other))
        .as("two 10 MiB rank files + overhead")
        .isEqualTo(20 * MIB + OperatorEnvironment.OVERHEAD);

    cluster.reports.put(first, report(created, DataPlaneStatus.Phase.Ready, List.of(0, 1), true));
    cluster.reports.put(second, report(created, DataPlaneStatus.Phase.Ready, List.of(2, 3), true));
    TensorShardSet ready = awaitSet("llama", s -> s.getStatus().getPhase() == ArtifactPhase.Ready);

    var st = ready.getStatus();
    assertThat(st.getObservedGeneration()).isEqualTo(1L);
    assertThat(st.getWorldSize()).isEqualTo(4);
    assertThat(st.getParallelism()).isEqualTo("tp:4");
    assertThat(st.getRuleSet()).isEqualTo(RULE_SET);
    assertThat(st.getResolvedRevision()).isEqualTo(REVISION);
    assertThat(st.getReadyRanks()).isEqualTo(4);
    assertThat(st.getRanksReady()).isEqualTo("4/4");
    assertThat(st.getBytesPerRank()).isEqualTo(10 * MIB);
    assertThat(st.getSizePerRank()).isEqualTo("10.0 MiB");
    assertThat(st.getRanks()).extracting(ShardRankStatus::getRank).containsExactly(0, 1, 2, 3);
    for (ShardRankStatus r : st.getRanks()) {
      assertThat(r.getPhase()).isEqualTo(ArtifactPhase.Ready);
      assertThat(r.getNode()).isEqualTo(PodPlan.node(r.getRank() < 2 ? resolver : other));
      assertThat(r.getFileBytes()).isEqualTo(10 * MIB);
      assertThat(r.getBytesNeeded()).isEqualTo(10 * MIB - 4096);
      assertThat(r.getFile()).isEqualTo(String.format("/store/rank_%05d.safetensors", r.getRank()));
      assertThat(r.getCoordinates()).isEqualTo("tp:" + r.getRank() + "/4");
    }
    assertThat(condition(ready, "Scheduled").getStatus()).isEqualTo("True");
    assertThat(condition(ready, "Scheduled").getReason()).isEqualTo("NodesSelected");
    assertThat(condition(ready, "Loaded").getReason()).isEqualTo("AllBytesLoaded");
    Condition readyCondition = condition(ready, "Ready");
    assertThat(readyCondition.getStatus()).isEqualTo("True");
    assertThat(readyCondition.getReason()).isEqualTo("AllRanksReady");
    assertThat(readyCondition.getMessage())
        .isEqualTo("every rank file is complete and verified on its node (4/4 ranks ready)");
  }

  @Test
  void aMalformedSpecFailsWithEveryViolationAndCreatesNothing() {
    cluster.node(ns, "a", true);
    TensorShardSet bad = set("both", 2, 2);
    bad.getSpec().setArtifactRef(new ArtifactRef("llama"));
    ShardRule rule = new ShardRule();
    rule.setPattern("model\\.layers\\.(\\d+");
    rule.setSplitDim(0);
    bad.getSpec().setRules(List.of(rule));
    client.resource(bad).create();

    TensorShardSet failed = awaitSet("both", s -> s.getStatus().getPhase() == ArtifactPhase.Failed);

    Condition ready = condition(failed, "Ready");
    assertThat(ready.getStatus()).isEqualTo("False");
    assertThat(ready.getReason()).isEqualTo("InvalidSpec");
    assertThat(ready.getMessage())
        .startsWith(
            "invalid spec: spec.artifactRef, spec.source: give exactly one: a ModelArtifact of"
                + " this namespace, or a source of its own; spec.rules[0].pattern:"
                + " 'model\\.layers\\.(\\d+' is not a valid Java regular expression: ");
    assertThat(condition(failed, "Resolved").getReason()).isEqualTo("InvalidSpec");
    assertThat(failed.getStatus().getRanks()).isEmpty();
    assertThat(pods()).isEmpty();
  }

  @Test
  void ranksTooLargeForEveryNodeFailTheSetWithTheNumbersAndRemoveItsPods() {
    String a = cluster.node(ns, "a", true);
    String b = cluster.node(ns, "b", true);
    TensorShardSet created = client.resource(set("huge", 4, 2)).create();
    await().atMost(WAIT).until(() -> pods().size() == 1);
    Pod resolver = pods().get(0);

    // Two 3 GiB rank files per node do not fit a node of 4 GiB.
    cluster.reports.put(
        address(resolver, a, b),
        DataPlaneStatus.builder(ShardSetPod.artifactId(created), DataPlaneStatus.Phase.Loading)
            .source(created.getSpec().getSource().getUri())
            .resolvedRevision(REVISION)
            .shards(
                new ShardReport(
                    "tp:4",
                    RULE_SET,
                    4,
                    List.of(3072 * MIB, 3072 * MIB, 3072 * MIB, 3072 * MIB),
                    List.of(3072 * MIB, 3072 * MIB, 3072 * MIB, 3072 * MIB),
                    4096,
                    List.of()))
            .build());
    TensorShardSet failed = awaitSet("huge", s -> s.getStatus().getPhase() == ArtifactPhase.Failed);

    Condition ready = condition(failed, "Ready");
    assertThat(ready.getReason()).isEqualTo("InsufficientMemory");
    assertThat(ready.getMessage())
        .contains("2 with too little free memory (most free: node " + ns + "-")
        .endsWith(
            " 4.0 GiB (4294967296 bytes) free (allocatable; no other Tensorcast pod requests"
                + " memory there) < 6.1 GiB (6509559808 bytes) needed per node = largest node's"
                + " rank files 6.0 GiB + overhead 64.0 MiB) ["
                + ns
                + "-a, "
                + ns
                + "-b]");
    assertThat(condition(failed, "Scheduled").getReason()).isEqualTo("InsufficientMemory");
    await()
        .atMost(WAIT)
        .untilAsserted(
            () ->
                assertThat(pods())
                    .as("the set's pods are removed")
                    .allMatch(p -> p.getMetadata().getDeletionTimestamp() != null));
    // And it stays so: the status keeps the sizes, so no resolver pod is started again (one was,
    // every ~100 ms: created, resolved from the same report, failed, deleted).
    await()
        .during(Duration.ofSeconds(3))
        .atMost(WAIT)
        .untilAsserted(
            () ->
                assertThat(pods())
                    .as("no pod of the failed set is created again")
                    .allMatch(p -> p.getMetadata().getDeletionTimestamp() != null));
    assertThat(client.resource(created).get().getStatus().getRanks())
        .extracting(r -> r.getFileBytes())
        .containsOnly(3072 * MIB);

    // Nodes grown to fit end the failure: the kept sizes place both blocks at once, each pod sized
    // for its node's two rank files, and no resolver pod runs again.
    for (String n : List.of(ns + "-a", ns + "-b")) {
      Node node = client.nodes().withName(n).get();
      node.getStatus().getAllocatable().put("memory", new Quantity("8Gi"));
      node.getStatus().getCapacity().put("memory", new Quantity("8Gi"));
      client.nodes().resource(node).updateStatus();
    }
    await()
        .atMost(WAIT)
        .untilAsserted(
            () ->
                assertThat(pods())
                    .filteredOn(p -> p.getMetadata().getDeletionTimestamp() == null)
                    .extracting(TensorShardSetReconcilerIT::memoryRequest)
                    .containsExactly(2 * 3072 * MIB + 64 * MIB, 2 * 3072 * MIB + 64 * MIB));
    awaitSet("huge", s -> s.getStatus().getPhase() != ArtifactPhase.Failed);
  }

  @Test
  void deletionWaitsForThePodsAndThenLetsTheSetGo() {
    cluster.node(ns, "a", true);
    client.resource(set("gone", 2, 2)).create();
    await().atMost(WAIT).until(() -> pods().size() == 1);
    await()
        .atMost(WAIT)
        .until(
            () ->
                get("gone").getMetadata().getFinalizers().contains(TensorcastConstants.FINALIZER));
    // The scheduler's part: bound to its node, the pod is deleted gracefully (it stays,
    // terminating, until its kubelet confirms it gone), not at once.
    Pod pod = pods().get(0);
    cluster.bind(pod, ns + "-a");

    client.resources(TensorShardSet.class).inNamespace(ns).withName("gone").delete();

    ReconcilerCluster.Deletion seen = cluster.awaitDeletion(() -> get("gone"), this::setPods, WAIT);
    assertThat(seen.heldForTerminatingPods())
        .as("the finalizer held the set while its pod was terminating")
        .contains(pod.getMetadata().getName());
    assertThat(seen.podsLeftBehind())
        .as("pods still there when the finalizer let the set go")
        .isEmpty();
    assertThat(setPods()).isEmpty();
  }

  // ---------------------------------------------------------------------------------- helpers

  /** A set of {@code tp} ranks with a source of its own, {@code perNode} ranks per node. */
  private TensorShardSet set(String name, int tp, int perNode) {
    TensorShardSet set = new TensorShardSet();
    set.getMetadata().setName(name);
    set.getMetadata().setNamespace(ns);
    TensorShardSetSpec spec = new TensorShardSetSpec();
    SourceSpec source = new SourceSpec();
    source.setUri("s3://models/" + name + "/");
    source.setEndpoint("http://s3.storage:9000");
    source.setInsecureEndpoint(true);
    spec.setSource(source);
    spec.setParallelism(new ParallelismSpec(tp, 1, 1, 1));
    spec.getPlacement().setRanksPerNode(perNode);
    spec.getPlacement().setRdma(RdmaPolicy.Required);
    spec.getPlacement().setNodeSelector(Map.of(ReconcilerCluster.GROUP_LABEL, ns));
    MemorySpec memory = new MemorySpec();
    memory.setPinned(false);
    memory.setLimit(new Quantity("8Mi"));
    spec.setMemory(memory);
    set.setSpec(spec);
    return set;
  }

  /**
   * A report of the 4-rank plan (10 MiB per rank file, 4 KiB of it the manifest) with progress of
   * {@code ranks}.
   */
  private static DataPlaneStatus report(
      TensorShardSet set, DataPlaneStatus.Phase phase, List<Integer> ranks, boolean complete) {
    long file = 10 * MIB;
    long tensors = file - 4096;
    return DataPlaneStatus.builder(ShardSetPod.artifactId(set), phase)
        .source(set.getSpec().getSource().getUri())
        .resolvedRevision(REVISION)
        .shards(
            new ShardReport(
                "tp:4",
                RULE_SET,
                4,
                List.of(file, file, file, file),
                List.of(tensors, tensors, tensors, tensors),
                4096,
                ranks.stream()
                    .map(
                        r ->
                            new ShardReport.Rank(
                                r,
                                "tp:" + r + "/4",
                                String.format("/store/rank_%05d.safetensors", r),
                                file,
                                tensors,
                                complete ? tensors : 0,
                                complete ? tensors : 0,
                                0,
                                complete ? 3 : 0,
                                complete))
                    .toList()))
        .build();
  }

  private TensorShardSet get(String name) {
    return client.resources(TensorShardSet.class).inNamespace(ns).withName(name).get();
  }

  private TensorShardSet awaitSet(String name, Predicate<TensorShardSet> done) {
    return await()
        .atMost(WAIT)
        .until(
            () -> {
              pods();
              return get(name);
            },
            s -> s != null && s.getStatus() != null && done.test(s));
  }

  private List<Pod> setPods() {
    return client.pods().inNamespace(ns).withLabel(ShardSetPod.LABEL_SHARD_SET).list().getItems();
  }

  /** The test's set pods; each new one is marked Running on its node's address. */
  private List<Pod> pods() {
    return cluster.running(setPods());
  }

  /** Which of the node addresses {@code a}, {@code b} the pod's node has. */
  private String address(Pod p, String a, String b) {
    String address =
        client.nodes().withName(PodPlan.node(p)).get().getMetadata().getLabels().get("ip");
    assertThat(address).isIn(a, b);
    return address;
  }

  private static long memoryRequest(Pod p) {
    return PodPlan.memoryRequest(p);
  }

  private static Condition condition(TensorShardSet s, String type) {
    return s.getStatus().getConditions().stream()
        .filter(c -> c.getType().equals(type))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no condition " + type + " in " + s.getStatus()));
  }

  private static void assertOwnedByTheSet(Pod child, TensorShardSet owner) {
    assertThat(child.getMetadata().getOwnerReferences())
        .singleElement()
        .satisfies(
            (OwnerReference r) -> {
              assertThat(r.getKind()).isEqualTo("TensorShardSet");
              assertThat(r.getName()).isEqualTo(owner.getMetadata().getName());
              assertThat(r.getUid()).isEqualTo(owner.getMetadata().getUid());
              assertThat(r.getController()).isTrue();
            });
  }
}
