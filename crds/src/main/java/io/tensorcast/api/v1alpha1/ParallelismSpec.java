package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Default;
import io.fabric8.generator.annotation.Max;
import io.fabric8.generator.annotation.Min;
import java.util.Objects;

/**
 * The parallel layout of a TensorShardSet ({@code spec.parallelism}): the sizes of the axes of the
 * unified parallel tensor IO terms. Only {@code tp} splits tensor bytes (along each tensor's split
 * dim); {@code dp} replicas hold the same bytes, {@code pp} stages own the layers of their share of
 * the layer indexes, {@code ep} ranks own their share of the experts. Ranks are numbered in the
 * canonical axis order {@code dp, pp, ep, tp} with {@code tp} varying fastest: {@code rank = ((dp ×
 * pp_size + pp) × ep_size + ep) × tp_size + tp}.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class ParallelismSpec {

  /** Largest size of one axis, and of the world (the product of all four). */
  public static final int MAX_SIZE = 4096;

  @Min(1)
  @Max(MAX_SIZE)
  @Default("1")
  @JsonPropertyDescription(
      "Tensor-parallel size: each tensor a rule splits is cut into tp equal slices along its"
          + " split dim. Default 1.")
  private Integer tp = 1;

  @Min(1)
  @Max(MAX_SIZE)
  @Default("1")
  @JsonPropertyDescription(
      "Pipeline-parallel size: stage s holds the layers whose index i satisfies"
          + " floor(i × pp / layers) = s; tensors outside the layers are held by every stage."
          + " Default 1.")
  private Integer pp = 1;

  @Min(1)
  @Max(MAX_SIZE)
  @Default("1")
  @JsonPropertyDescription(
      "Data-parallel size: every dp replica holds the same rank files. Default 1.")
  private Integer dp = 1;

  @Min(1)
  @Max(MAX_SIZE)
  @Default("1")
  @JsonPropertyDescription(
      "Expert-parallel size: the experts are split into ep contiguous groups and an expert's"
          + " tensors (rules with expertOwned) are held only by the ranks of its group; must"
          + " divide the expert count. Default 1.")
  private Integer ep = 1;

  public ParallelismSpec() {}

  public ParallelismSpec(int tp, int pp, int dp, int ep) {
    this.tp = tp;
    this.pp = pp;
    this.dp = dp;
    this.ep = ep;
  }

  public Integer getTp() {
    return tp;
  }

  public void setTp(Integer tp) {
    this.tp = tp;
  }

  public Integer getPp() {
    return pp;
  }

  public void setPp(Integer pp) {
    this.pp = pp;
  }

  public Integer getDp() {
    return dp;
  }

  public void setDp(Integer dp) {
    this.dp = dp;
  }

  public Integer getEp() {
    return ep;
  }

  public void setEp(Integer ep) {
    this.ep = ep;
  }

  /** {@code size} of an axis, 1 when unset. */
  public static int size(Integer size) {
    return size == null ? 1 : size;
  }

  /** Number of ranks: dp × pp × ep × tp. */
  public long worldSize() {
    return (long) size(dp) * size(pp) * size(ep) * size(tp);
  }

  /**
   * The sizes in canonical order, axes of size 1 left out (e.g. {@code "ep:2,tp:4"}); {@code
   * "tp:1"} when every size is 1.
   */
  public String describe() {
    StringBuilder b = new StringBuilder();
    append(b, "dp", size(dp));
    append(b, "pp", size(pp));
    append(b, "ep", size(ep));
    append(b, "tp", size(tp));
    return b.length() == 0 ? "tp:1" : b.toString();
  }

  private static void append(StringBuilder b, String kind, int size) {
    if (size > 1) {
      if (b.length() > 0) {
        b.append(',');
      }
      b.append(kind).append(':').append(size);
    }
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ParallelismSpec that
        && size(tp) == size(that.tp)
        && size(pp) == size(that.pp)
        && size(dp) == size(that.dp)
        && size(ep) == size(that.ep);
  }

  @Override
  public int hashCode() {
    return Objects.hash(size(tp), size(pp), size(dp), size(ep));
  }
}
