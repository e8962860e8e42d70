package io.tensorcast.operator.written;

import static io.tensorcast.operator.testing.Fixtures.artifact;
import static io.tensorcast.operator.testing.Fixtures.config;
import static io.tensorcast.operator.testing.Fixtures.node;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.Volume;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactKind;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.v1alpha1.SaveSpec;
import io.tensorcast.api.v1alpha1.WritersSpec;
import io.tensorcast.api.v1alpha1.WrittenVersionsStatus;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.operator.desired.NodeSelection;
import io.tensorcast.operator.status.WrittenStatus;
import io.tensorcast.operator.testing.Fixtures;
import io.tensorcast.operator.written.WrittenArtifacts.PodVersions;
import io.tensorcast.operator.written.WrittenArtifacts.Role;
import io.tensorcast.operator.written.WrittenArtifacts.SaveOrder;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import org.junit.jupiter.api.Test;

class WrittenArtifactsTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static ModelArtifact written(ArtifactKind kind) {
    ModelArtifact a = artifact("rl", "policy", 3, null);
    a.getSpec().getSource().setUri(null);
    WritersSpec w = new WritersSpec();
    w.setPodSelector(Map.of("app", "trainer"));
    a.getSpec().getSource().setWriters(w);
    a.getSpec().setKind(kind);
    a.getSpec().getMemory().setLimit(new Quantity("8Gi"));
    return a;
  }

  private static Pod pod(String name, String node, String phase, Map<String, String> labels) {
    return new PodBuilder()
        .withNewMetadata()
        .withName(name)
        .withNamespace("rl")
        .withLabels(labels)
        .endMetadata()
        .withNewSpec()
        .withNodeName(node)
        .endSpec()
        .withNewStatus()
        .withPhase(phase)
        .endStatus()
        .build();
  }

  @Test
  void writerNodesAreTheNodesOfRunningPodsThatMatchTheSelector() {
    Map<String, String> sel = Map.of("app", "trainer");
    List<Pod> pods =
        List.of(
            pod("t-0", "n1", "Running", Map.of("app", "trainer", "rank", "0")),
            pod("t-1", "n1", "Running", Map.of("app", "trainer", "rank", "1")),
            pod("t-2", "n2", "Running", Map.of("app", "trainer", "rank", "2")),
            pod("t-3", "n3", "Pending", Map.of("app", "trainer")),
            pod("other", "n4", "Running", Map.of("app", "rollout")),
            pod(
                "dp",
                "n5",
                "Running",
                Map.of(
                    "app",
                    "trainer",
                    TensorcastConstants.LABEL_NAME,
                    TensorcastConstants.LABEL_NAME_DATAPLANE)));
    assertThat(WrittenArtifacts.writerNodes(pods, sel)).containsExactly("n1", "n2");
    assertThat(WrittenArtifacts.writerNodes(pods, Map.of())).as("an empty selector").isEmpty();
  }

  @Test
  void writerAndReaderPodsRunServeWritesWithTheirRolesAndTheWriterGetsTheWriteToken() {
    ModelArtifact a = written(ArtifactKind.RLCheckpoint);
    List<String> writers = List.of("policy-dp-n2", "policy-dp-n1");
    Pod w =
        DataPlanePod.desired(
            a,
            node("n1").candidate(),
            WrittenArtifacts.bytesPerNode(a.getSpec()),
            config(),
            Fixtures.KEY_ID,
            Role.WRITER,
            writers);
    Pod r =
        DataPlanePod.desired(
            a,
            node("n3").candidate(),
            WrittenArtifacts.bytesPerNode(a.getSpec()),
            config(),
            Fixtures.KEY_ID,
            Role.READER,
            writers);
    List<String> wa = w.getSpec().getContainers().get(0).getArgs();
    List<String> ra = r.getSpec().getContainers().get(0).getArgs();
    assertThat(wa.get(0)).isEqualTo("serve-writes");
    assertThat(wa)
        .containsSequence("--writers", "policy-dp-n1,policy-dp-n2")
        .containsSequence("--retain", "2")
        .containsSequence("--kind", "RLCheckpoint")
        .contains("--writer")
        .containsSequence(
            "--write-token-file",
            TensorcastConstants.ARTIFACT_SECRET_DIR + "/" + TensorcastConstants.SECRET_WRITE_TOKEN)
        .doesNotContain("--want");
    assertThat(ra).containsSequence("--want", "all").doesNotContain("--writer");
    assertThat(secretKeys(w)).contains(TensorcastConstants.SECRET_WRITE_TOKEN);
    assertThat(secretKeys(r))
        .as("only writer nodes' pods hold the write token")
        .doesNotContain(TensorcastConstants.SECRET_WRITE_TOKEN);
    // 8 GiB per version, 3 versions at most on a node (2 kept + 1 arriving), plus the overhead.
    assertThat(WrittenArtifacts.bytesPerNode(a.getSpec())).isEqualTo(OptionalLong.of(24L << 30));
  }

  private static List<String> secretKeys(Pod p) {
    for (Volume v : p.getSpec().getVolumes()) {
      if (v.getSecret() != null) {
        return v.getSecret().getItems().stream().map(i -> i.getKey()).toList();
      }
    }
    return List.of();
  }

  private static JsonNode entry(String state, boolean complete, String save) throws Exception {
    String s = "{\"state\":\"" + state + "\",\"complete\":" + complete;
    if (save != null) {
      s += ",\"save\":{\"state\":\"" + save + "\",\"uri\":\"s3://b/p/x/\"}";
    }
    return JSON.readTree(s + "}");
  }

  @Test
  void eachCompleteReadyVersionIsSavedOnceFromAReaderFirstUnderItsKey() throws Exception {
    SaveSpec save = new SaveSpec();
    save.setUri("s3://kv-tier/llama");
    save.setKeyMetadata("prefix_sha256");
    List<PodVersions> pods =
        List.of(
            new PodVersions(
                "w-1",
                Role.WRITER,
                "kv-aa",
                Map.of("kv-aa", entry("Ready", true, null), "kv-bb", entry("Ready", true, null))),
            new PodVersions(
                "r-1", Role.READER, "kv-aa", Map.of("kv-aa", entry("Ready", true, null))),
            new PodVersions(
                "r-2", Role.READER, null, Map.of("kv-cc", entry("Fetching", true, "Saving"))));
    Map<String, Map<String, String>> meta =
        Map.of("kv-aa", Map.of("prefix_sha256", "aa11"), "kv-bb", Map.of("prefix_sha256", "bb22"));
    List<SaveOrder> orders = WrittenArtifacts.saves(save, pods, null, meta);
    assertThat(orders)
        .containsExactlyInAnyOrder(
            new SaveOrder("r-1", "kv-aa", "s3://kv-tier/llama/aa11/"),
            new SaveOrder("w-1", "kv-bb", "s3://kv-tier/llama/bb22/"));
    // Saved already (the status says so): nothing more; a key missing from metadata: no order.
    WrittenVersionsStatus done = new WrittenVersionsStatus();
    done.setSaved(
        List.of(new WrittenVersionsStatus.SavedVersion("kv-aa", "s3://kv-tier/llama/aa11/")));
    assertThat(WrittenArtifacts.saves(save, pods, done, Map.of("kv-bb", Map.of())))
        .as("kv-bb has no prefix_sha256 entry: nowhere to save it")
        .isEmpty();
    assertThat(WrittenArtifacts.saveUri(save, "kv-x", Map.of("prefix_sha256", "../etc")))
        .as("a key that is not a plain path segment")
        .isNull();
  }

  @Test
  void versionAnswersAreReadPerPodWithTheirRoleAndEachVersionsMetadata() throws Exception {
    Pod writer = pod("w-1", "n1", "Running", Map.of());
    Pod reader = pod("r-1", "n2", "Running", Map.of());
    Pod silent = pod("r-2", "n3", "Running", Map.of());
    Map<String, JsonNode> answers =
        Map.of(
            "w-1",
            JSON.readTree(
                "{\"current\":\"kv-aa\",\"versions\":[{\"name\":\"kv-aa\",\"state\":\"Ready\","
                    + "\"complete\":true,\"metadata\":{\"prefix_sha256\":\"aa11\"}}]}"),
            "r-1",
            JSON.readTree(
                "{\"current\":null,\"versions\":[{\"name\":\"kv-aa\",\"state\":\"Fetching\","
                    + "\"complete\":false,\"metadata\":{}}]}"));
    WrittenArtifacts.Views v =
        WrittenArtifacts.views(List.of(writer, reader, silent), answers, Set.of("n1"));
    assertThat(v.pods())
        .extracting(PodVersions::pod, PodVersions::role, PodVersions::current)
        .as("a pod without an answer is left out")
        .containsExactly(tuple("w-1", Role.WRITER, "kv-aa"), tuple("r-1", Role.READER, null));
    assertThat(v.pods().get(1).versions().get("kv-aa").path("state").asText())
        .isEqualTo("Fetching");
    assertThat(v.metadata()).containsEntry("kv-aa", Map.of("prefix_sha256", "aa11"));
  }

  @Test
  void statusIsReadyWhenEveryReaderServesAVersionAndServingIsTheCommonOne() throws Exception {
    ModelArtifact a = written(ArtifactKind.RLCheckpoint);
    Instant now = Instant.parse("2026-12-01T12:00:00Z");
    ModelArtifactStatus none = WrittenStatus.build(a, Set.of(), null, List.of(), now);
    assertThat(none.getPhase()).isEqualTo(ArtifactPhase.Pending);
    assertThat(none.getConditions())
        .anySatisfy(c -> assertThat(c.getReason()).isEqualTo("NoWriters"));

    List<PodVersions> halfway =
        List.of(
            new PodVersions("w", Role.WRITER, "step-2", Map.of()),
            new PodVersions("r1", Role.READER, "step-2", Map.of()),
            new PodVersions("r2", Role.READER, "step-1", Map.of()));
    ModelArtifactStatus s = WrittenStatus.build(a, Set.of("n1"), readers(2, 2), halfway, now);
    assertThat(s.getPhase()).as("every reader serves a version").isEqualTo(ArtifactPhase.Ready);
    assertThat(s.getVersions().getLatest()).isEqualTo("step-2");
    assertThat(s.getVersions().getServing()).as("not every reader has step-2 yet").isNull();
    assertThat(s.getReady()).isEqualTo("2/2");

    List<PodVersions> switched =
        List.of(
            new PodVersions("w", Role.WRITER, "step-2", Map.of()),
            new PodVersions(
                "r1", Role.READER, "step-2", Map.of("step-2", entry("Ready", true, "Saved"))),
            new PodVersions("r2", Role.READER, "step-2", Map.of()));
    s = WrittenStatus.build(a, Set.of("n1"), readers(2, 2), switched, now);
    assertThat(s.getVersions().getServing()).isEqualTo("step-2");
    assertThat(s.getResolvedRevision()).isEqualTo("step-2");
    assertThat(s.getVersions().getSaved())
        .extracting(WrittenVersionsStatus.SavedVersion::getVersion)
        .containsExactly("step-2");

    List<PodVersions> waiting =
        List.of(
            new PodVersions("w", Role.WRITER, "step-1", Map.of()),
            new PodVersions("r1", Role.READER, null, Map.of()));
    s = WrittenStatus.build(a, Set.of("n1"), readers(2, 2), waiting, now);
    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Loading);
    assertThat(s.getReady()).isEqualTo("0/2");
  }

  /** {@code chosen} of {@code wanted} reader nodes, chosen among plain nodes with rdma Disabled. */
  private static NodeSelection.Result readers(int chosen, int wanted) {
    List<Node> nodes = new ArrayList<>();
    for (int i = 1; i <= chosen; i++) {
      nodes.add(node("r" + i).build());
    }
    return NodeSelection.select(
        nodes,
        new NodeSelection.Request(
            wanted, RdmaPolicy.Disabled, Map.of(), List.of(), 0, "", Set.of()));
  }

  @Test
  void rdmaRequiredWithoutRdmaReaderNodesIsPendingAndTheStatusSaysWhyAndHowToRelaxIt() {
    ModelArtifact a = written(ArtifactKind.RLCheckpoint);
    Instant now = Instant.parse("2026-12-01T12:00:00Z");
    NodeSelection.Result none =
        NodeSelection.select(
            List.of(node("plain-1").build(), node("plain-2").build()),
            new NodeSelection.Request(
                1, RdmaPolicy.Required, Map.of(), List.of(), 0, "", Set.of()));
    List<PodVersions> writerOnly = List.of(new PodVersions("w", Role.WRITER, "step-1", Map.of()));

    ModelArtifactStatus s = WrittenStatus.build(a, Set.of("n1"), none, writerOnly, now);

    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Pending);
    assertThat(s.getReady()).isEqualTo("0/1");
    assertThat(s.getConditions())
        .filteredOn(c -> c.getType().equals("Scheduled"))
        .singleElement()
        .satisfies(
            c -> {
              assertThat(c.getStatus()).isEqualTo("False");
              assertThat(c.getReason()).isEqualTo("InsufficientNodes");
              assertThat(c.getMessage())
                  .isEqualTo(
                      "1 writer node(s), 0 reader node(s); reader nodes (spec.placement, other"
                          + " than the writers'): 0 of 2 nodes are eligible for 1 replica: 2 not"
                          + " RDMA-capable (no tensorcast.io/rdma in allocatable, no label"
                          + " tensorcast.io/rdma=true; spec.placement.rdma is Required: Preferred"
                          + " or Disabled uses them too) [plain-1, plain-2]");
            });
    assertThat(s.getConditions())
        .filteredOn(c -> c.getType().equals("Ready"))
        .singleElement()
        .satisfies(
            c -> {
              assertThat(c.getStatus()).isEqualTo("False");
              assertThat(c.getReason()).isEqualTo("InsufficientNodes");
              assertThat(c.getMessage()).contains("no node can hold a reader copy");
            });
    assertThat(s.getVersions().getLatest())
        .as("what the writer sealed is still listed")
        .isEqualTo("step-1");
  }

  @Test
  void fewerReaderNodesThanReplicasKeepTheArtifactLoadingWithScheduledFalse() {
    ModelArtifact a = written(ArtifactKind.RLCheckpoint);
    Instant now = Instant.parse("2026-12-01T12:00:00Z");
    List<PodVersions> serving =
        List.of(
            new PodVersions("w", Role.WRITER, "step-1", Map.of()),
            new PodVersions("r1", Role.READER, "step-1", Map.of()));

    ModelArtifactStatus s = WrittenStatus.build(a, Set.of("n1"), readers(1, 2), serving, now);

    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Loading);
    assertThat(s.getReady()).isEqualTo("1/2");
    assertThat(s.getConditions())
        .filteredOn(c -> c.getType().equals("Scheduled"))
        .singleElement()
        .satisfies(
            c -> {
              assertThat(c.getStatus()).isEqualTo("False");
              assertThat(c.getReason()).isEqualTo("InsufficientNodes");
              assertThat(c.getMessage()).contains("1 of 1 nodes are eligible for 2 replicas");
            });
    assertThat(s.getConditions())
        .filteredOn(c -> c.getType().equals("Ready"))
        .singleElement()
        .satisfies(
            c ->
                assertThat(c.getMessage())
                    .isEqualTo(
                        "1 of 2 reader node(s) serve a version (1 could be chosen; see the"
                            + " Scheduled condition); latest sealed: step-1"));
  }

  @Test
  void aKvCacheHasNoReadersAndIsReadyWhenEveryWriterServes() {
    ModelArtifact a = written(ArtifactKind.KVCache);
    Instant now = Instant.parse("2026-12-01T12:00:00Z");
    ModelArtifactStatus s =
        WrittenStatus.build(
            a,
            Set.of("n1"),
            null,
            List.of(new PodVersions("w", Role.WRITER, "snap-1", Map.of())),
            now);

    assertThat(s.getPhase()).isEqualTo(ArtifactPhase.Ready);
    assertThat(s.getReady()).isEqualTo("1/1");
    assertThat(s.getConditions())
        .filteredOn(c -> c.getType().equals("Scheduled"))
        .singleElement()
        .satisfies(c -> assertThat(c.getMessage()).isEqualTo("1 writer node(s), 0 reader node(s)"));
  }
}
