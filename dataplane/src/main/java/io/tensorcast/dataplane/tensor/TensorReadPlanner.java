package io.tensorcast.dataplane.tensor;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.tensor.TensorIoException.Reason;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;

/**
 * Plans tensor reads as byte-range copies from the stored files; never touches file data.
 *
 * <p>Every read is a box of the global tensor: {@code full} is the whole tensor; {@code shard} with
 * tp axis {@code (rank r, size T, split_dim d)} is the slice {@code [r × g/T, (r+1) × g/T)} along
 * {@code d} ({@code g = global_shape[d]}, uniform split required, as in the design); {@code
 * as_stored} is one stored object. The planner intersects the box with each stored piece (a whole
 * tensor, or one TP shard) and emits, per intersection, the longest runs that are contiguous in
 * both the piece and the result (all trailing dimensions that both span fully fold into one run),
 * then orders the runs by destination offset and coalesces neighbours. So heterogeneous TP ({@code
 * T != S}, whether or not one divides the other, and even a different split dim) is planned by
 * ranges without materialising the full tensor, and an exact-match shard read ({@code T == S}, same
 * {@code split_dim}) is a single range.
 *
 * <p>Cost: proportional to the number of runs emitted (e.g. one per row when splitting along the
 * last dimension), independent of the bytes.
 */
public final class TensorReadPlanner {

  private TensorReadPlanner() {}

  /**
   * Plans reading {@code tensorName} from {@code layout} as {@code target}.
   *
   * @return dtype, result shape, total bytes and the ordered copies
   * @throws TensorIoException {@code UNKNOWN_TENSOR} if the layout has no such tensor; {@code
   *     IDENTITY_MISMATCH} if the target's scope axes differ from the layout's {@code layout_axes}
   *     or an {@code as_stored} tp rank/size names no stored object; {@code INVALID_TARGET} if the
   *     split dim is outside the tensor; {@code NOT_DIVISIBLE} if the dimension does not split
   *     evenly into the target tp size; {@code MISALIGNED_SUB_BYTE} for sub-byte slices that do not
   *     fall on byte boundaries. Messages name the tensor, the target and the numbers.
   */
  public static TensorReadPlan plan(StoredLayout layout, String tensorName, ReadTarget target) {
    StoredTensor t =
        layout
            .tensor(tensorName)
            .orElseThrow(
                () ->
                    new TensorIoException(
                        Reason.UNKNOWN_TENSOR,
                        "no tensor \""
                            + tensorName
                            + "\" in the stored layout ("
                            + layout.tensorNames().size()
                            + " tensors, "
                            + layout.kind()
                            + ")"));
    TensorParallelism p = target.parallelism();
    if (p != null
        && layout.kind() == StoredLayout.Kind.TP_SHARDS
        && !p.scopeAxes().equals(layout.layoutAxes())) {
      throw new TensorIoException(
          Reason.IDENTITY_MISMATCH,
          "tensor \""
              + tensorName
              + "\": "
              + target
              + " has scope axes "
              + p.scopeAxes()
              + " but the layout is stored for layout_axes "
              + layout.layoutAxes()
              + " (identity must match exactly)");
    }
    long[] g = t.globalShapeRef();
    TensorReadPlan plan =
        switch (target.mode()) {
          case FULL ->
              planBox(
                  t,
                  target,
                  t.whole() ? List.of(t.pieces().get(0)) : t.pieces(),
                  new long[g.length],
                  g);
          case SHARD -> planShard(layout, t, target);
          case AS_STORED -> planAsStored(layout, t, target);
        };
    if (layout.partial()) {
      long covered = 0;
      for (RangeCopy c : plan.copies()) {
        covered += c.length();
      }
      if (covered != plan.totalBytes()) {
        throw new TensorIoException(
            Reason.NOT_HELD,
            "tensor \""
                + tensorName
                + "\": "
                + target
                + " needs rank files this node does not hold (it holds "
                + layout.files()
                + " of tp_size "
                + layout.tpSize()
                + "); read it on a node that holds those ranks");
      }
    }
    return plan;
  }

  /**
   * The copies that cut the shard named by {@code tp} out of a full tensor held contiguously
   * (row-major, starting at byte 0): a writer partition's plan. Source offsets are relative to the
   * full tensor's first byte, destination offsets to the shard's; ordered by destination.
   *
   * @param fullShape shape of the full tensor
   * @throws TensorIoException {@code INVALID_TARGET} if the split dim is outside the tensor, {@code
   *     NOT_DIVISIBLE} if the dimension does not split evenly, {@code MISALIGNED_SUB_BYTE} for a
   *     sub-byte slice off a byte boundary; messages name the tensor and the numbers
   */
  public static List<RangeCopy> shardOfFull(
      String name, Dtype dtype, long[] fullShape, ParallelAxis tp) {
    StoredTensor whole =
        new StoredTensor(
            name,
            dtype,
            fullShape,
            null,
            List.of(new StoredTensor.Piece(name, 0, new long[fullShape.length], fullShape)));
    ReadTarget target = ReadTarget.shard(TensorParallelism.of(tp));
    return planShard(null, whole, target).copies();
  }

  private static TensorReadPlan planShard(StoredLayout layout, StoredTensor t, ReadTarget target) {
    ParallelAxis tp = target.parallelism().tp().orElseThrow();
    long[] g = t.globalShapeRef();
    int d = tp.splitDim();
    if (d >= g.length) {
      throw new TensorIoException(
          Reason.INVALID_TARGET,
          "tensor \""
              + t.name()
              + "\" "
              + Arrays.toString(g)
              + ": split_dim "
              + d
              + " of "
              + tp
              + " is outside its "
              + g.length
              + " dimensions");
    }
    int size = tp.size();
    if (g[d] % size != 0) {
      throw new TensorIoException(
          Reason.NOT_DIVISIBLE,
          "tensor \""
              + t.name()
              + "\" "
              + Arrays.toString(g)
              + ": dimension "
              + d
              + " = "
              + g[d]
              + " does not split uniformly into tp size "
              + size
              + " ("
              + g[d]
              + " = "
              + size
              + " × "
              + g[d] / size
              + " + "
              + g[d] % size
              + ")");
    }
    long extent = g[d] / size;
    long[] origin = new long[g.length];
    origin[d] = tp.rank() * extent;
    long[] shape = g.clone();
    shape[d] = extent;
    List<StoredTensor.Piece> sources =
        t.whole() ? List.of(t.pieces().get(tp.rank() % t.pieces().size())) : t.pieces();
    return planBox(t, target, sources, origin, shape);
  }

  private static TensorReadPlan planAsStored(
      StoredLayout layout, StoredTensor t, ReadTarget target) {
    Optional<ParallelAxis> tp =
        target.parallelism() == null ? Optional.empty() : target.parallelism().tp();
    int s = layout.tpSize();
    int rank = 0;
    if (tp.isPresent() && tp.get().size() != s) {
      throw new TensorIoException(
          Reason.IDENTITY_MISMATCH,
          "tensor \""
              + t.name()
              + "\": "
              + target
              + " names tp size "
              + tp.get().size()
              + " but the layout stores tp_size "
              + s
              + "; as_stored returns only a stored object (use shard to reconstruct)");
    }
    if (tp.isPresent()) {
      rank = tp.get().rank();
    } else if (s > 1) {
      throw new TensorIoException(
          Reason.INVALID_TARGET,
          "tensor \""
              + t.name()
              + "\": the layout stores tp_size "
              + s
              + ", so as_stored needs a parallelism with a tp axis naming the rank (e.g. tp:0/"
              + s
              + "@"
              + (t.splitDim() == null ? 0 : t.splitDim())
              + ")");
    }
    String wanted =
        s > 1 || layout.kind() == StoredLayout.Kind.TP_SHARDS
            ? ShardManifest.rankFileName(rank)
            : null;
    StoredTensor.Piece piece = null;
    for (StoredTensor.Piece p : t.pieces()) {
      if (wanted == null || p.file().equals(wanted)) {
        piece = p;
        break;
      }
    }
    if (piece == null) {
      throw new TensorIoException(
          Reason.NOT_HELD,
          "tensor \""
              + t.name()
              + "\": "
              + target
              + " names "
              + wanted
              + ", which this node does not hold (it holds "
              + layout.files()
              + ")");
    }
    return planBox(t, target, List.of(piece), piece.originRef(), piece.shapeRef());
  }

  /**
   * Plans the box {@code [origin, origin + shape)} of the global tensor from {@code sources}, which
   * must cover the box.
   */
  static TensorReadPlan planBox(
      StoredTensor t,
      ReadTarget target,
      List<StoredTensor.Piece> sources,
      long[] origin,
      long[] shape) {
    Dtype dtype = t.dtype();
    long elements = 1;
    for (long d : shape) {
      elements *= d;
    }
    long total;
    try {
      total = dtype.byteSize(elements);
    } catch (IllegalArgumentException e) {
      throw misaligned(t, target, e.getMessage());
    }
    List<RangeCopy> copies = new ArrayList<>();
    if (elements > 0) {
      boolean sorted = true;
      for (StoredTensor.Piece piece : sources) {
        int before = copies.size();
        emitRuns(t, target, piece, origin, shape, copies);
        if (before > 0
            && copies.size() > before
            && copies.get(before).destinationOffset()
                < copies.get(before - 1).destinationOffset()) {
          sorted = false;
        }
      }
      if (!sorted) {
        copies.sort(Comparator.comparingLong(RangeCopy::destinationOffset));
      }
      copies = coalesce(copies);
    }
    return new TensorReadPlan(t.name(), target, dtype, shape, total, copies);
  }

  private static void emitRuns(
      StoredTensor t,
      ReadTarget target,
      StoredTensor.Piece piece,
      long[] to,
      long[] ts,
      List<RangeCopy> out) {
    long[] po = piece.originRef();
    long[] ps = piece.shapeRef();
    int k = ts.length;
    long[] lo = new long[k];
    long[] hi = new long[k];
    for (int i = 0; i < k; i++) {
      lo[i] = Math.max(po[i], to[i]);
      hi[i] = Math.min(po[i] + ps[i], to[i] + ts[i]);
      if (lo[i] >= hi[i]) {
        return;
      }
    }
    // Trailing dimensions spanned fully by the box, the piece and the result fold into one run.
    int j = k - 1;
    long run = 1;
    while (j >= 0 && hi[j] - lo[j] == ps[j] && ps[j] == ts[j]) {
      run *= ps[j];
      j--;
    }
    if (j >= 0) {
      run *= hi[j] - lo[j];
    }
    long[] srcStride = strides(ps);
    long[] dstStride = strides(ts);
    long src = 0;
    long dst = 0;
    for (int i = 0; i <= j; i++) {
      src += (lo[i] - po[i]) * srcStride[i];
      dst += (lo[i] - to[i]) * dstStride[i];
    }
    int bits = t.dtype().bitSize();
    if ((run * bits) % 8 != 0) {
      throw misaligned(t, target, "a run of " + run + " elements is not a whole number of bytes");
    }
    long runBytes = run * bits / 8;
    String file = piece.file();
    long base = piece.dataOffset();
    // Odometer over the outer dimensions 0..j-1.
    long[] idx = Arrays.copyOf(lo, Math.max(j, 0));
    while (true) {
      if ((src * bits) % 8 != 0 || (dst * bits) % 8 != 0) {
        throw misaligned(
            t,
            target,
            "a run starts at element " + src + " of " + file + " (or " + dst + " of the result)");
      }
      out.add(new RangeCopy(file, base + src * bits / 8, dst * bits / 8, runBytes));
      int i = j - 1;
      while (i >= 0) {
        idx[i]++;
        src += srcStride[i];
        dst += dstStride[i];
        if (idx[i] < hi[i]) {
          break;
        }
        long span = hi[i] - lo[i];
        src -= span * srcStride[i];
        dst -= span * dstStride[i];
        idx[i] = lo[i];
        i--;
      }
      if (i < 0) {
        return;
      }
    }
  }

  private static long[] strides(long[] shape) {
    long[] s = new long[shape.length];
    long acc = 1;
    for (int i = shape.length - 1; i >= 0; i--) {
      s[i] = acc;
      acc *= shape[i];
    }
    return s;
  }

  private static List<RangeCopy> coalesce(List<RangeCopy> copies) {
    if (copies.size() < 2) {
      return copies;
    }
    boolean any = false;
    for (int i = 1; i < copies.size() && !any; i++) {
      RangeCopy a = copies.get(i - 1);
      RangeCopy b = copies.get(i);
      any =
          a.sourceEnd() == b.sourceOffset()
              && a.destinationEnd() == b.destinationOffset()
              && a.file().equals(b.file());
    }
    if (!any) {
      return copies;
    }
    List<RangeCopy> out = new ArrayList<>(copies.size());
    RangeCopy cur = copies.get(0);
    for (int i = 1; i < copies.size(); i++) {
      RangeCopy n = copies.get(i);
      if (n.file().equals(cur.file())
          && n.sourceOffset() == cur.sourceEnd()
          && n.destinationOffset() == cur.destinationEnd()) {
        cur =
            new RangeCopy(
                cur.file(), cur.sourceOffset(), cur.destinationOffset(), cur.length() + n.length());
      } else {
        out.add(cur);
        cur = n;
      }
    }
    out.add(cur);
    return out;
  }

  private static TensorIoException misaligned(StoredTensor t, ReadTarget target, String detail) {
    return new TensorIoException(
        Reason.MISALIGNED_SUB_BYTE,
        "tensor \""
            + t.name()
            + "\" ("
            + t.dtype()
            + ", "
            + t.dtype().bitSize()
            + " bits per element) read as "
            + target
            + ": "
            + detail
            + "; sub-byte dtypes can only be sliced on byte boundaries");
  }
}
