package io.tensorcast.dataplane.tensor;

import java.util.Objects;

/**
 * One step of a {@link TensorReadPlan}: copy {@code length} bytes of stored file {@code file},
 * starting at byte {@code sourceOffset} of the file (absolute, header included), to byte {@code
 * destinationOffset} of the result tensor.
 *
 * @param file the stored file, as named by the {@link StoredLayout} (a path relative to the
 *     layout's directory, e.g. {@code rank_00002.safetensors}; the same relative path a store names
 *     it by)
 * @param sourceOffset file offset in bytes, {@code >= 0}
 * @param destinationOffset offset into the result in bytes, {@code >= 0}
 * @param length bytes to copy, {@code > 0}
 */
public record RangeCopy(String file, long sourceOffset, long destinationOffset, long length) {

  /**
   * @throws IllegalArgumentException if an offset is negative or the length is not positive
   */
  public RangeCopy {
    Objects.requireNonNull(file, "file");
    if (sourceOffset < 0 || destinationOffset < 0 || length <= 0) {
      throw new IllegalArgumentException(
          "invalid range copy of "
              + file
              + ": source offset "
              + sourceOffset
              + ", destination offset "
              + destinationOffset
              + ", length "
              + length);
    }
  }

  /** One past the last source byte. */
  public long sourceEnd() {
    return sourceOffset + length;
  }

  /** One past the last destination byte. */
  public long destinationEnd() {
    return destinationOffset + length;
  }
}
