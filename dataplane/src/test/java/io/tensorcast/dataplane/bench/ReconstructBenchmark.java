package io.tensorcast.dataplane.bench;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.tensor.ReadTarget;
import io.tensorcast.dataplane.tensor.Reconstructor;
import io.tensorcast.dataplane.tensor.ShardManifest;
import io.tensorcast.dataplane.tensor.StoredFiles;
import io.tensorcast.dataplane.tensor.StoredLayout;
import io.tensorcast.dataplane.tensor.TensorReadPlan;
import io.tensorcast.dataplane.tensor.TensorReadPlanner;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * Reconstruction of a full BF16 [4096, 8192] tensor (64 MiB) from 4 TP shards held in memory
 * (direct buffers, as rank files in a page-locked store), split along dim 0 (4 ranges) or dim 1
 * (16,384 ranges of 4 KiB), against a plain memory copy of the same 64 MiB ({@code ByteBuffer.put})
 * into the same destination, in the same fork.
 */
@State(Scope.Benchmark)
public class ReconstructBenchmark {

  /** Rows of the tensor. */
  public static final long ROWS = 4096;

  /** Columns of the tensor. */
  public static final long COLS = 8192;

  /** Bytes of the full tensor. */
  public static final long BYTES = ROWS * COLS * 2;

  @Param({"0", "1"})
  public int splitDim;

  TensorReadPlan plan;
  StoredFiles source;
  ByteBuffer full;
  ByteBuffer dst;

  @Setup
  public void setup() throws IOException {
    long[] shape = {ROWS, COLS};
    byte[] data = new byte[(int) BYTES];
    new Random(1).nextBytes(data);
    full = ByteBuffer.allocateDirect(data.length).put(data).flip();
    dst = ByteBuffer.allocateDirect(data.length);
    int s = 4;
    long[] local = shape.clone();
    local[splitDim] /= s;
    List<SafetensorsHeader> headers = new ArrayList<>();
    Map<String, ByteBuffer> files = new HashMap<>();
    for (int r = 0; r < s; r++) {
      List<TensorDeclaration> decls = List.of(new TensorDeclaration("w", Dtype.BF16, local));
      SafetensorsHeader h = SafetensorsWriter.layout(decls, null);
      byte[] head = SafetensorsWriter.headerBytes(decls, null);
      ByteBuffer file = ByteBuffer.allocateDirect((int) h.fileSize());
      file.put(head);
      // Shard r, cut row by row (setup only).
      long rowBytes = local[1] * 2;
      for (long row = 0; row < local[0]; row++) {
        long srcRow = splitDim == 0 ? r * local[0] + row : row;
        long srcCol = splitDim == 0 ? 0 : r * local[1];
        file.put(data, (int) ((srcRow * COLS + srcCol) * 2), (int) rowBytes);
      }
      file.flip();
      headers.add(h);
      files.put(ShardManifest.rankFileName(r), file);
    }
    ShardManifest m =
        new ShardManifest(
            s,
            "safetensors",
            List.of("w"),
            Map.of("w", new ShardManifest.Entry(shape, Dtype.BF16, splitDim, s)),
            List.of());
    plan = TensorReadPlanner.plan(StoredLayout.ofShards(m, headers), "w", ReadTarget.full());
    source = StoredFiles.ofBuffers(files);
    Reconstructor.execute(plan, source, dst.clear());
    if (!dst.flip().equals(full.duplicate())) {
      throw new IllegalStateException("reconstructed tensor differs from the original");
    }
  }

  /** Full tensor from the 4 shards by the plan's ranges. */
  @Benchmark
  public ByteBuffer reconstructFull() throws IOException {
    dst.clear();
    Reconstructor.execute(plan, source, dst);
    return dst;
  }

  /** The baseline: one put of the same bytes into the same destination. */
  @Benchmark
  public ByteBuffer memoryCopy() {
    dst.clear();
    dst.put(full.duplicate());
    return dst;
  }
}
