package io.tensorcast.dataplane.load;

import io.tensorcast.dataplane.source.SourceFile;
import java.nio.ByteBuffer;

/**
 * Where {@link ParallelRangeReader} puts the bytes of each range: typically a slice of the
 * page-locked mapping of the file in the store; a heap array in tests.
 *
 * <p>Called concurrently from the reader's workers, for distinct ranges: implementations must be
 * thread-safe. The reader never asks twice for the same range within one read. A "range" is what
 * one request reads: a planned range, or several adjacent ones in a read that merges them ({@link
 * ParallelRangeReader#readRanges(io.tensorcast.dataplane.source.ArtifactSource, java.util.List,
 * RangeSink, ReadProgressListener, ThrottleGate, boolean)}).
 */
public interface RangeSink {

  /**
   * The buffer that receives bytes {@code [offset, offset + length)} of {@code file}, called once
   * per range before its first request. The reader writes with relative {@code put}s from the
   * buffer's position; the buffer must have exactly {@code length} bytes remaining and must not be
   * written by anyone else until {@link #rangeCompleted} or the read fails.
   *
   * @param offset byte offset in the file, ≥ 0
   * @param length bytes in the range, 1 ≤ length ≤ {@link ReadOptions#rangeSize()}; up to {@link
   *     ReadOptions#maxRangeSize()} in a read that merges adjacent ranges, whose sink then gets one
   *     buffer (or writer) and one completion per request instead of per planned range
   */
  ByteBuffer target(SourceFile file, long offset, int length);

  /**
   * A writer that takes bytes {@code [offset, offset + length)} of {@code file} in order from heap
   * arrays, in place of {@link #target}'s buffer; null (the default) when the sink takes the bytes
   * through {@link #target}. Called once per range before its first request, like {@link #target};
   * the reader closes it when the range is done or the read stops.
   */
  default Writer writer(SourceFile file, long offset, int length) {
    return null;
  }

  /** Takes one range's bytes in order (see {@link RangeSink#writer}). */
  interface Writer extends AutoCloseable {
    /**
     * Takes {@code b[off, off + len)} as the range's next bytes.
     *
     * @throws RuntimeException when the bytes cannot be stored; the read fails
     */
    void write(byte[] b, int off, int len);

    @Override
    void close();
  }

  /**
   * Every byte of the range is in its buffer: each came from a response that passed the source's
   * checks, and the count equals {@code length}. Called once per range, from the worker that read
   * it. Ranges of a failed read that did not complete are never reported.
   */
  void rangeCompleted(SourceFile file, long offset, int length);
}
