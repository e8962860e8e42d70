package io.tensorcast.operator.desired;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.Reason;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactRef;
import io.tensorcast.api.v1alpha1.ParallelismSpec;
import io.tensorcast.api.v1alpha1.ShardRule;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.api.v1alpha1.TensorShardSet;
import io.tensorcast.api.v1alpha1.TensorShardSetSpec;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.testing.Fixtures;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;

/** The pod of a TensorShardSet node and the placement of its ranks. */
class ShardSetPodTest {
  static final OperatorConfig CONFIG = Fixtures.config();

  static TensorShardSet set(int tp, int ranksPerNode) {
    TensorShardSet s = new TensorShardSet();
    s.getMetadata().setName("llama");
    s.getMetadata().setNamespace("team");
    s.getMetadata().setUid("uid-1");
    s.getMetadata().setGeneration(3L);
    TensorShardSetSpec spec = new TensorShardSetSpec();
    spec.setArtifactRef(new ArtifactRef("llama"));
    spec.setParallelism(new ParallelismSpec(tp, 1, 1, 1));
    spec.getPlacement().setRanksPerNode(ranksPerNode);
    s.setSpec(spec);
    return s;
  }

  static SourceSpec source() {
    SourceSpec s = new SourceSpec();
    s.setUri("hf://meta/llama");
    return s;
  }

  @Test
  void podHasTheSetsIdentityStoreRootAndShardArgsButTheArtifactPodsShape() {
    TensorShardSet set = set(4, 2);
    set.getSpec().setRules(List.of(ShardRule.split("w$", 0)));
    Pod p =
        ShardSetPod.desired(
            set,
            source(),
            "abc123",
            true,
            Fixtures.node("n1").candidate(),
            List.of(2, 3),
            OptionalLong.of(1_000_000),
            CONFIG,
            "key-1");
    assertThat(p.getMetadata().getLabels())
        .containsEntry(ShardSetPod.LABEL_SHARD_SET, "llama")
        .containsEntry(DataPlanePod.LABEL_GENERATION, "3")
        .doesNotContainKey(TensorcastConstants.LABEL_ARTIFACT);
    assertThat(p.getMetadata().getOwnerReferences().get(0).getKind()).isEqualTo("TensorShardSet");
    assertThat(p.getMetadata().getName())
        .startsWith("llama-")
        .isNotEqualTo(DataPlanePod.podName(ShardSetPod.carrier(set, source(), null), "n1"));
    assertThat(ShardSetPod.ranks(p)).containsExactly(2, 3);
    Container c = p.getSpec().getContainers().get(0);
    String root = CONFIG.storeRoot() + "/tensorshardsets/team.llama";
    assertThat(c.getArgs())
        .containsSequence("--store-root", root)
        .containsSequence("--shards", "dp:1,pp:1,ep:1,tp:4")
        .containsSequence("--ranks", "2,3")
        .containsSequence("--distribution", "source-only")
        .containsSequence("--revision", "abc123")
        .containsSequence("--copy-wait", "10s")
        .contains("--rules");
    assertThat(String.join(" ", c.getArgs())).doesNotContain(CONFIG.storeRoot() + "/team.llama");
    assertThat(p.getSpec().getVolumes()).anySatisfy(v -> assertThat(v.getHostPath()).isNotNull());
    assertThat(PodPlan.memoryRequest(p)).isEqualTo(1_000_000 + CONFIG.memoryOverheadBytes());
    assertThat(c.getReadinessProbe().getHttpGet().getPath()).isEqualTo("/readyz");
  }

  @Test
  void podMountsOnlyTheSetsFolderItsOwnSecretAndTheArtifactsReadTokenAndCarriesItsConsumerLabel() {
    TensorShardSet set = set(4, 2);
    Pod p =
        ShardSetPod.desired(
            set,
            source(),
            null,
            true,
            Fixtures.node("n1").candidate(),
            List.of(0, 1),
            OptionalLong.of(1_000_000),
            CONFIG,
            "key-1");
    String root = CONFIG.storeRoot() + "/tensorshardsets/team.llama";
    // One host directory: the set's own folder, also for the init container that chowns it.
    assertThat(p.getSpec().getVolumes().stream().filter(v -> v.getHostPath() != null))
        .singleElement()
        .satisfies(v -> assertThat(v.getHostPath().getPath()).isEqualTo(root));
    Container init = p.getSpec().getInitContainers().get(0);
    assertThat(init.getCommand()).last().isEqualTo(root);
    assertThat(init.getVolumeMounts())
        .allSatisfy(m -> assertThat(m.getMountPath()).isEqualTo(root));
    // The set's own Secret, not the ModelArtifact's of the same name.
    var own =
        p.getSpec().getVolumes().stream()
            .filter(v -> DataPlanePod.SECRET_VOLUME.equals(v.getName()))
            .findFirst()
            .orElseThrow();
    assertThat(own.getSecret().getSecretName()).isEqualTo("llama-tss-tensorcast");
    // Of the artifact's Secret only the read token, read-only, passed as --copy-token-file.
    var copy =
        p.getSpec().getVolumes().stream()
            .filter(v -> ShardSetPod.COPY_TOKEN_VOLUME.equals(v.getName()))
            .findFirst()
            .orElseThrow();
    assertThat(copy.getSecret().getSecretName()).isEqualTo("llama-tensorcast");
    assertThat(copy.getSecret().getItems())
        .singleElement()
        .satisfies(i -> assertThat(i.getKey()).isEqualTo(TensorcastConstants.SECRET_READ_TOKEN));
    Container c = p.getSpec().getContainers().get(0);
    assertThat(c.getVolumeMounts())
        .anySatisfy(
            m -> {
              assertThat(m.getName()).isEqualTo(ShardSetPod.COPY_TOKEN_VOLUME);
              assertThat(m.getMountPath()).isEqualTo(TensorcastConstants.COPY_TOKEN_DIR);
              assertThat(m.getReadOnly()).isTrue();
            });
    assertThat(c.getArgs())
        .containsSequence(
            "--copy-token-file",
            TensorcastConstants.COPY_TOKEN_DIR + "/" + TensorcastConstants.SECRET_READ_TOKEN)
        .containsSequence(
            "--admin-token-file",
            TensorcastConstants.ARTIFACT_SECRET_DIR + "/" + TensorcastConstants.SECRET_ADMIN_TOKEN);
    assertThat(p.getMetadata().getLabels())
        .containsEntry(TensorcastConstants.CONSUMER_LABEL_PREFIX + "llama", "true");
    // Non-root, nothing added but IPC_LOCK.
    assertThat(p.getSpec().getSecurityContext().getRunAsNonRoot()).isTrue();
    assertThat(c.getSecurityContext().getCapabilities().getDrop()).containsExactly("ALL");
    assertThat(c.getSecurityContext().getCapabilities().getAdd()).containsExactly("IPC_LOCK");
    assertThat(c.getSecurityContext().getReadOnlyRootFilesystem()).isTrue();
    assertThat(p.getMetadata().getAnnotations())
        .containsEntry(DataPlanePod.ANNOTATION_KEY_ID, "key-1");
  }

  @Test
  void aSetWithItsOwnSourceMountsNoArtifactTokenAndCarriesNoConsumerLabel() {
    TensorShardSet set = set(2, 2);
    set.getSpec().setArtifactRef(null);
    set.getSpec().setSource(source());
    Pod p =
        ShardSetPod.desired(
            set,
            source(),
            null,
            false,
            Fixtures.node("n1").candidate(),
            List.of(0, 1),
            OptionalLong.empty(),
            CONFIG,
            "key-1");
    assertThat(p.getSpec().getVolumes())
        .noneSatisfy(v -> assertThat(v.getName()).isEqualTo(ShardSetPod.COPY_TOKEN_VOLUME));
    assertThat(p.getMetadata().getLabels().keySet())
        .noneMatch(k -> k.startsWith(TensorcastConstants.CONSUMER_LABEL_PREFIX));
    assertThat(p.getSpec().getContainers().get(0).getArgs()).doesNotContain("--copy-token-file");
  }

  @Test
  void theSetsSecretAndNetworkPolicyAreItsOwnNotTheArtifactsOfTheSameName() {
    TensorShardSet set = set(4, 2);
    io.tensorcast.api.v1alpha1.ModelArtifact ma = new io.tensorcast.api.v1alpha1.ModelArtifact();
    ma.getMetadata().setName("llama");
    ma.getMetadata().setNamespace("team");
    ma.getMetadata().setUid("uid-ma");
    ma.getMetadata().setGeneration(3L);
    var key = io.tensorcast.operator.trust.MasterKey.random();
    var setKeys =
        io.tensorcast.operator.trust.ArtifactKeys.derive(
            key, set, set.getMetadata().getGeneration());
    var maKeys =
        io.tensorcast.operator.trust.ArtifactKeys.derive(
            key, ma, io.tensorcast.operator.desired.CopyGeneration.of(ma).generation());
    var secret = ShardSetChildren.secret(set, setKeys);
    assertThat(secret.getMetadata().getName())
        .isEqualTo("llama-tss-tensorcast")
        .isNotEqualTo(ArtifactChildren.name(ma));
    assertThat(secret.getMetadata().getOwnerReferences().get(0).getKind())
        .isEqualTo("TensorShardSet");
    assertThat(secret.getMetadata().getOwnerReferences().get(0).getUid()).isEqualTo("uid-1");
    assertThat(secret.getData().keySet())
        .containsExactly(
            TensorcastConstants.SECRET_PEER_SECRET,
            TensorcastConstants.SECRET_READ_TOKEN,
            TensorcastConstants.SECRET_ADMIN_TOKEN);
    assertThat(setKeys.peerSecret()).isNotEqualTo(maKeys.peerSecret());
    assertThat(setKeys.readToken()).isNotEqualTo(maKeys.readToken());
    assertThat(setKeys.adminToken()).isNotEqualTo(maKeys.adminToken());

    var policy = ShardSetChildren.networkPolicy(set, CONFIG);
    assertThat(policy.getMetadata().getName()).isEqualTo("llama-tss-tensorcast");
    assertThat(policy.getSpec().getPodSelector().getMatchLabels())
        .containsEntry(ShardSetPod.LABEL_SHARD_SET, "llama")
        .containsEntry(TensorcastConstants.LABEL_NAME, TensorcastConstants.LABEL_NAME_DATAPLANE);
    // The control port only; the set's pods form no swarm, so nothing reaches their peer port.
    assertThat(policy.getSpec().getIngress())
        .singleElement()
        .satisfies(
            r -> {
              assertThat(r.getPorts().get(0).getPort().getIntVal()).isEqualTo(CONFIG.controlPort());
              assertThat(r.getFrom())
                  .anySatisfy(
                      f ->
                          assertThat(f.getPodSelector().getMatchLabels())
                              .containsEntry("shardset.consumer.tensorcast.io/llama", "true"));
            });
  }

  @Test
  void blocksOfRanksGoToChosenNodesAndStayWhereTheirPodIs() {
    List<Node> nodes =
        List.of(
            Fixtures.node("a").rdmaResource(1).build(),
            Fixtures.node("b").rdmaResource(1).build(),
            Fixtures.node("c").build());
    var placement = set(4, 2).getSpec().getPlacement();
    RankPlacement.Result r =
        RankPlacement.place(
            placement,
            4,
            nodes,
            List.of(),
            Optional.of(List.of(10L, 10L, 10L, 10L)),
            5,
            5,
            Map.of("b", List.of(0, 1)),
            Map.of());
    assertThat(r.complete()).isTrue();
    assertThat(r.slots()).hasSize(2);
    assertThat(r.slots().get(0).node().name()).isEqualTo("b");
    assertThat(r.slots().get(0).ranks()).containsExactly(0, 1);
    assertThat(r.slots().get(0).bytes()).contains(20L);
    assertThat(r.slots().get(1).node().name()).isEqualTo("a");
    assertThat(r.slots().get(1).ranks()).containsExactly(2, 3);
    assertThat(RankPlacement.blocks(5, 2))
        .containsExactly(List.of(0, 1), List.of(2, 3), List.of(4));
  }

  static Pod consumer(String name, String index, String node) {
    return new io.fabric8.kubernetes.api.model.PodBuilder()
        .withNewMetadata()
        .withName(name)
        .withNamespace("team")
        .withLabels(Map.of("app", "vllm", "worker-index", index))
        .endMetadata()
        .withNewSpec()
        .withNodeName(node)
        .endSpec()
        .build();
  }

  @Test
  void consumerPodsDecideWhereTheirBlockOfRanksGoes() {
    List<Node> nodes =
        List.of(Fixtures.node("a").build(), Fixtures.node("b").build(), Fixtures.node("c").build());
    var placement = set(4, 2).getSpec().getPlacement();
    var c = new io.tensorcast.api.v1alpha1.ShardPlacementSpec.ConsumerPlacement();
    c.setMatchLabels(Map.of("app", "vllm"));
    c.setRankLabel("worker-index");
    placement.setConsumers(c);
    RankPlacement.Result r =
        RankPlacement.place(
            placement,
            4,
            nodes,
            List.of(consumer("w1", "1", "c"), consumer("w0", "0", "a")),
            Optional.empty(),
            5,
            5,
            Map.of(),
            Map.of());
    assertThat(r.complete()).isTrue();
    assertThat(r.slots())
        .extracting(s -> s.node().name() + s.ranks())
        .containsExactlyInAnyOrder("a[0, 1]", "c[2, 3]");
    RankPlacement.Result waiting =
        RankPlacement.place(
            placement,
            4,
            nodes,
            List.of(consumer("w1", "1", "c"), consumer("w0", "0", null)),
            Optional.empty(),
            5,
            5,
            Map.of(),
            Map.of());
    assertThat(waiting.complete()).isFalse();
    assertThat(waiting.reason()).isEqualTo(Reason.ConsumersNotScheduled);
    assertThat(waiting.message()).contains("worker-index = [0]");
    assertThat(waiting.slots()).extracting(s -> s.node().name()).containsExactly("c");
  }
}
