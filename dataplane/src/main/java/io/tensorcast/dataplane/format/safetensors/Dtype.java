package io.tensorcast.dataplane.format.safetensors;

import java.util.Arrays;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * Element types of the safetensors format, spelled exactly as in the header's {@code "dtype"}
 * field.
 *
 * <p>Names, bit widths and the declaration order are those of the reference implementation
 * (huggingface/safetensors {@code tensor::Dtype}, 0.6 line). The declaration order matters: the
 * reference writer places tensors by descending dtype in this order, then by name (see {@link
 * SafetensorsWriter#referenceOrder}). Sub-byte types ({@link #F4}, {@link #F6_E2M3}, {@link
 * #F6_E3M2}) are packed; a tensor of such a type must hold a whole number of bytes.
 */
public enum Dtype {
  /** Boolean, one byte per element. */
  BOOL(8),
  /** 4-bit float (OCP MX FP4, E2M1), packed two per byte. */
  F4(4),
  /** 6-bit float E2M3 (OCP MX FP6), packed. */
  F6_E2M3(6),
  /** 6-bit float E3M2 (OCP MX FP6), packed. */
  F6_E3M2(6),
  /** Unsigned 8-bit integer. */
  U8(8),
  /** Signed 8-bit integer. */
  I8(8),
  /** 8-bit float E5M2 (arXiv:2209.05433). */
  F8_E5M2(8),
  /** 8-bit float E4M3 (arXiv:2209.05433; torch {@code float8_e4m3fn}). */
  F8_E4M3(8),
  /** 8-bit exponent-only scale E8M0 (OCP MX). */
  F8_E8M0(8),
  /** Signed 16-bit integer. */
  I16(16),
  /** Unsigned 16-bit integer. */
  U16(16),
  /** IEEE 754 half precision. */
  F16(16),
  /** bfloat16. */
  BF16(16),
  /** Signed 32-bit integer. */
  I32(32),
  /** Unsigned 32-bit integer. */
  U32(32),
  /** IEEE 754 single precision. */
  F32(32),
  /** Complex number of two 32-bit floats. */
  C64(64),
  /** IEEE 754 double precision. */
  F64(64),
  /** Signed 64-bit integer. */
  I64(64),
  /** Unsigned 64-bit integer. */
  U64(64);

  private static final Map<String, Dtype> BY_NAME =
      Arrays.stream(values())
          .collect(Collectors.toUnmodifiableMap(Dtype::name, Function.identity()));

  private final int bitSize;

  Dtype(int bitSize) {
    this.bitSize = bitSize;
  }

  /** Width of one element in bits (4, 6, 8, 16, 32 or 64). */
  public int bitSize() {
    return bitSize;
  }

  /**
   * Bytes taken by {@code elements} elements of this type.
   *
   * @param elements number of elements, {@code >= 0}
   * @return {@code elements × bitSize / 8}
   * @throws IllegalArgumentException if {@code elements} is negative, or the elements of a sub-byte
   *     type do not fill a whole number of bytes (the reference's {@code MisalignedSlice})
   * @throws ArithmeticException if the byte count does not fit in a {@code long}
   */
  public long byteSize(long elements) {
    if (elements < 0) {
      throw new IllegalArgumentException("negative element count " + elements + " for " + this);
    }
    if (bitSize % 8 == 0) {
      return Math.multiplyExact(elements, (long) (bitSize / 8));
    }
    long bits = Math.multiplyExact(elements, (long) bitSize);
    if (bits % 8 != 0) {
      throw new IllegalArgumentException(
          elements
              + " elements of "
              + this
              + " ("
              + bitSize
              + " bits each) take "
              + bits
              + " bits, not a whole number of bytes");
    }
    return bits / 8;
  }

  /** The dtype spelled {@code name} in a header (case-sensitive), if the format defines it. */
  public static Optional<Dtype> fromName(String name) {
    return Optional.ofNullable(BY_NAME.get(name));
  }
}
