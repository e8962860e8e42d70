package io.tensorcast.dataplane.store;

import java.util.Objects;

/**
 * One file of an artifact as the store lays it out: {@code <root>/<artifactId>/<path>}.
 *
 * @param path path relative to the artifact directory, '/'-separated; {@link PinnedStore#allocate}
 *     checks it (relative, normalised, no {@code ..}, no backslash, NUL or control characters)
 * @param size size in bytes, {@code >= 0}; the file is created with exactly this size
 */
public record StoreFile(String path, long size) {
  public StoreFile {
    Objects.requireNonNull(path, "path");
  }
}
