package io.tensorcast.dataplane.tensor;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Writes the TP shard layout of the unified artifact IO seed: {@code manifest.json} ({@link
 * ShardManifest}) and {@code rank_NNNNN.safetensors} (5 digits) in a directory. Shards are cut from
 * full tensors by planned byte ranges and streamed into the rank file; no shard copy is built.
 *
 * <p>Two entry points:
 *
 * <ul>
 *   <li>{@link #save}: one caller holds every full tensor and writes all {@code tp_size} rank files
 *       (the design's {@code save_artifact(..., tp_size)}).
 *   <li>{@link #writeBatch}: one writer (one TP rank) writes its own rank file from a batch, with
 *       either per-key {@code parallelisms} or per-key {@code writer_partitions}, never both (the
 *       seed rejects the mix as ambiguous). Every writer writes the same manifest; a differing
 *       existing manifest is an error.
 * </ul>
 *
 * <p>Each rank file's {@code __metadata__} is {@code {"tp_rank": "r", "tp_size": "S"}}; {@link
 * StoredLayout#open} checks it. Files are written to a temporary name and renamed into place.
 */
public final class ShardLayoutWriter {

  private ShardLayoutWriter() {}

  /**
   * A tensor in memory: name, dtype, shape and its row-major little-endian bytes (from the buffer's
   * position to its limit; the position is not moved).
   */
  public record TensorBytes(String name, Dtype dtype, long[] shape, ByteBuffer data) {
    /**
     * @throws IllegalArgumentException if the buffer's remaining bytes differ from shape × dtype
     */
    public TensorBytes {
      Objects.requireNonNull(data, "data");
      shape = shape.clone();
      long expected = new TensorDeclaration(name, dtype, shape).byteLength();
      if (data.remaining() != expected) {
        throw new IllegalArgumentException(
            "tensor \""
                + name
                + "\": buffer holds "
                + data.remaining()
                + " bytes but "
                + dtype
                + " × "
                + Arrays.toString(shape)
                + " takes "
                + expected);
      }
    }

    @Override
    public long[] shape() {
      return shape.clone();
    }
  }

  /**
   * One writer's batch (the design's batch put): tensors plus, per tensor in the same order, either
   * {@code parallelisms} or {@code writerPartitions} (the other {@code null}).
   *
   * <p>Per the design's write table: with a parallelism of {@code [tp]} alone the tensor passed is
   * the shard itself; with {@code [dp|pp|ep, tp]} it is the full tensor and only the tp shard is
   * stored; with no tp axis ({@code [dp]}, ...) it is stored as passed (replicated, {@code
   * split_dim} null). With a writer partition the tensor is always full and only its shard is
   * stored.
   */
  public record WriteBatch(
      List<TensorBytes> tensors,
      List<TensorParallelism> parallelisms,
      List<WriterPartition> writerPartitions) {

    /**
     * @throws IllegalArgumentException if both or neither of {@code parallelisms} and {@code
     *     writerPartitions} are given, or the given list's size differs from {@code tensors}
     */
    public WriteBatch {
      tensors = List.copyOf(tensors);
      if (parallelisms != null && writerPartitions != null) {
        throw new IllegalArgumentException(
            "batch gives both parallelisms and writer_partitions: mixing them in one request is"
                + " ambiguous and rejected (seed: unified parallel tensor IO); pass one or the"
                + " other");
      }
      if (parallelisms == null && writerPartitions == null) {
        throw new IllegalArgumentException(
            "batch gives neither parallelisms nor writer_partitions; use save() for full tensors");
      }
      List<?> per = parallelisms != null ? parallelisms : writerPartitions;
      if (per.size() != tensors.size()) {
        throw new IllegalArgumentException(
            "batch has "
                + tensors.size()
                + " tensors but "
                + per.size()
                + (parallelisms != null ? " parallelisms" : " writer_partitions")
                + "; give one per tensor");
      }
      parallelisms = parallelisms == null ? null : List.copyOf(parallelisms);
      writerPartitions = writerPartitions == null ? null : List.copyOf(writerPartitions);
    }

    /** A batch with per-tensor parallelisms. */
    public static WriteBatch withParallelisms(
        List<TensorBytes> tensors, List<TensorParallelism> parallelisms) {
      return new WriteBatch(tensors, Objects.requireNonNull(parallelisms, "parallelisms"), null);
    }

    /** A batch with per-tensor writer partitions. */
    public static WriteBatch withWriterPartitions(
        List<TensorBytes> tensors, List<WriterPartition> writerPartitions) {
      return new WriteBatch(
          tensors, null, Objects.requireNonNull(writerPartitions, "writer_partitions"));
    }
  }

  /** What to store for one tensor in one rank file. */
  private record Planned(TensorBytes input, ShardManifest.Entry entry, boolean inputIsFull) {}

  /**
   * Writes a complete layout of {@code tpSize} rank files plus {@code manifest.json} from full
   * tensors.
   *
   * @param dir target directory (created if missing)
   * @param tpSize number of TP ranks, {@code >= 1}
   * @param layoutAxes scope axes of the identity ({@code dp}, {@code pp}, {@code ep}); may be empty
   * @param tensors the full tensors, in key order
   * @param splitDims per tensor name, the dimension to split; absent or {@code null} = replicated
   * @return the manifest written
   * @throws IllegalArgumentException if a split dim is outside a tensor, a dimension does not
   *     divide by {@code tpSize} (message with the numbers), names repeat, or a split dim names an
   *     unknown tensor
   */
  public static ShardManifest save(
      Path dir,
      int tpSize,
      List<ParallelAxis> layoutAxes,
      List<TensorBytes> tensors,
      Map<String, Integer> splitDims)
      throws IOException {
    Map<String, Integer> dims = new HashMap<>(splitDims);
    List<Planned> planned = new ArrayList<>();
    for (TensorBytes t : tensors) {
      Integer d = dims.remove(t.name());
      planned.add(new Planned(t, entryFor(t.name(), t.shape, t.dtype(), d, tpSize), true));
    }
    if (!dims.isEmpty()) {
      throw new IllegalArgumentException(
          "split dims given for tensors that are not saved: " + dims.keySet());
    }
    ShardManifest m = manifest(tpSize, layoutAxes, planned);
    Files.createDirectories(dir);
    for (int r = 0; r < tpSize; r++) {
      writeRank(dir, r, tpSize, planned);
    }
    m.write(dir);
    return m;
  }

  /**
   * Writes one writer's rank file ({@code rank_<tp rank>.safetensors}) and, when absent, {@code
   * manifest.json}. All tensors of the batch must share the scope axes and the tp rank and size
   * (one rank file of one layout identity).
   *
   * @return the manifest of the layout
   * @throws IllegalArgumentException if identities differ across the batch, a split is not uniform
   *     (message with the numbers), or a split dim is outside a tensor
   * @throws ShardLayoutException if {@code dir} already holds a different {@code manifest.json}
   *     (message shows both)
   */
  public static ShardManifest writeBatch(Path dir, WriteBatch batch) throws IOException {
    List<TensorParallelism> ids = new ArrayList<>();
    for (int i = 0; i < batch.tensors().size(); i++) {
      ids.add(
          batch.parallelisms() != null
              ? batch.parallelisms().get(i)
              : batch.writerPartitions().get(i).parallelism());
    }
    List<ParallelAxis> scope = null;
    ParallelAxis tp = null;
    String tpKey = null;
    for (int i = 0; i < ids.size(); i++) {
      String key = batch.tensors().get(i).name();
      TensorParallelism p = ids.get(i);
      if (scope == null) {
        scope = p.scopeAxes();
      } else if (!scope.equals(p.scopeAxes())) {
        throw new IllegalArgumentException(
            "tensor \""
                + key
                + "\" has scope axes "
                + p.scopeAxes()
                + " but earlier tensors of the batch have "
                + scope
                + "; one batch writes one rank file of one layout identity");
      }
      ParallelAxis a = p.tp().orElse(null);
      if (a != null) {
        if (tp == null) {
          tp = a;
          tpKey = key;
        } else if (tp.rank() != a.rank() || tp.size() != a.size()) {
          throw new IllegalArgumentException(
              "tensor \""
                  + key
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
    List<Planned> planned = new ArrayList<>();
    for (int i = 0; i < ids.size(); i++) {
      TensorBytes t = batch.tensors().get(i);
      TensorParallelism p = ids.get(i);
      ParallelAxis a = p.tp().orElse(null);
      if (a == null) {
        planned.add(new Planned(t, entryFor(t.name(), t.shape, t.dtype(), null, size), false));
        continue;
      }
      boolean full = batch.writerPartitions() != null || !p.scopeAxes().isEmpty();
      long[] global = t.shape;
      if (!full) {
        int d = a.splitDim();
        checkDim(t.name(), global, d);
        global = global.clone();
        global[d] = Math.multiplyExact(global[d], (long) size);
      }
      planned.add(new Planned(t, entryFor(t.name(), global, t.dtype(), a.splitDim(), size), full));
    }
    ShardManifest m = manifest(size, scope == null ? List.of() : scope, planned);
    Files.createDirectories(dir);
    Path existing = dir.resolve(ShardManifest.FILE_NAME);
    if (Files.isRegularFile(existing)) {
      ShardManifest before = ShardManifest.read(existing);
      if (!before.equals(m)) {
        throw new ShardLayoutException(
            existing
                + " differs from what this batch (tp rank "
                + rank
                + " of "
                + size
                + ") implies: stored "
                + new String(before.toJson(), java.nio.charset.StandardCharsets.UTF_8)
                + " vs batch "
                + new String(m.toJson(), java.nio.charset.StandardCharsets.UTF_8));
      }
    }
    writeRank(dir, rank, size, planned);
    if (!Files.isRegularFile(existing)) {
      m.write(dir);
    }
    return m;
  }

  private static ShardManifest manifest(
      int tpSize, List<ParallelAxis> scope, List<Planned> planned) {
    Map<String, ShardManifest.Entry> entries = new LinkedHashMap<>();
    List<String> keys = new ArrayList<>();
    for (Planned p : planned) {
      if (entries.put(p.input.name(), p.entry) != null) {
        throw new IllegalArgumentException("tensor \"" + p.input.name() + "\" appears twice");
      }
      keys.add(p.input.name());
    }
    return new ShardManifest(tpSize, ShardManifest.FORMAT_SAFETENSORS, keys, entries, scope);
  }

  private static void checkDim(String name, long[] shape, int d) {
    if (d >= shape.length) {
      throw new IllegalArgumentException(
          "tensor \""
              + name
              + "\" "
              + Arrays.toString(shape)
              + ": split_dim "
              + d
              + " is outside its "
              + shape.length
              + " dimensions");
    }
  }

  private static ShardManifest.Entry entryFor(
      String name, long[] global, Dtype dtype, Integer splitDim, int tpSize) {
    if (splitDim == null) {
      return new ShardManifest.Entry(global, dtype, null, 1);
    }
    if (splitDim < 0) {
      throw new IllegalArgumentException("tensor \"" + name + "\": split_dim " + splitDim + " < 0");
    }
    checkDim(name, global, splitDim);
    long g = global[splitDim];
    if (g % tpSize != 0) {
      throw new IllegalArgumentException(
          "tensor \""
              + name
              + "\" "
              + Arrays.toString(global)
              + ": dimension "
              + splitDim
              + " = "
              + g
              + " does not split uniformly into tp size "
              + tpSize
              + " ("
              + g
              + " = "
              + tpSize
              + " × "
              + g / tpSize
              + " + "
              + g % tpSize
              + ")");
    }
    return new ShardManifest.Entry(global, dtype, splitDim, tpSize);
  }

  private static void writeRank(Path dir, int rank, int size, List<Planned> planned)
      throws IOException {
    List<TensorDeclaration> decls = new ArrayList<>();
    Map<String, List<RangeCopy>> copies = new HashMap<>();
    Map<String, ByteBuffer> inputs = new HashMap<>();
    for (Planned p : planned) {
      TensorBytes t = p.input;
      ShardManifest.Entry e = p.entry;
      long[] local = e.localShape();
      decls.add(new TensorDeclaration(t.name(), t.dtype(), local));
      inputs.put(t.name(), t.data());
      if (p.inputIsFull && e.splitDim() != null) {
        StoredTensor whole =
            new StoredTensor(
                t.name(),
                t.dtype(),
                t.shape,
                null,
                List.of(new StoredTensor.Piece(t.name(), 0, new long[t.shape.length], t.shape)));
        long[] origin = new long[local.length];
        origin[e.splitDim()] = rank * local[e.splitDim()];
        ReadTarget target = ReadTarget.shard(TensorParallelism.tp(rank, size, e.splitDim()));
        copies.put(
            t.name(),
            TensorReadPlanner.planBox(whole, target, whole.pieces(), origin, local).copies());
      }
    }
    Map<String, String> metadata = new LinkedHashMap<>();
    metadata.put("tp_rank", Integer.toString(rank));
    metadata.put("tp_size", Integer.toString(size));
    Path target = dir.resolve(ShardManifest.rankFileName(rank));
    Path tmp = Files.createTempFile(dir, "." + target.getFileName(), ".tmp");
    try {
      SafetensorsWriter.write(
          tmp,
          decls,
          metadata,
          (info, out) -> {
            ByteBuffer src = inputs.get(info.name());
            List<RangeCopy> plan = copies.get(info.name());
            if (plan == null) {
              writeFully(out, src.duplicate());
              return;
            }
            for (RangeCopy c : plan) {
              ByteBuffer part = src.duplicate();
              int at = src.position() + (int) c.sourceOffset();
              part.limit(at + (int) c.length()).position(at);
              writeFully(out, part);
            }
          });
      Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } finally {
      Files.deleteIfExists(tmp);
    }
  }

  private static void writeFully(WritableByteChannel out, ByteBuffer b) throws IOException {
    while (b.hasRemaining()) {
      out.write(b);
    }
  }
}
