package io.tensorcast.dataplane.source;

import java.io.InputStream;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * An {@link ArtifactSource} that forwards every call to another one; a subclass overrides what it
 * changes (counting the bytes of {@link #openRange}, injecting a fault). Every method of the
 * interface is forwarded, its defaults included, so a wrapper never answers with a default — no
 * published digest, no path filter, no revision — where the wrapped source has one.
 */
public abstract class ForwardingArtifactSource implements ArtifactSource {
  private final ArtifactSource delegate;

  protected ForwardingArtifactSource(ArtifactSource delegate) {
    this.delegate = Objects.requireNonNull(delegate, "delegate");
  }

  /** The wrapped source. */
  protected final ArtifactSource delegate() {
    return delegate;
  }

  @Override
  public List<SourceFile> list() throws SourceException {
    return delegate.list();
  }

  @Override
  public InputStream openRange(SourceFile file, long offset, long length) throws SourceException {
    return delegate.openRange(file, offset, length);
  }

  @Override
  public Optional<String> resolvedRevision() {
    return delegate.resolvedRevision();
  }

  @Override
  public void checkUnchanged(SourceFile file) throws SourceException {
    delegate.checkUnchanged(file);
  }

  @Override
  public PathFilter filter() {
    return delegate.filter();
  }

  @Override
  public PublishedDigest publishedDigest(SourceFile file) throws SourceException {
    return delegate.publishedDigest(file);
  }

  @Override
  public String describe() {
    return delegate.describe();
  }

  @Override
  public void close() {
    delegate.close();
  }
}
