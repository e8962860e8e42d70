package io.tensorcast.dataplane.source;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.concurrent.atomic.LongAdder;

/**
 * An {@link ArtifactSource} that counts every byte its response bodies deliver: the source bytes on
 * the wire, whoever reads them (ranged reads of the store's bytes, header and checkpoint reads,
 * reads of a peer swarm) and whatever becomes of them (kept, discarded by a failed load, read again
 * after a retry). Next to a load's useful bytes ({@code bytesFromSource}) it shows what a fault
 * cost. Everything else is the wrapped source's.
 */
public final class WireCountingSource extends ForwardingArtifactSource {
  private final LongAdder wireBytes = new LongAdder();

  public WireCountingSource(ArtifactSource source) {
    super(source);
  }

  /** Bytes received from the source's response bodies since this source was opened. */
  public long wireBytes() {
    return wireBytes.sum();
  }

  @Override
  public InputStream openRange(SourceFile file, long offset, long length) throws SourceException {
    return new Counting(delegate().openRange(file, offset, length));
  }

  private final class Counting extends FilterInputStream {
    Counting(InputStream in) {
      super(in);
    }

    @Override
    public int read() throws IOException {
      int b = super.read();
      if (b >= 0) {
        wireBytes.increment();
      }
      return b;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      int n = in.read(b, off, len);
      if (n > 0) {
        wireBytes.add(n);
      }
      return n;
    }

    @Override
    public long skip(long n) throws IOException {
      long skipped = in.skip(n);
      if (skipped > 0) {
        wireBytes.add(skipped);
      }
      return skipped;
    }
  }
}
