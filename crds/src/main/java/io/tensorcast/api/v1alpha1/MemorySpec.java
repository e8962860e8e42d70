package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Default;
import io.fabric8.generator.annotation.Min;
import io.fabric8.generator.annotation.Pattern;
import io.fabric8.kubernetes.api.model.Quantity;
import java.util.Objects;

/**
 * How an artifact is held in host memory ({@code spec.memory}). Field initialisers equal the CRD
 * defaults.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class MemorySpec {

  @Default("true")
  @JsonPropertyDescription(
      "Page-lock the copy (mmap + mlock on a memory-backed filesystem) so it is never swapped"
          + " out and can be registered for RDMA. Default true.")
  private Boolean pinned = true;

  @Pattern(ByteQuantity.PATTERN)
  @Min(1)
  @JsonPropertyDescription(
      "Largest artifact accepted, as a Kubernetes quantity of bytes more than 0 (e.g. 200Gi)."
          + " An artifact"
          + " whose resolved size exceeds it fails before any byte is loaded. Absent means no"
          + " limit beyond the nodes' allocatable memory.")
  private Quantity limit;

  public Boolean getPinned() {
    return pinned;
  }

  public void setPinned(Boolean pinned) {
    this.pinned = pinned;
  }

  public Quantity getLimit() {
    return limit;
  }

  public void setLimit(Quantity limit) {
    this.limit = limit;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof MemorySpec that
        && Objects.equals(pinned, that.pinned)
        && Objects.equals(limit, that.limit);
  }

  @Override
  public int hashCode() {
    return Objects.hash(pinned, limit);
  }
}
