package io.tensorcast.dataplane.tensor;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * Executes a {@link TensorReadPlan}: copies each range from a {@link StoredFiles} straight into its
 * place in the destination buffer. No intermediate buffer; the full tensor is never materialised to
 * produce a shard.
 */
public final class Reconstructor {

  /** Largest single transfer handed to a source, so one copy never needs a >1 GiB view. */
  static final int MAX_CHUNK = 1 << 30;

  private Reconstructor() {}

  /**
   * Fills {@code dst} from its position with the plan's {@code totalBytes} bytes and advances the
   * position by that much (the limit is unchanged).
   *
   * @throws IllegalArgumentException if {@code dst} has fewer than {@code totalBytes} remaining
   * @throws IOException if the source fails; {@code dst}'s contents are then unspecified
   */
  public static void execute(TensorReadPlan plan, StoredFiles source, ByteBuffer dst)
      throws IOException {
    Objects.requireNonNull(source, "source");
    if (dst.remaining() < plan.totalBytes()) {
      throw new IllegalArgumentException(
          "destination has "
              + dst.remaining()
              + " bytes remaining but "
              + plan.tensorName()
              + " "
              + plan.target()
              + " needs "
              + plan.totalBytes());
    }
    int base = dst.position();
    ByteBuffer window = dst.duplicate(); // one view, re-aimed per copy: no allocation per range
    for (RangeCopy c : plan.copies()) {
      long done = 0;
      while (done < c.length()) {
        int n = (int) Math.min(MAX_CHUNK, c.length() - done);
        int at = Math.toIntExact(base + c.destinationOffset() + done);
        window.limit(at + n).position(at);
        source.read(c.file(), c.sourceOffset() + done, window);
        if (window.hasRemaining()) {
          throw new IOException(
              c.file()
                  + ": source left "
                  + window.remaining()
                  + " of "
                  + n
                  + " bytes unread at offset "
                  + (c.sourceOffset() + done));
        }
        done += n;
      }
    }
    dst.position(base + (int) plan.totalBytes());
  }

  /**
   * Executes the plan into a new heap buffer (position 0, limit {@code totalBytes}).
   *
   * @throws IllegalArgumentException if the result exceeds {@link Integer#MAX_VALUE} bytes
   */
  public static ByteBuffer read(TensorReadPlan plan, StoredFiles source) throws IOException {
    if (plan.totalBytes() > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException(
          plan.tensorName()
              + ": "
              + plan.totalBytes()
              + " bytes do not fit one heap buffer; pass a destination to execute");
    }
    ByteBuffer b = ByteBuffer.allocate((int) plan.totalBytes());
    execute(plan, source, b);
    return b.flip();
  }
}
