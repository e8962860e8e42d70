package io.tensorcast.dataplane.format.torch;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.NonWritableChannelException;
import java.nio.channels.SeekableByteChannel;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A read-only {@link SeekableByteChannel} over a {@link ByteSource} with a small cache of aligned
 * blocks, so a zip library's many small reads (end of central directory, central directory, local
 * headers) become few reads of the source (each possibly a ranged request).
 */
final class ByteSourceChannel implements SeekableByteChannel {
  private static final int BLOCK = 64 * 1024;
  private static final int BLOCKS_CACHED = 16;

  private final ByteSource source;
  private final Map<Long, byte[]> cache =
      new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, byte[]> e) {
          return size() > BLOCKS_CACHED;
        }
      };
  private long position;
  private boolean open = true;

  ByteSourceChannel(ByteSource source) {
    this.source = source;
  }

  @Override
  public int read(ByteBuffer dst) throws IOException {
    if (!open) {
      throw new ClosedChannelException();
    }
    long size = source.size();
    if (position >= size) {
      return -1;
    }
    int total = 0;
    while (dst.hasRemaining() && position < size) {
      long block = position / BLOCK;
      byte[] b = block(block, size);
      int in = (int) (position - block * BLOCK);
      int n = Math.min(dst.remaining(), b.length - in);
      dst.put(b, in, n);
      position += n;
      total += n;
    }
    return total;
  }

  private byte[] block(long block, long size) throws IOException {
    byte[] b = cache.get(block);
    if (b == null) {
      long start = block * BLOCK;
      b = source.read(start, (int) Math.min(BLOCK, size - start));
      cache.put(block, b);
    }
    return b;
  }

  @Override
  public int write(ByteBuffer src) {
    throw new NonWritableChannelException();
  }

  @Override
  public long position() {
    return position;
  }

  @Override
  public SeekableByteChannel position(long newPosition) {
    if (newPosition < 0) {
      throw new IllegalArgumentException("negative position " + newPosition);
    }
    this.position = newPosition;
    return this;
  }

  @Override
  public long size() {
    return source.size();
  }

  @Override
  public SeekableByteChannel truncate(long size) {
    throw new NonWritableChannelException();
  }

  @Override
  public boolean isOpen() {
    return open;
  }

  @Override
  public void close() {
    open = false;
    cache.clear();
  }
}
