package io.tensorcast.dataplane.tensor;

import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * The stored files of one layout (rank files, safetensors files, by the relative names a {@link
 * TensorReadPlan} uses), read by file name and offset: every read names its file, where the torch
 * reader's {@link io.tensorcast.dataplane.format.torch.ByteSource} is the bytes of one file.
 * Implementations: {@link FileByteSource} (FileChannel or read-only mappings over a directory) and
 * {@link #ofBuffers(java.util.Map)} (in memory). A page-locked store adapts with a method
 * reference, e.g. {@code artifact::read} for a {@code read(String path, long offset, ByteBuffer
 * dst)} method.
 */
@FunctionalInterface
public interface StoredFiles {

  /**
   * Fills {@code dst} from its position to its limit with the bytes of {@code file} starting at
   * file offset {@code offset}; on return the position equals the limit.
   *
   * @param file the file as the layout names it (relative path)
   * @param offset absolute file offset in bytes
   * @throws IOException if the file cannot be read or ends before {@code dst} is full (the message
   *     names the file and offsets)
   */
  void read(String file, long offset, ByteBuffer dst) throws IOException;

  /**
   * A source over in-memory buffers, one per file name, each holding the whole file from its
   * position (positions are not moved).
   */
  static StoredFiles ofBuffers(java.util.Map<String, ByteBuffer> files) {
    java.util.Map<String, ByteBuffer> copy = java.util.Map.copyOf(files);
    return (file, offset, dst) -> {
      ByteBuffer b = copy.get(file);
      if (b == null) {
        throw new java.io.FileNotFoundException("no in-memory file \"" + file + "\"");
      }
      int n = dst.remaining();
      if (offset < 0 || offset + n > b.remaining()) {
        throw new java.io.EOFException(
            file
                + ": read of "
                + n
                + " bytes at offset "
                + offset
                + " passes the end of the file ("
                + b.remaining()
                + " bytes)");
      }
      dst.put(dst.position(), b, b.position() + (int) offset, n);
      dst.position(dst.position() + n);
    };
  }
}
