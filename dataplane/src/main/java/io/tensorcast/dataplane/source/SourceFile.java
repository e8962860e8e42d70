package io.tensorcast.dataplane.source;

import java.util.Objects;
import java.util.Optional;

/**
 * One file of an artifact as the source lists it.
 *
 * @param path path relative to the artifact root, '/'-separated, never absolute and never
 *     containing {@code ..} segments (sources reject such keys when listing)
 * @param size size in bytes as the source reports it; checked against the bytes received
 * @param etag the source's entity tag (S3 ETag, Hub ETag), without quotes; empty if none
 * @param sha256 lowercase hex SHA-256 of the whole file when the source knows it (Hub LFS linked
 *     ETag, S3 full-object checksum); empty otherwise
 */
public record SourceFile(String path, long size, String etag, Optional<String> sha256) {
  public SourceFile {
    Objects.requireNonNull(path, "path");
    Objects.requireNonNull(etag, "etag");
    Objects.requireNonNull(sha256, "sha256");
    if (size < 0) {
      throw new IllegalArgumentException("negative size " + size + " for " + path);
    }
  }
}
