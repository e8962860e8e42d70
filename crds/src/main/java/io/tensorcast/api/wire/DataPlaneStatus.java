package io.tensorcast.api.wire;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonInclude;
import java.util.List;

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
 * @param reason CamelCase reason when {@code phase} is {@code Failed}, or the last retryable
 *     problem while loading; {@code null} otherwise
 * @param message human-readable detail that goes with {@code reason}
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
 * @param lock page-locking outcome
 * @param storeDirectory directory on the node holding the artifact's files as-is
 * @param readyTime RFC 3339 time the artifact became Ready on this node, or {@code null}
 * @param fileStatuses per-file detail
 * @param peerEpoch the epoch of the peer membership this pod applied last ({@code PUT /v1/peers},
 *     opaque; {@code "static"} for a {@code --peers} list); {@code null} when it has none
 * @param peers number of peers this pod is connected to over the peer transport now
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
    LockInfo lock,
    String storeDirectory,
    String readyTime,
    List<FileStatus> fileStatuses,
    String peerEpoch,
    int peers) {

  /** A status without peer-to-peer fields ({@code peerEpoch} null, {@code peers} 0). */
  public DataPlaneStatus(
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
      LockInfo lock,
      String storeDirectory,
      String readyTime,
      List<FileStatus> fileStatuses) {
    this(
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
        lock,
        storeDirectory,
        readyTime,
        fileStatuses,
        null,
        0);
  }

  /** Where a data-plane pod is with its artifact. */
  public enum Phase {
    /** Started, nothing asked yet. */
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
    Failed
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
   * One file of the artifact.
   *
   * @param path path relative to the artifact root
   * @param size size in bytes
   * @param complete whether the file is verified and complete in the store
   * @param sha256 lowercase hex SHA-256 of the bytes in the store, once complete
   */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  @JsonIgnoreProperties(ignoreUnknown = true)
  public record FileStatus(String path, long size, boolean complete, String sha256) {}
}
