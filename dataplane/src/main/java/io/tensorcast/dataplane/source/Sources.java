package io.tensorcast.dataplane.source;

/** Opens the {@link ArtifactSource} a {@link SourceUri} names. */
public final class Sources {
  private Sources() {}

  /**
   * Opens a source. {@code file} and {@code s3} are supported; {@code oss} and {@code hf} are
   * recognised and refused until their issues land.
   *
   * @throws SourceException {@code UnsupportedSource} for {@code oss://} and {@code hf://}; {@code
   *     SourceNotFound}/{@code AccessDenied} when a local directory cannot be used
   */
  public static ArtifactSource open(SourceUri uri, SourceOptions options) throws SourceException {
    return switch (uri.scheme()) {
      case FILE -> FileSource.open(uri.localPath(), options.filter());
      case S3 -> S3Source.open(uri, options);
      case OSS ->
          throw new SourceException(
              "UnsupportedSource",
              "oss:// sources are not supported yet ("
                  + uri
                  + "); OSS speaks the S3 API, so meanwhile use an s3:// URI with the OSS"
                  + " endpoint and virtual-hosted addressing",
              false);
      case HF ->
          throw new SourceException(
              "UnsupportedSource",
              "hf:// sources (Hugging Face Hub) are not supported yet (" + uri + ")",
              false);
    };
  }

  /** Parses {@code uri} and opens it; see {@link SourceUri#parse} and {@link #open}. */
  public static ArtifactSource open(String uri, SourceOptions options) throws SourceException {
    return open(SourceUri.parse(uri), options);
  }
}
