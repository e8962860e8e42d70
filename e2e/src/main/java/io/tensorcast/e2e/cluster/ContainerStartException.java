package io.tensorcast.e2e.cluster;

/**
 * A container could not be started. {@link #reason()} uses the kubelet's waiting reasons ({@code
 * ErrImagePull}, {@code CreateContainerConfigError}, {@code RunContainerError}); the message goes
 * into the container status as is, so it names the image, object or field at fault.
 */
public class ContainerStartException extends Exception {

  private static final long serialVersionUID = 1L;

  private final String reason;

  public ContainerStartException(String reason, String message) {
    super(message);
    this.reason = reason;
  }

  public ContainerStartException(String reason, String message, Throwable cause) {
    super(message, cause);
    this.reason = reason;
  }

  /** The kubelet-style waiting reason, e.g. {@code CreateContainerConfigError}. */
  public String reason() {
    return reason;
  }
}
