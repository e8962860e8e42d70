package io.tensorcast.dataplane.source;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.atomic.LongAdder;

/**
 * An {@link ArtifactSource} that counts every byte its response bodies deliver: the source bytes on
 * the wire, whoever reads them (ranged reads of the store's bytes, header and checkpoint reads,
 * reads of a peer swarm) and whatever becomes of them (kept, discarded by a failed load, read again
 * after a retry). Next to a load's useful bytes ({@code bytesFromSource}) it shows what a fault
 * cost. Everything else is the wrapped source's.
 */
public final class WireCountingSource implements ArtifactSource {
  private final ArtifactSource source;
  private final LongAdder wireBytes = new LongAdder();

  public WireCountingSource(ArtifactSource source) {
    this.source = Objects.requireNonNull(source, "source");
  }

  /** Bytes received from the source's response bodies since this source was opened. */
  public long wireBytes() {
    return wireBytes.sum();
  }

  @Override
  public List<SourceFile> list() throws SourceException {
    return source.list();
  }

  @Override
  public InputStream openRange(SourceFile file, long offset, long length) throws SourceException {
    return new Counting(source.openRange(file, offset, length));
  }

  @Override
  public Optional<String> resolvedRevision() {
    return source.resolvedRevision();
  }

  @Override
  public void checkUnchanged(SourceFile file) throws SourceException {
    source.checkUnchanged(file);
  }

  @Override
  public PathFilter filter() {
    return source.filter();
  }

  @Override
  public PublishedDigest publishedDigest(SourceFile file) throws SourceException {
    return source.publishedDigest(file);
  }

  @Override
  public String describe() {
    return source.describe();
  }

  @Override
  public void close() {
    source.close();
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
