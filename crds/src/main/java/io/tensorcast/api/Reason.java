package io.tensorcast.api;

import java.util.Optional;

/**
 * Every CamelCase reason Tensorcast puts on the wire: in a ModelArtifact's conditions and node
 * entries (the operator), in a data-plane pod's {@code /status} ({@code reason}) and in the
 * failures behind it (the data plane). One vocabulary for both sides; the constant's name is the
 * wire name (Kubernetes API conventions: a reason a program can switch on, the message is for
 * people).
 *
 * <p>On the wire a reason stays a string, so an operator reads the reasons of a newer data plane
 * ({@link #of} is empty for a name it does not know) and the other way round.
 *
 * <p>{@link #isTransient()}: the failure may heal by itself — loading again later may succeed, so a
 * data plane that failed for that reason waits and loads again instead of reporting {@code Failed}.
 * Every other failure reason is about the spec, the data or the node and does not heal by waiting.
 */
public enum Reason {
  // ---- spec and source (Resolved, Ready)

  /** The spec breaks a rule the CRD schema cannot express; the message names field and rule. */
  InvalidSpec,
  /** Listing the source is in progress. */
  Resolving,
  /** The source was listed: files, sizes, revision and headers are known. */
  SourceResolved,
  /** The bucket, prefix, repository, revision or directory does not exist or lists no file. */
  SourceNotFound,
  /** The bucket does not exist. */
  BucketNotFound,
  /** An object the listing named is gone. */
  ObjectNotFound,
  /** The Hub repository does not exist (or is private and the token may not see it). */
  RepoNotFound,
  /** The Hub revision (branch, tag, commit) does not exist. */
  RevisionNotFound,
  /** A Hub path does not exist at the revision. */
  EntryNotFound,
  /** The Hub repository is gated and the token was not granted access. */
  GatedRepo,
  /** The source refused the credentials (or their absence), HTTP 403. */
  AccessDenied,
  /** The Hub refused the token, HTTP 401. */
  Unauthorized,
  /** The credentials Secret or one of its keys is missing; or no credentials anywhere. */
  CredentialsNotFound,
  /**
   * The name of the artifact's own Secret or NetworkPolicy ({@code <name>-tensorcast}) is taken by
   * an object the artifact does not own; the message names it.
   */
  NameConflict,
  /** Credentials would go to a plain {@code http://} endpoint that was not declared insecure. */
  InsecureEndpoint,
  /** The endpoint is a link-local or cloud metadata address, refused whatever the flags. */
  ForbiddenEndpoint,
  /** The source URI cannot be used (scheme, bucket, path). */
  InvalidSourceUri,
  /** The source's options cannot be used together (e.g. {@code oss://} with path-style). */
  InvalidSourceOptions,
  /** The source cannot be opened with the pod's settings; the message says why. */
  InvalidSource,
  /** The source refused a request as malformed (HTTP 4xx other than 401/403/404/429). */
  SourceRequestRejected,
  /** The source could not be reached or kept failing after the bounded retries. Transient. */
  SourceUnavailable(true),
  /** The source throttled (HTTP 429, 503 SlowDown) for longer than the retries. Transient. */
  Throttled(true),
  /** The object is no longer the one listed (ETag or size differ); resolve again. */
  ObjectChanged,
  /**
   * An object changed at the source while it was being loaded; the load is loaded again against a
   * new listing, keeping the bytes of the files that did not change and reading the changed ones
   * whole. Transient: the artifact converges on the new version once the source is stable.
   */
  SourceChanged(true),
  /** A ranged read was answered with other bytes than asked (200 with the whole object, ...). */
  RangeNotHonored,
  /** The source answered with something other than the protocol promises. */
  InvalidResponse,
  /** A response body ended before its declared length. */
  TruncatedResponse,
  /** The resolved size exceeds {@code spec.memory.limit}. */
  SizeLimitExceeded,
  /** The artifact is larger than the store can hold. */
  ArtifactTooLarge,
  /** The source lists no file the filters keep. */
  EmptyArtifact,
  /**
   * Rank files of a TP shard layout without their {@code manifest.json}: a save that writes the
   * manifest last is in progress (or failed). Transient.
   */
  IncompleteArtifact(true),

  // ---- the artifact's bytes

  /** A file is malformed or unsafe (bad header, pickle asking for code, escaping path). */
  InvalidArtifact,
  /**
   * A safetensors file breaks a rule of the format or a bound of the reader (header size, tensors,
   * rank); the message names the file, the rule and the numbers.
   */
  InvalidSafetensors,
  /**
   * A torch checkpoint needs code, is a malformed archive, or breaks a bound of the reader (memo
   * reuse, objects, zip ratio, ...); the message names the file, the rule and the numbers.
   */
  InvalidTorchCheckpoint,
  /**
   * An index file ({@code model.safetensors.index.json}, {@code pytorch_model.bin.index.json}) is
   * not JSON, names a shard missing or filtered out, a tensor not in its shard, or a wrong {@code
   * total_size}; the message names the file and the position or name, and how to leave it out.
   */
  InvalidIndex,
  /** A listed name is absolute, climbs out, or is a link or not a regular file. */
  UnsafePath,
  /** A file's bytes do not match the digest its source publishes. */
  DigestMismatch,
  /** Bytes in the store do not match the SHA-256 recorded for them. */
  ChecksumMismatch,
  /** Received bytes did not match the declared size or checksum. */
  VerificationFailed,
  /**
   * A torch tensor that cannot be cut by ranges (no safetensors dtype, big-endian, not contiguous).
   */
  UnsupportedTensor,

  // ---- a TensorShardSet's plan (split rules against the artifact's tensors)

  /** A split dimension is outside a tensor's dimensions. */
  SplitDimOutOfRange,
  /** A dimension does not divide by the tp size (or sub-byte elements by bytes). */
  NotDivisible,
  /** An explicit rule matches no tensor of the artifact. */
  RuleMatchesNoTensor,
  /** A tensor no explicit rule covers. */
  TensorNotCovered,
  /** The ep size does not divide the expert count, or there are no experts to own. */
  ExpertsNotDivisible,
  /** No rules given and no built-in set for the architecture (or no config.json). */
  NoRuleSet,
  /** The rules, the layout or a tensor cannot be used otherwise (the message says why). */
  InvalidShardRules,

  // ---- the store on the node

  /** The node's budget for the store cannot hold the artifact. */
  InsufficientMemory,
  /** The store's file system is full. */
  FilesystemFull,
  /** Page-locking the store failed (no CAP_IPC_LOCK, memlock limit, memory exhausted). */
  PinFailed,
  /** The pages are locked ({@code lock.reason}). */
  Locked,
  /** Page-locking is disabled for the store ({@code lock.reason}). */
  LockingDisabled,
  /** The memlock limit is below the artifact's size ({@code lock.reason}). */
  MemlockLimitTooLow,
  /** {@code mlock} failed for another reason ({@code lock.reason}). */
  LockFailed,
  /** An artifact id the store cannot use as a directory name. */
  InvalidArtifactId,
  /** A path the store refuses. */
  InvalidPath,
  /** A size the store refuses (negative, beyond the budget's arithmetic). */
  InvalidSize,
  /** A path is listed twice. */
  DuplicatePath,
  /** A path is both a file and a directory of another file. */
  PathConflict,
  /** An artifact without files. */
  NoFiles,
  /** The store already holds an artifact of that id. */
  ArtifactExists,
  /** The artifact is in use (read, written) and cannot be changed now. */
  ArtifactBusy,
  /** Another process uses the store's root. */
  StoreInUse,
  /** The store was closed. */
  StoreClosed,
  /** The store's file system failed an operation. */
  StoreIoError,
  /** The store cannot be opened with the pod's settings; the message says why. */
  StoreError,
  /** Writing a range into the store failed (the sink or progress listener of a read threw). */
  SinkFailed,

  // ---- scheduling (Scheduled)

  /** Every replica has a chosen node and a data-plane pod. */
  NodesSelected,
  /** Fewer eligible nodes (selector, taints, RDMA, memory) than {@code replicas}. */
  InsufficientNodes,
  /** Pods exist but the scheduler has not bound all of them yet. */
  PodsPending,
  /** A data-plane pod's node is not Ready (its kubelet stopped reporting). */
  NodeNotReady,
  /** Consumer pods that decide a TensorShardSet's placement are missing or not scheduled yet. */
  ConsumersNotScheduled,

  // ---- loading (Loaded, Ready)

  /** Bytes are being loaded; the message carries the progress. */
  Loading,
  /** A read of the load is being retried (while {@code Loading}); the message names it. */
  Retrying,
  /** Every byte is present and verified on every chosen node. */
  AllBytesLoaded,
  /** A data-plane pod failed to load its copy; the message names node and cause. */
  LoadFailed,
  /** The load was stopped (the pod is shutting down, or its swarm closed). */
  Interrupted,
  /** A bug: an exception the data plane did not expect; the message has it. */
  InternalError,

  // ---- readiness and health (Ready, Degraded)

  /** All replicas are Ready. */
  AllReplicasReady,
  /** Some replicas are not Ready yet. */
  ReplicasNotReady,
  /** A replica that was Ready lost its copy or its pod (node gone, pod deleted). */
  ReplicaLost,
  /** Not Ready yet but nothing blocks it (Stalled=False). */
  Progressing,
  /** Nothing is wrong (Degraded=False). */
  Healthy,

  // ---- TensorShardSet (Resolved, Ready)

  /** {@code spec.artifactRef} names no ModelArtifact of the namespace; the set waits for it. */
  ArtifactNotFound,
  /** The referenced ModelArtifact is not Ready yet; the set waits for it. */
  ArtifactNotReady,
  /** The referenced ModelArtifact failed; the message carries its reason. */
  ArtifactFailed,
  /** Every rank file is complete and verified on its node. */
  AllRanksReady,
  /** Some ranks are not Ready yet. */
  RanksNotReady,

  // ---- consumers (InUse)

  /** No pod uses the artifact through a CSI volume. */
  NoConsumers,
  /** Pods use the artifact; the message names them and their nodes. */
  ConsumerPods,
  /**
   * Pods on a node still use a copy the operator would otherwise replace (an older generation, a
   * changed pod): that copy is kept until they are gone; the message names node, pods and copy.
   */
  CopyKeptForConsumers,
  /** The artifact is being deleted and waits for the pods that use it to go. */
  DeletionWaitsForConsumers;

  private final boolean transientFailure;

  Reason() {
    this(false);
  }

  Reason(boolean transientFailure) {
    this.transientFailure = transientFailure;
  }

  /** Whether a failure for this reason may heal by itself, so loading again later may succeed. */
  public boolean isTransient() {
    return transientFailure;
  }

  /** The reason named {@code name} (its wire name), or empty for null or an unknown name. */
  public static Optional<Reason> of(String name) {
    if (name == null) {
      return Optional.empty();
    }
    try {
      return Optional.of(valueOf(name));
    } catch (IllegalArgumentException e) {
      return Optional.empty();
    }
  }

  /** Whether {@code name} is the wire name of a transient reason. */
  public static boolean isTransient(String name) {
    return of(name).map(Reason::isTransient).orElse(false);
  }
}
