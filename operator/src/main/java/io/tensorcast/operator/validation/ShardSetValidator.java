package io.tensorcast.operator.validation;

import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.ParallelismSpec;
import io.tensorcast.api.v1alpha1.ShardPlacementSpec;
import io.tensorcast.api.v1alpha1.ShardRule;
import io.tensorcast.api.v1alpha1.TensorShardSet;
import io.tensorcast.api.v1alpha1.TensorShardSetSpec;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * Rules of a TensorShardSet's spec that its CRD schema cannot express on Kubernetes 1.20: exactly
 * one of {@code artifactRef} and {@code source} (an own source passes the ModelArtifact's source
 * rules), each rule a valid Java regular expression with exactly one of {@code splitDim} and {@code
 * replicate} and, when {@code expertOwned}, a group {@code (?<expert>...)}; a world of at most
 * {@value ParallelismSpec#MAX_SIZE} ranks; consumer placement with a selector and a rank label.
 * Rules about the tensors themselves (a split dim in range, sizes that divide, every tensor
 * covered) need the artifact's headers and are checked by the data plane before anything is loaded.
 */
public final class ShardSetValidator {

  private ShardSetValidator() {}

  /** The violations of {@code set}'s spec under the default source policy; empty when valid. */
  public static List<Violation> validate(TensorShardSet set) {
    return validate(set, SourcePolicy.DEFAULT);
  }

  /**
   * The violations of {@code set}'s spec; empty when valid. An own source is checked under {@code
   * policy} as a ModelArtifact's is (the operator's endpoint allowlist, no {@code file://} under
   * the store root, credentials only over https unless {@code insecureEndpoint}).
   */
  public static List<Violation> validate(TensorShardSet set, SourcePolicy policy) {
    List<Violation> out = new ArrayList<>();
    TensorShardSetSpec spec = set.getSpec();
    if (spec == null) {
      out.add(new Violation("spec", "is missing"));
      return out;
    }
    boolean ref = spec.getArtifactRef() != null;
    boolean own = spec.getSource() != null;
    if (ref == own) {
      out.add(
          new Violation(
              "spec.artifactRef, spec.source",
              "give exactly one: a ModelArtifact of this namespace, or a source of its own"));
    }
    if (ref
        && (spec.getArtifactRef().getName() == null || spec.getArtifactRef().getName().isBlank())) {
      out.add(new Violation("spec.artifactRef.name", "is required"));
    }
    if (own) {
      ModelArtifact carrier = new ModelArtifact();
      carrier.setMetadata(set.getMetadata());
      ModelArtifactSpec s = new ModelArtifactSpec();
      s.setSource(spec.getSource());
      s.setMemory(spec.getMemory());
      carrier.setSpec(s);
      out.addAll(SpecValidator.validate(carrier, policy));
    }
    ParallelismSpec p =
        spec.getParallelism() == null ? new ParallelismSpec() : spec.getParallelism();
    if (p.worldSize() > ParallelismSpec.MAX_SIZE) {
      out.add(
          new Violation(
              "spec.parallelism",
              "dp × pp × ep × tp = "
                  + p.worldSize()
                  + " ranks; at most "
                  + ParallelismSpec.MAX_SIZE));
    }
    List<ShardRule> rules = spec.getRules() == null ? List.of() : spec.getRules();
    for (int i = 0; i < rules.size(); i++) {
      ShardRule r = rules.get(i);
      String where = "spec.rules[" + i + "]";
      if (r.getPattern() == null || r.getPattern().isEmpty()) {
        out.add(new Violation(where + ".pattern", "is required"));
        continue;
      }
      try {
        Pattern.compile(r.getPattern());
      } catch (PatternSyntaxException e) {
        out.add(
            new Violation(
                where + ".pattern",
                "'"
                    + r.getPattern()
                    + "' is not a valid Java regular expression: "
                    + e.getDescription()
                    + " near index "
                    + e.getIndex()));
      }
      boolean replicate = Boolean.TRUE.equals(r.getReplicate());
      if (replicate == (r.getSplitDim() != null)) {
        out.add(new Violation(where, "give exactly one of splitDim and replicate: true"));
      }
      if (Boolean.TRUE.equals(r.getExpertOwned())
          && !r.getPattern().contains("(?<" + ShardRule.EXPERT_GROUP + ">")) {
        out.add(
            new Violation(
                where + ".pattern",
                "is expertOwned but has no named group (?<expert>[0-9]+) capturing the expert"
                    + " index"));
      }
    }
    ShardPlacementSpec placement = spec.getPlacement();
    if (placement != null && placement.getConsumers() != null) {
      var c = placement.getConsumers();
      if (c.getMatchLabels() == null || c.getMatchLabels().isEmpty()) {
        out.add(
            new Violation(
                "spec.placement.consumers.matchLabels",
                "is required: the labels of the consumer pods whose nodes hold the ranks"));
      }
      if (c.getRankLabel() == null || c.getRankLabel().isBlank()) {
        out.add(
            new Violation(
                "spec.placement.consumers.rankLabel",
                "is required: the label holding each consumer pod's index"));
      }
    }
    return out;
  }
}
