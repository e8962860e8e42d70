package io.tensorcast.operator.desired;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.Pod;
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
            CONFIG);
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
    assertThat(waiting.reason()).isEqualTo("ConsumersNotScheduled");
    assertThat(waiting.message()).contains("worker-index = [0]");
    assertThat(waiting.slots()).extracting(s -> s.node().name()).containsExactly("c");
  }
}
