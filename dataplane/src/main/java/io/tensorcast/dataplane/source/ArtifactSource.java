package io.tensorcast.dataplane.source;

import java.io.InputStream;
import java.util.List;
import java.util.Optional;

/**
 * Where an artifact's bytes come from: a local directory, an S3 or OSS prefix, a Hugging Face
 * repository. Implementations are thread-safe: ranges are opened concurrently.
 */
public interface ArtifactSource extends AutoCloseable {

  /**
   * Lists the artifact's files after include/exclude filtering, sorted by path.
   *
   * @throws SourceException if the source cannot be listed (missing bucket, denied, ...)
   */
  List<SourceFile> list() throws SourceException;

  /**
   * Opens bytes {@code [offset, offset + length)} of {@code file}. The stream yields exactly {@code
   * length} bytes and then end-of-stream; implementations check the response (status, {@code
   * Content-Range}, length) and never substitute other bytes. A stream that ends early is the
   * caller's signal to resume at the byte where it broke.
   *
   * @throws SourceException if the range cannot be opened; {@link SourceException#retryable()}
   *     tells whether trying again may help
   */
  InputStream openRange(SourceFile file, long offset, long length) throws SourceException;

  /**
   * The immutable revision the source pinned when it listed, e.g. the Hub commit sha a branch
   * resolved to; empty for sources without revisions (files, buckets). Valid after {@link #list()}.
   */
  default Optional<String> resolvedRevision() {
    return Optional.empty();
  }

  /**
   * Checks, after all of {@code file}'s bytes were read, that the source still holds the version
   * that was listed. Sources whose every ranged read is conditional on the listed identity (S3's
   * {@code If-Match}, the Hub's pinned commit) need nothing more; a local directory does.
   *
   * @throws SourceException {@code ObjectChanged} or {@code ObjectNotFound} if it changed
   */
  default void checkUnchanged(SourceFile file) throws SourceException {}

  /**
   * The include/exclude filter {@link #list()} applies; {@link PathFilter#all()} for a source that
   * lists everything. Lets a check say that a file it needs was left out by the filters rather than
   * missing from the source.
   */
  default PathFilter filter() {
    return PathFilter.all();
  }

  /**
   * The digest the source publishes for the whole of {@code file}, which the loader checks the
   * bytes in the store against before the file counts as complete ({@code SourceDigest}); or, when
   * it publishes none that can be checked, {@link PublishedDigest#none} saying why (the file is
   * then verified by the piece hashes of its readers only, {@code ReaderPieceHashes}). May make a
   * request (S3: a HEAD); called once per file after its bytes are in.
   *
   * @throws SourceException if the source cannot be asked, or the object changed since listing
   */
  default PublishedDigest publishedDigest(SourceFile file) throws SourceException {
    return file.sha256().isPresent()
        ? PublishedDigest.hex(PublishedDigest.Algorithm.SHA256, file.sha256().get(), "sha256")
        : PublishedDigest.none(describe() + " publishes no digest for its files");
  }

  /** A short description for logs and status, e.g. {@code s3://bucket/prefix/}; no secrets. */
  String describe();

  @Override
  void close();
}
