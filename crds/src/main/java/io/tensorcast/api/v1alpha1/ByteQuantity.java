package io.tensorcast.api.v1alpha1;

/**
 * The syntax of a byte count written as a Kubernetes quantity ({@code spec.memory.limit}, {@code
 * spec.distribution.pieceSize}): Kubernetes' quantity grammar (apimachinery {@code
 * resource.ParseQuantity}) without a minus sign and without the sub-unit suffixes {@code n}, {@code
 * u} and {@code m}, which cannot count whole bytes. Whether the amount is a whole number above 0 is
 * left to the operator.
 */
public final class ByteQuantity {

  /** Searched by the API server in the string form of the quantity (anchored). */
  public static final String PATTERN =
      "^\\+?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i|[kMGTPE])?$";

  private ByteQuantity() {}
}
