package io.tensorcast.operator.desired;

import static io.tensorcast.operator.testing.Fixtures.GI;
import static io.tensorcast.operator.testing.Fixtures.MI;
import static io.tensorcast.operator.testing.Fixtures.artifact;
import static io.tensorcast.operator.testing.Fixtures.config;
import static io.tensorcast.operator.testing.Fixtures.node;
import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.NodeSelectorTerm;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.TolerationBuilder;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.CredentialsSecretRef;
import io.tensorcast.api.v1alpha1.DistributionMode;
import io.tensorcast.api.v1alpha1.MemorySpec;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.operator.config.OperatorConfig;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class DataPlanePodTest {
  private static final NodeSelection.Candidate RDMA_NODE =
      node("node-a").rdmaResource(1).candidate();
  private static final NodeSelection.Candidate LABEL_NODE = node("node-b").rdmaLabel().candidate();

  private static ModelArtifact s3Artifact() {
    ModelArtifact a = artifact("team-a", "llama", 3, "s3://models/llama/");
    a.getSpec().getSource().setEndpoint("http://127.0.0.1:9090");
    a.getSpec().getSource().setRegion("us-east-1");
    a.getSpec().getSource().setPathStyle(true);
    a.getSpec().getSource().setInclude(List.of("*.safetensors", "config.json"));
    a.getSpec().getSource().setExclude(List.of("original/"));
    a.getSpec().getSource().setCredentialsSecretRef(new CredentialsSecretRef("store-creds"));
    return a;
  }

  private static Container container(Pod p) {
    return p.getSpec().getContainers().get(0);
  }

  @Test
  void identityLabelsAndOwner() {
    ModelArtifact a = s3Artifact();

    Pod p = DataPlanePod.desired(a, RDMA_NODE, OptionalLong.of(GI), config());

    assertThat(p.getMetadata().getName()).matches("llama-[0-9a-f]{10}");
    assertThat(p.getMetadata().getNamespace()).isEqualTo("team-a");
    assertThat(p.getMetadata().getLabels())
        .containsEntry(TensorcastConstants.LABEL_ARTIFACT, "llama")
        .containsEntry(TensorcastConstants.LABEL_NAME, "tensorcast-dataplane")
        .containsEntry(TensorcastConstants.LABEL_MANAGED_BY, "tensorcast-operator")
        .containsEntry(DataPlanePod.LABEL_GENERATION, "3");
    assertThat(p.getMetadata().getAnnotations())
        .containsEntry(DataPlanePod.ANNOTATION_NODE, "node-a")
        .containsEntry(DataPlanePod.ANNOTATION_ARTIFACT_ID, "team-a-llama-g3")
        .containsKey(DataPlanePod.ANNOTATION_SPEC_HASH);
    var owner = p.getMetadata().getOwnerReferences().get(0);
    assertThat(owner.getKind()).isEqualTo("ModelArtifact");
    assertThat(owner.getApiVersion()).isEqualTo("tensorcast.io/v1alpha1");
    assertThat(owner.getUid()).isEqualTo("uid-llama");
    assertThat(owner.getController()).isTrue();
    assertThat(p.getSpec().getNodeName()).isNull();
    assertThat(p.getSpec().getAutomountServiceAccountToken()).isFalse();
  }

  @Test
  void nameIsDeterministicAndDiffersByNodeAndGeneration() {
    ModelArtifact a = s3Artifact();
    ModelArtifact next = s3Artifact();
    next.getMetadata().setGeneration(4L);

    assertThat(DataPlanePod.podName(a, "node-a")).isEqualTo(DataPlanePod.podName(a, "node-a"));
    assertThat(DataPlanePod.podName(a, "node-a")).isNotEqualTo(DataPlanePod.podName(a, "node-b"));
    assertThat(DataPlanePod.podName(a, "node-a"))
        .isNotEqualTo(DataPlanePod.podName(next, "node-a"));
    ModelArtifact longName = artifact("ns", "m".repeat(63), 1, "s3://bucket/x/");
    assertThat(DataPlanePod.podName(longName, "n")).hasSizeLessThanOrEqualTo(63);
  }

  static Stream<Arguments> artifactIds() {
    return Stream.of(
        Arguments.of("team-a", "llama", 3L, "team-a-llama-g3"),
        Arguments.of("ns", "qwen2.5-7b", 12L, "ns-qwen2-5-7b-g12"),
        Arguments.of(
            "a-rather-long-namespace-name-for-a-team",
            "and-an-equally-long-artifact-name-v2",
            7L,
            null));
  }

  @ParameterizedTest
  @MethodSource("artifactIds")
  void artifactIdIsADns1123LabelNamingNamespaceNameAndGeneration(
      String ns, String name, long gen, String expected) {
    String id = DataPlanePod.artifactId(artifact(ns, name, gen, "s3://bucket/x/"));

    assertThat(id).matches("[a-z0-9]([-a-z0-9]*[a-z0-9])?").hasSizeLessThanOrEqualTo(63);
    assertThat(id).endsWith("-g" + gen);
    if (expected != null) {
      assertThat(id).isEqualTo(expected);
    } else {
      assertThat(id).startsWith(ns).matches(".*-[0-9a-f]{8}-g" + gen);
    }
  }

  static Stream<Arguments> memory() {
    return Stream.of(
        // size known: size + overhead
        Arguments.of(OptionalLong.of(GI), null, GI + 256 * MI),
        Arguments.of(OptionalLong.of(GI), "40Gi", GI + 256 * MI),
        // size unknown, a limit: limit + overhead
        Arguments.of(OptionalLong.empty(), "2Gi", 2 * GI + 256 * MI),
        // size unknown, no limit: overhead only
        Arguments.of(OptionalLong.empty(), null, 256 * MI));
  }

  @ParameterizedTest
  @MethodSource("memory")
  void memoryRequestAndLimitAreSizePlusOverhead(OptionalLong size, String limit, long expected) {
    ModelArtifact a = s3Artifact();
    if (limit != null) {
      MemorySpec m = new MemorySpec();
      m.setLimit(new Quantity(limit));
      a.getSpec().setMemory(m);
    }

    Pod p = DataPlanePod.desired(a, RDMA_NODE, size, config());

    Map<String, Quantity> requests = container(p).getResources().getRequests();
    assertThat(ByteSize.bytes(requests.get("memory"))).isEqualTo(expected);
    assertThat(container(p).getResources().getLimits()).isEqualTo(requests);
    assertThat(PodPlanTestAccess.memoryRequest(p)).isEqualTo(expected);
  }

  @Test
  void pullSecretsPriorityClassAndCpuRequestComeFromTheOperatorsSettings() {
    OperatorConfig config =
        OperatorConfig.fromLookup(
            Map.of(
                    "TENSORCAST_DATAPLANE_IMAGE_PULL_SECRETS", "regcred, mirror-cred",
                    "TENSORCAST_DATAPLANE_PRIORITY_CLASS", "tensorcast-dataplane",
                    "TENSORCAST_DATAPLANE_CPU_REQUEST", "500m")
                ::get);

    Pod p = DataPlanePod.desired(s3Artifact(), RDMA_NODE, OptionalLong.of(GI), config);

    assertThat(p.getSpec().getImagePullSecrets())
        .extracting(r -> r.getName())
        .containsExactly("regcred", "mirror-cred");
    assertThat(p.getSpec().getPriorityClassName()).isEqualTo("tensorcast-dataplane");
    assertThat(container(p).getResources().getRequests())
        .containsEntry("cpu", new Quantity("500m"))
        .containsEntry("memory", ByteSize.quantity(GI + 256 * MI));
    assertThat(container(p).getResources().getLimits()).doesNotContainKey("cpu");
    // The settings are part of the pod spec: an operator given new ones replaces its pods.
    Pod plain = DataPlanePod.desired(s3Artifact(), RDMA_NODE, OptionalLong.of(GI), config());
    assertThat(p.getMetadata().getAnnotations().get(DataPlanePod.ANNOTATION_SPEC_HASH))
        .isNotEqualTo(plain.getMetadata().getAnnotations().get(DataPlanePod.ANNOTATION_SPEC_HASH));
    assertThat(plain.getSpec().getImagePullSecrets()).isEmpty();
    assertThat(plain.getSpec().getPriorityClassName()).isNull();
    assertThat(container(plain).getResources().getRequests()).doesNotContainKey("cpu");
  }

  static Stream<Arguments> rdma() {
    return Stream.of(
        Arguments.of(RdmaPolicy.Required, RDMA_NODE, true),
        Arguments.of(RdmaPolicy.Preferred, RDMA_NODE, true),
        Arguments.of(RdmaPolicy.Disabled, RDMA_NODE, false),
        // Capable by label only: requesting the resource would make the pod unschedulable.
        Arguments.of(RdmaPolicy.Required, LABEL_NODE, false),
        Arguments.of(RdmaPolicy.Preferred, node("plain").candidate(), false));
  }

  @ParameterizedTest
  @MethodSource("rdma")
  void requestsTheRdmaResourceOnlyWhereAdvertisedAndWanted(
      RdmaPolicy policy, NodeSelection.Candidate node, boolean requested) {
    ModelArtifact a = s3Artifact();
    a.getSpec().getPlacement().setRdma(policy);

    Pod p = DataPlanePod.desired(a, node, OptionalLong.of(GI), config());

    Map<String, Quantity> requests = container(p).getResources().getRequests();
    if (requested) {
      assertThat(requests).containsEntry(TensorcastConstants.RDMA_RESOURCE, new Quantity("1"));
      assertThat(container(p).getResources().getLimits())
          .containsEntry(TensorcastConstants.RDMA_RESOURCE, new Quantity("1"));
    } else {
      assertThat(requests).doesNotContainKey(TensorcastConstants.RDMA_RESOURCE);
    }
  }

  @Test
  void pinsToTheNodeByHostnameAffinityOrByNameWhenTheLabelIsMissing() {
    ModelArtifact a = s3Artifact();

    NodeSelectorTerm byHostname =
        DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), config())
            .getSpec()
            .getAffinity()
            .getNodeAffinity()
            .getRequiredDuringSchedulingIgnoredDuringExecution()
            .getNodeSelectorTerms()
            .get(0);
    NodeSelectorTerm byName =
        DataPlanePod.desired(
                a, node("odd").withoutHostnameLabel().candidate(), OptionalLong.empty(), config())
            .getSpec()
            .getAffinity()
            .getNodeAffinity()
            .getRequiredDuringSchedulingIgnoredDuringExecution()
            .getNodeSelectorTerms()
            .get(0);

    assertThat(byHostname.getMatchExpressions().get(0).getKey())
        .isEqualTo("kubernetes.io/hostname");
    assertThat(byHostname.getMatchExpressions().get(0).getValues()).containsExactly("node-a");
    assertThat(byName.getMatchFields().get(0).getKey()).isEqualTo("metadata.name");
    assertThat(byName.getMatchFields().get(0).getValues()).containsExactly("odd");
  }

  @Test
  void argsCarryTheSpecToServe() {
    ModelArtifact a = s3Artifact();
    MemorySpec m = new MemorySpec();
    m.setLimit(new Quantity("40Gi"));
    a.getSpec().setMemory(m);

    List<String> args =
        container(DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), config())).getArgs();

    assertThat(args)
        .containsExactly(
            "serve",
            "--uri",
            "s3://models/llama/",
            "--artifact-id",
            "team-a-llama-g3",
            "--store-root",
            "/dev/shm/tensorcast/team-a.llama",
            "--peer-id",
            "$(POD_NAME)",
            "--memory-limit",
            Long.toString(40 * GI),
            "--lock-policy",
            "REQUIRED",
            "--endpoint",
            "http://127.0.0.1:9090",
            "--region",
            "us-east-1",
            "--path-style",
            "--include",
            "*.safetensors",
            "--include",
            "config.json",
            "--exclude",
            "original/");
  }

  @Test
  void peerPortIsDeclaredAndDistributionShowsInArgs() {
    ModelArtifact a = artifact("ns", "m", 1, "file:///models/m");
    a.getSpec().getDistribution().setPieceSize(new Quantity("256Ki"));
    a.getSpec().getDistribution().setMode(DistributionMode.SourceOnly);
    OperatorConfig cfg = OperatorConfig.fromLookup(Map.of("TENSORCAST_PEER_PORT", "9472")::get);

    Pod p = DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), cfg);

    assertThat(container(p).getArgs())
        .containsSequence("--peer-id", "$(POD_NAME)")
        .containsSequence("--peer-listen", "$(POD_IP):9472")
        .containsSequence("--piece-size", "262144")
        .containsSequence("--distribution", "source-only");
    assertThat(container(p).getPorts())
        .anySatisfy(
            port -> {
              assertThat(port.getName()).isEqualTo("peer");
              assertThat(port.getContainerPort()).isEqualTo(9472);
              assertThat(port.getProtocol()).isEqualTo("TCP");
            });
    // Defaults: peer-to-peer, port 8472, data plane's piece size: no flag but the id.
    Pod plain =
        DataPlanePod.desired(
            artifact("ns", "m", 1, "file:///models/m"), RDMA_NODE, OptionalLong.empty(), config());
    assertThat(container(plain).getArgs())
        .doesNotContain("--peer-listen", "--piece-size", "--distribution");
    assertThat(container(plain).getPorts())
        .extracting(port -> port.getName() + ":" + port.getContainerPort())
        .containsExactly("control:8471", "peer:8472");
  }

  @Test
  void changingTheDistributionChangesTheSpecHash() {
    ModelArtifact a = artifact("ns", "m", 1, "file:///models/m");
    Pod before = DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), config());
    a.getSpec().getDistribution().setMode(DistributionMode.SourceOnly);
    Pod after = DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), config());

    assertThat(after.getMetadata().getAnnotations().get(DataPlanePod.ANNOTATION_SPEC_HASH))
        .isNotEqualTo(before.getMetadata().getAnnotations().get(DataPlanePod.ANNOTATION_SPEC_HASH));
  }

  @Test
  void unpinnedAndOtherPortAndTokenShowInArgs() {
    ModelArtifact a = artifact("ns", "m", 1, "file:///models/m");
    a.getSpec().getMemory().setPinned(false);
    OperatorConfig cfg =
        OperatorConfig.fromLookup(
            Map.of(
                    "TENSORCAST_CONTROL_PORT", "9000",
                    "TENSORCAST_CONTROL_TOKEN_SECRET", "control",
                    "TENSORCAST_CONTROL_TOKEN_FILE", "/etc/tc/token")
                ::get);

    Pod p = DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), cfg);

    assertThat(container(p).getArgs())
        .containsSequence("--lock-policy", "DISABLED")
        .containsSequence("--listen", "$(POD_IP):9000")
        .containsSequence("--control-token-file", DataPlanePod.CONTROL_TOKEN_DIR + "/token");
    assertThat(container(p).getReadinessProbe().getHttpGet().getPort().getIntVal()).isEqualTo(9000);
    assertThat(p.getSpec().getVolumes())
        .anySatisfy(
            v -> {
              assertThat(v.getSecret()).isNotNull();
              assertThat(v.getSecret().getSecretName()).isEqualTo("control");
            });
  }

  @Test
  void environmentGivesPodIpBudgetAndCredentialsByReference() {
    Pod p = DataPlanePod.desired(s3Artifact(), RDMA_NODE, OptionalLong.of(GI), config());

    Map<String, EnvVar> env =
        container(p).getEnv().stream().collect(Collectors.toMap(EnvVar::getName, e -> e));
    assertThat(env.get("POD_IP").getValueFrom().getFieldRef().getFieldPath())
        .isEqualTo("status.podIP");
    var budget = env.get("TENSORCAST_MEMORY_BUDGET").getValueFrom().getResourceFieldRef();
    assertThat(budget.getResource()).isEqualTo("limits.memory");
    assertThat(budget.getContainerName()).isEqualTo("dataplane");
    var key = env.get("AWS_ACCESS_KEY_ID").getValueFrom().getSecretKeyRef();
    assertThat(key.getName()).isEqualTo("store-creds");
    assertThat(key.getKey()).isEqualTo("AWS_ACCESS_KEY_ID");
    assertThat(key.getOptional()).isFalse();
    assertThat(env.get("AWS_SECRET_ACCESS_KEY").getValueFrom().getSecretKeyRef().getKey())
        .isEqualTo("AWS_SECRET_ACCESS_KEY");
    assertThat(env.get("AWS_SESSION_TOKEN").getValueFrom().getSecretKeyRef().getOptional())
        .isTrue();
    assertThat(env.values()).allSatisfy(e -> assertThat(e.getValue()).isNull());
  }

  @Test
  void huggingFaceSourcesGetATokenAndFileSourcesNoCredentials() {
    ModelArtifact hf = artifact("ns", "m", 1, "hf://Qwen/Qwen2-7B");
    CredentialsSecretRef ref = new CredentialsSecretRef("hf");
    ref.setTokenKey("token");
    hf.getSpec().getSource().setCredentialsSecretRef(ref);
    ModelArtifact file = artifact("ns", "m", 1, "file:///models/m");
    file.getSpec().getSource().setCredentialsSecretRef(new CredentialsSecretRef("unused"));

    List<String> hfEnv = names(DataPlanePod.desired(hf, RDMA_NODE, OptionalLong.empty(), config()));
    List<String> fileEnv =
        names(DataPlanePod.desired(file, RDMA_NODE, OptionalLong.empty(), config()));

    assertThat(hfEnv).contains("HF_TOKEN").doesNotContain("AWS_ACCESS_KEY_ID");
    assertThat(fileEnv).doesNotContain("HF_TOKEN", "AWS_ACCESS_KEY_ID");
  }

  @Test
  void aHubRevisionIsPassedToServeAndAbsentWhenUnset() {
    ModelArtifact pinned = artifact("ns", "m", 1, "hf://Qwen/Qwen2-7B");
    pinned.getSpec().getSource().setRevision("refs/pr/1");
    ModelArtifact unpinned = artifact("ns", "m", 1, "hf://Qwen/Qwen2-7B");

    List<String> args =
        container(DataPlanePod.desired(pinned, RDMA_NODE, OptionalLong.empty(), config()))
            .getArgs();
    List<String> none =
        container(DataPlanePod.desired(unpinned, RDMA_NODE, OptionalLong.empty(), config()))
            .getArgs();

    assertThat(args).containsSequence("--revision", "refs/pr/1");
    assertThat(none).doesNotContain("--revision");
  }

  private static List<String> names(Pod p) {
    return container(p).getEnv().stream().map(EnvVar::getName).toList();
  }

  @Test
  void securityStoreVolumeAndProbes() {
    ModelArtifact a = s3Artifact();
    a.getSpec()
        .getPlacement()
        .setTolerations(
            List.of(new TolerationBuilder().withKey("gpu").withOperator("Exists").build()));

    Pod p = DataPlanePod.desired(a, RDMA_NODE, OptionalLong.of(GI), config());

    Container c = container(p);
    assertThat(c.getImage()).isEqualTo(OperatorConfig.DEFAULT_IMAGE);
    assertThat(c.getSecurityContext().getCapabilities().getAdd()).containsExactly("IPC_LOCK");
    assertThat(c.getReadinessProbe().getHttpGet().getPath()).isEqualTo("/readyz");
    assertThat(c.getLivenessProbe().getHttpGet().getPath()).isEqualTo("/healthz");
    assertThat(c.getReadinessProbe().getHttpGet().getPort().getIntVal()).isEqualTo(8471);
    assertThat(c.getPorts().get(0).getContainerPort()).isEqualTo(8471);
    assertThat(p.getSpec().getVolumes().get(0).getHostPath().getPath())
        .isEqualTo("/dev/shm/tensorcast");
    assertThat(c.getVolumeMounts().get(0).getMountPath()).isEqualTo("/dev/shm/tensorcast");
    assertThat(p.getSpec().getTolerations()).hasSize(1);
    assertThat(p.getSpec().getTolerations().get(0).getKey()).isEqualTo("gpu");
  }

  @Test
  void specHashIgnoresMemoryButNotArgs() {
    ModelArtifact a = s3Artifact();
    ModelArtifact otherFilter = s3Artifact();
    otherFilter.getSpec().getSource().setInclude(List.of("*.json"));

    String unsized = hash(DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), config()));
    String sized = hash(DataPlanePod.desired(a, RDMA_NODE, OptionalLong.of(5 * GI), config()));
    String filtered =
        hash(DataPlanePod.desired(otherFilter, RDMA_NODE, OptionalLong.of(5 * GI), config()));
    String otherImage =
        hash(
            DataPlanePod.desired(
                a, RDMA_NODE, OptionalLong.of(5 * GI), config().withDataPlaneImage("x/y:2")));

    assertThat(sized).isEqualTo(unsized);
    assertThat(filtered).isNotEqualTo(sized);
    assertThat(otherImage).isNotEqualTo(sized);
  }

  private static String hash(Pod p) {
    return p.getMetadata().getAnnotations().get(DataPlanePod.ANNOTATION_SPEC_HASH);
  }

  /** Reads what {@link PodPlan} reads. */
  static final class PodPlanTestAccess {
    static long memoryRequest(Pod p) {
      return PodPlan.memoryRequest(p);
    }
  }
}
