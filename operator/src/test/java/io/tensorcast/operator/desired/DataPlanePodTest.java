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
  private static final String KEY_ID = "0123456789abcdef";
  private static final NodeSelection.Candidate RDMA_NODE =
      node("node-a").rdmaResource(1).candidate();
  private static final NodeSelection.Candidate LABEL_NODE = node("node-b").rdmaLabel().candidate();

  private static ModelArtifact s3Artifact() {
    ModelArtifact a = artifact("team-a", "llama", 3, "s3://models/llama/");
    a.getSpec().getSource().setEndpoint("http://127.0.0.1:9090");
    a.getSpec().getSource().setInsecureEndpoint(true);
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

    Pod p = DataPlanePod.desired(a, RDMA_NODE, OptionalLong.of(GI), config(), KEY_ID);

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
        // size unknown, a limit: still the overhead only (the limit bounds the artifact, not the
        // resolving pod; the data plane's budget check admits the bytes)
        Arguments.of(OptionalLong.empty(), "8Gi", 256 * MI),
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

    Pod p = DataPlanePod.desired(a, RDMA_NODE, size, config(), KEY_ID);

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

    Pod p = DataPlanePod.desired(s3Artifact(), RDMA_NODE, OptionalLong.of(GI), config, KEY_ID);

    assertThat(p.getSpec().getImagePullSecrets())
        .extracting(r -> r.getName())
        .containsExactly("regcred", "mirror-cred");
    assertThat(p.getSpec().getPriorityClassName()).isEqualTo("tensorcast-dataplane");
    assertThat(container(p).getResources().getRequests())
        .containsEntry("cpu", new Quantity("500m"))
        .containsEntry("memory", ByteSize.quantity(GI + 256 * MI));
    assertThat(container(p).getResources().getLimits()).doesNotContainKey("cpu");
    // The settings are part of the pod spec: an operator given new ones replaces its pods.
    Pod plain =
        DataPlanePod.desired(s3Artifact(), RDMA_NODE, OptionalLong.of(GI), config(), KEY_ID);
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

    Pod p = DataPlanePod.desired(a, node, OptionalLong.of(GI), config(), KEY_ID);

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
        DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), config(), KEY_ID)
            .getSpec()
            .getAffinity()
            .getNodeAffinity()
            .getRequiredDuringSchedulingIgnoredDuringExecution()
            .getNodeSelectorTerms()
            .get(0);
    NodeSelectorTerm byName =
        DataPlanePod.desired(
                a,
                node("odd").withoutHostnameLabel().candidate(),
                OptionalLong.empty(),
                config(),
                KEY_ID)
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
        container(DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), config(), KEY_ID))
            .getArgs();

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
            "--allow-insecure-endpoint",
            "--region",
            "us-east-1",
            "--path-style",
            "--include",
            "*.safetensors",
            "--include",
            "config.json",
            "--exclude",
            "original/",
            "--peer-secret-file",
            "/var/run/secrets/tensorcast/peer-secret",
            "--read-token-file",
            "/var/run/secrets/tensorcast/read-token",
            "--admin-token-file",
            "/var/run/secrets/tensorcast/admin-token");
  }

  @Test
  void formatLimitsOfTheConfigurationAreFlagsOfTheDataPlane() {
    ModelArtifact a = artifact("ns", "m", 1, "file:///models/m");
    OperatorConfig cfg =
        OperatorConfig.fromLookup(
            Map.of("TENSORCAST_FORMAT_LIMITS", "max-tensors=2000000,max-header-bytes=200Mi")::get);

    List<String> args =
        container(DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), cfg, KEY_ID)).getArgs();
    List<String> defaults =
        container(DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), config(), KEY_ID))
            .getArgs();

    assertThat(args).endsWith("--max-header-bytes=200Mi", "--max-tensors=2000000");
    assertThat(defaults).noneMatch(arg -> arg.startsWith("--max-"));
  }

  @Test
  void peerPortIsDeclaredAndDistributionShowsInArgs() {
    ModelArtifact a = artifact("ns", "m", 1, "file:///models/m");
    a.getSpec().getDistribution().setPieceSize(new Quantity("256Ki"));
    a.getSpec().getDistribution().setMode(DistributionMode.SourceOnly);
    OperatorConfig cfg = OperatorConfig.fromLookup(Map.of("TENSORCAST_PEER_PORT", "9472")::get);

    Pod p = DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), cfg, KEY_ID);

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
            artifact("ns", "m", 1, "file:///models/m"),
            RDMA_NODE,
            OptionalLong.empty(),
            config(),
            KEY_ID);
    assertThat(container(plain).getArgs())
        .doesNotContain("--peer-listen", "--piece-size", "--distribution");
    assertThat(container(plain).getPorts())
        .extracting(port -> port.getName() + ":" + port.getContainerPort())
        .containsExactly("control:8471", "peer:8472");
  }

  @Test
  void changingTheDistributionChangesTheSpecHash() {
    ModelArtifact a = artifact("ns", "m", 1, "file:///models/m");
    Pod before = DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), config(), KEY_ID);
    a.getSpec().getDistribution().setMode(DistributionMode.SourceOnly);
    Pod after = DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), config(), KEY_ID);

    assertThat(after.getMetadata().getAnnotations().get(DataPlanePod.ANNOTATION_SPEC_HASH))
        .isNotEqualTo(before.getMetadata().getAnnotations().get(DataPlanePod.ANNOTATION_SPEC_HASH));
  }

  @Test
  void unpinnedAndOtherPortShowInArgsAndDropIpcLock() {
    ModelArtifact a = artifact("ns", "m", 1, "file:///models/m");
    a.getSpec().getMemory().setPinned(false);
    OperatorConfig cfg = OperatorConfig.fromLookup(Map.of("TENSORCAST_CONTROL_PORT", "9000")::get);

    Pod p = DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), cfg, KEY_ID);

    assertThat(container(p).getArgs())
        .containsSequence("--lock-policy", "DISABLED")
        .containsSequence("--listen", "$(POD_IP):9000")
        .doesNotContain("--control-token-file", "--allow-insecure-endpoint");
    assertThat(container(p).getReadinessProbe().getHttpGet().getPort().getIntVal()).isEqualTo(9000);
    assertThat(container(p).getSecurityContext().getCapabilities().getAdd()).isEmpty();
    assertThat(container(p).getSecurityContext().getCapabilities().getDrop())
        .containsExactly("ALL");
  }

  @Test
  void mountsOnlyTheArtifactsOwnStoreDirectoryAndItsSecret() {
    Pod p = DataPlanePod.desired(s3Artifact(), RDMA_NODE, OptionalLong.of(GI), config(), KEY_ID);

    var hostPaths = p.getSpec().getVolumes().stream().filter(v -> v.getHostPath() != null).toList();
    assertThat(hostPaths).hasSize(1);
    assertThat(hostPaths.get(0).getHostPath().getPath())
        .isEqualTo("/dev/shm/tensorcast/team-a.llama");
    assertThat(hostPaths.get(0).getHostPath().getType()).isEqualTo("DirectoryOrCreate");
    var secret =
        p.getSpec().getVolumes().stream()
            .filter(v -> v.getSecret() != null)
            .findFirst()
            .orElseThrow()
            .getSecret();
    assertThat(secret.getSecretName()).isEqualTo("llama-tensorcast");
    assertThat(secret.getDefaultMode()).isEqualTo(0400);
    assertThat(secret.getItems())
        .extracting(i -> i.getKey() + "=" + i.getPath())
        .containsExactly(
            "peer-secret=peer-secret", "read-token=read-token", "admin-token=admin-token");
    assertThat(container(p).getVolumeMounts())
        .extracting(m -> m.getName() + ":" + m.getMountPath() + ":" + m.getReadOnly())
        .containsExactly(
            "store:/dev/shm/tensorcast/team-a.llama:null",
            DataPlanePod.SECRET_VOLUME + ":/var/run/secrets/tensorcast:true",
            "tmp:/tmp:null");
    assertThat(p.getSpec().getVolumes())
        .filteredOn(v -> v.getName().equals("tmp"))
        .singleElement()
        .satisfies(v -> assertThat(v.getEmptyDir()).isNotNull());
  }

  @Test
  void runsNonRootWithoutPrivilegesAndAnInitContainerHandsItTheStoreDirectory() {
    Pod p = DataPlanePod.desired(s3Artifact(), RDMA_NODE, OptionalLong.of(GI), config(), KEY_ID);

    var pod = p.getSpec().getSecurityContext();
    assertThat(pod.getRunAsNonRoot()).isTrue();
    assertThat(pod.getRunAsUser()).isEqualTo(10001L);
    assertThat(pod.getRunAsGroup()).isEqualTo(10001L);
    assertThat(pod.getFsGroup()).isEqualTo(10001L);
    assertThat(pod.getSeccompProfile().getType()).isEqualTo("RuntimeDefault");
    var c = container(p).getSecurityContext();
    assertThat(c.getRunAsNonRoot()).isTrue();
    assertThat(c.getRunAsUser()).isEqualTo(10001L);
    assertThat(c.getAllowPrivilegeEscalation()).isFalse();
    assertThat(c.getPrivileged()).isFalse();
    assertThat(c.getReadOnlyRootFilesystem()).isTrue();
    assertThat(c.getCapabilities().getDrop()).containsExactly("ALL");
    assertThat(c.getCapabilities().getAdd()).containsExactly("IPC_LOCK");

    assertThat(p.getSpec().getInitContainers()).hasSize(1);
    Container init = p.getSpec().getInitContainers().get(0);
    assertThat(init.getName()).isEqualTo(DataPlanePod.STORE_OWNER_CONTAINER);
    assertThat(init.getImage()).isEqualTo(OperatorConfig.DEFAULT_IMAGE);
    assertThat(init.getCommand())
        .containsExactly("chown", "-R", "-h", "10001:10001", "/dev/shm/tensorcast/team-a.llama");
    assertThat(init.getVolumeMounts())
        .extracting(m -> m.getName() + ":" + m.getMountPath())
        .containsExactly("store:/dev/shm/tensorcast/team-a.llama");
    assertThat(init.getSecurityContext().getRunAsUser()).isZero();
    assertThat(init.getSecurityContext().getRunAsNonRoot()).isFalse();
    assertThat(init.getSecurityContext().getAllowPrivilegeEscalation()).isFalse();
    assertThat(init.getSecurityContext().getReadOnlyRootFilesystem()).isTrue();
    assertThat(init.getSecurityContext().getCapabilities().getDrop()).containsExactly("ALL");
    assertThat(init.getSecurityContext().getCapabilities().getAdd())
        .containsExactly("CHOWN", "DAC_READ_SEARCH");

    OperatorConfig other =
        OperatorConfig.fromLookup(Map.of("TENSORCAST_DATAPLANE_USER", "4242")::get);
    Pod q = DataPlanePod.desired(s3Artifact(), RDMA_NODE, OptionalLong.of(GI), other, KEY_ID);
    assertThat(q.getSpec().getSecurityContext().getRunAsUser()).isEqualTo(4242L);
    assertThat(q.getSpec().getInitContainers().get(0).getCommand()).contains("4242:4242");
  }

  @Test
  void aPodOfAnotherMasterKeyHasAnotherSpecHash() {
    Pod p = DataPlanePod.desired(s3Artifact(), RDMA_NODE, OptionalLong.of(GI), config(), KEY_ID);
    Pod q =
        DataPlanePod.desired(
            s3Artifact(), RDMA_NODE, OptionalLong.of(GI), config(), "fedcba9876543210");

    assertThat(p.getMetadata().getAnnotations())
        .containsEntry(DataPlanePod.ANNOTATION_KEY_ID, KEY_ID);
    assertThat(hash(q)).isNotEqualTo(hash(p));
    assertThat(q.getSpec()).isEqualTo(p.getSpec());
  }

  @Test
  void environmentGivesPodIpBudgetAndCredentialsByReference() {
    Pod p = DataPlanePod.desired(s3Artifact(), RDMA_NODE, OptionalLong.of(GI), config(), KEY_ID);

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
    assertThat(env.get("AWS_EC2_METADATA_DISABLED").getValue()).isEqualTo("true");
    assertThat(env.values())
        .filteredOn(e -> !e.getName().equals("AWS_EC2_METADATA_DISABLED"))
        .allSatisfy(e -> assertThat(e.getValue()).isNull());
  }

  @Test
  void huggingFaceSourcesGetATokenAndFileSourcesNoCredentials() {
    ModelArtifact hf = artifact("ns", "m", 1, "hf://Qwen/Qwen2-7B");
    CredentialsSecretRef ref = new CredentialsSecretRef("hf");
    ref.setTokenKey("token");
    hf.getSpec().getSource().setCredentialsSecretRef(ref);
    ModelArtifact file = artifact("ns", "m", 1, "file:///models/m");
    file.getSpec().getSource().setCredentialsSecretRef(new CredentialsSecretRef("unused"));

    List<String> hfEnv =
        names(DataPlanePod.desired(hf, RDMA_NODE, OptionalLong.empty(), config(), KEY_ID));
    List<String> fileEnv =
        names(DataPlanePod.desired(file, RDMA_NODE, OptionalLong.empty(), config(), KEY_ID));

    assertThat(hfEnv).contains("HF_TOKEN").doesNotContain("AWS_ACCESS_KEY_ID");
    assertThat(fileEnv).doesNotContain("HF_TOKEN", "AWS_ACCESS_KEY_ID");
  }

  @Test
  void aHubRevisionIsPassedToServeAndAbsentWhenUnset() {
    ModelArtifact pinned = artifact("ns", "m", 1, "hf://Qwen/Qwen2-7B");
    pinned.getSpec().getSource().setRevision("refs/pr/1");
    ModelArtifact unpinned = artifact("ns", "m", 1, "hf://Qwen/Qwen2-7B");

    List<String> args =
        container(DataPlanePod.desired(pinned, RDMA_NODE, OptionalLong.empty(), config(), KEY_ID))
            .getArgs();
    List<String> none =
        container(DataPlanePod.desired(unpinned, RDMA_NODE, OptionalLong.empty(), config(), KEY_ID))
            .getArgs();

    assertThat(args).containsSequence("--revision", "refs/pr/1");
    assertThat(none).doesNotContain("--revision");
  }

  private static List<String> names(Pod p) {
    return container(p).getEnv().stream().map(EnvVar::getName).toList();
  }

  @Test
  void storeVolumeAndProbes() {
    ModelArtifact a = s3Artifact();
    a.getSpec()
        .getPlacement()
        .setTolerations(
            List.of(new TolerationBuilder().withKey("gpu").withOperator("Exists").build()));

    Pod p = DataPlanePod.desired(a, RDMA_NODE, OptionalLong.of(GI), config(), KEY_ID);

    Container c = container(p);
    assertThat(c.getImage()).isEqualTo(OperatorConfig.DEFAULT_IMAGE);
    assertThat(c.getReadinessProbe().getHttpGet().getPath()).isEqualTo("/readyz");
    assertThat(c.getLivenessProbe().getHttpGet().getPath()).isEqualTo("/healthz");
    assertThat(c.getReadinessProbe().getHttpGet().getPort().getIntVal()).isEqualTo(8471);
    assertThat(c.getPorts().get(0).getContainerPort()).isEqualTo(8471);
    assertThat(p.getSpec().getVolumes().get(0).getHostPath().getPath())
        .isEqualTo("/dev/shm/tensorcast/team-a.llama");
    assertThat(c.getVolumeMounts().get(0).getMountPath())
        .isEqualTo("/dev/shm/tensorcast/team-a.llama");
    assertThat(p.getSpec().getTolerations()).hasSize(1);
    assertThat(p.getSpec().getTolerations().get(0).getKey()).isEqualTo("gpu");
  }

  @Test
  void specHashIgnoresMemoryButNotArgs() {
    ModelArtifact a = s3Artifact();
    ModelArtifact otherFilter = s3Artifact();
    otherFilter.getSpec().getSource().setInclude(List.of("*.json"));

    String unsized =
        hash(DataPlanePod.desired(a, RDMA_NODE, OptionalLong.empty(), config(), KEY_ID));
    String sized =
        hash(DataPlanePod.desired(a, RDMA_NODE, OptionalLong.of(5 * GI), config(), KEY_ID));
    String filtered =
        hash(
            DataPlanePod.desired(
                otherFilter, RDMA_NODE, OptionalLong.of(5 * GI), config(), KEY_ID));
    String otherImage =
        hash(
            DataPlanePod.desired(
                a,
                RDMA_NODE,
                OptionalLong.of(5 * GI),
                config().withDataPlaneImage("x/y:2"),
                KEY_ID));

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
