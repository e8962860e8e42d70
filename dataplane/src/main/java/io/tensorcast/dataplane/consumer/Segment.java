package io.tensorcast.dataplane.consumer;

import java.util.Objects;

/**
 * Bytes {@code [offset, offset + length)} of one file of a stored artifact. A tensor read is
 * answered with an ordered list of segments whose concatenation is the response body.
 *
 * @param file artifact-relative path of the file, '/'-separated, as {@code StoredArtifact.files()}
 *     names it
 * @param offset first byte, relative to the start of the file (not of its data section), {@code >=
 *     0}
 * @param length bytes, {@code >= 0}
 */
public record Segment(String file, long offset, long length) {
  /**
   * @throws IllegalArgumentException if offset or length is negative or their sum overflows
   */
  public Segment {
    Objects.requireNonNull(file, "file");
    if (offset < 0 || length < 0 || offset > Long.MAX_VALUE - length) {
      throw new IllegalArgumentException(
          "segment of '" + file + "': invalid offset " + offset + " / length " + length);
    }
  }

  /** One past the last byte: {@code offset + length}. */
  public long end() {
    return offset + length;
  }
}
