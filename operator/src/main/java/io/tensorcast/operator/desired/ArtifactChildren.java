package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.api.model.OwnerReference;
import io.fabric8.kubernetes.api.model.OwnerReferenceBuilder;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What every object the operator creates for one ModelArtifact shares: the owner reference (so the
 * garbage collector removes it with the artifact), the labels, and the name of the artifact's
 * Secret and NetworkPolicy.
 */
public final class ArtifactChildren {

  /** Suffix of the name of an artifact's Secret and NetworkPolicy. */
  public static final String SUFFIX = "-tensorcast";

  /** Longest name of a Secret or NetworkPolicy (a DNS-1123 subdomain). */
  static final int MAX_NAME = 253;

  private ArtifactChildren() {}

  /**
   * Name of the artifact's Secret and of its NetworkPolicy: {@code <artifact name>-tensorcast}.
   * Object names are DNS-1123 subdomains of at most 253 characters; a longer result keeps the first
   * characters of the artifact's name, then 8 hex of the SHA-256 of the whole name, then the suffix
   * (always {@value #SUFFIX}, which the spec validator refuses as a credentials Secret).
   */
  public static String name(ModelArtifact artifact) {
    return name(artifact.getMetadata().getName());
  }

  /** {@link #name(ModelArtifact)} of the ModelArtifact named {@code name}. */
  public static String name(String name) {
    return withSuffix(name, SUFFIX);
  }

  /**
   * {@code name + suffix}, or, when longer than {@value #MAX_NAME} characters, the first characters
   * of {@code name}, {@code -}, 8 hex of the SHA-256 of {@code name}, then {@code suffix}.
   */
  static String withSuffix(String name, String suffix) {
    if (name.length() + suffix.length() <= MAX_NAME) {
      return name + suffix;
    }
    String hash = DataPlanePod.sha256(name).substring(0, 8);
    String prefix = name.substring(0, MAX_NAME - suffix.length() - hash.length() - 1);
    while (prefix.endsWith("-") || prefix.endsWith(".")) {
      prefix = prefix.substring(0, prefix.length() - 1);
    }
    return prefix + "-" + hash + suffix;
  }

  /**
   * An owner reference to {@code artifact} with {@code controller: true}.
   *
   * @param blockOwnerDeletion whether a foreground deletion of the artifact waits for this object
   */
  public static OwnerReference ownerReference(ModelArtifact artifact, boolean blockOwnerDeletion) {
    return new OwnerReferenceBuilder()
        .withApiVersion(artifact.getApiVersion())
        .withKind(artifact.getKind())
        .withName(artifact.getMetadata().getName())
        .withUid(artifact.getMetadata().getUid())
        .withController(true)
        .withBlockOwnerDeletion(blockOwnerDeletion)
        .build();
  }

  /**
   * Labels of the artifact's Secret and NetworkPolicy: {@value
   * TensorcastConstants#LABEL_MANAGED_BY} and {@value TensorcastConstants#LABEL_ARTIFACT}.
   */
  public static Map<String, String> labels(ModelArtifact artifact) {
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put(TensorcastConstants.LABEL_MANAGED_BY, TensorcastConstants.LABEL_MANAGED_BY_OPERATOR);
    labels.put(TensorcastConstants.LABEL_ARTIFACT, artifact.getMetadata().getName());
    return labels;
  }

  /** Labels every data-plane pod of {@code artifact} carries and its NetworkPolicy selects on. */
  public static Map<String, String> podSelector(ModelArtifact artifact) {
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put(TensorcastConstants.LABEL_NAME, TensorcastConstants.LABEL_NAME_DATAPLANE);
    labels.put(TensorcastConstants.LABEL_ARTIFACT, artifact.getMetadata().getName());
    return labels;
  }

  /**
   * The label that admits a pod of the artifact's namespace to its control port: {@code
   * consumer.tensorcast.io/<artifact name>} (value {@code "true"}). Artifact names are at most 63
   * characters and DNS subdomains, so the key is a valid qualified label name.
   */
  public static String consumerLabel(ModelArtifact artifact) {
    return TensorcastConstants.CONSUMER_LABEL_PREFIX + artifact.getMetadata().getName();
  }
}
