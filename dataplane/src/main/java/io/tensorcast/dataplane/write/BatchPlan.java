package io.tensorcast.dataplane.write;

import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.tensor.ParallelAxis;
import io.tensorcast.dataplane.tensor.RangeCopy;
import io.tensorcast.dataplane.tensor.ShardManifest;
import io.tensorcast.dataplane.tensor.TensorIoException;
import io.tensorcast.dataplane.tensor.TensorParallelism;
import io.tensorcast.dataplane.tensor.TensorReadPlanner;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * A checked batch of puts: which rank file of which layout it writes, and per tensor what is stored
 * (shape, manifest entry) and which bytes of what the writer sends are kept.
 *
 * <p>Rules, from the unified parallel tensor IO design and its batch APIs:
 *
 * <ul>
 *   <li>A batch gives per-tensor parallelisms, or per-tensor writer partitions, or neither (full
 *       tensors, a plain safetensors layout); mixing parallelisms and writer partitions is
 *       ambiguous and refused ({@code MixedBatch}). In a batch of either, a tensor that has none is
 *       replicated: stored whole in the batch's rank file ({@code split_dim} null), as the norms
 *       and biases every TP rank of a trainer holds.
 *   <li>A batch writes one rank file of one layout identity: every tensor has the same scope axes
 *       ({@code dp}, {@code pp}, {@code ep}) and every tp axis the same rank and size ({@code
 *       MixedBatch}).
 *   <li>A shard must fit its parallelism: the split dim inside the tensor, and for a full tensor
 *       its dimension divisible by the tp size ({@code InvalidParallelism}, with the numbers).
 *   <li>Names are unique in a batch ({@code DuplicateTensor}).
 * </ul>
 */
public final class BatchPlan {
  /** Most tensors one batch may hold. */
  public static final int MAX_TENSORS = 100_000;

  /**
   * A version's layout: plain safetensors files of full tensors, or the TP shard layout ({@code
   * manifest.json} + {@code rank_NNNNN.safetensors}) of {@code tpSize} ranks with these scope axes.
   *
   * @param shards whether it is the TP shard layout
   * @param tpSize tp size (1 for plain, or for a shard layout with scope axes only)
   * @param layoutAxes scope axes of the identity, canonical order (empty for plain)
   */
  public record Layout(boolean shards, int tpSize, List<ParallelAxis> layoutAxes) {
    public Layout {
      layoutAxes = List.copyOf(layoutAxes);
    }

    /** Plain safetensors of full tensors. */
    public static final Layout PLAIN = new Layout(false, 1, List.of());

    @Override
    public String toString() {
      return shards
          ? "TP shard layout (tp_size " + tpSize + ", layout_axes " + layoutAxes + ")"
          : "plain safetensors (no parallelism)";
    }
  }

  /**
   * One tensor of the batch.
   *
   * @param put what the writer sends
   * @param stored the tensor as stored in the rank file (its local shape)
   * @param entry its manifest entry (global shape, dtype, split dim, shard count)
   * @param keep the bytes kept, as copies from what is sent (source offsets from the tensor's first
   *     byte sent) to what is stored (destination offsets from the stored tensor's first byte),
   *     ordered by source offset; one copy of everything when all is kept
   */
  public record Planned(
      TensorPut put, TensorDeclaration stored, ShardManifest.Entry entry, List<RangeCopy> keep) {}

  private final Layout layout;
  private final int rank;
  private final List<Planned> tensors;
  private final long inputBytes;
  private final long storedBytes;

  private BatchPlan(Layout layout, int rank, List<Planned> tensors) {
    this.layout = layout;
    this.rank = rank;
    this.tensors = List.copyOf(tensors);
    long in = 0;
    long st = 0;
    for (Planned p : tensors) {
      in += p.put().inputBytes();
      st += p.stored().byteLength();
    }
    this.inputBytes = in;
    this.storedBytes = st;
  }

  /** The layout this batch writes into. */
  public Layout layout() {
    return layout;
  }

  /** The tp rank whose rank file this batch writes (0 for plain). */
  public int rank() {
    return rank;
  }

  public List<Planned> tensors() {
    return tensors;
  }

  /** Bytes the writer sends for the whole batch. */
  public long inputBytes() {
    return inputBytes;
  }

  /** Bytes stored for the whole batch (tensor data only). */
  public long storedBytes() {
    return storedBytes;
  }

  /**
   * Checks and plans a batch.
   *
   * @throws WriteException 400 {@code BadRequest} (empty, too many), {@code DuplicateTensor},
   *     {@code MixedBatch}, {@code InvalidParallelism}
   */
  public static BatchPlan of(List<TensorPut> puts) throws WriteException {
    Objects.requireNonNull(puts, "puts");
    if (puts.isEmpty()) {
      throw WriteException.bad("BadRequest", "the batch holds no tensors");
    }
    if (puts.size() > MAX_TENSORS) {
      throw WriteException.bad(
          "BadRequest",
          "the batch holds " + puts.size() + " tensors, more than " + MAX_TENSORS + "; split it");
    }
    Set<String> names = new HashSet<>();
    int withParallelism = 0;
    int withPartition = 0;
    for (TensorPut p : puts) {
      if (!names.add(p.name())) {
        throw WriteException.bad(
            "DuplicateTensor",
            "tensor \"" + p.name() + "\" appears twice in the batch; a name is put once per batch");
      }
      if (p.parallelism() != null) {
        withParallelism++;
      }
      if (p.writerPartition() != null) {
        withPartition++;
      }
    }
    if (withParallelism > 0 && withPartition > 0) {
      throw WriteException.bad(
          "MixedBatch",
          "the batch gives parallelisms for "
              + withParallelism
              + " tensors and writer_partitions for "
              + withPartition
              + "; mixing them in one batch is ambiguous and refused (unified parallel tensor IO):"
              + " send one batch per kind");
    }
    if (withParallelism == 0 && withPartition == 0) {
      List<Planned> out = new ArrayList<>();
      for (TensorPut p : puts) {
        TensorDeclaration d = new TensorDeclaration(p.name(), p.dtype(), p.shape());
        out.add(
            new Planned(
                p,
                d,
                new ShardManifest.Entry(p.shape(), p.dtype(), null, 1),
                all(p.name(), d.byteLength())));
      }
      return new BatchPlan(Layout.PLAIN, 0, out);
    }
    // One rank file of one identity.
    List<ParallelAxis> scope = null;
    ParallelAxis tp = null;
    String scopeKey = null;
    String tpKey = null;
    for (TensorPut p : puts) {
      TensorParallelism id = p.identity();
      if (id == null) {
        continue; // replicated in this rank file, whatever its identity
      }
      if (scope == null) {
        scope = id.scopeAxes();
        scopeKey = p.name();
      } else if (!scope.equals(id.scopeAxes())) {
        throw WriteException.bad(
            "MixedBatch",
            "tensor \""
                + p.name()
                + "\" has scope axes "
                + id.scopeAxes()
                + " but \""
                + scopeKey
                + "\" has "
                + scope
                + "; one batch writes one rank file of one layout identity");
      }
      ParallelAxis a = id.tp().orElse(null);
      if (a != null) {
        if (tp == null) {
          tp = a;
          tpKey = p.name();
        } else if (tp.rank() != a.rank() || tp.size() != a.size()) {
          throw WriteException.bad(
              "MixedBatch",
              "tensor \""
                  + p.name()
                  + "\" is tp rank "
                  + a.rank()
                  + " of "
                  + a.size()
                  + " but \""
                  + tpKey
                  + "\" is tp rank "
                  + tp.rank()
                  + " of "
                  + tp.size()
                  + "; one batch writes one rank file");
        }
      }
    }
    int size = tp == null ? 1 : tp.size();
    int rank = tp == null ? 0 : tp.rank();
    List<Planned> out = new ArrayList<>();
    for (TensorPut p : puts) {
      out.add(plan(p, size));
    }
    return new BatchPlan(new Layout(true, size, scope == null ? List.of() : scope), rank, out);
  }

  private static Planned plan(TensorPut p, int size) throws WriteException {
    TensorParallelism id = p.identity();
    long[] shape = p.shape();
    ParallelAxis a = id == null ? null : id.tp().orElse(null);
    if (a == null) {
      TensorDeclaration d = new TensorDeclaration(p.name(), p.dtype(), shape);
      return new Planned(
          p, d, new ShardManifest.Entry(shape, p.dtype(), null, 1), all(p.name(), d.byteLength()));
    }
    int dim = a.splitDim();
    if (dim >= shape.length) {
      throw WriteException.bad(
          "InvalidParallelism",
          "tensor \""
              + p.name()
              + "\" "
              + Arrays.toString(shape)
              + ": split_dim "
              + dim
              + " of "
              + a
              + " is outside its "
              + shape.length
              + " dimensions");
    }
    boolean full = p.writerPartition() != null || !id.scopeAxes().isEmpty();
    if (!full) {
      // [tp] alone: the bytes sent are the shard itself.
      long[] global = shape.clone();
      try {
        global[dim] = Math.multiplyExact(global[dim], (long) size);
      } catch (ArithmeticException e) {
        throw WriteException.bad(
            "InvalidParallelism",
            "tensor \"" + p.name() + "\": global dimension " + dim + " overflows 64 bits");
      }
      TensorDeclaration d = new TensorDeclaration(p.name(), p.dtype(), shape);
      return new Planned(
          p,
          d,
          new ShardManifest.Entry(global, p.dtype(), dim, size),
          all(p.name(), d.byteLength()));
    }
    if (shape[dim] % size != 0) {
      throw WriteException.bad(
          "InvalidParallelism",
          "tensor \""
              + p.name()
              + "\" "
              + Arrays.toString(shape)
              + " is sent whole for "
              + (p.writerPartition() != null ? "writer_partition " : "parallelism ")
              + id
              + ", but dimension "
              + dim
              + " = "
              + shape[dim]
              + " does not split uniformly into tp size "
              + size
              + " ("
              + shape[dim]
              + " = "
              + size
              + " × "
              + shape[dim] / size
              + " + "
              + shape[dim] % size
              + ")");
    }
    long[] local = shape.clone();
    local[dim] = shape[dim] / size;
    List<RangeCopy> keep;
    try {
      keep = new ArrayList<>(TensorReadPlanner.shardOfFull(p.name(), p.dtype(), shape, a));
    } catch (TensorIoException e) {
      throw WriteException.bad("InvalidParallelism", e.getMessage());
    }
    keep.sort(Comparator.comparingLong(RangeCopy::sourceOffset));
    return new Planned(
        p,
        new TensorDeclaration(p.name(), p.dtype(), local),
        new ShardManifest.Entry(shape, p.dtype(), dim, size),
        keep);
  }

  private static List<RangeCopy> all(String name, long bytes) {
    return bytes == 0 ? List.of() : List.of(new RangeCopy(name, 0, 0, bytes));
  }
}
