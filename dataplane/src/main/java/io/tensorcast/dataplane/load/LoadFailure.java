package io.tensorcast.dataplane.load;

/**
 * A load stopped. {@link #reason()} is the CamelCase reason that goes into the status and, through
 * the operator, into the ModelArtifact's conditions; the message names the file and the rule or the
 * numbers involved.
 */
public class LoadFailure extends Exception {
  private static final long serialVersionUID = 1L;
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
}
