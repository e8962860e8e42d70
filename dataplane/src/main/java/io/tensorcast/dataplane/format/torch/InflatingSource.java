package io.tensorcast.dataplane.format.torch;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.zip.ZipException;

/**
 * The bytes of a compressed zip entry as a {@link ByteSource} that may only be read front to back
 * (as the pickle reader reads): inflated while read, never more than the {@code declared} size the
 * central directory gives. When a read reaches that size, one more byte is asked for: if the entry
 * has it, the entry inflates past its declared size and {@link BadEntry} is thrown, so a zip bomb
 * costs at most its declared size, not what it inflates to. Compressed data the inflater cannot
 * decode is a {@link BadEntry} too; other I/O errors (of the file underneath) pass unchanged.
 */
final class InflatingSource implements ByteSource {
  /**
   * The entry inflates to more or fewer bytes than its central directory record declares, or its
   * compressed data is corrupt.
   */
  static final class BadEntry extends IOException {
    private static final long serialVersionUID = 1L;

    BadEntry(String message) {
      super(message);
    }
  }

  private final InputStream in;
  private final long declared;
  private final String entry;
  private long position;

  InflatingSource(InputStream in, long declared, String entry) {
    this.in = in;
    this.declared = declared;
    this.entry = entry;
  }

  @Override
  public long size() {
    return declared;
  }

  private int inflate(byte[] into, int length) throws IOException {
    try {
      return in.read(into, 0, length);
    } catch (ZipException e) {
      BadEntry bad =
          new BadEntry(
              entry
                  + ": its compressed data is corrupt after "
                  + position
                  + " bytes: "
                  + e.getMessage());
      bad.initCause(e);
      throw bad;
    }
  }

  @Override
  public void read(long offset, ByteBuffer dst) throws IOException {
    if (offset != position) {
      throw new IOException(
          entry + ": read at " + offset + " but the inflated stream is at " + position);
    }
    if (dst.remaining() > declared - position) {
      throw new IOException(
          entry + ": read of " + dst.remaining() + " bytes at " + offset + " past its end");
    }
    byte[] chunk = new byte[Math.max(1, Math.min(dst.remaining(), 64 * 1024))];
    while (dst.hasRemaining()) {
      int n = inflate(chunk, Math.min(chunk.length, dst.remaining()));
      if (n < 0) {
        throw new BadEntry(
            entry
                + " inflates to only "
                + position
                + " of the "
                + declared
                + " bytes its central directory record declares");
      }
      dst.put(chunk, 0, n);
      position += n;
    }
    if (position == declared && inflate(chunk, 1) >= 0) {
      throw new BadEntry(
          entry
              + " inflates to more than the "
              + declared
              + " bytes its central directory record declares; refused at that size");
    }
  }
}
