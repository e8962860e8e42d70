package io.tensorcast.dataplane.format.safetensors;

import java.util.Arrays;
import java.util.Objects;

/**
 * A tensor to be written: name, element type and shape, without offsets. {@link SafetensorsWriter}
 * assigns the offsets. The shape is copied on the way in and out.
 *
 * @param name tensor name (any string except {@code "__metadata__"})
 * @param dtype element type
 * @param shape dimensions, each {@code >= 0}; {@code []} for a scalar
 */
public record TensorDeclaration(String name, Dtype dtype, long[] shape) {

  /**
   * @throws IllegalArgumentException if a dimension is negative, the size overflows 64 bits, or a
   *     sub-byte tensor does not fill whole bytes
   */
  public TensorDeclaration {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(dtype, "dtype");
    shape = Objects.requireNonNull(shape, "shape").clone();
    byteLength(name, dtype, shape);
  }

  /** A copy of the dimensions. */
  @Override
  public long[] shape() {
    return shape.clone();
  }

  /** Product of the dimensions; 1 for a scalar. */
  public long numElements() {
    return numElements(name, shape);
  }

  /** Bytes of data: {@code dtype.byteSize(numElements())}. */
  public long byteLength() {
    return byteLength(name, dtype, shape);
  }

  static long numElements(String name, long[] shape) {
    long n = 1;
    for (long d : shape) {
      if (d < 0) {
        throw new IllegalArgumentException(
            "tensor \"" + name + "\": negative dimension in shape " + Arrays.toString(shape));
      }
      try {
        n = Math.multiplyExact(n, d);
      } catch (ArithmeticException e) {
        throw new IllegalArgumentException(
            "tensor \""
                + name
                + "\": element count of shape "
                + Arrays.toString(shape)
                + " overflows 64 bits",
            e);
      }
    }
    return n;
  }

  static long byteLength(String name, Dtype dtype, long[] shape) {
    long n = numElements(name, shape);
    try {
      return dtype.byteSize(n);
    } catch (ArithmeticException e) {
      throw new IllegalArgumentException(
          "tensor \""
              + name
              + "\": byte count of "
              + dtype
              + " × "
              + Arrays.toString(shape)
              + " overflows 64 bits",
          e);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("tensor \"" + name + "\": " + e.getMessage(), e);
    }
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof TensorDeclaration t
        && name.equals(t.name)
        && dtype == t.dtype
        && Arrays.equals(shape, t.shape);
  }

  @Override
  public int hashCode() {
    return Objects.hash(name, dtype, Arrays.hashCode(shape));
  }

  @Override
  public String toString() {
    return name + " " + dtype + Arrays.toString(shape);
  }
}
