package io.tensorcast.operator.validation;

/**
 * One broken rule of a ModelArtifact.
 *
 * @param field path of the offending field, e.g. {@code spec.source.include[1]}
 * @param rule what is wrong and what would be right, for people
 */
public record Violation(String field, String rule) {
  @Override
  public String toString() {
    return field + ": " + rule;
  }
}
