package io.tensorcast.dataplane.tensor;

import java.util.Objects;

/**
 * A tensor read that cannot be planned: unknown tensor, invalid or mismatched target, non-uniform
 * split. The message names the tensor, the target and the numbers; {@link #reason()} classifies it
 * (e.g. for an HTTP status: {@code UNKNOWN_TENSOR} is 404, the others are client errors).
 */
public class TensorIoException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** Why a read cannot be planned. */
  public enum Reason {
    /** The layout has no tensor of that name. */
    UNKNOWN_TENSOR,
    /** The target does not fit the tensor (split_dim out of range, as_stored without a rank). */
    INVALID_TARGET,
    /** The target's identity (scope axes, tp rank/size) differs from what is stored. */
    IDENTITY_MISMATCH,
    /** The requested split is not uniform: the dimension is not divisible by the tp size. */
    NOT_DIVISIBLE,
    /** A slice of a sub-byte dtype (F4, F6_*) that does not start or end on a byte boundary. */
    MISALIGNED_SUB_BYTE,
    /** A partial layout (some rank files only) does not hold the bytes the read needs. */
    NOT_HELD
  }

  private final Reason reason;

  /** An exception of the given reason and message. */
  public TensorIoException(Reason reason, String message) {
    super(message);
    this.reason = Objects.requireNonNull(reason, "reason");
  }

  /** The classification of the failure. */
  public Reason reason() {
    return reason;
  }
}
