package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * How the files of a Ready copy were verified, as a data-plane pod reported it: how many against a
 * digest the source publishes, how many by the piece hashes of their readers only, and which.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class ArtifactVerification {
  /** Most file names listed in {@link #getReaderPieceHashesFiles()}. */
  public static final int MAX_FILES_LISTED = 10;

  @JsonPropertyDescription(
      "Files checked against a digest the source publishes before Ready (Hub LFS sha256 or git"
          + " blob sha1, S3/OSS full-object checksum, single-part ETag MD5): protected against"
          + " wrong bytes from any peer.")
  private Integer sourceDigest;

  @JsonPropertyDescription(
      "Files the source publishes no checkable digest for (file://, multipart objects without a"
          + " full-object checksum): each piece matched the SHA-256 announced by the member"
          + " assigned to read it from the source. Protected against strangers and other"
          + " members, not against that reader.")
  private Integer readerPieceHashes;

  @JsonPropertyDescription("The first 10 files (sorted) verified by readerPieceHashes only.")
  private List<String> readerPieceHashesFiles = new ArrayList<>();

  public Integer getSourceDigest() {
    return sourceDigest;
  }

  public void setSourceDigest(Integer sourceDigest) {
    this.sourceDigest = sourceDigest;
  }

  public Integer getReaderPieceHashes() {
    return readerPieceHashes;
  }

  public void setReaderPieceHashes(Integer readerPieceHashes) {
    this.readerPieceHashes = readerPieceHashes;
  }

  public List<String> getReaderPieceHashesFiles() {
    return readerPieceHashesFiles;
  }

  public void setReaderPieceHashesFiles(List<String> readerPieceHashesFiles) {
    this.readerPieceHashesFiles = readerPieceHashesFiles;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ArtifactVerification v
        && Objects.equals(sourceDigest, v.sourceDigest)
        && Objects.equals(readerPieceHashes, v.readerPieceHashes)
        && Objects.equals(readerPieceHashesFiles, v.readerPieceHashesFiles);
  }

  @Override
  public int hashCode() {
    return Objects.hash(sourceDigest, readerPieceHashes, readerPieceHashesFiles);
  }

  @Override
  public String toString() {
    return "ArtifactVerification[sourceDigest="
        + sourceDigest
        + ", readerPieceHashes="
        + readerPieceHashes
        + ", readerPieceHashesFiles="
        + readerPieceHashesFiles
        + "]";
  }
}
