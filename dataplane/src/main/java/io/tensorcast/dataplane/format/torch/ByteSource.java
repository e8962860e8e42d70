package io.tensorcast.dataplane.format.torch;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Random-access read-only bytes of one file: a local file, a file in the page-locked store, or a
 * remote object read with ranged requests. The torch reader reads only the zip central directory,
 * local headers and the pickle through it; storage bytes are read only when a tensor's bytes are
 * asked for.
 */
public interface ByteSource {
  /** Size of the file in bytes. */
  long size();

  /**
   * Fills {@code dst} (from its position to its limit) with the bytes at {@code offset}.
   *
   * @throws EOFException if the range runs past {@link #size()}
   * @throws IOException if the underlying read fails
   */
  void read(long offset, ByteBuffer dst) throws IOException;

  /** Reads {@code length} bytes at {@code offset}. */
  default byte[] read(long offset, int length) throws IOException {
    byte[] b = new byte[length];
    read(offset, ByteBuffer.wrap(b));
    return b;
  }

  /** The bytes of an array (tests, small pickles). */
  static ByteSource of(byte[] bytes) {
    return new ByteSource() {
      @Override
      public long size() {
        return bytes.length;
      }

      @Override
      public void read(long offset, ByteBuffer dst) throws IOException {
        if (offset < 0 || offset + dst.remaining() > bytes.length) {
          throw new EOFException(
              "range " + offset + "+" + dst.remaining() + " outside " + bytes.length + " bytes");
        }
        dst.put(bytes, (int) offset, dst.remaining());
      }
    };
  }

  /**
   * A local file, opened for the life of the returned source; close it when done.
   *
   * @throws IOException if the file cannot be opened
   */
  static FileByteSource open(Path file) throws IOException {
    return new FileByteSource(FileChannel.open(file, StandardOpenOption.READ));
  }

  /** A {@link ByteSource} over an open {@link FileChannel}; closing it closes the channel. */
  final class FileByteSource implements ByteSource, AutoCloseable {
    private final FileChannel channel;
    private final long size;

    FileByteSource(FileChannel channel) throws IOException {
      this.channel = channel;
      this.size = channel.size();
    }

    @Override
    public long size() {
      return size;
    }

    @Override
    public void read(long offset, ByteBuffer dst) throws IOException {
      if (offset < 0 || offset + dst.remaining() > size) {
        throw new EOFException(
            "range " + offset + "+" + dst.remaining() + " outside " + size + " bytes");
      }
      long pos = offset;
      while (dst.hasRemaining()) {
        int n = channel.read(dst, pos);
        if (n < 0) {
          throw new EOFException("file ended at " + pos);
        }
        pos += n;
      }
    }

    @Override
    public void close() throws IOException {
      channel.close();
    }
  }
}
