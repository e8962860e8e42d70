package io.tensorcast.dataplane.consumer;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * How to answer one tensor read: what the body is (dtype, shape) and where its bytes are, as an
 * ordered list of {@link Segment}s of the artifact's stored files whose concatenation is the body
 * (little-endian, C order). A planner returns one; the endpoint streams it, zero-copy, and serves
 * an HTTP {@code Range} by {@link #slice slicing} the list.
 *
 * @param name tensor name
 * @param dtype element type of the body
 * @param shape dimensions of the body (of the shard for {@code target=shard}); {@code []} for a
 *     scalar
 * @param segments the body, in order; adjacent segments of one file are merged, empty ones dropped
 */
public record ReadPlan(String name, Dtype dtype, long[] shape, List<Segment> segments) {

  /**
   * @throws IllegalArgumentException if the segments' total length differs from shape × dtype
   */
  public ReadPlan {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(dtype, "dtype");
    shape = Objects.requireNonNull(shape, "shape").clone();
    segments = coalesce(segments);
    long elements = 1;
    for (long d : shape) {
      elements = Math.multiplyExact(elements, d);
    }
    long expected = dtype.byteSize(elements);
    long total = total(segments);
    if (total != expected) {
      throw new IllegalArgumentException(
          "plan for tensor \""
              + name
              + "\": "
              + dtype
              + " × "
              + Arrays.toString(shape)
              + " = "
              + expected
              + " bytes but the segments hold "
              + total);
    }
  }

  /** A copy of the dimensions. */
  @Override
  public long[] shape() {
    return shape.clone();
  }

  /** Body length in bytes: the sum of the segments' lengths. */
  public long length() {
    return total(segments);
  }

  /**
   * The segments holding body bytes {@code [from, from + count)}: the first and last are cut to the
   * range, the ones in between kept whole.
   *
   * @throws IndexOutOfBoundsException if the range is not inside {@code [0, length())}
   */
  public List<Segment> slice(long from, long count) {
    long length = length();
    if (from < 0 || count < 0 || from > length - count) {
      throw new IndexOutOfBoundsException(
          "range ["
              + from
              + ", "
              + (from + count)
              + ") is outside the body of "
              + length
              + " bytes");
    }
    List<Segment> out = new ArrayList<>();
    if (count == 0) {
      return List.of();
    }
    long pos = 0; // body offset of the current segment
    long end = from + count;
    for (Segment s : segments) {
      long sEnd = pos + s.length();
      if (sEnd > from && pos < end) {
        long cutStart = Math.max(from, pos) - pos;
        long cutEnd = Math.min(end, sEnd) - pos;
        out.add(new Segment(s.file(), s.offset() + cutStart, cutEnd - cutStart));
      }
      if (sEnd >= end) {
        break;
      }
      pos = sEnd;
    }
    return List.copyOf(out);
  }

  /** The shape as {@code X-Tensor-Shape} carries it: comma-separated, empty for a scalar. */
  public String shapeHeader() {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < shape.length; i++) {
      if (i > 0) {
        b.append(',');
      }
      b.append(shape[i]);
    }
    return b.toString();
  }

  private static long total(List<Segment> segments) {
    long t = 0;
    for (Segment s : segments) {
      t = Math.addExact(t, s.length());
    }
    return t;
  }

  /** Drops empty segments and merges a segment into its predecessor when it continues it. */
  static List<Segment> coalesce(List<Segment> segments) {
    List<Segment> out = new ArrayList<>(segments.size());
    for (Segment s : segments) {
      Objects.requireNonNull(s, "segment");
      if (s.length() == 0) {
        continue;
      }
      if (!out.isEmpty()) {
        Segment last = out.get(out.size() - 1);
        if (last.file().equals(s.file()) && last.end() == s.offset()) {
          out.set(out.size() - 1, new Segment(s.file(), last.offset(), last.length() + s.length()));
          continue;
        }
      }
      out.add(s);
    }
    return List.copyOf(out);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ReadPlan p
        && name.equals(p.name)
        && dtype == p.dtype
        && Arrays.equals(shape, p.shape)
        && segments.equals(p.segments);
  }

  @Override
  public int hashCode() {
    return Objects.hash(name, dtype, Arrays.hashCode(shape), segments);
  }

  @Override
  public String toString() {
    return "ReadPlan[" + name + " " + dtype + Arrays.toString(shape) + ", " + segments + "]";
  }
}
