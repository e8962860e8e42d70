package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Default;
import io.fabric8.generator.annotation.Max;
import io.fabric8.generator.annotation.Min;
import io.fabric8.generator.annotation.Pattern;
import io.fabric8.kubernetes.api.model.Quantity;
import java.util.Objects;

/**
 * How bytes travel from the source to the nodes ({@code spec.distribution}). Absent {@code
 * pieceSize} and {@code sourceConnections} leave the choice to the data plane. Field initialisers
 * equal the CRD defaults.
 *
 * <p>{@code pieceSize} must lie in [{@link #MIN_PIECE_SIZE}, {@link #MAX_PIECE_SIZE}] bytes. The
 * CRD says so for the integer form ({@code minimum}/{@code maximum}, which OpenAPI applies to
 * numbers only) and checks the string form's syntax ({@link ByteQuantity#PATTERN}); the range of a
 * string such as {@code 128Ki} needs CEL's quantity library (Kubernetes 1.29+), so the operator
 * checks it and reports {@code Ready=False} reason {@code InvalidSpec}.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class DistributionSpec {

  /** Smallest accepted {@code pieceSize}: 256 KiB. */
  public static final long MIN_PIECE_SIZE = 256L * 1024;

  /**
   * Largest accepted {@code pieceSize}: 64 MiB, the data plane's limit ({@code --piece-size}; a
   * PIECE frame is buffered whole by its receiver).
   */
  public static final long MAX_PIECE_SIZE = 64L * 1024 * 1024;

  @Default("PeerToPeer")
  @JsonPropertyDescription(
      "PeerToPeer (each piece read from the source by one pod, shared with the others) or"
          + " SourceOnly (every pod reads every byte from the source). Default PeerToPeer.")
  private DistributionMode mode = DistributionMode.PeerToPeer;

  @Pattern(ByteQuantity.PATTERN)
  @Min(MIN_PIECE_SIZE)
  @Max(MAX_PIECE_SIZE)
  @JsonPropertyDescription(
      "Size of the pieces the artifact is cut into for loading and peer transfer, as a"
          + " Kubernetes quantity in bytes (e.g. 4Mi), from 256Ki to 64Mi inclusive. Each piece"
          + " is read from the source by one pod and verified by its hash before peers get it."
          + " Absent means the data plane's default (1Mi). Changing it replaces the pods.")
  private Quantity pieceSize;

  @Min(1)
  @JsonPropertyDescription(
      "Most concurrent connections (ranged GETs) one pod opens to the source. At least 1;"
          + " absent means the data plane's default.")
  private Integer sourceConnections;

  public DistributionMode getMode() {
    return mode;
  }

  public void setMode(DistributionMode mode) {
    this.mode = mode;
  }

  public Quantity getPieceSize() {
    return pieceSize;
  }

  public void setPieceSize(Quantity pieceSize) {
    this.pieceSize = pieceSize;
  }

  public Integer getSourceConnections() {
    return sourceConnections;
  }

  public void setSourceConnections(Integer sourceConnections) {
    this.sourceConnections = sourceConnections;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof DistributionSpec that
        && mode == that.mode
        && Objects.equals(pieceSize, that.pieceSize)
        && Objects.equals(sourceConnections, that.sourceConnections);
  }

  @Override
  public int hashCode() {
    return Objects.hash(mode, pieceSize, sourceConnections);
  }
}
