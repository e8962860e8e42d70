package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonPropertyDescription;

/**
 * The CRD schema of one entry of {@code status.conditions}: the fields of the Kubernetes condition
 * shape (apimachinery {@code metav1.Condition}) with their documentation. Only a schema source
 * ({@code @SchemaFrom}); the Java model keeps fabric8's {@code Condition}. Types and reasons are in
 * {@link Conditions}.
 */
public final class ConditionSchema {

  @JsonPropertyDescription("Resolved, Scheduled, Loaded, Ready or Degraded.")
  public String type;

  @JsonPropertyDescription("True, False or Unknown.")
  public String status;

  @JsonPropertyDescription(
      "Why the condition has this status, one CamelCase word for programs (e.g."
          + " AllReplicasReady, InsufficientNodes, SourceNotFound).")
  public String reason;

  @JsonPropertyDescription("What happened, for people; may name nodes, files and numbers.")
  public String message;

  @JsonPropertyDescription(
      "When status last changed (RFC 3339, UTC); unchanged while only reason or message"
          + " change.")
  public String lastTransitionTime;

  @JsonPropertyDescription("metadata.generation of the spec the condition was set for.")
  public Long observedGeneration;

  private ConditionSchema() {}
}
