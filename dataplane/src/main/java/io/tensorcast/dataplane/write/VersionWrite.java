package io.tensorcast.dataplane.write;

import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A batch being written into a version: a put streaming over HTTP, or a reservation the writer
 * fills itself. It becomes part of the version only by {@link WritableVersion#commit}; until then
 * nothing it holds is visible, and {@link WritableVersion#abort} (or the writer going away) leaves
 * the version as it was.
 */
public final class VersionWrite {
  private final WritableVersion version;
  private final int id;
  private final BatchPlan plan;
  private final Segment segment;
  private final boolean upsert;
  private final boolean reservation;
  private final long startedNanos;

  VersionWrite(
      WritableVersion version,
      int id,
      BatchPlan plan,
      Segment segment,
      boolean upsert,
      boolean reservation) {
    this.version = version;
    this.id = id;
    this.plan = plan;
    this.segment = segment;
    this.upsert = upsert;
    this.reservation = reservation;
    this.startedNanos = System.nanoTime();
  }

  /** Number of this batch in its version ({@code r<id>} for reservations). */
  public int id() {
    return id;
  }

  public BatchPlan plan() {
    return plan;
  }

  Segment segment() {
    return segment;
  }

  public boolean upsert() {
    return upsert;
  }

  public boolean reservation() {
    return reservation;
  }

  long startedNanos() {
    return startedNanos;
  }

  public WritableVersion version() {
    return version;
  }

  /** A streaming writer for the put's body. */
  public BatchWriter writer() {
    return new BatchWriter(this);
  }

  /** The segment file (absolute path), which a writer filling a reservation opens. */
  public Path file() {
    return segment.file.path();
  }

  /**
   * Where each tensor's stored bytes go in {@link #file()}: for a reservation, what the writer
   * writes (the stored bytes: for a writer partition, its shard, cut by the writer).
   *
   * @param name the tensor
   * @param offset absolute offset in the file
   * @param length bytes
   */
  public record Slot(String name, long offset, long length) {}

  /** The slots of every tensor, in batch order. */
  public List<Slot> slots() {
    List<Slot> out = new ArrayList<>();
    for (BatchPlan.Planned p : plan.tensors()) {
      TensorInfo t = segment.header.tensor(p.put().name()).orElseThrow();
      out.add(new Slot(t.name(), segment.dataStart(t), t.byteLength()));
    }
    return out;
  }
}
