package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerBuilder;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.EnvVarBuilder;
import io.fabric8.kubernetes.api.model.LocalObjectReference;
import io.fabric8.kubernetes.api.model.NodeSelectorRequirementBuilder;
import io.fabric8.kubernetes.api.model.NodeSelectorTerm;
import io.fabric8.kubernetes.api.model.NodeSelectorTermBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.ResourceRequirements;
import io.fabric8.kubernetes.api.model.Toleration;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeBuilder;
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.fabric8.kubernetes.api.model.VolumeMountBuilder;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.tensorcast.api.StoreLayout;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.CredentialsSecretRef;
import io.tensorcast.api.v1alpha1.DistributionMode;
import io.tensorcast.api.v1alpha1.DistributionSpec;
import io.tensorcast.api.v1alpha1.MemorySpec;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.v1alpha1.SaveSpec;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.api.wire.FormatLimitFlags;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.written.WrittenArtifacts;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;

/**
 * The data-plane Pod that holds one copy of a ModelArtifact on one node. Pure: builds objects,
 * never calls the API server.
 *
 * <p>Shape of the pod for (artifact, node, generation), where generation is the artifact's {@link
 * CopyGeneration} (scaling keeps it, so scaling keeps the pods):
 *
 * <ul>
 *   <li>Name {@code <artifact>-<10 hex>}, the hex a SHA-256 over namespace, artifact, node and
 *       generation: deterministic, so a reconcile that runs twice creates one pod.
 *   <li>Owner reference to the ModelArtifact ({@code controller: true}), so the garbage collector
 *       removes pods the operator did not; labels {@link TensorcastConstants#LABEL_ARTIFACT}, name,
 *       managed-by and {@link #LABEL_GENERATION}; annotations {@link #ANNOTATION_NODE}, {@link
 *       #ANNOTATION_ARTIFACT_ID}, {@link #ANNOTATION_SPEC_HASH}.
 *   <li>No {@code nodeName}: a required node affinity on the node's {@code kubernetes.io/hostname}
 *       label (or {@code metadata.name} when the node lacks that label) pins the pod, and the
 *       scheduler still binds it and accounts its resources.
 *   <li>The container runs {@code serve} (the data-plane CLI) with the spec's source, filters and
 *       limit; artifact id {@link #artifactId}; store root {@link #storeRoot} (one store root per
 *       artifact, because a data-plane store holds an exclusive lock on its root); the pod's memory
 *       limit as {@code TENSORCAST_MEMORY_BUDGET}; source credentials as {@code secretKeyRef}s to
 *       {@code spec.source.credentialsSecretRef} (the operator never reads the Secret), and {@code
 *       AWS_EC2_METADATA_DISABLED=true} so that an artifact without credentials cannot borrow the
 *       node's instance role.
 *   <li>Image pull Secrets, PriorityClass and a CPU request (no CPU limit) from {@link
 *       OperatorConfig#dataPlanePod()} when set.
 *   <li>Memory request = limit = {@link #memoryRequestBytes}: the artifact's size plus the
 *       operator's overhead once the size is known. Before that (the first pod, which resolves the
 *       source) the overhead alone, whatever {@code spec.memory.limit} says: that pod lists the
 *       source and reads headers, and the data plane's own budget check (its memory limit) admits
 *       or refuses the artifact's bytes; it is then replaced by a pod of exactly size + overhead
 *       (see {@link PodPlan}), so no pod holds more than its artifact needs.
 *   <li>Container ports {@code control} and {@value #PEER_PORT_NAME} ({@link
 *       OperatorConfig#peerPort()}); the peer flags of the P2P contract ({@code --peer-id}, {@code
 *       --piece-size}, {@code --distribution}), so a change of {@code spec.distribution} changes
 *       the args and the pod is replaced.
 *   <li>One {@value TensorcastConstants#RDMA_RESOURCE} when RDMA is used on that node (policy not
 *       Disabled and the node advertises the resource); readiness {@code GET /readyz} and liveness
 *       {@code GET /healthz} on the control port; no service account token.
 *   <li>Tenancy: the only host directory is the artifact's own store root {@link #storeRoot}
 *       ({@code hostPath}, {@code DirectoryOrCreate}, mounted at the same path), never the store
 *       root of all artifacts. The artifact's Secret ({@link ArtifactSecret}) is mounted read-only
 *       at {@value TensorcastConstants#ARTIFACT_SECRET_DIR} (files mode 0400, group {@code
 *       fsGroup}) and passed as {@code --peer-secret-file}, {@code --read-token-file}, {@code
 *       --admin-token-file}.
 *   <li>Least privilege: the pod runs as the non-root uid {@link OperatorConfig#dataPlaneUser()}
 *       ({@code runAsNonRoot}, same gid and fsGroup), seccomp {@code RuntimeDefault}; the container
 *       drops every capability and adds {@code IPC_LOCK} only when {@code spec.memory.pinned}, no
 *       privilege escalation, read-only root file system with an {@code emptyDir} at {@code /tmp}
 *       for the JVM. The kubelet creates a missing store directory owned by root, so an init
 *       container {@value #STORE_OWNER_CONTAINER} (uid 0, only {@code CHOWN} and {@code
 *       DAC_READ_SEARCH}) runs {@code chown -R -h <uid>:<uid>} on that one directory first.
 *   <li>The master key's id ({@link io.tensorcast.operator.trust.MasterKey#id()}) in annotation
 *       {@link #ANNOTATION_KEY_ID} and in the spec digest: pods whose Secret came from another
 *       master key are replaced.
 *   <li>The format-reader bounds of the operator's configuration ({@link
 *       OperatorConfig#formatLimits()}) as {@code --max-…=value} flags, sorted by name.
 * </ul>
 */
public final class DataPlanePod {

  /** Label holding {@code metadata.generation} of the ModelArtifact the pod was made for. */
  public static final String LABEL_GENERATION = "tensorcast.io/generation";

  /** Annotation naming the node the pod is pinned to. */
  public static final String ANNOTATION_NODE = "tensorcast.io/node";

  /** Annotation holding the data plane's artifact id (the store directory name). */
  public static final String ANNOTATION_ARTIFACT_ID = "tensorcast.io/artifact-id";

  /**
   * Annotation holding a digest of the desired pod spec without its resources: a pod whose digest
   * differs from the desired one (new image, new args, new tolerations) is replaced.
   */
  public static final String ANNOTATION_SPEC_HASH = "tensorcast.io/spec-hash";

  /** Name of the data-plane container. */
  public static final String CONTAINER = "dataplane";

  /** Name of the container port of the peer transport. */
  public static final String PEER_PORT_NAME = "peer";

  /** Annotation holding the id of the master key the pod's Secret values come from. */
  public static final String ANNOTATION_KEY_ID = "tensorcast.io/key-id";

  /** Name of the init container that gives the store directory to the data-plane user. */
  public static final String STORE_OWNER_CONTAINER = "store-owner";

  /** Name of the pod's volume of the artifact's Secret. */
  public static final String SECRET_VOLUME = "tensorcast-secret";

  private DataPlanePod() {}

  /**
   * The desired pod.
   *
   * @param artifact the ModelArtifact (metadata name, namespace, uid, generation; spec)
   * @param node the chosen node
   * @param totalBytes the artifact's resolved size for this generation, if known
   * @param config operator settings (image, ports, store root, overhead, user)
   * @param keyId id of the master key the artifact's Secret was derived from
   */
  public static Pod desired(
      ModelArtifact artifact,
      NodeSelection.Candidate node,
      OptionalLong totalBytes,
      OperatorConfig config,
      String keyId) {
    return desired(artifact, node, totalBytes, config, keyId, null, List.of());
  }

  /**
   * The desired pod of a written artifact ({@code spec.source.writers}) in {@code role}: {@code
   * serve-writes} instead of {@code serve} ({@link WrittenArtifacts#args}), the write token mounted
   * on writer nodes, the save destination's credentials ({@code spec.save.credentialsSecretRef}) in
   * the environment.
   *
   * @param role the pod's role, or null for a loaded artifact
   * @param writerPods the names of the writer role's pods
   */
  public static Pod desired(
      ModelArtifact artifact,
      NodeSelection.Candidate node,
      OptionalLong totalBytes,
      OperatorConfig config,
      String keyId,
      WrittenArtifacts.Role role,
      List<String> writerPods) {
    ModelArtifactSpec spec = artifact.getSpec();
    String name = artifact.getMetadata().getName();
    String namespace = artifact.getMetadata().getNamespace();
    long generation = generation(artifact);
    long memory = memoryRequestBytes(spec, totalBytes, config.memoryOverheadBytes());
    boolean rdma = usesRdma(spec, node);

    Map<String, Quantity> limits = new LinkedHashMap<>();
    limits.put("memory", ByteSize.quantity(memory));
    if (rdma) {
      limits.put(TensorcastConstants.RDMA_RESOURCE, new Quantity("1"));
    }
    Map<String, Quantity> requests = new LinkedHashMap<>();
    config.dataPlanePod().cpuRequest().ifPresent(cpu -> requests.put("cpu", cpu));
    requests.putAll(limits);
    ResourceRequirements resources = new ResourceRequirements();
    resources.setRequests(requests);
    resources.setLimits(limits);

    String storeRoot = storeRoot(artifact, config);
    List<VolumeMount> mounts = new ArrayList<>();
    List<Volume> volumes = new ArrayList<>();
    mounts.add(new VolumeMountBuilder().withName("store").withMountPath(storeRoot).build());
    mounts.add(
        new VolumeMountBuilder()
            .withName(SECRET_VOLUME)
            .withMountPath(TensorcastConstants.ARTIFACT_SECRET_DIR)
            .withReadOnly(true)
            .build());
    mounts.add(new VolumeMountBuilder().withName("tmp").withMountPath("/tmp").build());
    volumes.add(
        new VolumeBuilder()
            .withName("store")
            .withNewHostPath()
            .withPath(storeRoot)
            .withType("DirectoryOrCreate")
            .endHostPath()
            .build());
    volumes.add(
        new VolumeBuilder()
            .withName(SECRET_VOLUME)
            .withNewSecret()
            .withSecretName(ArtifactChildren.name(artifact))
            .withDefaultMode(SECRET_FILE_MODE)
            .withItems(secretItems(role))
            .endSecret()
            .build());
    volumes.add(
        new VolumeBuilder()
            .withName("tmp")
            .withNewEmptyDir()
            .withSizeLimit(new Quantity("64Mi"))
            .endEmptyDir()
            .build());
    boolean pinned = pinned(spec);
    long uid = config.dataPlaneUser();

    Container container =
        new ContainerBuilder()
            .withName(CONTAINER)
            .withImage(config.dataPlaneImage())
            .withImagePullPolicy(config.imagePullPolicy())
            .withArgs(
                role == null
                    ? args(artifact, config, storeRoot)
                    : WrittenArtifacts.args(artifact, config, storeRoot, role, writerPods))
            .withEnv(role == null ? env(spec.getSource()) : writtenEnv(spec))
            .addNewPort()
            .withName("control")
            .withContainerPort(config.controlPort())
            .withProtocol("TCP")
            .endPort()
            .addNewPort()
            .withName(PEER_PORT_NAME)
            .withContainerPort(config.peerPort())
            .withProtocol("TCP")
            .endPort()
            .withResources(resources)
            .withVolumeMounts(mounts)
            .withTerminationMessagePolicy("FallbackToLogsOnError")
            .withNewSecurityContext()
            .withRunAsNonRoot(true)
            .withRunAsUser(uid)
            .withRunAsGroup(uid)
            .withAllowPrivilegeEscalation(false)
            .withPrivileged(false)
            .withReadOnlyRootFilesystem(true)
            .withNewCapabilities()
            .withDrop("ALL")
            .withAdd(pinned ? List.of("IPC_LOCK") : List.of())
            .endCapabilities()
            .endSecurityContext()
            .withNewReadinessProbe()
            .withNewHttpGet()
            .withPath("/readyz")
            .withNewPort(config.controlPort())
            .endHttpGet()
            .withPeriodSeconds(2)
            .withTimeoutSeconds(1)
            .withFailureThreshold(1)
            .endReadinessProbe()
            .withNewLivenessProbe()
            .withNewHttpGet()
            .withPath("/healthz")
            .withNewPort(config.controlPort())
            .endHttpGet()
            .withInitialDelaySeconds(10)
            .withPeriodSeconds(10)
            .withTimeoutSeconds(2)
            .withFailureThreshold(3)
            .endLivenessProbe()
            .build();

    List<Toleration> tolerations =
        spec.getPlacement() == null || spec.getPlacement().getTolerations() == null
            ? List.of()
            : spec.getPlacement().getTolerations();

    OperatorConfig.DataPlanePodSettings extra = config.dataPlanePod();
    PodSpec podSpec =
        new io.fabric8.kubernetes.api.model.PodSpecBuilder()
            .withInitContainers(storeOwner(config, storeRoot))
            .withContainers(container)
            .withImagePullSecrets(
                extra.imagePullSecrets().stream().map(n -> new LocalObjectReference(n)).toList())
            .withPriorityClassName(extra.priorityClassName().orElse(null))
            .withVolumes(volumes)
            .withNewSecurityContext()
            .withRunAsNonRoot(true)
            .withRunAsUser(uid)
            .withRunAsGroup(uid)
            .withFsGroup(uid)
            .withNewSeccompProfile()
            .withType("RuntimeDefault")
            .endSeccompProfile()
            .endSecurityContext()
            .withTolerations(tolerations)
            .withNewAffinity()
            .withNewNodeAffinity()
            .withNewRequiredDuringSchedulingIgnoredDuringExecution()
            .withNodeSelectorTerms(pinTo(node))
            .endRequiredDuringSchedulingIgnoredDuringExecution()
            .endNodeAffinity()
            .endAffinity()
            .withRestartPolicy("Always")
            .withAutomountServiceAccountToken(false)
            .withEnableServiceLinks(false)
            .withTerminationGracePeriodSeconds(30L)
            .build();

    Map<String, String> labels = new LinkedHashMap<>();
    labels.put(TensorcastConstants.LABEL_NAME, TensorcastConstants.LABEL_NAME_DATAPLANE);
    labels.put(TensorcastConstants.LABEL_MANAGED_BY, TensorcastConstants.LABEL_MANAGED_BY_OPERATOR);
    labels.put(TensorcastConstants.LABEL_ARTIFACT, name);
    labels.put(LABEL_GENERATION, Long.toString(generation));

    Map<String, String> annotations = new LinkedHashMap<>();
    annotations.put(ANNOTATION_NODE, node.name());
    annotations.put(ANNOTATION_ARTIFACT_ID, artifactId(artifact));
    annotations.put(ANNOTATION_KEY_ID, keyId);
    annotations.put(ANNOTATION_SPEC_HASH, specHash(podSpec, keyId));

    return new PodBuilder()
        .withNewMetadata()
        .withName(podName(artifact, node.name()))
        .withNamespace(namespace)
        .withLabels(labels)
        .withAnnotations(annotations)
        .withOwnerReferences(ArtifactChildren.ownerReference(artifact, true))
        .endMetadata()
        .withSpec(podSpec)
        .build();
  }

  /**
   * Memory one pod asks for (request and limit), bytes: {@code totalBytes + overhead} when the size
   * is known, else {@code overhead} (the resolving pod; {@code spec.memory.limit} bounds the
   * artifact, not the pod).
   */
  public static long memoryRequestBytes(
      ModelArtifactSpec spec, OptionalLong totalBytes, long overheadBytes) {
    return totalBytes.isPresent()
        ? Math.addExact(totalBytes.getAsLong(), overheadBytes)
        : overheadBytes;
  }

  /** How {@link #memoryRequestBytes} was computed, for messages. */
  public static String memoryBasis(
      ModelArtifactSpec spec, OptionalLong totalBytes, long overheadBytes) {
    String overhead = "overhead " + ByteSize.human(overheadBytes);
    if (totalBytes.isPresent()) {
      return "artifact " + ByteSize.human(totalBytes.getAsLong()) + " + " + overhead;
    }
    return overhead + " (artifact size not resolved yet)";
  }

  /** {@code spec.memory.limit} in bytes, if set (the spec is assumed valid). */
  public static OptionalLong memoryLimit(ModelArtifactSpec spec) {
    MemorySpec m = spec.getMemory();
    return m == null || m.getLimit() == null
        ? OptionalLong.empty()
        : OptionalLong.of(ByteSize.bytes(m.getLimit()));
  }

  /** Whether the pod on {@code node} requests the RDMA resource. */
  public static boolean usesRdma(ModelArtifactSpec spec, NodeSelection.Candidate node) {
    RdmaPolicy policy =
        spec.getPlacement() == null || spec.getPlacement().getRdma() == null
            ? RdmaPolicy.Required
            : spec.getPlacement().getRdma();
    return policy != RdmaPolicy.Disabled && node.rdmaResource();
  }

  /**
   * Name of the pod of {@code artifact}'s current generation on {@code nodeName}: {@code
   * <artifact>-<10 hex>}, at most 63 characters.
   */
  public static String podName(ModelArtifact artifact, String nodeName) {
    String name = artifact.getMetadata().getName();
    String hash =
        sha256(
                artifact.getMetadata().getNamespace()
                    + "/"
                    + name
                    + "/"
                    + nodeName
                    + "/"
                    + generation(artifact))
            .substring(0, 10);
    String prefix = name.length() > 52 ? name.substring(0, 52) : name;
    while (prefix.endsWith("-") || prefix.endsWith(".")) {
      prefix = prefix.substring(0, prefix.length() - 1);
    }
    return prefix + "-" + hash;
  }

  /**
   * The data plane's id of the artifact's current generation: {@code
   * <namespace>-<name>-g<generation>} with '.' turned into '-', a DNS-1123 label as the store
   * requires; when longer than 63 characters, the namespace-name part is cut and followed by 8 hex
   * of its SHA-256.
   */
  public static String artifactId(ModelArtifact artifact) {
    return StoreLayout.artifactId(
        artifact.getMetadata().getNamespace(),
        artifact.getMetadata().getName(),
        generation(artifact));
  }

  /**
   * The pod's store root: {@code <config storeRoot>/<namespace>.<name>} (unique: namespaces hold no
   * '.'). One root per ModelArtifact, shared by its generations on a node one at a time, so that a
   * new pod's store start-up removes what an earlier, killed pod left behind. It is the only host
   * directory the pod mounts.
   */
  public static String storeRoot(ModelArtifact artifact, OperatorConfig config) {
    String root = config.storeRoot();
    return (root.endsWith("/") ? root : root + "/")
        + StoreLayout.artifactDirectory(
            artifact.getMetadata().getNamespace(), artifact.getMetadata().getName());
  }

  /**
   * The generation the pod is for: the artifact's {@link CopyGeneration}, which a change of {@code
   * spec.placement.replicas} alone leaves as it is.
   */
  public static long generation(ModelArtifact artifact) {
    return CopyGeneration.of(artifact).generation();
  }

  /**
   * The digest stored in {@link #ANNOTATION_SPEC_HASH}: SHA-256 of the spec without the data-plane
   * container's resources, and of the master key's id.
   */
  public static String specHash(PodSpec spec, String keyId) {
    PodSpec copy = Serialization.clone(spec);
    copy.getContainers().forEach(c -> c.setResources(null));
    return sha256(Serialization.asJson(copy) + "\nkey-id " + keyId).substring(0, 16);
  }

  /** Mode of the Secret's files in the pod (0400; the kubelet adds group read for fsGroup). */
  static final int SECRET_FILE_MODE = 0400;

  private static List<io.fabric8.kubernetes.api.model.KeyToPath> secretItems(
      WrittenArtifacts.Role role) {
    List<io.fabric8.kubernetes.api.model.KeyToPath> items = new ArrayList<>();
    items.add(secretItem(TensorcastConstants.SECRET_PEER_SECRET));
    items.add(secretItem(TensorcastConstants.SECRET_READ_TOKEN));
    items.add(secretItem(TensorcastConstants.SECRET_ADMIN_TOKEN));
    if (role == WrittenArtifacts.Role.WRITER) {
      items.add(secretItem(TensorcastConstants.SECRET_WRITE_TOKEN));
    }
    return items;
  }

  /** The environment of a written artifact's pod: as {@link #env}, credentials of the save. */
  private static List<EnvVar> writtenEnv(ModelArtifactSpec spec) {
    SourceSpec none = new SourceSpec();
    List<EnvVar> env = env(none);
    SaveSpec save = spec.getSave();
    CredentialsSecretRef ref = save == null ? null : save.getCredentialsSecretRef();
    if (ref != null) {
      String uri = save.getUri();
      if (uri.startsWith("hf://")) {
        env.add(secret("HF_TOKEN", ref.getName(), ref.tokenKeyOrDefault(), false));
      } else if (uri.startsWith("s3://") || uri.startsWith("oss://")) {
        env.add(secret("AWS_ACCESS_KEY_ID", ref.getName(), ref.accessKeyIdKeyOrDefault(), false));
        env.add(
            secret(
                "AWS_SECRET_ACCESS_KEY", ref.getName(), ref.secretAccessKeyKeyOrDefault(), false));
        env.add(secret("AWS_SESSION_TOKEN", ref.getName(), ref.sessionTokenKeyOrDefault(), true));
      }
    }
    return env;
  }

  private static io.fabric8.kubernetes.api.model.KeyToPath secretItem(String key) {
    return new io.fabric8.kubernetes.api.model.KeyToPathBuilder()
        .withKey(key)
        .withPath(key)
        .build();
  }

  /** Whether {@code spec.memory.pinned} (default true). */
  public static boolean pinned(ModelArtifactSpec spec) {
    return spec.getMemory() == null || !Boolean.FALSE.equals(spec.getMemory().getPinned());
  }

  /**
   * The init container that hands the artifact's store directory to the data-plane user: the
   * kubelet creates a missing {@code hostPath} directory owned by root (mode 0755), where a
   * non-root process cannot write. It runs the data-plane image's {@code chown} as uid 0 with only
   * {@code CHOWN} (to change owners) and {@code DAC_READ_SEARCH} (to walk what an earlier pod
   * left), {@code -h} so that no symbolic link is followed, on that one directory.
   */
  private static Container storeOwner(OperatorConfig config, String storeRoot) {
    long uid = config.dataPlaneUser();
    Map<String, Quantity> memory = Map.of("memory", new Quantity("32Mi"));
    return new ContainerBuilder()
        .withName(STORE_OWNER_CONTAINER)
        .withImage(config.dataPlaneImage())
        .withImagePullPolicy(config.imagePullPolicy())
        .withCommand("chown", "-R", "-h", uid + ":" + uid, storeRoot)
        .withVolumeMounts(
            new VolumeMountBuilder().withName("store").withMountPath(storeRoot).build())
        .withNewResources()
        .withRequests(memory)
        .withLimits(memory)
        .endResources()
        .withNewSecurityContext()
        .withRunAsNonRoot(false)
        .withRunAsUser(0L)
        .withRunAsGroup(0L)
        .withAllowPrivilegeEscalation(false)
        .withPrivileged(false)
        .withReadOnlyRootFilesystem(true)
        .withNewCapabilities()
        .withDrop("ALL")
        .withAdd("CHOWN", "DAC_READ_SEARCH")
        .endCapabilities()
        .endSecurityContext()
        .build();
  }

  private static NodeSelectorTerm pinTo(NodeSelection.Candidate node) {
    if (node.hostname().isPresent()) {
      return new NodeSelectorTermBuilder()
          .withMatchExpressions(
              new NodeSelectorRequirementBuilder()
                  .withKey(NodeSelection.HOSTNAME_LABEL)
                  .withOperator("In")
                  .withValues(node.hostname().get())
                  .build())
          .build();
    }
    return new NodeSelectorTermBuilder()
        .withMatchFields(
            new NodeSelectorRequirementBuilder()
                .withKey("metadata.name")
                .withOperator("In")
                .withValues(node.name())
                .build())
        .build();
  }

  private static List<String> args(ModelArtifact artifact, OperatorConfig config, String root) {
    ModelArtifactSpec spec = artifact.getSpec();
    SourceSpec source = spec.getSource();
    List<String> a = new ArrayList<>();
    a.add("serve");
    a.add("--uri");
    a.add(source.getUri());
    a.add("--artifact-id");
    a.add(artifactId(artifact));
    a.add("--store-root");
    a.add(root);
    if (config.controlPort() != OperatorConfig.DEFAULT_CONTROL_PORT) {
      a.add("--listen");
      a.add("$(POD_IP):" + config.controlPort());
    }
    peerArgs(spec.getDistribution(), config, a);
    OptionalLong limit = memoryLimit(spec);
    if (limit.isPresent()) {
      a.add("--memory-limit");
      a.add(Long.toString(limit.getAsLong()));
    }
    a.add("--lock-policy");
    a.add(pinned(spec) ? "REQUIRED" : "DISABLED");
    if (source.getEndpoint() != null) {
      a.add("--endpoint");
      a.add(source.getEndpoint());
    }
    if (Boolean.TRUE.equals(source.getInsecureEndpoint())) {
      a.add("--allow-insecure-endpoint");
    }
    if (source.getRegion() != null) {
      a.add("--region");
      a.add(source.getRegion());
    }
    if (source.getRevision() != null && !source.getRevision().isBlank()) {
      a.add("--revision");
      a.add(source.getRevision());
    }
    if (Boolean.TRUE.equals(source.getPathStyle())) {
      a.add("--path-style");
    }
    for (String g : source.getInclude() == null ? List.<String>of() : source.getInclude()) {
      a.add("--include");
      a.add(g);
    }
    for (String g : source.getExclude() == null ? List.<String>of() : source.getExclude()) {
      a.add("--exclude");
      a.add(g);
    }
    a.add("--peer-secret-file");
    a.add(TensorcastConstants.ARTIFACT_SECRET_DIR + "/" + TensorcastConstants.SECRET_PEER_SECRET);
    a.add("--read-token-file");
    a.add(TensorcastConstants.ARTIFACT_SECRET_DIR + "/" + TensorcastConstants.SECRET_READ_TOKEN);
    a.add("--admin-token-file");
    a.add(TensorcastConstants.ARTIFACT_SECRET_DIR + "/" + TensorcastConstants.SECRET_ADMIN_TOKEN);
    a.addAll(FormatLimitFlags.args(config.formatLimits()));
    return a;
  }

  /**
   * The peer-to-peer flags of the P2P contract: {@code --peer-id $(POD_NAME)} (the id the operator
   * uses in membership), {@code --peer-listen $(POD_IP):<port>} when the port is not the data
   * plane's default {@value OperatorConfig#DEFAULT_PEER_PORT}, {@code --piece-size <bytes>} when
   * {@code spec.distribution.pieceSize} is set, {@code --distribution source-only} for {@code
   * SourceOnly}.
   */
  private static void peerArgs(DistributionSpec d, OperatorConfig config, List<String> a) {
    a.add("--peer-id");
    a.add("$(POD_NAME)");
    if (config.peerPort() != OperatorConfig.DEFAULT_PEER_PORT) {
      a.add("--peer-listen");
      a.add("$(POD_IP):" + config.peerPort());
    }
    if (d != null && d.getPieceSize() != null) {
      a.add("--piece-size");
      a.add(Long.toString(ByteSize.bytes(d.getPieceSize())));
    }
    if (d != null && d.getMode() == DistributionMode.SourceOnly) {
      a.add("--distribution");
      a.add("source-only");
    }
  }

  /** Whether the pods of {@code spec} share pieces with each other (mode PeerToPeer, default). */
  public static boolean peerToPeer(ModelArtifactSpec spec) {
    DistributionSpec d = spec.getDistribution();
    return d == null || d.getMode() != DistributionMode.SourceOnly;
  }

  private static List<EnvVar> env(SourceSpec source) {
    List<EnvVar> env = new ArrayList<>();
    env.add(field("POD_IP", "status.podIP"));
    env.add(field("POD_NAME", "metadata.name"));
    env.add(field("POD_NAMESPACE", "metadata.namespace"));
    env.add(field("NODE_NAME", "spec.nodeName"));
    env.add(
        new EnvVarBuilder()
            .withName("TENSORCAST_MEMORY_BUDGET")
            .withNewValueFrom()
            .withNewResourceFieldRef()
            .withContainerName(CONTAINER)
            .withResource("limits.memory")
            .withDivisor(new Quantity("1"))
            .endResourceFieldRef()
            .endValueFrom()
            .build());
    // The node's instance role is not the artifact's to use: without this the AWS SDK's default
    // chain would fall back to the metadata service and read with the node's credentials.
    env.add(new EnvVarBuilder().withName("AWS_EC2_METADATA_DISABLED").withValue("true").build());
    CredentialsSecretRef ref = source.getCredentialsSecretRef();
    if (ref != null) {
      String uri = source.getUri();
      if (uri.startsWith("hf://")) {
        env.add(secret("HF_TOKEN", ref.getName(), ref.tokenKeyOrDefault(), false));
      } else if (uri.startsWith("s3://") || uri.startsWith("oss://")) {
        env.add(secret("AWS_ACCESS_KEY_ID", ref.getName(), ref.accessKeyIdKeyOrDefault(), false));
        env.add(
            secret(
                "AWS_SECRET_ACCESS_KEY", ref.getName(), ref.secretAccessKeyKeyOrDefault(), false));
        env.add(secret("AWS_SESSION_TOKEN", ref.getName(), ref.sessionTokenKeyOrDefault(), true));
      }
    }
    return env;
  }

  private static EnvVar field(String name, String path) {
    return new EnvVarBuilder()
        .withName(name)
        .withNewValueFrom()
        .withNewFieldRef()
        .withApiVersion("v1")
        .withFieldPath(path)
        .endFieldRef()
        .endValueFrom()
        .build();
  }

  private static EnvVar secret(String name, String secret, String key, boolean optional) {
    return new EnvVarBuilder()
        .withName(name)
        .withNewValueFrom()
        .withNewSecretKeyRef()
        .withName(secret)
        .withKey(key)
        .withOptional(optional)
        .endSecretKeyRef()
        .endValueFrom()
        .build();
  }

  static String sha256(String s) {
    try {
      return HexFormat.of()
          .formatHex(
              MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
