package io.tensorcast.dataplane.write;

import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.store.StagedFile;

/**
 * One batch's bytes in the page-locked store: a complete safetensors file (header written by the
 * data plane, tensor data filled by the put stream or by the writer through the shared writes
 * directory) for one rank file of the version. When, at seal, a rank file's tensors are exactly a
 * segment's, in its order, the segment becomes that file by a rename (no copy).
 */
final class Segment {
  final int id;
  final int rank;
  final StagedFile file;
  final SafetensorsHeader header;

  /** Tensors of this segment that are the current bytes of their name; guarded by the version. */
  int live;

  Segment(int id, int rank, StagedFile file, SafetensorsHeader header) {
    this.id = id;
    this.rank = rank;
    this.file = file;
    this.header = header;
    this.live = header.tensors().size();
  }

  /** Absolute offset in the file of {@code tensor}'s first byte. */
  long dataStart(TensorInfo tensor) {
    return header.dataOffset() + tensor.begin();
  }

  /** Whether every tensor of the segment is still current. */
  boolean allLive() {
    return live == header.tensors().size();
  }

  @Override
  public String toString() {
    return "segment " + id + " (rank " + rank + ", " + header.tensors().size() + " tensors)";
  }
}
