package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.operator.trust.ArtifactKeys;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The Secret the operator creates for one ModelArtifact: name {@link ArtifactChildren#name}, type
 * {@code Opaque}, owned by the artifact (garbage-collected with it), labels {@link
 * ArtifactChildren#labels}, data {@code peer-secret}, {@code read-token}, {@code admin-token} from
 * {@link ArtifactKeys}. Pure: builds the object, never calls the API server.
 *
 * <p>The artifact's data-plane pods mount it at {@value
 * io.tensorcast.api.TensorcastConstants#ARTIFACT_SECRET_DIR}; consumers mount its {@code
 * read-token} key.
 */
public final class ArtifactSecret {

  private ArtifactSecret() {}

  /** The desired Secret. */
  public static Secret desired(ModelArtifact artifact, ArtifactKeys keys) {
    return new SecretBuilder()
        .withNewMetadata()
        .withName(ArtifactChildren.name(artifact))
        .withNamespace(artifact.getMetadata().getNamespace())
        .withLabels(ArtifactChildren.labels(artifact))
        .withOwnerReferences(ArtifactChildren.ownerReference(artifact, false))
        .endMetadata()
        .withType("Opaque")
        .withData(data(keys))
        .build();
  }

  /** The Secret's {@code data}: each value base64-encoded, as the API stores it. */
  public static Map<String, String> data(ArtifactKeys keys) {
    Map<String, String> data = new LinkedHashMap<>();
    keys.asData()
        .forEach(
            (k, v) ->
                data.put(
                    k, Base64.getEncoder().encodeToString(v.getBytes(StandardCharsets.UTF_8))));
    return data;
  }
}
