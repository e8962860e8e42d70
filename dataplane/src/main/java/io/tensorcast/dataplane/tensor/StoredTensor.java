package io.tensorcast.dataplane.tensor;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * One logical tensor of a {@link StoredLayout} and the stored objects that hold its bytes.
 *
 * <p>Plain safetensors files: one piece, the whole tensor. TP shard layout: one piece per rank in
 * rank order; for a split tensor piece {@code r} holds the slice starting at {@code r × g/S} along
 * {@code splitDim}, for a replicated tensor ({@code splitDim == null}) every piece holds the whole
 * tensor.
 *
 * @param name the tensor's name
 * @param dtype element type
 * @param globalShape shape of the full tensor
 * @param splitDim the dimension the pieces split, or {@code null} if each piece is whole
 * @param pieces the stored objects, in rank order
 */
public record StoredTensor(
    String name, Dtype dtype, long[] globalShape, Integer splitDim, List<Piece> pieces) {

  /**
   * One stored object: a box of the global tensor, row-major in a file.
   *
   * @param file the file as the layout names it (relative path)
   * @param dataOffset absolute file offset of the object's first byte
   * @param origin the global index of the object's first element, per dimension
   * @param shape the object's (local) shape
   */
  public record Piece(String file, long dataOffset, long[] origin, long[] shape) {
    public Piece {
      Objects.requireNonNull(file, "file");
      origin = origin.clone();
      shape = shape.clone();
    }

    @Override
    public long[] origin() {
      return origin.clone();
    }

    @Override
    public long[] shape() {
      return shape.clone();
    }

    long[] originRef() {
      return origin;
    }

    long[] shapeRef() {
      return shape;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Piece p
          && file.equals(p.file)
          && dataOffset == p.dataOffset
          && Arrays.equals(origin, p.origin)
          && Arrays.equals(shape, p.shape);
    }

    @Override
    public int hashCode() {
      return Objects.hash(file, dataOffset, Arrays.hashCode(origin), Arrays.hashCode(shape));
    }

    @Override
    public String toString() {
      return file
          + "@"
          + dataOffset
          + " origin "
          + Arrays.toString(origin)
          + " shape "
          + Arrays.toString(shape);
    }
  }

  public StoredTensor {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(dtype, "dtype");
    globalShape = globalShape.clone();
    pieces = List.copyOf(pieces);
  }

  @Override
  public long[] globalShape() {
    return globalShape.clone();
  }

  long[] globalShapeRef() {
    return globalShape;
  }

  /** Whether every piece holds the whole tensor (plain file, or replicated in a shard layout). */
  public boolean whole() {
    return splitDim == null;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof StoredTensor t
        && name.equals(t.name)
        && dtype == t.dtype
        && Arrays.equals(globalShape, t.globalShape)
        && Objects.equals(splitDim, t.splitDim)
        && pieces.equals(t.pieces);
  }

  @Override
  public int hashCode() {
    return Objects.hash(name, dtype, Arrays.hashCode(globalShape), splitDim, pieces);
  }

  @Override
  public String toString() {
    return name
        + " "
        + dtype
        + Arrays.toString(globalShape)
        + " split_dim="
        + splitDim
        + " pieces="
        + pieces.size();
  }
}
