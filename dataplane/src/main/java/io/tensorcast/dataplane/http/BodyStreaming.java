package io.tensorcast.dataplane.http;

/**
 * How {@link ControlServer} streams a tensor body (a list of store-file segments) to a connection.
 *
 * <p>A segment of at least {@code gatherBelowBytes} goes out zero-copy as its own {@code
 * sendfile(2)}. Runs of consecutive smaller segments (e.g. one row per segment when a shard splits
 * the last dimension of a row-major tensor: 8192 rows of 2 KiB) are instead read into one pooled
 * direct buffer of at most {@code gatherBufferBytes} and written with one {@code write(2)}: one
 * system call and one promise per buffer instead of per segment. Memory stays bounded: at most
 * {@code maxGatherBuffersInFlight} buffers per connection are queued, and a new one only while the
 * channel is writable, so a connection holds at most {@code maxGatherBuffersInFlight ×
 * gatherBufferBytes} of direct memory.
 *
 * @param gatherBelowBytes segments shorter than this are gathered; {@code 0} sends every segment
 *     zero-copy (the behaviour before gathering existed)
 * @param gatherBufferBytes capacity of one gather buffer, {@code >= gatherBelowBytes} and {@code >=
 *     1}
 * @param maxGatherBuffersInFlight gather buffers queued on one connection at most, {@code >= 1}
 */
public record BodyStreaming(
    int gatherBelowBytes, int gatherBufferBytes, int maxGatherBuffersInFlight) {

  /** Gather segments below 64 KiB into buffers of up to 1 MiB, at most 4 per connection. */
  public static final BodyStreaming DEFAULTS = new BodyStreaming(64 << 10, 1 << 20, 4);

  /** Every segment as its own zero-copy file region (for comparison). */
  public static final BodyStreaming ZERO_COPY_ONLY = new BodyStreaming(0, 1 << 20, 4);

  /**
   * @throws IllegalArgumentException naming the field and the rule broken
   */
  public BodyStreaming {
    if (gatherBelowBytes < 0) {
      throw new IllegalArgumentException("gatherBelowBytes " + gatherBelowBytes + " < 0");
    }
    if (gatherBufferBytes < Math.max(1, gatherBelowBytes)) {
      throw new IllegalArgumentException(
          "gatherBufferBytes "
              + gatherBufferBytes
              + " must be >= 1 and >= gatherBelowBytes "
              + gatherBelowBytes
              + " (a gathered segment must fit one buffer)");
    }
    if (maxGatherBuffersInFlight < 1) {
      throw new IllegalArgumentException(
          "maxGatherBuffersInFlight " + maxGatherBuffersInFlight + " < 1");
    }
  }
}
