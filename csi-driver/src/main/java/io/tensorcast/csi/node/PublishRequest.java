package io.tensorcast.csi.node;

import io.grpc.Status;
import io.tensorcast.api.ConsumerVolumes;
import io.tensorcast.csi.DriverConfig;
import io.tensorcast.csi.v1.NodePublishVolumeRequest;
import io.tensorcast.csi.v1.VolumeCapability;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * A checked {@code NodePublishVolume} call: who asks (the pod, from the {@code csi.storage.k8s.io/}
 * keys the kubelet adds when the CSIDriver object has {@code podInfoOnMount: true}), what it asks
 * for ({@link VolumeSource}), where it goes and how long it may wait.
 *
 * @param volumeId the kubelet's id of this ephemeral volume ({@code csi-<hash>} of pod UID and
 *     volume name)
 * @param targetPath absolute path the volume is published at
 * @param podNamespace namespace of the consumer pod
 * @param podName name of the consumer pod
 * @param podUid UID of the consumer pod
 * @param source what to mount
 * @param readyTimeout how long this mount may wait for the copy to be Ready on the node
 */
public record PublishRequest(
    String volumeId,
    Path targetPath,
    String podNamespace,
    String podName,
    String podUid,
    VolumeSource source,
    Duration readyTimeout) {

  /** What a volume asks for: a ModelArtifact's copy or a TensorShardSet rank's layout. */
  public sealed interface VolumeSource permits ArtifactVolume, ShardRankVolume {
    /** For messages, e.g. {@code ModelArtifact team-a/llama}. */
    String describe();
  }

  /** The Ready copy of a ModelArtifact of the pod's namespace. */
  public record ArtifactVolume(String namespace, String name) implements VolumeSource {
    @Override
    public String describe() {
      return "ModelArtifact " + namespace + "/" + name;
    }
  }

  /**
   * The layout directory holding rank {@code rank}'s file of a TensorShardSet of the pod's
   * namespace ({@code manifest.json} and the rank files of that node's ranks).
   */
  public record ShardRankVolume(String namespace, String name, int rank) implements VolumeSource {
    @Override
    public String describe() {
      return "TensorShardSet " + namespace + "/" + name + " rank " + rank;
    }
  }

  /** Volume attribute: the TensorShardSet whose rank to mount. */
  static final String ATTR_TENSOR_SHARD_SET = "tensorShardSet";

  /** Volume attribute: the global rank (with {@link #ATTR_TENSOR_SHARD_SET}). */
  static final String ATTR_RANK = "rank";

  static final String POD_NAMESPACE = "csi.storage.k8s.io/pod.namespace";
  static final String POD_NAME = "csi.storage.k8s.io/pod.name";
  static final String POD_UID = "csi.storage.k8s.io/pod.uid";
  static final String EPHEMERAL = "csi.storage.k8s.io/ephemeral";
  static final String KUBELET_PREFIX = "csi.storage.k8s.io/";

  /** Attributes a person may set, in the order messages list them. */
  static final List<String> ATTRIBUTES =
      List.of(
          ConsumerVolumes.ATTR_MODEL_ARTIFACT,
          ATTR_TENSOR_SHARD_SET,
          ATTR_RANK,
          ConsumerVolumes.ATTR_NAMESPACE,
          ConsumerVolumes.ATTR_READY_TIMEOUT);

  /** A Kubernetes object name (DNS-1123 subdomain). */
  private static final Pattern OBJECT_NAME =
      Pattern.compile("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");

  /**
   * Checks a call and extracts the request.
   *
   * @throws CsiException {@code INVALID_ARGUMENT} for a missing or malformed field or attribute
   *     (the message names it and what is allowed); {@code PERMISSION_DENIED} for an artifact of
   *     another namespace than the pod's
   */
  static PublishRequest of(NodePublishVolumeRequest call, DriverConfig config) throws CsiException {
    if (call.getVolumeId().isEmpty()) {
      throw invalid("volume_id is required");
    }
    if (call.getTargetPath().isEmpty()) {
      throw invalid("target_path is required");
    }
    Path target = Path.of(call.getTargetPath());
    if (!target.isAbsolute() || !target.normalize().equals(target)) {
      throw invalid("target_path " + call.getTargetPath() + " must be absolute and normalised");
    }
    Path pods = config.kubeletRoot().resolve("pods");
    if (!target.startsWith(pods)) {
      throw invalid(
          "target_path "
              + target
              + " is not under the kubelet's pod directory "
              + pods
              + " (check the driver's --kubelet-root against the kubelet's --root-dir)");
    }
    if (!call.hasVolumeCapability()) {
      throw invalid("volume_capability is required");
    }
    if (call.getVolumeCapability().getAccessTypeCase() == VolumeCapability.AccessTypeCase.BLOCK) {
      throw invalid(
          "volume "
              + call.getVolumeId()
              + " asks for a raw block volume; the driver serves a read-only directory"
              + " (volumeMode Filesystem)");
    }
    Map<String, String> ctx = call.getVolumeContextMap();
    if (!"true".equals(ctx.get(EPHEMERAL))) {
      throw invalid(
          "volume "
              + call.getVolumeId()
              + " is not an inline ephemeral volume ("
              + EPHEMERAL
              + "="
              + ctx.getOrDefault(EPHEMERAL, "<absent>")
              + "): "
              + ConsumerVolumes.DRIVER
              + " serves only csi volumes declared in a pod's spec.volumes, not"
              + " PersistentVolumes; its CSIDriver object must set podInfoOnMount: true");
    }
    String podNamespace = required(ctx, POD_NAMESPACE);
    String podName = required(ctx, POD_NAME);
    String podUid = required(ctx, POD_UID);
    String pod = podNamespace + "/" + podName;

    List<String> unknown = new ArrayList<>();
    for (String key : new TreeSet<>(ctx.keySet())) {
      if (!key.startsWith(KUBELET_PREFIX) && !ATTRIBUTES.contains(key)) {
        unknown.add(key);
      }
    }
    if (!unknown.isEmpty()) {
      throw invalid(
          "pod "
              + pod
              + ": unknown volumeAttributes "
              + unknown
              + "; allowed: "
              + String.join(", ", ATTRIBUTES));
    }

    Duration timeout = readyTimeout(ctx, config, pod);
    if (ctx.containsKey(ATTR_TENSOR_SHARD_SET) || ctx.containsKey(ATTR_RANK)) {
      return new PublishRequest(
          call.getVolumeId(),
          target,
          podNamespace,
          podName,
          podUid,
          shardRank(ctx, pod, podNamespace),
          timeout);
    }
    String reference = ctx.get(ConsumerVolumes.ATTR_MODEL_ARTIFACT);
    if (reference == null || reference.isBlank()) {
      throw invalid(
          "pod "
              + pod
              + ": volumeAttributes.modelArtifact is required: the name of a ModelArtifact in"
              + " namespace "
              + podNamespace);
    }
    String namespaceAttr = ctx.get(ConsumerVolumes.ATTR_NAMESPACE);
    if (namespaceAttr != null && !namespaceAttr.equals(podNamespace)) {
      throw crossNamespace(pod, podNamespace, namespaceAttr + "/" + reference.trim());
    }
    String name =
        ConsumerVolumes.sameNamespaceName(reference, podNamespace)
            .orElseThrow(
                () ->
                    reference.trim().indexOf('/') > 0
                            && reference.trim().indexOf('/') == reference.trim().lastIndexOf('/')
                            && !reference.trim().endsWith("/")
                        ? crossNamespace(pod, podNamespace, reference.trim())
                        : invalid(
                            "pod "
                                + pod
                                + ": volumeAttributes.modelArtifact '"
                                + reference
                                + "' is not a ModelArtifact name or <namespace>/<name>"));
    if (name.length() > 253 || !OBJECT_NAME.matcher(name).matches()) {
      throw invalid(
          "pod "
              + pod
              + ": volumeAttributes.modelArtifact '"
              + name
              + "' is not a valid object name (lowercase letters, digits, '-' and '.', at most 253"
              + " characters)");
    }

    return new PublishRequest(
        call.getVolumeId(),
        target,
        podNamespace,
        podName,
        podUid,
        new ArtifactVolume(podNamespace, name),
        timeout);
  }

  /** The TensorShardSet rank a volume names: both attributes, a valid name, a rank >= 0. */
  private static ShardRankVolume shardRank(Map<String, String> ctx, String pod, String podNamespace)
      throws CsiException {
    if (ctx.containsKey(ConsumerVolumes.ATTR_MODEL_ARTIFACT)) {
      throw invalid(
          "pod "
              + pod
              + ": volumeAttributes name both modelArtifact and tensorShardSet; a volume mounts one"
              + " of them");
    }
    String name = ctx.get(ATTR_TENSOR_SHARD_SET);
    String rankText = ctx.get(ATTR_RANK);
    if (name == null || name.isBlank() || rankText == null || rankText.isBlank()) {
      throw invalid(
          "pod "
              + pod
              + ": a TensorShardSet volume needs both volumeAttributes.tensorShardSet (a"
              + " TensorShardSet of namespace "
              + podNamespace
              + ") and volumeAttributes.rank (the global rank whose file to mount)");
    }
    String namespaceAttr = ctx.get(ConsumerVolumes.ATTR_NAMESPACE);
    if (namespaceAttr != null && !namespaceAttr.equals(podNamespace)) {
      throw new CsiException(
          Status.Code.PERMISSION_DENIED,
          "pod "
              + pod
              + " may not use TensorShardSet "
              + namespaceAttr
              + "/"
              + name.trim()
              + ": a pod can mount only TensorShardSets of its own namespace ("
              + podNamespace
              + ")");
    }
    String n = name.trim();
    if (n.length() > 253 || !OBJECT_NAME.matcher(n).matches()) {
      throw invalid(
          "pod "
              + pod
              + ": volumeAttributes.tensorShardSet '"
              + name
              + "' is not a valid object"
              + " name");
    }
    int rank;
    try {
      rank = Integer.parseInt(rankText.trim());
    } catch (NumberFormatException e) {
      rank = -1;
    }
    if (rank < 0) {
      throw invalid(
          "pod "
              + pod
              + ": volumeAttributes.rank '"
              + rankText
              + "' is not a rank (an integer >="
              + " 0)");
    }
    return new ShardRankVolume(podNamespace, n, rank);
  }

  private static Duration readyTimeout(Map<String, String> ctx, DriverConfig config, String pod)
      throws CsiException {
    Duration timeout = config.defaultReadyTimeout();
    String timeoutText = ctx.get(ConsumerVolumes.ATTR_READY_TIMEOUT);
    if (timeoutText != null) {
      timeout = ReadyTimeouts.parse(timeoutText);
      if (timeout == null
          || timeout.isNegative()
          || timeout.compareTo(config.maxReadyTimeout()) > 0) {
        throw invalid(
            "pod "
                + pod
                + ": volumeAttributes.readyTimeout '"
                + timeoutText
                + "' is not a duration between 0s and "
                + ReadyTimeouts.format(config.maxReadyTimeout())
                + " (e.g. 90s, 5m, 1h30m)");
      }
    }
    return timeout;
  }

  private static String required(Map<String, String> ctx, String key) throws CsiException {
    String v = ctx.get(key);
    if (v == null || v.isEmpty()) {
      throw invalid(
          key
              + " is missing from the volume context: the CSIDriver object "
              + ConsumerVolumes.DRIVER
              + " must set podInfoOnMount: true (the Tensorcast chart's does)");
    }
    return v;
  }

  private static CsiException crossNamespace(String pod, String podNamespace, String reference) {
    return new CsiException(
        Status.Code.PERMISSION_DENIED,
        "pod "
            + pod
            + " may not use ModelArtifact "
            + reference
            + ": a pod can mount only ModelArtifacts of its own namespace ("
            + podNamespace
            + "); create the artifact there");
  }

  private static CsiException invalid(String message) {
    return new CsiException(Status.Code.INVALID_ARGUMENT, message);
  }
}
