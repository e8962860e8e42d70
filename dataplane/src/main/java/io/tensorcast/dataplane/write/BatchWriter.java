package io.tensorcast.dataplane.write;

import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.tensor.RangeCopy;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * Routes the bytes of a put, as they arrive, into its segment: the tensors of the batch one after
 * another, each {@code dtype × shape} bytes as sent, of which only the planned ranges are kept (all
 * of them, or a writer partition's shard). Memory is what the caller passes in; nothing is
 * buffered.
 *
 * <p>Not thread-safe: one stream feeds one writer.
 */
public final class BatchWriter {
  private final VersionWrite write;
  private final List<BatchPlan.Planned> tensors;
  private final long expected;
  private long received;
  private int tensor;
  private long inTensor; // bytes of the current tensor received
  private int copy; // index of the next copy of the current tensor not fully written

  BatchWriter(VersionWrite write) {
    this.write = write;
    this.tensors = write.plan().tensors();
    this.expected = write.plan().inputBytes();
    skipEmpty();
  }

  /**
   * Takes the next bytes of the stream (all of {@code chunk}'s remaining bytes; its position moves
   * to its limit).
   *
   * @throws WriteException 400 {@code SizeMismatch} if they go past what the batch declares (the
   *     caller aborts the put)
   */
  public void accept(ByteBuffer chunk) throws WriteException {
    if (chunk.remaining() > expected - received) {
      throw WriteException.bad(
          "SizeMismatch",
          "the body carries more than the "
              + expected
              + " bytes the batch declares (dtype × shape of every tensor sent): "
              + (received + chunk.remaining())
              + " bytes so far");
    }
    while (chunk.hasRemaining()) {
      BatchPlan.Planned t = tensors.get(tensor);
      long size = t.put().inputBytes();
      int take = (int) Math.min(chunk.remaining(), size - inTensor);
      route(t, chunk, take);
      inTensor += take;
      received += take;
      if (inTensor == size) {
        tensor++;
        inTensor = 0;
        copy = 0;
        skipEmpty();
      }
    }
  }

  /** Writes the next {@code take} bytes of {@code chunk} (of tensor {@code t}) where they go. */
  private void route(BatchPlan.Planned t, ByteBuffer chunk, int take) {
    int end = chunk.position() + take;
    long from = inTensor;
    long to = inTensor + take;
    List<RangeCopy> keep = t.keep();
    TensorInfo info = write.segment().header.tensor(t.put().name()).orElseThrow();
    long base = write.segment().dataStart(info);
    while (copy < keep.size() && keep.get(copy).sourceEnd() <= from) {
      copy++;
    }
    for (int i = copy; i < keep.size(); i++) {
      RangeCopy c = keep.get(i);
      if (c.sourceOffset() >= to) {
        break;
      }
      long a = Math.max(from, c.sourceOffset());
      long b = Math.min(to, c.sourceEnd());
      ByteBuffer part = chunk.duplicate();
      part.limit(chunk.position() + (int) (b - from)).position(chunk.position() + (int) (a - from));
      write.segment().file.write(base + c.destinationOffset() + (a - c.sourceOffset()), part);
    }
    chunk.position(end);
  }

  private void skipEmpty() {
    while (tensor < tensors.size() && tensors.get(tensor).put().inputBytes() == 0) {
      tensor++;
    }
  }

  /**
   * Checks the stream ended exactly at the end of the batch.
   *
   * @throws WriteException 400 {@code SizeMismatch} naming the tensor where it ended short
   */
  public void finish() throws WriteException {
    if (received != expected) {
      BatchPlan.Planned t = tensors.get(Math.min(tensor, tensors.size() - 1));
      throw WriteException.bad(
          "SizeMismatch",
          "the body ended after "
              + received
              + " of the "
              + expected
              + " bytes the batch declares, in tensor \""
              + t.put().name()
              + "\" ("
              + t.put().dtype()
              + " × "
              + java.util.Arrays.toString(t.put().shape())
              + " = "
              + t.put().inputBytes()
              + " bytes, "
              + inTensor
              + " received); nothing of this batch is kept");
    }
  }
}
