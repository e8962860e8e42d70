package io.tensorcast.dataplane.write;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.tensor.TensorParallelism;
import io.tensorcast.dataplane.tensor.WriterPartition;
import java.util.Arrays;
import java.util.Objects;

/**
 * One tensor of a put: what the writer sends. Per the unified parallel tensor IO write table: with
 * no parallelism the tensor is stored as sent (a full tensor); with a {@code parallelism} of {@code
 * [tp]} alone the bytes sent are the shard itself; with {@code [dp|pp|ep, tp]} they are the full
 * tensor and only the tp shard is stored; with scope axes only ({@code [dp]}, ...) the tensor is
 * stored as sent (replicated on every tp rank); with a {@code writerPartition} the bytes sent are
 * always the full tensor and only the writer's shard is stored.
 *
 * @param name tensor name (the safetensors key): not empty, not {@code __metadata__}, at most
 *     {@value #MAX_NAME_CHARS} characters
 * @param dtype element type
 * @param shape shape of the bytes sent (the full tensor, or the shard for {@code [tp]} alone)
 * @param parallelism the tensor's layout identity, or null
 * @param writerPartition the shard a writer holding the full tensor stores, or null; never both
 */
public record TensorPut(
    String name,
    Dtype dtype,
    long[] shape,
    TensorParallelism parallelism,
    WriterPartition writerPartition) {

  /** Longest tensor name accepted. */
  public static final int MAX_NAME_CHARS = 4096;

  /**
   * @throws IllegalArgumentException naming the tensor and the rule broken: empty or reserved name,
   *     both a parallelism and a writer partition, a negative dimension, a size that overflows or
   *     leaves a sub-byte dtype off a byte boundary
   */
  public TensorPut {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(dtype, "dtype");
    shape = Objects.requireNonNull(shape, "shape").clone();
    if (name.isEmpty()) {
      throw new IllegalArgumentException("a tensor name must not be empty");
    }
    if (name.length() > MAX_NAME_CHARS) {
      throw new IllegalArgumentException(
          "tensor name of "
              + name.length()
              + " characters is longer than "
              + MAX_NAME_CHARS
              + ": "
              + name.substring(0, 64)
              + "...");
    }
    if ("__metadata__".equals(name)) {
      throw new IllegalArgumentException(
          "a tensor may not be named \"__metadata__\": the safetensors format keeps the file's"
              + " metadata under that key");
    }
    if (parallelism != null && writerPartition != null) {
      throw new IllegalArgumentException(
          "tensor \""
              + name
              + "\" gives both a parallelism ("
              + parallelism
              + ") and a writer_partition ("
              + writerPartition.parallelism()
              + "); give one: parallelism when the bytes sent are already the shard (tp alone)"
              + " or scope the object, writer_partition when they are the full tensor");
    }
    new TensorDeclaration(name, dtype, shape); // sizes, overflow, sub-byte alignment
  }

  /** Bytes the writer sends: {@code dtype × shape}. */
  public long inputBytes() {
    return new TensorDeclaration(name, dtype, shape).byteLength();
  }

  @Override
  public long[] shape() {
    return shape.clone();
  }

  /** The identity this put declares: the parallelism, the writer partition's, or null. */
  public TensorParallelism identity() {
    return writerPartition != null ? writerPartition.parallelism() : parallelism;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof TensorPut p
        && name.equals(p.name)
        && dtype == p.dtype
        && Arrays.equals(shape, p.shape)
        && Objects.equals(parallelism, p.parallelism)
        && Objects.equals(writerPartition, p.writerPartition);
  }

  @Override
  public int hashCode() {
    return Objects.hash(name, dtype, Arrays.hashCode(shape), parallelism, writerPartition);
  }

  @Override
  public String toString() {
    return name
        + " "
        + dtype
        + Arrays.toString(shape)
        + (parallelism != null ? " parallelism=" + parallelism : "")
        + (writerPartition != null ? " writer_partition=" + writerPartition.parallelism() : "");
  }
}
