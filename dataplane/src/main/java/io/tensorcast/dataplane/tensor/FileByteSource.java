package io.tensorcast.dataplane.tensor;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A {@link StoredFiles} over the files of a directory (names relative to it), read with positional
 * {@link FileChannel} reads or copied from read-only memory mappings (mapped lazily in windows of 1
 * GiB, so files above 2 GiB work). Channels and mappings are opened on first use and kept until
 * {@link #close()}. Thread-safe.
 */
public final class FileByteSource implements StoredFiles, AutoCloseable {

  static final long WINDOW = 1L << 30;

  private final Path dir;
  private final boolean mapped;
  private final Map<String, FileChannel> channels = new ConcurrentHashMap<>();
  private final Map<String, List<MappedByteBuffer>> mappings = new ConcurrentHashMap<>();

  private FileByteSource(Path dir, boolean mapped) {
    this.dir = dir.toAbsolutePath().normalize();
    this.mapped = mapped;
  }

  /** Reads with {@link FileChannel#read(ByteBuffer, long)}. */
  public static FileByteSource channels(Path dir) {
    return new FileByteSource(dir, false);
  }

  /** Copies from read-only {@link MappedByteBuffer}s. */
  public static FileByteSource mapped(Path dir) {
    return new FileByteSource(dir, true);
  }

  @Override
  public void read(String file, long offset, ByteBuffer dst) throws IOException {
    FileChannel ch = channel(file);
    if (offset < 0 || offset + dst.remaining() > ch.size()) {
      throw new EOFException(
          dir.resolve(file)
              + ": read of "
              + dst.remaining()
              + " bytes at offset "
              + offset
              + " passes the end of the file ("
              + ch.size()
              + " bytes)");
    }
    if (!mapped) {
      long pos = offset;
      while (dst.hasRemaining()) {
        int r = ch.read(dst, pos);
        if (r < 0) {
          throw new EOFException(dir.resolve(file) + ": file ended at byte " + pos);
        }
        pos += r;
      }
      return;
    }
    List<MappedByteBuffer> windows = windows(file, ch);
    long pos = offset;
    while (dst.hasRemaining()) {
      int w = (int) (pos / WINDOW);
      MappedByteBuffer src = windows.get(w);
      int at = (int) (pos - w * WINDOW);
      int n = (int) Math.min(dst.remaining(), src.capacity() - at);
      dst.put(dst.position(), src, at, n);
      dst.position(dst.position() + n);
      pos += n;
    }
  }

  private FileChannel channel(String file) throws IOException {
    FileChannel ch = channels.get(file);
    if (ch != null) {
      return ch;
    }
    Path p = dir.resolve(file).normalize();
    if (!p.startsWith(dir)) {
      throw new IOException("file \"" + file + "\" resolves outside " + dir);
    }
    FileChannel opened = FileChannel.open(p, StandardOpenOption.READ);
    FileChannel raced = channels.putIfAbsent(file, opened);
    if (raced != null) {
      opened.close();
      return raced;
    }
    return opened;
  }

  private List<MappedByteBuffer> windows(String file, FileChannel ch) throws IOException {
    List<MappedByteBuffer> w = mappings.get(file);
    if (w != null) {
      return w;
    }
    long size = ch.size();
    List<MappedByteBuffer> list = new ArrayList<>();
    for (long at = 0; at < size; at += WINDOW) {
      list.add(ch.map(FileChannel.MapMode.READ_ONLY, at, Math.min(WINDOW, size - at)));
    }
    List<MappedByteBuffer> raced = mappings.putIfAbsent(file, List.copyOf(list));
    return raced != null ? raced : mappings.get(file);
  }

  /** Closes the channels; mappings are released by the garbage collector. */
  @Override
  public void close() throws IOException {
    IOException first = null;
    for (FileChannel ch : channels.values()) {
      try {
        ch.close();
      } catch (IOException e) {
        if (first == null) {
          first = e;
        }
      }
    }
    channels.clear();
    mappings.clear();
    if (first != null) {
      throw first;
    }
  }
}
