package io.tensorcast.dataplane.tensor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Every shape up to 4×6×4 (1-, 2- and 3-D), every stored split dim and tp size S in 1..6 that
 * divides it, every target split dim and tp size T in 1..6 that divides it, every rank: the planned
 * read equals {@link NaiveSlicer}'s, and the plan's copies are ordered, disjoint, tile the result
 * and are fully coalesced. Rank files are built in memory with shards cut by the naive slicer (not
 * the planner).
 */
class TensorReadPlannerExhaustiveTest {

  private static final Dtype DTYPE = Dtype.I16;
  private static final int EB = 2;

  private static List<long[]> shapes() {
    List<long[]> out = new ArrayList<>();
    for (long a = 1; a <= 4; a++) {
      out.add(new long[] {a});
      for (long b = 1; b <= 6; b++) {
        out.add(new long[] {a, b});
        for (long c = 1; c <= 4; c++) {
          out.add(new long[] {a, b, c});
        }
      }
    }
    return out;
  }

  private record Store(StoredLayout layout, StoredFiles source) {}

  /** A TP shard layout of one tensor "t" (split along {@code dim} into {@code s}), in memory. */
  private static Store store(long[] shape, byte[] full, Integer dim, int s) throws Exception {
    Map<String, ShardManifest.Entry> entries = new LinkedHashMap<>();
    entries.put("t", new ShardManifest.Entry(shape, DTYPE, dim, dim == null ? 1 : s));
    ShardManifest m = new ShardManifest(s, "safetensors", List.of("t"), entries, List.of());
    List<SafetensorsHeader> headers = new ArrayList<>();
    Map<String, ByteBuffer> files = new HashMap<>();
    for (int r = 0; r < s; r++) {
      byte[] data = dim == null ? full : NaiveSlicer.shard(full, shape, EB, dim, r, s);
      long[] local = shape.clone();
      if (dim != null) {
        local[dim] /= s;
      }
      List<TensorDeclaration> decls = List.of(new TensorDeclaration("t", DTYPE, local));
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      headers.add(
          SafetensorsWriter.write(
              Channels.newChannel(out), decls, null, List.of(ByteBuffer.wrap(data))));
      files.put(ShardManifest.rankFileName(r), ByteBuffer.wrap(out.toByteArray()));
    }
    return new Store(StoredLayout.ofShards(m, headers), StoredFiles.ofBuffers(files));
  }

  private static void checkPlanShape(TensorReadPlan plan) {
    long at = 0;
    RangeCopy prev = null;
    for (RangeCopy c : plan.copies()) {
      assertThat(c.destinationOffset()).isEqualTo(at);
      if (prev != null) {
        boolean mergeable = prev.file().equals(c.file()) && prev.sourceEnd() == c.sourceOffset();
        assertThat(mergeable).as("uncoalesced neighbours %s %s", prev, c).isFalse();
      }
      at = c.destinationEnd();
      prev = c;
    }
    assertThat(at).isEqualTo(plan.totalBytes());
  }

  private static byte[] run(Store st, ReadTarget target) throws Exception {
    TensorReadPlan plan = TensorReadPlanner.plan(st.layout, "t", target);
    checkPlanShape(plan);
    return Reconstructor.read(plan, st.source).array();
  }

  @Test
  void everySmallShapeEverySplitEveryTpSize() throws Exception {
    int plans = 0;
    long seed = 1;
    for (long[] shape : shapes()) {
      byte[] full = NaiveSlicer.data(DTYPE, shape, seed++);
      List<Integer> storedDims = new ArrayList<>();
      storedDims.add(null);
      for (int d = 0; d < shape.length; d++) {
        storedDims.add(d);
      }
      for (Integer sd : storedDims) {
        for (int s = 1; s <= 6; s++) {
          if (sd == null ? s > 2 : shape[sd] % s != 0) {
            continue;
          }
          Store st = store(shape, full, sd, s);
          assertThat(run(st, ReadTarget.full())).isEqualTo(full);
          plans++;
          for (int td = 0; td < shape.length; td++) {
            for (int t = 1; t <= 6; t++) {
              if (shape[td] % t != 0) {
                continue;
              }
              for (int r = 0; r < t; r++) {
                ReadTarget target = ReadTarget.shard(TensorParallelism.tp(r, t, td));
                byte[] expected = NaiveSlicer.shard(full, shape, EB, td, r, t);
                assertThat(run(st, target))
                    .as(
                        "shape %s stored split %s/%d, read tp %d/%d@%d",
                        java.util.Arrays.toString(shape), sd, s, r, t, td)
                    .isEqualTo(expected);
                plans++;
                if (sd != null && sd == td && s == t) {
                  assertThat(TensorReadPlanner.plan(st.layout, "t", target).copies())
                      .as("exact match is one range")
                      .hasSize(1);
                }
              }
            }
          }
        }
      }
    }
    assertThat(plans).isGreaterThan(10_000);
  }

  @Test
  void scalarsAndEmptyTensors() throws Exception {
    Store scalar = store(new long[] {}, new byte[] {5, 6}, null, 1);
    assertThat(run(scalar, ReadTarget.full())).containsExactly(5, 6);
    assertThat(run(scalar, ReadTarget.asStored())).containsExactly(5, 6);
    Store empty = store(new long[] {0, 4}, new byte[0], 1, 2);
    TensorReadPlan p =
        TensorReadPlanner.plan(empty.layout, "t", ReadTarget.shard(TensorParallelism.tp(1, 2, 1)));
    assertThat(p.copies()).isEmpty();
    assertThat(p.shape()).containsExactly(0, 2);
    assertThat(p.totalBytes()).isZero();
  }

  @Test
  void subByteDtypesSliceOnlyOnByteBoundaries() throws Exception {
    // F4 [4, 6]: a shard of 2 columns is 1 byte per row; a shard of 1 column is half a byte.
    Map<String, ShardManifest.Entry> entries =
        Map.of("t", new ShardManifest.Entry(new long[] {4, 6}, Dtype.F4, null, 1));
    byte[] data = new byte[12];
    for (int i = 0; i < 12; i++) {
      data[i] = (byte) (i * 17);
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    SafetensorsHeader h =
        SafetensorsWriter.write(
            Channels.newChannel(out),
            List.of(new TensorDeclaration("t", Dtype.F4, new long[] {4, 6})),
            null,
            List.of(ByteBuffer.wrap(data)));
    StoredLayout layout =
        StoredLayout.ofShards(
            new ShardManifest(1, "safetensors", List.of("t"), entries, List.of()), List.of(h));
    StoredFiles src =
        StoredFiles.ofBuffers(Map.of("rank_00000.safetensors", ByteBuffer.wrap(out.toByteArray())));
    TensorReadPlan p =
        TensorReadPlanner.plan(layout, "t", ReadTarget.shard(TensorParallelism.tp(1, 3, 1)));
    // Row i holds bytes 3i..3i+2; column pair 1 is byte 3i+1.
    assertThat(Reconstructor.read(p, src).array())
        .containsExactly(data[1], data[4], data[7], data[10]);
    assertThatThrownBy(
            () ->
                TensorReadPlanner.plan(
                    layout, "t", ReadTarget.shard(TensorParallelism.tp(1, 6, 1))))
        .isInstanceOf(TensorIoException.class)
        .hasMessageContaining("F4, 4 bits per element")
        .hasMessageContaining("sub-byte dtypes can only be sliced on byte boundaries");
  }
}
