package io.tensorcast.dataplane.format.safetensors;

import java.util.Arrays;
import java.util.Objects;

/**
 * One tensor of a safetensors file as its header declares it.
 *
 * <p>{@code begin} and {@code end} are byte offsets relative to the start of the data section (file
 * offset {@link SafetensorsHeader#dataOffset()}), end exclusive, as in the header's {@code
 * "data_offsets": [begin, end]}. Data is little-endian, C (row-major) order. The shape is copied on
 * the way in and on the way out; a rank-0 tensor (scalar) has shape {@code []} and one element.
 *
 * @param name tensor name, the header key
 * @param dtype element type
 * @param shape dimensions, each {@code >= 0}
 * @param begin first byte, relative to the data section, {@code >= 0}
 * @param end one past the last byte, relative to the data section; {@code end - begin} equals
 *     {@code dtype.byteSize(numElements())}
 */
public record TensorInfo(String name, Dtype dtype, long[] shape, long begin, long end) {

  /**
   * @throws IllegalArgumentException if a dimension or offset is negative, {@code begin > end}, or
   *     {@code end - begin} differs from shape × dtype (overflow included)
   */
  public TensorInfo {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(dtype, "dtype");
    shape = Objects.requireNonNull(shape, "shape").clone();
    if (begin < 0 || end < begin) {
      throw new IllegalArgumentException(
          "tensor \"" + name + "\": invalid data_offsets [" + begin + ", " + end + "]");
    }
    long expected = TensorDeclaration.byteLength(name, dtype, shape);
    if (expected != end - begin) {
      throw new IllegalArgumentException(
          "tensor \""
              + name
              + "\": "
              + dtype
              + " × "
              + Arrays.toString(shape)
              + " = "
              + expected
              + " bytes but data_offsets ["
              + begin
              + ", "
              + end
              + "] span "
              + (end - begin));
    }
  }

  /** A copy of the dimensions. */
  @Override
  public long[] shape() {
    return shape.clone();
  }

  /** Number of dimensions; 0 for a scalar. */
  public int rank() {
    return shape.length;
  }

  /** Product of the dimensions; 1 for a scalar, 0 if any dimension is 0. */
  public long numElements() {
    return TensorDeclaration.numElements(name, shape);
  }

  /** Bytes of data, {@code end - begin}. */
  public long byteLength() {
    return end - begin;
  }

  /** The declaration (name, dtype, shape) without offsets, e.g. to write the tensor again. */
  public TensorDeclaration declaration() {
    return new TensorDeclaration(name, dtype, shape);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof TensorInfo t
        && name.equals(t.name)
        && dtype == t.dtype
        && Arrays.equals(shape, t.shape)
        && begin == t.begin
        && end == t.end;
  }

  @Override
  public int hashCode() {
    return Objects.hash(name, dtype, Arrays.hashCode(shape), begin, end);
  }

  @Override
  public String toString() {
    return name + " " + dtype + Arrays.toString(shape) + " [" + begin + ", " + end + ")";
  }
}
