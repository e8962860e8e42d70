package io.tensorcast.dataplane.consumer;

/**
 * A tensor read that cannot be answered, with the HTTP status that says why and a message naming
 * the tensor, file, parameter or rule. The endpoint sends it as {@code {"error": message, "reason":
 * reason}} with {@link #status()}.
 */
public final class TensorReadException extends Exception {
  private final int status;
  private final String reason;

  /**
   * @param status HTTP status: 400 bad parameter or unsatisfiable shard, 404 unknown tensor, 409
   *     ambiguous name or identity mismatch, 500 unreadable header or layout, 503 not ready
   * @param reason machine-readable reason, e.g. {@code UnknownTensor}
   * @param message what is wrong, naming the tensor, file or parameter and the rule broken
   */
  public TensorReadException(int status, String reason, String message) {
    super(message);
    this.status = status;
    this.reason = reason;
  }

  /** The HTTP status to answer with. */
  public int status() {
    return status;
  }

  /** Machine-readable reason, e.g. {@code UnknownTensor}, {@code BadParameter}. */
  public String reason() {
    return reason;
  }
}
