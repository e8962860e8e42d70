package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Pattern;
import io.fabric8.generator.annotation.Size;
import io.fabric8.generator.annotation.ValidationRule;

/**
 * The CRD schema of one entry of {@code spec.placement.tolerations}: the fields of a pod's {@code
 * core/v1 Toleration} with their documentation and the rules of Kubernetes' own toleration
 * validation (apimachinery {@code ValidateTolerations}). Only a schema source
 * ({@code @SchemaFrom}); the Java model keeps fabric8's {@code Toleration}. The operator checks the
 * same rules ({@code SpecValidator}) for clusters that do not run CEL rules.
 */
@ValidationRule(
    value =
        "(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')",
    message = "operator must be Exists when key is empty (a toleration of every taint)")
@ValidationRule(
    value =
        "!has(self.operator) || self.operator != 'Exists' || !has(self.value) || self.value == ''",
    message = "value must be empty when operator is Exists")
@ValidationRule(
    value = "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
    message = "tolerationSeconds is allowed only with effect NoExecute")
public final class TolerationSchema {

  /**
   * Empty, or a label key: an optional DNS subdomain prefix and '/', then a name of letters,
   * digits, '-', '_' and '.' that begins and ends with a letter or digit.
   */
  static final String LABEL_KEY =
      "^(([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
          + "[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$";

  @Size(max = 317)
  @Pattern(LABEL_KEY)
  @JsonPropertyDescription(
      "Taint key the toleration applies to (a label key). Empty matches every key; then"
          + " operator must be Exists.")
  public String key;

  @Pattern("^(Exists|Equal)?$")
  @JsonPropertyDescription("Exists (any value) or Equal (the value below). Empty means Equal.")
  public String operator;

  @Size(max = 63)
  @JsonPropertyDescription("Taint value to match with operator Equal; empty with operator Exists.")
  public String value;

  @Pattern("^(NoSchedule|PreferNoSchedule|NoExecute)?$")
  @JsonPropertyDescription(
      "Taint effect to match: NoSchedule, PreferNoSchedule or NoExecute. Empty matches every"
          + " effect.")
  public String effect;

  @JsonPropertyDescription(
      "With effect NoExecute: seconds the pod stays bound after the taint appears (absent:"
          + " forever; 0 or less: evicted at once).")
  public Long tolerationSeconds;

  private TolerationSchema() {}
}
