package io.tensorcast.dataplane.tensor;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import java.util.Random;

/**
 * The test oracle: slices a row-major tensor element by element with plain index arithmetic
 * (multi-index to linear index), independent of the planner. Whole-byte dtypes only.
 */
public final class NaiveSlicer {
  private NaiveSlicer() {}

  /** Bytes of the box {@code [origin, origin + box)} of a tensor of {@code shape}. */
  public static byte[] slice(byte[] full, long[] shape, int elemBytes, long[] origin, long[] box) {
    int k = shape.length;
    long n = 1;
    for (long b : box) {
      n *= b;
    }
    byte[] out = new byte[(int) (n * elemBytes)];
    long[] idx = new long[k];
    for (long e = 0; e < n; e++) {
      // idx = multi-index of element e inside the box (row-major)
      long rem = e;
      for (int i = k - 1; i >= 0; i--) {
        idx[i] = rem % box[i];
        rem /= box[i];
      }
      long lin = 0;
      for (int i = 0; i < k; i++) {
        lin = lin * shape[i] + (origin[i] + idx[i]);
      }
      System.arraycopy(full, (int) (lin * elemBytes), out, (int) (e * elemBytes), elemBytes);
    }
    return out;
  }

  /** TP shard {@code rank} of {@code size} along {@code dim}. */
  public static byte[] shard(
      byte[] full, long[] shape, int elemBytes, int dim, int rank, int size) {
    long[] origin = new long[shape.length];
    long[] box = shape.clone();
    box[dim] = shape[dim] / size;
    origin[dim] = rank * box[dim];
    return slice(full, shape, elemBytes, origin, box);
  }

  /** Deterministic bytes for a tensor; BOOL gets 0/1 only. */
  public static byte[] data(Dtype dtype, long[] shape, long seed) {
    long n = 1;
    for (long d : shape) {
      n *= d;
    }
    byte[] b = new byte[(int) dtype.byteSize(n)];
    new Random(seed).nextBytes(b);
    if (dtype == Dtype.BOOL) {
      for (int i = 0; i < b.length; i++) {
        b[i] &= 1;
      }
    }
    return b;
  }
}
