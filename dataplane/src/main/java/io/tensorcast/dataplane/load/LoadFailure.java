package io.tensorcast.dataplane.load;

import io.tensorcast.api.Reason;

/**
 * A load stopped. {@link #reason()} is the CamelCase reason that goes into the status and, through
 * the operator, into the ModelArtifact's conditions; the message names the file and the rule or the
 * numbers involved.
 *
 * <p>A failure is {@linkplain #isTransient() transient} when its reason is ({@link
 * Reason#isTransient()}: the source was unavailable or throttled for longer than the per-request
 * retries ({@code --max-attempts}) lasted, or it holds rank files of a TP shard layout without
 * their {@code manifest.json} ({@code IncompleteArtifact}: a save that writes the manifest last is
 * in progress, or failed). The same load may succeed later, so {@code dataplane serve} loads again
 * after a back-off instead of reporting {@code Failed}. Every other reason is about the spec, the
 * data or the node ({@code BucketNotFound}, {@code AccessDenied}, {@code InvalidSafetensors},
 * {@code DigestMismatch}, {@code InsufficientMemory}, ...) and does not heal by waiting.
 */
public class LoadFailure extends Exception {
  private static final long serialVersionUID = 1L;

  private final Reason reason;

  public LoadFailure(Reason reason, String message, Throwable cause) {
    super(message, cause);
    this.reason = reason;
  }

  public LoadFailure(Reason reason, String message) {
    this(reason, message, null);
  }

  /** Why, e.g. {@link Reason#InvalidSafetensors}, {@link Reason#InsufficientMemory}. */
  public Reason reason() {
    return reason;
  }

  /** Whether loading again later may succeed ({@link Reason#isTransient()}). */
  public boolean isTransient() {
    return reason.isTransient();
  }
}
