package io.tensorcast.csi.node;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;

/**
 * A refusal of a CSI call: the gRPC status code the CSI specification names for the case, and a
 * message for the person who reads it in {@code kubectl describe pod} (the kubelet copies it into
 * its {@code FailedMount} event).
 */
public final class CsiException extends Exception {
  private static final long serialVersionUID = 1L;

  private final Status.Code code;

  public CsiException(Status.Code code, String message) {
    super(message);
    this.code = code;
  }

  public Status.Code code() {
    return code;
  }

  /** The gRPC form of this refusal. */
  public StatusRuntimeException toStatus() {
    return code.toStatus().withDescription(getMessage()).asRuntimeException();
  }
}
