package io.tensorcast.dataplane.source;

import java.io.IOException;
import java.io.InputStream;
import java.util.Objects;

/**
 * The body of one ranged read: at most {@code length} bytes, then end of stream. Subclasses supply
 * {@link #readBody}, which is never asked for more than what is left of the range; this class keeps
 * the count, so a server that sends more than the range can never push extra bytes into a store.
 */
abstract class RangeInputStream extends InputStream {
  private long remaining;

  /**
   * @param length bytes of the range, {@code >= 0}
   */
  RangeInputStream(long length) {
    this.remaining = length;
  }

  /**
   * Reads up to {@code len} bytes ({@code 1 <= len <=} what is left of the range).
   *
   * @return bytes read, or {@code -1} when the underlying body ended early (the reader then resumes
   *     at the first missing byte)
   * @throws IOException when the body fails
   */
  protected abstract int readBody(byte[] b, int off, int len) throws IOException;

  /** Bytes of the range not yet returned. */
  protected final long remaining() {
    return remaining;
  }

  @Override
  public final int read() throws IOException {
    byte[] one = new byte[1];
    int n = read(one, 0, 1);
    return n < 0 ? -1 : one[0] & 0xff;
  }

  @Override
  public final int read(byte[] b, int off, int len) throws IOException {
    Objects.checkFromIndexSize(off, len, b.length);
    if (remaining == 0) {
      return -1;
    }
    if (len == 0) {
      return 0;
    }
    int n = readBody(b, off, (int) Math.min(len, remaining));
    if (n < 0) {
      remaining = 0;
      return -1;
    }
    remaining -= n;
    return n;
  }
}
