package io.tensorcast.dataplane.load;

import java.util.Set;

/**
 * A load stopped. {@link #reason()} is the CamelCase reason that goes into the status and, through
 * the operator, into the ModelArtifact's conditions; the message names the file and the rule or the
 * numbers involved.
 *
 * <p>A failure is {@linkplain #isTransient() transient} when its reason is one of {@link
 * #TRANSIENT_REASONS}: the source was unavailable or throttled for longer than the per-request
 * retries ({@code --max-attempts}) lasted, or it holds rank files of a TP shard layout without
 * their {@code manifest.json} ({@code IncompleteArtifact}: a save that writes the manifest last is
 * in progress, or failed). The same load may succeed later, so {@code dataplane serve} loads again
 * after a back-off instead of reporting {@code Failed}. Every other reason is about the spec, the
 * data or the node ({@code BucketNotFound}, {@code AccessDenied}, {@code CredentialsNotFound},
 * {@code InvalidSafetensors}, {@code InvalidTorchCheckpoint}, {@code InvalidIndex}, {@code
 * DigestMismatch}, {@code ObjectChanged}, {@code RangeNotHonored}, {@code InsufficientMemory}, ...)
 * and does not heal by waiting.
 */
public class LoadFailure extends Exception {
  private static final long serialVersionUID = 1L;

  /**
   * Reasons of failures that retrying the whole load later may cure: {@code SourceUnavailable}
   * (5xx, timeouts, connection errors, bodies cut short) and {@code Throttled} (429, 503 SlowDown),
   * as the sources report them (see {@code SourceException}).
   */
  public static final Set<String> TRANSIENT_REASONS =
      Set.of("SourceUnavailable", "Throttled", "IncompleteArtifact");

  private final String reason;

  public LoadFailure(String reason, String message, Throwable cause) {
    super(message, cause);
    this.reason = reason;
  }

  public LoadFailure(String reason, String message) {
    this(reason, message, null);
  }

  /** CamelCase reason, e.g. {@code InvalidSafetensors}, {@code InsufficientMemory}. */
  public String reason() {
    return reason;
  }

  /** Whether the reason is one of {@link #TRANSIENT_REASONS}: loading again later may succeed. */
  public boolean isTransient() {
    return TRANSIENT_REASONS.contains(reason);
  }
}
