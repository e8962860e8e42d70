package io.tensorcast.dataplane.format.torch;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Objects;
import java.util.Optional;

/**
 * One tensor of a checkpoint, as {@code torch._utils._rebuild_tensor_v2} rebuilds it: a strided
 * view of {@code shape} over a {@link TorchStorage}, starting {@link #storageOffset()} elements
 * into it. Shape, strides and the storage offset are in elements, as torch reports them ({@code
 * t.shape}, {@code t.stride()}, {@code t.storage_offset()}).
 *
 * <p>The reader has checked that every element the view reaches lies inside its storage (strides
 * and sizes are non-negative, {@code storageOffset + Σ (shape[i]-1)·stride[i] < storage.numel} for
 * a non-empty tensor), so {@link #writeContiguous} never reads outside the storage.
 */
public final class TorchTensor {
  private final String name;
  private final long[] shape;
  private final long[] stride;
  private final long storageOffset;
  private final TorchStorage storage;
  private final boolean parameter;

  TorchTensor(
      String name,
      long[] shape,
      long[] stride,
      long storageOffset,
      TorchStorage storage,
      boolean p) {
    this.name = name;
    this.shape = shape.clone();
    this.stride = stride.clone();
    this.storageOffset = storageOffset;
    this.storage = Objects.requireNonNull(storage);
    this.parameter = p;
  }

  TorchTensor withName(String newName) {
    return new TorchTensor(newName, shape, stride, storageOffset, storage, parameter);
  }

  TorchTensor asParameter() {
    return new TorchTensor(name, shape, stride, storageOffset, storage, true);
  }

  /**
   * Path of the tensor in the checkpoint's object tree: dict keys and list/tuple indexes joined by
   * {@code .}, e.g. {@code model_state_dict.layer.weight} or {@code optimizer.state.0.exp_avg}.
   */
  public String name() {
    return name;
  }

  /** Element type. */
  public TorchDtype dtype() {
    return storage.dtype();
  }

  /** The safetensors dtype of the elements, when the format has one (not for complex128). */
  public Optional<Dtype> safetensorsDtype() {
    return storage.dtype().safetensors();
  }

  /** Sizes per dimension (empty for a 0-dim scalar). */
  public long[] shape() {
    return shape.clone();
  }

  /** Strides per dimension, in elements. */
  public long[] stride() {
    return stride.clone();
  }

  /** Offset of the first element in the storage, in elements. */
  public long storageOffset() {
    return storageOffset;
  }

  /** The storage viewed; shared (same instance) by all tensors viewing one storage. */
  public TorchStorage storage() {
    return storage;
  }

  /** Byte offset of the storage's element 0 in the checkpoint file. */
  public long storageFileOffset() {
    return storage.fileOffset();
  }

  /** Whether it was saved as an {@code nn.Parameter}. */
  public boolean parameter() {
    return parameter;
  }

  /** Number of elements: the product of the shape (1 for a scalar). */
  public long numel() {
    long n = 1;
    for (long s : shape) {
      n *= s;
    }
    return n;
  }

  /** Bytes of the tensor's contiguous form: {@code numel × elementSize}. */
  public long byteLength() {
    return numel() * storage.dtype().elementSize();
  }

  /** Whether the elements are one row-major run in the storage (dims of size 1 ignored). */
  public boolean isContiguous() {
    long expected = 1;
    for (int d = shape.length - 1; d >= 0; d--) {
      if (shape[d] == 0) {
        return true;
      }
      if (shape[d] != 1 && stride[d] != expected) {
        return false;
      }
      expected *= shape[d];
    }
    return true;
  }

  /**
   * Writes the tensor's elements in contiguous row-major order, little-endian, to {@code out}:
   * exactly {@link #byteLength()} bytes, the bytes of {@code t.contiguous()} on a little-endian
   * host. Handles any non-negative strides (transposes, slices, stride-0 broadcasts, views) and
   * converts big-endian storages.
   *
   * @param file the checkpoint file this tensor was read from
   * @throws IOException if reading {@code file} or writing {@code out} fails
   * @throws IllegalStateException if a non-contiguous tensor's storage span exceeds 2 GiB
   */
  public void writeContiguous(ByteSource file, OutputStream out) throws IOException {
    int es = storage.dtype().elementSize();
    long total = byteLength();
    if (total == 0) {
      return;
    }
    long base = storage.fileOffset() + storageOffset * es;
    if (isContiguous()) {
      long done = 0;
      int chunk = (int) Math.min(total, 1 << 20);
      byte[] buf = new byte[chunk];
      while (done < total) {
        int n = (int) Math.min(chunk, total - done);
        ByteBuffer b = ByteBuffer.wrap(buf, 0, n);
        file.read(base + done, b);
        if (storage.bigEndian()) {
          swap(buf, n, storage.dtype().swapUnit());
        }
        out.write(buf, 0, n);
        done += n;
      }
      return;
    }
    long spanElements = 1;
    for (int d = 0; d < shape.length; d++) {
      spanElements += (shape[d] - 1) * stride[d];
    }
    long spanBytes = spanElements * es;
    if (spanBytes > Integer.MAX_VALUE - 8) {
      throw new IllegalStateException(
          "tensor \""
              + name
              + "\": non-contiguous view spans "
              + spanBytes
              + " bytes of its storage; gathering more than 2 GiB is not supported");
    }
    byte[] span = file.read(base, (int) spanBytes);
    if (storage.bigEndian()) {
      swap(span, span.length, storage.dtype().swapUnit());
    }
    int rank = shape.length;
    long[] index = new long[rank];
    long inner = rank == 0 ? 1 : shape[rank - 1];
    long innerStride = rank == 0 ? 0 : stride[rank - 1];
    byte[] row = new byte[(int) Math.min(inner * es, 1 << 20)];
    long rows = inner == 0 ? 0 : numel() / inner;
    for (long r = 0; r < rows; r++) {
      long start = 0;
      for (int d = 0; d < rank - 1; d++) {
        start += index[d] * stride[d];
      }
      int filled = 0;
      for (long i = 0; i < inner; i++) {
        System.arraycopy(span, (int) ((start + i * innerStride) * es), row, filled, es);
        filled += es;
        if (filled == row.length) {
          out.write(row, 0, filled);
          filled = 0;
        }
      }
      out.write(row, 0, filled);
      for (int d = rank - 2; d >= 0; d--) {
        if (++index[d] < shape[d]) {
          break;
        }
        index[d] = 0;
      }
    }
  }

  /**
   * The tensor's contiguous little-endian bytes in a new array (see {@link #writeContiguous}).
   *
   * @throws IllegalStateException if the tensor has more than 2 GiB of bytes
   */
  public byte[] contiguousBytes(ByteSource file) throws IOException {
    long n = byteLength();
    if (n > Integer.MAX_VALUE - 8) {
      throw new IllegalStateException(
          "tensor \"" + name + "\" has " + n + " bytes; too many for one array, stream it");
    }
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream((int) n);
    writeContiguous(file, out);
    return out.toByteArray();
  }

  private static void swap(byte[] b, int len, int unit) {
    if (unit <= 1) {
      return;
    }
    for (int i = 0; i + unit <= len; i += unit) {
      for (int a = i, z = i + unit - 1; a < z; a++, z--) {
        byte t = b[a];
        b[a] = b[z];
        b[z] = t;
      }
    }
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof TorchTensor t
        && name.equals(t.name)
        && Arrays.equals(shape, t.shape)
        && Arrays.equals(stride, t.stride)
        && storageOffset == t.storageOffset
        && storage.equals(t.storage)
        && parameter == t.parameter;
  }

  @Override
  public int hashCode() {
    return Objects.hash(name, Arrays.hashCode(shape), Arrays.hashCode(stride), storageOffset);
  }

  @Override
  public String toString() {
    return name
        + " "
        + dtype().torchName()
        + " "
        + Arrays.toString(shape)
        + " stride "
        + Arrays.toString(stride)
        + " +"
        + storageOffset
        + " in storage "
        + storage.key();
  }
}
