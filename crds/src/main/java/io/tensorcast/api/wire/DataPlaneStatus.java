package io.tensorcast.api.wire;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonInclude;
import io.tensorcast.api.Reason;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a data-plane pod reports on {@code GET /status} of its control endpoint, and what the
 * operator aggregates into a ModelArtifact's status. JSON, field names as below; unknown fields are
 * ignored so either side may be newer.
 *
 * <p>Truthfulness rule: {@code bytesLoaded} counts only bytes that have landed in the store; {@code
 * phase == Ready} only after every file's size, structure and (where the source gives one) digest
 * were verified on the bytes in the store.
 *
 * @param artifactId the store's identifier of the artifact (stable per ModelArtifact generation)
 * @param phase one of {@link Phase}
 * @param reason CamelCase reason when {@code phase} is {@code Failed}; the last retryable problem
 *     while loading; while {@code Pending} after a load failed on a transient source error ({@code
 *     SourceUnavailable}, {@code Throttled}), that failure's reason; {@code null} otherwise
 * @param message human-readable detail that goes with {@code reason}; while waiting to retry a
 *     load, the failure's message followed by {@code "; retrying in 40s (attempt 3)"} (see {@link
 *     #retryMessage} and {@link #withoutRetryCountdown})
 * @param source the source URI without secrets
 * @param resolvedRevision what the source resolved to (Hub commit sha, or a digest of the S3
 *     listing's ETags); {@code null} until resolved
 * @param files number of files in the artifact
 * @param filesComplete number of files verified and complete in the store
 * @param tensors number of tensors found in safetensors headers (0 for other formats)
 * @param bytesTotal artifact size in bytes
 * @param bytesLoaded bytes written to the store and accounted for (≤ bytesTotal)
 * @param bytesFromSource bytes received from the artifact's source
 * @param bytesFromPeers bytes received from peer data-plane pods
 * @param bytesFromSourceOnWire every byte the pod received from the source's response bodies since
 *     it started, whatever became of it: header reads, ranges kept, ranges discarded by a failed
 *     load, bytes read again after a retry, reads for peers. {@code bytesFromSource} counts only
 *     the bytes in the store; the two differ by what faults and re-reads cost. 0 when not counted
 * @param lock page-locking outcome
 * @param storeDirectory directory on the node holding the artifact's files as-is
 * @param readyTime RFC 3339 time the artifact became Ready on this node, or {@code null}
 * @param fileStatuses per-file detail
 * @param peerEpoch the epoch of the peer membership this pod applied last ({@code PUT /v1/peers},
 *     opaque; {@code "static"} for a {@code --peers} list); {@code null} when it has none
 * @param peers number of peers this pod is connected to over the peer transport now
 * @param droppedPeers members this pod dropped for announcing a piece hash that differs from the
 *     piece's reader's (at most 16), or null
 * @param handedOverPeers members whose share of the source reads this pod's swarm handed over to
 *     the others, by member id, with the reason (its load failed for good, or it announced no piece
 *     of its block within the deadline); null when none
 * @param shards a TensorShardSet pod's plan and ranks; {@code null} for a ModelArtifact's pod
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
@JsonIgnoreProperties(ignoreUnknown = true)
public record DataPlaneStatus(
    String artifactId,
    Phase phase,
    String reason,
    String message,
    String source,
    String resolvedRevision,
    int files,
    int filesComplete,
    long tensors,
    long bytesTotal,
    long bytesLoaded,
    long bytesFromSource,
    long bytesFromPeers,
    long bytesFromSourceOnWire,
    LockInfo lock,
    String storeDirectory,
    String readyTime,
    List<FileStatus> fileStatuses,
    String peerEpoch,
    int peers,
    List<DroppedPeer> droppedPeers,
    Map<String, String> handedOverPeers,
    ShardReport shards) {

  /**
   * A status with only {@code artifactId} and {@code phase} set; fill the rest with its setters.
   */
  public static Builder builder(String artifactId, Phase phase) {
    return new Builder().artifactId(artifactId).phase(phase);
  }

  /** A builder holding every field of this status, to change some of them. */
  public Builder toBuilder() {
    return new Builder()
        .artifactId(artifactId)
        .phase(phase)
        .reason(reason)
        .message(message)
        .source(source)
        .resolvedRevision(resolvedRevision)
        .files(files)
        .filesComplete(filesComplete)
        .tensors(tensors)
        .bytesTotal(bytesTotal)
        .bytesLoaded(bytesLoaded)
        .bytesFromSource(bytesFromSource)
        .bytesFromPeers(bytesFromPeers)
        .bytesFromSourceOnWire(bytesFromSourceOnWire)
        .lock(lock)
        .storeDirectory(storeDirectory)
        .readyTime(readyTime)
        .fileStatuses(fileStatuses)
        .peerEpoch(peerEpoch)
        .peers(peers)
        .droppedPeers(droppedPeers)
        .handedOverPeers(handedOverPeers)
        .shards(shards);
  }

  /**
   * Whether this is a pod waiting to load again after a transient failure: {@code Pending} with a
   * reason. (Reasons while {@code Loading} are retries of single reads; they change with every poll
   * and stay out of the artifact's status.)
   */
  public boolean waitingToRetry() {
    return phase == Phase.Pending && reason != null && !reason.isEmpty();
  }

  /** Builds a {@link DataPlaneStatus}; every field starts empty (null, 0). */
  public static final class Builder {
    private String artifactId;
    private Phase phase;
    private String reason;
    private String message;
    private String source;
    private String resolvedRevision;
    private int files;
    private int filesComplete;
    private long tensors;
    private long bytesTotal;
    private long bytesLoaded;
    private long bytesFromSource;
    private long bytesFromPeers;
    private long bytesFromSourceOnWire;
    private LockInfo lock;
    private String storeDirectory;
    private String readyTime;
    private List<FileStatus> fileStatuses;
    private String peerEpoch;
    private int peers;
    private List<DroppedPeer> droppedPeers;
    private Map<String, String> handedOverPeers;
    private ShardReport shards;

    private Builder() {}

    public Builder artifactId(String v) {
      artifactId = v;
      return this;
    }

    public Builder phase(Phase v) {
      phase = v;
      return this;
    }

    /** The reason as it travels (a wire name of {@link Reason}, or one a newer pod sent). */
    public Builder reason(String v) {
      reason = v;
      return this;
    }

    public Builder reason(Reason v) {
      reason = v == null ? null : v.name();
      return this;
    }

    public Builder message(String v) {
      message = v;
      return this;
    }

    public Builder source(String v) {
      source = v;
      return this;
    }

    public Builder resolvedRevision(String v) {
      resolvedRevision = v;
      return this;
    }

    public Builder files(int v) {
      files = v;
      return this;
    }

    public Builder filesComplete(int v) {
      filesComplete = v;
      return this;
    }

    public Builder tensors(long v) {
      tensors = v;
      return this;
    }

    public Builder bytesTotal(long v) {
      bytesTotal = v;
      return this;
    }

    public Builder bytesLoaded(long v) {
      bytesLoaded = v;
      return this;
    }

    public Builder bytesFromSource(long v) {
      bytesFromSource = v;
      return this;
    }

    public Builder bytesFromPeers(long v) {
      bytesFromPeers = v;
      return this;
    }

    public Builder bytesFromSourceOnWire(long v) {
      bytesFromSourceOnWire = v;
      return this;
    }

    public Builder lock(LockInfo v) {
      lock = v;
      return this;
    }

    public Builder storeDirectory(String v) {
      storeDirectory = v;
      return this;
    }

    public Builder readyTime(String v) {
      readyTime = v;
      return this;
    }

    public Builder fileStatuses(List<FileStatus> v) {
      fileStatuses = v;
      return this;
    }

    public Builder peerEpoch(String v) {
      peerEpoch = v;
      return this;
    }

    public Builder peers(int v) {
      peers = v;
      return this;
    }

    /** Members this pod dropped; an empty list is reported as none (null). */
    public Builder droppedPeers(List<DroppedPeer> v) {
      droppedPeers = v == null || v.isEmpty() ? null : v;
      return this;
    }

    /** Hand-overs by member id, with the reason; an empty map is stored as null. */
    public Builder handedOverPeers(Map<String, String> v) {
      handedOverPeers =
          v == null || v.isEmpty()
              ? null
              : java.util.Collections.unmodifiableMap(new java.util.TreeMap<>(v));
      return this;
    }

    /** A TensorShardSet pod's plan and ranks; null for a ModelArtifact's pod. */
    public Builder shards(ShardReport v) {
      shards = v;
      return this;
    }

    public DataPlaneStatus build() {
      return new DataPlaneStatus(
          artifactId,
          phase,
          reason,
          message,
          source,
          resolvedRevision,
          files,
          filesComplete,
          tensors,
          bytesTotal,
          bytesLoaded,
          bytesFromSource,
          bytesFromPeers,
          bytesFromSourceOnWire,
          lock,
          storeDirectory,
          readyTime,
          fileStatuses,
          peerEpoch,
          peers,
          droppedPeers,
          handedOverPeers,
          shards);
    }
  }

  /**
   * The message of a pod waiting to load again after a transient failure: {@code failure + ";
   * retrying in " + wait + " (attempt " + nextAttempt + ")"}, the wait as {@code 250ms}, {@code
   * 40s} or {@code 4m30s} (whole seconds rounded up from 1 s on). The data plane writes it with the
   * time left, so it changes while the pod waits; {@link #withoutRetryCountdown} removes the
   * countdown again (what the operator copies into conditions, so the status does not change on
   * every poll).
   *
   * @param failure the failed load's message
   * @param wait time left until the next attempt (not negative)
   * @param nextAttempt number of the attempt that follows the wait (the first load is attempt 1)
   */
  public static String retryMessage(String failure, Duration wait, int nextAttempt) {
    return failure + "; retrying in " + shortDuration(wait) + " (attempt " + nextAttempt + ")";
  }

  private static final Pattern RETRY_COUNTDOWN =
      Pattern.compile("; retrying in [0-9hms]+ \\(attempt ([0-9]+)\\)$");

  /**
   * {@code message} without the countdown of {@link #retryMessage}: {@code "...; retrying in 40s
   * (attempt 3)"} becomes {@code "...; retrying (attempt 3)"}, equal for every poll of one wait.
   * Other messages (and {@code null}) are returned unchanged.
   */
  public static String withoutRetryCountdown(String message) {
    if (message == null) {
      return null;
    }
    Matcher m = RETRY_COUNTDOWN.matcher(message);
    return m.find()
        ? message.substring(0, m.start()) + "; retrying (attempt " + m.group(1) + ")"
        : message;
  }

  private static String shortDuration(Duration d) {
    long ms = Math.max(0, d.toMillis());
    if (ms < 1000) {
      return ms + "ms";
    }
    long s = (ms + 999) / 1000;
    if (s < 60) {
      return s + "s";
    }
    long h = s / 3600;
    long m = (s % 3600) / 60;
    long rest = s % 60;
    return (h > 0 ? h + "h" : "") + (m > 0 || h > 0 ? m + "m" : "") + (rest > 0 ? rest + "s" : "");
  }

  /**
   * Where a data-plane pod is with its artifact. The pod decides it in one place ({@code
   * DataPlaneServer.status()} over its loader's state); the operator maps it to the node entry's
   * phase with {@link #artifactPhase()}.
   */
  public enum Phase {
    /**
     * Started, nothing asked yet; or waiting to load again after a load failed on a transient
     * source error ({@code reason} and {@code message} say which, when and which attempt).
     */
    Pending,
    /** Listing the source and reading headers. */
    Resolving,
    /** Reading bytes into the store. */
    Loading,
    /** Checking sizes, structure and digests of the bytes in the store. */
    Verifying,
    /** Every byte is in the store and verified. */
    Ready,
    /** Stopped on an error that retrying will not fix; see reason and message. */
    Failed;

    /** The phase of a ModelArtifact's node entry for a pod in this phase. */
    public ArtifactPhase artifactPhase() {
      return switch (this) {
        case Pending -> ArtifactPhase.Pending;
        case Resolving -> ArtifactPhase.Resolving;
        case Loading, Verifying -> ArtifactPhase.Loading;
        case Ready -> ArtifactPhase.Ready;
        case Failed -> ArtifactPhase.Failed;
      };
    }

    /**
     * The phase a pod reports for a load that ended in a failure for {@code reason}: {@code
     * Pending} when the reason is transient and the pod will load again (it is not {@code
     * stopping}), else {@code Failed}.
     */
    public static Phase afterFailure(String reason, boolean stopping) {
      return Reason.isTransient(reason) && !stopping ? Pending : Failed;
    }
  }

  /**
   * Page-locking outcome.
   *
   * @param locked whether the artifact's pages are locked in memory
   * @param lockedBytes bytes locked
   * @param reason CamelCase reason ({@code Locked}, {@code LockingDisabled}, {@code
   *     MemlockLimitTooLow}, ...)
   * @param message detail with the numbers (limit, bytes asked, capability)
   */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  @JsonIgnoreProperties(ignoreUnknown = true)
  public record LockInfo(boolean locked, long lockedBytes, String reason, String message) {}

  /**
   * How a file's bytes were verified before the pod reported it complete.
   *
   * <ul>
   *   <li>{@link #SourceDigest}: against a digest the source publishes for the whole file (Hub LFS
   *       SHA-256, Hub git blob SHA-1, S3/OSS full-object SHA-256/CRC64NVME/CRC32C/CRC32 checksum,
   *       single-part ETag MD5). Protects against wrong bytes from anywhere: peers, relays, a
   *       member that lies, corruption in the store.
   *   <li>{@link #ReaderPieceHashes}: the source publishes no usable digest; every piece matched
   *       the SHA-256 announced by the member assigned to read it from the source (or this pod read
   *       it itself). Protects against strangers, relays and members announcing other pieces'
   *       hashes; not against the reader of a piece lying about it, or the source path itself.
   * </ul>
   */
  public enum Verification {
    SourceDigest,
    ReaderPieceHashes
  }

  /**
   * One file of the artifact.
   *
   * @param path path relative to the artifact root
   * @param size size in bytes
   * @param complete whether the file is verified and complete in the store
   * @param sha256 lowercase hex SHA-256 of the bytes in the store, once complete, when that is the
   *     digest the store recorded (see {@code contentDigest})
   * @param verification how the bytes were verified, once complete
   * @param digest which digest: e.g. {@code "sha256 (Hub LFS)"}, {@code "git blob sha1"}, {@code
   *     "CRC64NVME (S3 full-object checksum)"}, {@code "MD5 (single-part ETag)"}; with {@link
   *     Verification#ReaderPieceHashes}, why the source gave none usable
   * @param contentDigest the digest the store recorded for the bytes once complete, as {@code
   *     <algorithm>:<lowercase hex>}: the source's digest that verified them (e.g. {@code
   *     crc64nvme:…}, {@code md5:…}), or {@code sha256:…} where the source publishes none
   */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  @JsonIgnoreProperties(ignoreUnknown = true)
  public record FileStatus(
      String path,
      long size,
      boolean complete,
      String sha256,
      Verification verification,
      String digest,
      String contentDigest) {
    /** A file without verification detail. */
    public FileStatus(String path, long size, boolean complete, String sha256) {
      this(path, size, complete, sha256, null, null, sha256 == null ? null : "sha256:" + sha256);
    }

    /** A file verified as {@code verification} says, whose recorded digest is its SHA-256. */
    public FileStatus(
        String path,
        long size,
        boolean complete,
        String sha256,
        Verification verification,
        String digest) {
      this(
          path,
          size,
          complete,
          sha256,
          verification,
          digest,
          sha256 == null ? null : "sha256:" + sha256);
    }
  }

  /**
   * A member a pod dropped from its swarm.
   *
   * @param id the member's id
   * @param reason one line: the piece and both hashes
   */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  @JsonIgnoreProperties(ignoreUnknown = true)
  public record DroppedPeer(String id, String reason) {}
}
