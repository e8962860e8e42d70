package io.tensorcast.dataplane.tensor;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * How to materialise one tensor read: the result's dtype and shape and the byte-range copies that
 * fill it.
 *
 * <p>The copies are ordered by {@code destinationOffset}, do not overlap, and tile {@code [0,
 * totalBytes)} exactly, so they may be streamed in order (e.g. as an HTTP body, honouring {@code
 * Range} by skipping). Adjacent runs that are contiguous in both the source file and the result are
 * coalesced; an exact-match shard read, a full read of an unsplit tensor and any read of one
 * contiguous stored range are a single copy, which a server can send zero-copy from the stored
 * file. A zero-size tensor has no copies.
 *
 * @param tensorName the tensor's name in the layout
 * @param target the read target planned for
 * @param dtype element type (that of the stored tensor)
 * @param shape result shape (row-major, little-endian data as in safetensors)
 * @param totalBytes result size in bytes: {@code dtype.byteSize(product(shape))}
 * @param copies the copies, ordered by destination offset
 */
public record TensorReadPlan(
    String tensorName,
    ReadTarget target,
    Dtype dtype,
    long[] shape,
    long totalBytes,
    List<RangeCopy> copies) {

  public TensorReadPlan {
    Objects.requireNonNull(tensorName, "tensorName");
    Objects.requireNonNull(target, "target");
    Objects.requireNonNull(dtype, "dtype");
    shape = shape.clone();
    copies = List.copyOf(copies);
  }

  /** A copy of the result shape. */
  @Override
  public long[] shape() {
    return shape.clone();
  }

  /**
   * The copies that produce result bytes {@code [from, to)} (an HTTP {@code Range}), clipped to
   * that window, with destination offsets relative to {@code from}; in destination order.
   *
   * @throws IllegalArgumentException unless {@code 0 <= from <= to <= totalBytes}
   */
  public List<RangeCopy> copiesInRange(long from, long to) {
    if (from < 0 || to < from || to > totalBytes) {
      throw new IllegalArgumentException(
          tensorName
              + ": byte range ["
              + from
              + ", "
              + to
              + ") is outside [0, "
              + totalBytes
              + ")");
    }
    int lo = 0;
    int hi = copies.size();
    while (lo < hi) { // first copy ending after from
      int mid = (lo + hi) >>> 1;
      if (copies.get(mid).destinationEnd() <= from) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    List<RangeCopy> out = new java.util.ArrayList<>();
    for (int i = lo; i < copies.size() && copies.get(i).destinationOffset() < to; i++) {
      RangeCopy c = copies.get(i);
      long start = Math.max(from, c.destinationOffset());
      long end = Math.min(to, c.destinationEnd());
      out.add(
          new RangeCopy(
              c.file(),
              c.sourceOffset() + (start - c.destinationOffset()),
              start - from,
              end - start));
    }
    return out;
  }

  /** The distinct stored files the plan reads, in first-use order. */
  public List<String> files() {
    return copies.stream().map(RangeCopy::file).distinct().toList();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof TensorReadPlan p
        && tensorName.equals(p.tensorName)
        && target.equals(p.target)
        && dtype == p.dtype
        && Arrays.equals(shape, p.shape)
        && totalBytes == p.totalBytes
        && copies.equals(p.copies);
  }

  @Override
  public int hashCode() {
    return Objects.hash(tensorName, target, dtype, Arrays.hashCode(shape), totalBytes, copies);
  }

  @Override
  public String toString() {
    return "TensorReadPlan["
        + tensorName
        + " "
        + target
        + " -> "
        + dtype
        + Arrays.toString(shape)
        + ", "
        + totalBytes
        + " bytes in "
        + copies.size()
        + " copies]";
  }
}
