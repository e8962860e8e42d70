package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Max;
import io.fabric8.generator.annotation.Min;
import io.fabric8.generator.annotation.Required;
import io.fabric8.generator.annotation.Size;
import java.util.Objects;

/**
 * One rule of {@code spec.rules}: which tensors it covers (a Java regular expression found in the
 * tensor name) and what the ranks hold of them: a {@code tp} slice along {@code splitDim}, or the
 * whole tensor ({@code replicate}); with {@code expertOwned}, only the ranks of the expert's {@code
 * ep} group hold it at all. Rules are tried in order; the first whose pattern is found in a name
 * decides.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class ShardRule {

  /** Name of the capturing group that holds the expert index in an expert-owned rule's pattern. */
  public static final String EXPERT_GROUP = "expert";

  @Required
  @Size(min = 1, max = 1024)
  @JsonPropertyDescription(
      "Java regular expression searched in each tensor name (anchor with ^ and $ to match the"
          + " whole name), e.g. 'self_attn\\\\.(q|k|v)_proj\\\\.weight$'. With expertOwned it must"
          + " have a named group (?<expert>[0-9]+) capturing the expert index.")
  private String pattern;

  @Min(0)
  @Max(63)
  @JsonPropertyDescription(
      "Dimension the tp ranks split the tensor along (0 = rows of a [out, in] weight,"
          + " column-parallel; 1 = columns, row-parallel). Exactly one of splitDim and replicate.")
  private Integer splitDim;

  @JsonPropertyDescription(
      "true: every tp rank holds the whole tensor. Exactly one of splitDim and replicate.")
  private Boolean replicate;

  @JsonPropertyDescription(
      "true: the tensor belongs to one expert (the pattern's group 'expert'); only the ep ranks"
          + " owning that expert hold it.")
  private Boolean expertOwned;

  public ShardRule() {}

  /** A rule splitting along {@code splitDim}. */
  public static ShardRule split(String pattern, int splitDim) {
    ShardRule r = new ShardRule();
    r.pattern = pattern;
    r.splitDim = splitDim;
    return r;
  }

  /** A rule replicating the tensor on every tp rank. */
  public static ShardRule replicated(String pattern) {
    ShardRule r = new ShardRule();
    r.pattern = pattern;
    r.replicate = true;
    return r;
  }

  /** This rule, for expert-owned tensors. */
  public ShardRule experts() {
    ShardRule r = new ShardRule();
    r.pattern = pattern;
    r.splitDim = splitDim;
    r.replicate = replicate;
    r.expertOwned = true;
    return r;
  }

  public String getPattern() {
    return pattern;
  }

  public void setPattern(String pattern) {
    this.pattern = pattern;
  }

  public Integer getSplitDim() {
    return splitDim;
  }

  public void setSplitDim(Integer splitDim) {
    this.splitDim = splitDim;
  }

  public Boolean getReplicate() {
    return replicate;
  }

  public void setReplicate(Boolean replicate) {
    this.replicate = replicate;
  }

  public Boolean getExpertOwned() {
    return expertOwned;
  }

  public void setExpertOwned(Boolean expertOwned) {
    this.expertOwned = expertOwned;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ShardRule that
        && Objects.equals(pattern, that.pattern)
        && Objects.equals(splitDim, that.splitDim)
        && Objects.equals(replicate, that.replicate)
        && Objects.equals(expertOwned, that.expertOwned);
  }

  @Override
  public int hashCode() {
    return Objects.hash(pattern, splitDim, replicate, expertOwned);
  }

  @Override
  public String toString() {
    return "{pattern: '"
        + pattern
        + "'"
        + (splitDim != null ? ", splitDim: " + splitDim : "")
        + (Boolean.TRUE.equals(replicate) ? ", replicate: true" : "")
        + (Boolean.TRUE.equals(expertOwned) ? ", expertOwned: true" : "")
        + "}";
  }
}
