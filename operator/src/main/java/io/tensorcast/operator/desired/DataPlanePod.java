package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerBuilder;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.EnvVarBuilder;
import io.fabric8.kubernetes.api.model.LocalObjectReference;
import io.fabric8.kubernetes.api.model.NodeSelectorRequirementBuilder;
import io.fabric8.kubernetes.api.model.NodeSelectorTerm;
import io.fabric8.kubernetes.api.model.NodeSelectorTermBuilder;
import io.fabric8.kubernetes.api.model.OwnerReferenceBuilder;
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
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.CredentialsSecretRef;
import io.tensorcast.api.v1alpha1.DistributionMode;
import io.tensorcast.api.v1alpha1.DistributionSpec;
import io.tensorcast.api.v1alpha1.MemorySpec;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.operator.config.OperatorConfig;
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
 * <p>Shape of the pod for (artifact, node, generation):
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
 *       {@code spec.source.credentialsSecretRef} (the operator never reads the Secret).
 *   <li>Image pull Secrets, PriorityClass and a CPU request (no CPU limit) from {@link
 *       OperatorConfig#dataPlanePod()} when set.
 *   <li>Memory request = limit = {@link #memoryRequestBytes}: the artifact's size plus the
 *       operator's overhead once the size is known. Before that (the first pod, which resolves the
 *       source): {@code spec.memory.limit} plus the overhead when a limit is set (the artifact
 *       cannot be larger), else the overhead alone. A first pod whose request turns out smaller
 *       than size plus overhead is replaced by a correctly sized one; see {@link PodPlan}.
 *   <li>Container ports {@code control} and {@value #PEER_PORT_NAME} ({@link
 *       OperatorConfig#peerPort()}); the peer flags of the P2P contract ({@code --peer-id}, {@code
 *       --piece-size}, {@code --distribution}), so a change of {@code spec.distribution} changes
 *       the args and the pod is replaced.
 *   <li>{@code IPC_LOCK} capability (page-locking); one {@value TensorcastConstants#RDMA_RESOURCE}
 *       when RDMA is used on that node (policy not Disabled and the node advertises the resource);
 *       the store root as a hostPath volume at the same path; readiness {@code GET /readyz} and
 *       liveness {@code GET /healthz} on the control port; no service account token.
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

  /** Where a pod finds the control token when one is configured. */
  public static final String CONTROL_TOKEN_DIR = "/var/run/secrets/tensorcast/control";

  private static final int MAX_ID = 63;

  private DataPlanePod() {}

  /**
   * The desired pod.
   *
   * @param artifact the ModelArtifact (metadata name, namespace, uid, generation; spec)
   * @param node the chosen node
   * @param totalBytes the artifact's resolved size for this generation, if known
   * @param config operator settings (image, port, store root, overhead, token)
   */
  public static Pod desired(
      ModelArtifact artifact,
      NodeSelection.Candidate node,
      OptionalLong totalBytes,
      OperatorConfig config) {
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
    mounts.add(
        new VolumeMountBuilder().withName("store").withMountPath(config.storeRoot()).build());
    volumes.add(
        new VolumeBuilder()
            .withName("store")
            .withNewHostPath()
            .withPath(config.storeRoot())
            .withType("DirectoryOrCreate")
            .endHostPath()
            .build());
    if (config.controlTokenSecret().isPresent()) {
      mounts.add(
          new VolumeMountBuilder()
              .withName("control-token")
              .withMountPath(CONTROL_TOKEN_DIR)
              .withReadOnly(true)
              .build());
      volumes.add(
          new VolumeBuilder()
              .withName("control-token")
              .withNewSecret()
              .withSecretName(config.controlTokenSecret().get())
              .endSecret()
              .build());
    }

    Container container =
        new ContainerBuilder()
            .withName(CONTAINER)
            .withImage(config.dataPlaneImage())
            .withImagePullPolicy(config.imagePullPolicy())
            .withArgs(args(artifact, config, storeRoot))
            .withEnv(env(spec.getSource()))
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
            .withNewSecurityContext()
            .withNewCapabilities()
            .withAdd("IPC_LOCK")
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
            .withContainers(container)
            .withImagePullSecrets(
                extra.imagePullSecrets().stream().map(n -> new LocalObjectReference(n)).toList())
            .withPriorityClassName(extra.priorityClassName().orElse(null))
            .withVolumes(volumes)
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
    annotations.put(ANNOTATION_SPEC_HASH, specHash(podSpec));

    return new PodBuilder()
        .withNewMetadata()
        .withName(podName(artifact, node.name()))
        .withNamespace(namespace)
        .withLabels(labels)
        .withAnnotations(annotations)
        .withOwnerReferences(
            new OwnerReferenceBuilder()
                .withApiVersion(artifact.getApiVersion())
                .withKind(artifact.getKind())
                .withName(name)
                .withUid(artifact.getMetadata().getUid())
                .withController(true)
                .withBlockOwnerDeletion(true)
                .build())
        .endMetadata()
        .withSpec(podSpec)
        .build();
  }

  /**
   * Memory one pod asks for (request and limit), bytes: {@code totalBytes + overhead} when the size
   * is known; else {@code spec.memory.limit + overhead} when a limit is set; else {@code overhead}.
   */
  public static long memoryRequestBytes(
      ModelArtifactSpec spec, OptionalLong totalBytes, long overheadBytes) {
    if (totalBytes.isPresent()) {
      return Math.addExact(totalBytes.getAsLong(), overheadBytes);
    }
    OptionalLong limit = memoryLimit(spec);
    return limit.isPresent() ? Math.addExact(limit.getAsLong(), overheadBytes) : overheadBytes;
  }

  /** How {@link #memoryRequestBytes} was computed, for messages. */
  public static String memoryBasis(
      ModelArtifactSpec spec, OptionalLong totalBytes, long overheadBytes) {
    String overhead = "overhead " + ByteSize.human(overheadBytes);
    if (totalBytes.isPresent()) {
      return "artifact " + ByteSize.human(totalBytes.getAsLong()) + " + " + overhead;
    }
    OptionalLong limit = memoryLimit(spec);
    return limit.isPresent()
        ? "spec.memory.limit " + ByteSize.human(limit.getAsLong()) + " + " + overhead
        : overhead + " (artifact size not resolved yet)";
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
    String ns = artifact.getMetadata().getNamespace();
    String name = artifact.getMetadata().getName();
    String base = (ns + "-" + name).replace('.', '-');
    String suffix = "-g" + generation(artifact);
    if (base.length() + suffix.length() > MAX_ID) {
      String hash = sha256(ns + "/" + name).substring(0, 8);
      int keep = MAX_ID - suffix.length() - hash.length() - 1;
      base = base.substring(0, keep);
      while (base.endsWith("-")) {
        base = base.substring(0, base.length() - 1);
      }
      base = base + "-" + hash;
    }
    return base + suffix;
  }

  /**
   * The pod's store root: {@code <config storeRoot>/<namespace>.<name>} (unique: namespaces hold no
   * '.'). One root per ModelArtifact, shared by its generations on a node one at a time, so that a
   * new pod's store start-up removes what an earlier, killed pod left behind.
   */
  public static String storeRoot(ModelArtifact artifact, OperatorConfig config) {
    String root = config.storeRoot();
    return (root.endsWith("/") ? root : root + "/")
        + artifact.getMetadata().getNamespace()
        + "."
        + artifact.getMetadata().getName();
  }

  /** The generation the pod is for ({@code metadata.generation}, 1 if the server gave none). */
  public static long generation(ModelArtifact artifact) {
    Long g = artifact.getMetadata().getGeneration();
    return g == null ? 1 : g;
  }

  /** The digest stored in {@link #ANNOTATION_SPEC_HASH}: SHA-256 of the spec without resources. */
  public static String specHash(PodSpec spec) {
    PodSpec copy = Serialization.clone(spec);
    copy.getContainers().forEach(c -> c.setResources(null));
    return sha256(Serialization.asJson(copy)).substring(0, 16);
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
    boolean pinned =
        spec.getMemory() == null || !Boolean.FALSE.equals(spec.getMemory().getPinned());
    a.add("--lock-policy");
    a.add(pinned ? "REQUIRED" : "DISABLED");
    if (source.getEndpoint() != null) {
      a.add("--endpoint");
      a.add(source.getEndpoint());
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
    if (config.controlTokenSecret().isPresent()) {
      a.add("--control-token-file");
      a.add(CONTROL_TOKEN_DIR + "/" + OperatorConfig.CONTROL_TOKEN_KEY);
    }
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
