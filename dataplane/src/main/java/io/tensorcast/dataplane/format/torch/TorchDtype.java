package io.tensorcast.dataplane.format.torch;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import java.util.Arrays;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * Element types of torch storages, named as torch names them ({@code torch.float32} is {@link
 * #FLOAT32} with {@link #torchName()} {@code "float32"}).
 *
 * <p>A pickled storage names its type either by its legacy storage class ({@code
 * torch.FloatStorage}, the form {@code torch.save} writes for the classic dtypes) or, for dtypes
 * without such a class, by the dtype itself ({@code torch.float8_e4m3fn}); both spellings are in
 * the {@code weights_only} allowlist ({@code torch._weights_only_unpickler}).
 */
public enum TorchDtype {
  FLOAT32("float32", "FloatStorage", 4, Dtype.F32),
  FLOAT64("float64", "DoubleStorage", 8, Dtype.F64),
  FLOAT16("float16", "HalfStorage", 2, Dtype.F16),
  BFLOAT16("bfloat16", "BFloat16Storage", 2, Dtype.BF16),
  UINT8("uint8", "ByteStorage", 1, Dtype.U8),
  INT8("int8", "CharStorage", 1, Dtype.I8),
  INT16("int16", "ShortStorage", 2, Dtype.I16),
  INT32("int32", "IntStorage", 4, Dtype.I32),
  INT64("int64", "LongStorage", 8, Dtype.I64),
  BOOL("bool", "BoolStorage", 1, Dtype.BOOL),
  /** Two float32 (real, imaginary); safetensors C64. */
  COMPLEX64("complex64", "ComplexFloatStorage", 8, Dtype.C64),
  /** Two float64; no safetensors dtype. */
  COMPLEX128("complex128", "ComplexDoubleStorage", 16, null),
  /** Two float16; no safetensors dtype. */
  COMPLEX32("complex32", "ComplexHalfStorage", 4, null),
  FLOAT8_E5M2("float8_e5m2", "Float8_e5m2Storage", 1, Dtype.F8_E5M2),
  FLOAT8_E4M3FN("float8_e4m3fn", "Float8_e4m3fnStorage", 1, Dtype.F8_E4M3),
  UINT16("uint16", "UInt16Storage", 2, Dtype.U16),
  UINT32("uint32", "UInt32Storage", 4, Dtype.U32),
  UINT64("uint64", "UInt64Storage", 8, Dtype.U64);

  private static final Map<String, TorchDtype> BY_STORAGE_CLASS =
      Arrays.stream(values())
          .collect(Collectors.toUnmodifiableMap(d -> d.storageClass, Function.identity()));
  private static final Map<String, TorchDtype> BY_NAME =
      Arrays.stream(values())
          .collect(Collectors.toUnmodifiableMap(d -> d.torchName, Function.identity()));

  private final String torchName;
  private final String storageClass;
  private final int elementSize;
  private final Dtype safetensors;

  TorchDtype(String torchName, String storageClass, int elementSize, Dtype safetensors) {
    this.torchName = torchName;
    this.storageClass = storageClass;
    this.elementSize = elementSize;
    this.safetensors = safetensors;
  }

  /** The name after {@code torch.}, e.g. {@code "bfloat16"}. */
  public String torchName() {
    return torchName;
  }

  /** Bytes per element (a complex element counts both parts). */
  public int elementSize() {
    return elementSize;
  }

  /**
   * Bytes per unit that a byte-order swap reverses: the element size, or half of it for complex
   * types (each part is swapped on its own).
   */
  int swapUnit() {
    return this == COMPLEX64 || this == COMPLEX128 || this == COMPLEX32
        ? elementSize / 2
        : elementSize;
  }

  /** The safetensors dtype with the same element encoding, when the format has one. */
  public Optional<Dtype> safetensors() {
    return Optional.ofNullable(safetensors);
  }

  /** The dtype whose storage class is {@code torch.<name>}, e.g. {@code FloatStorage}. */
  static Optional<TorchDtype> fromStorageClass(String name) {
    return Optional.ofNullable(BY_STORAGE_CLASS.get(name));
  }

  /** The dtype named {@code torch.<name>}, e.g. {@code float32}. */
  static Optional<TorchDtype> fromTorchName(String name) {
    return Optional.ofNullable(BY_NAME.get(name));
  }
}
