package io.tensorcast.api.v1alpha1;

/**
 * Condition types, statuses and reasons of {@code ModelArtifact.status.conditions}, in one place.
 * Shape and conventions follow the Kubernetes API conventions for conditions (type / status /
 * reason / message / lastTransitionTime, CamelCase reasons that a program can switch on; the
 * message is for people).
 *
 * <p>Meaning of {@code status=True} per type: {@link #RESOLVED} the source was listed and sized for
 * this generation; {@link #SCHEDULED} every replica has a node and a pod; {@link #LOADED} every
 * byte is present and verified on every chosen node; {@link #READY} the artifact can be used (what
 * {@code kubectl wait --for=condition=Ready} and Argo CD look at); {@link #DEGRADED} it is usable
 * but something is wrong (a replica lost, a peer failing); {@link #IN_USE} consumer pods use the
 * artifact through its CSI volume, so its copies are not removed under them (the message names the
 * pods).
 */
public final class Conditions {

  // Types.
  public static final String RESOLVED = "Resolved";
  public static final String SCHEDULED = "Scheduled";
  public static final String LOADED = "Loaded";
  public static final String READY = "Ready";
  public static final String DEGRADED = "Degraded";
  public static final String IN_USE = "InUse";

  // Statuses (the Kubernetes condition status values).
  public static final String TRUE = "True";
  public static final String FALSE = "False";
  public static final String UNKNOWN = "Unknown";

  // Reasons: spec and source (Resolved, Ready).
  /** The spec breaks a rule the CRD schema cannot express; the message names field and rule. */
  public static final String REASON_INVALID_SPEC = "InvalidSpec";

  /** Listing the source is in progress. */
  public static final String REASON_RESOLVING = "Resolving";

  /** The source was listed: files, sizes, revision and headers are known. */
  public static final String REASON_SOURCE_RESOLVED = "SourceResolved";

  /** The bucket, prefix, repository, revision or directory does not exist or lists no file. */
  public static final String REASON_SOURCE_NOT_FOUND = "SourceNotFound";

  /** The source refused the credentials (or their absence). */
  public static final String REASON_ACCESS_DENIED = "AccessDenied";

  /**
   * The name of the artifact's own Secret or NetworkPolicy ({@code <name>-tensorcast}) is taken by
   * an object the artifact does not own; the message names it.
   */
  public static final String REASON_NAME_CONFLICT = "NameConflict";

  /** The credentials Secret or one of its keys is missing. */
  public static final String REASON_CREDENTIALS_NOT_FOUND = "CredentialsNotFound";

  /** The source could not be reached or kept failing after the bounded retries. */
  public static final String REASON_SOURCE_UNAVAILABLE = "SourceUnavailable";

  /** The resolved size exceeds {@code spec.memory.limit}. */
  public static final String REASON_SIZE_LIMIT_EXCEEDED = "SizeLimitExceeded";

  /** A file is malformed or unsafe (bad header, pickle asking for code, escaping path). */
  public static final String REASON_INVALID_ARTIFACT = "InvalidArtifact";

  /**
   * A data-plane pod refused a safetensors file: it breaks a rule of the format or a bound of the
   * reader (header size, tensors, rank); the message names the file, the rule and the numbers.
   */
  public static final String REASON_INVALID_SAFETENSORS = "InvalidSafetensors";

  /**
   * A data-plane pod refused a torch checkpoint: a pickle that needs code, a malformed archive, or
   * a bound of the reader (memo reuse, objects, zip ratio, ...); the message names the file, the
   * rule and the numbers.
   */
  public static final String REASON_INVALID_TORCH_CHECKPOINT = "InvalidTorchCheckpoint";

  /**
   * A data-plane pod refused an index file ({@code model.safetensors.index.json}, {@code
   * pytorch_model.bin.index.json}): not JSON, a shard missing or filtered out, a tensor not in its
   * shard, a wrong {@code total_size}; the message names the file and the position or name, and how
   * to leave the index out.
   */
  public static final String REASON_INVALID_INDEX = "InvalidIndex";

  // Reasons: scheduling (Scheduled).
  /** Every replica has a chosen node and a data-plane pod. */
  public static final String REASON_NODES_SELECTED = "NodesSelected";

  /** Fewer eligible nodes (selector, taints, RDMA, memory) than {@code replicas}. */
  public static final String REASON_INSUFFICIENT_NODES = "InsufficientNodes";

  /** Pods exist but the scheduler has not bound all of them yet. */
  public static final String REASON_PODS_PENDING = "PodsPending";

  // Reasons: loading (Loaded, Ready).
  /** Bytes are being loaded; the message carries the progress. */
  public static final String REASON_LOADING = "Loading";

  /** Every byte is present and verified on every chosen node. */
  public static final String REASON_ALL_BYTES_LOADED = "AllBytesLoaded";

  /** Received bytes did not match the declared size or checksum. */
  public static final String REASON_VERIFICATION_FAILED = "VerificationFailed";

  /** A data-plane pod failed to load its copy; the message names node and cause. */
  public static final String REASON_LOAD_FAILED = "LoadFailed";

  /** Page-locking the store failed (no CAP_IPC_LOCK, memlock limit, memory exhausted). */
  public static final String REASON_PIN_FAILED = "PinFailed";

  // Reasons: readiness and health (Ready, Degraded).
  /** All replicas are Ready. */
  public static final String REASON_ALL_REPLICAS_READY = "AllReplicasReady";

  /** Some replicas are not Ready yet. */
  public static final String REASON_REPLICAS_NOT_READY = "ReplicasNotReady";

  /** A replica that was Ready lost its copy or its pod (node gone, pod deleted). */
  public static final String REASON_REPLICA_LOST = "ReplicaLost";

  /** Nothing is wrong (Degraded=False). */
  public static final String REASON_HEALTHY = "Healthy";

  // Reasons: consumers (InUse).
  /** No pod uses the artifact through a CSI volume. */
  public static final String REASON_NO_CONSUMERS = "NoConsumers";

  /** Pods use the artifact; the message names them and their nodes. */
  public static final String REASON_CONSUMER_PODS = "ConsumerPods";

  /**
   * Pods on a node still use a copy the operator would otherwise replace (an older generation, a
   * changed pod): that copy is kept until they are gone; the message names node, pods and copy.
   */
  public static final String REASON_COPY_KEPT_FOR_CONSUMERS = "CopyKeptForConsumers";

  /** The artifact is being deleted and waits for the pods that use it to go. */
  public static final String REASON_DELETION_WAITS_FOR_CONSUMERS = "DeletionWaitsForConsumers";

  // Reasons: TensorShardSet (Resolved, Ready).
  /** {@code spec.artifactRef} names no ModelArtifact of the namespace; the set waits for it. */
  public static final String REASON_ARTIFACT_NOT_FOUND = "ArtifactNotFound";

  /** The referenced ModelArtifact is not Ready yet; the set waits for it. */
  public static final String REASON_ARTIFACT_NOT_READY = "ArtifactNotReady";

  /** The referenced ModelArtifact failed; the message carries its reason. */
  public static final String REASON_ARTIFACT_FAILED = "ArtifactFailed";

  /** Consumer pods that decide the placement are missing or not scheduled yet. */
  public static final String REASON_CONSUMERS_NOT_SCHEDULED = "ConsumersNotScheduled";

  /** Every rank file is complete and verified on its node. */
  public static final String REASON_ALL_RANKS_READY = "AllRanksReady";

  /** Some ranks are not Ready yet. */
  public static final String REASON_RANKS_NOT_READY = "RanksNotReady";

  private Conditions() {}
}
