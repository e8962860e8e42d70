package io.tensorcast.operator.reconciler;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.dsl.base.PatchContext;
import io.fabric8.kubernetes.client.dsl.base.PatchType;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.tensorcast.api.Reason;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.desired.ArtifactNetworkPolicy;
import io.tensorcast.operator.desired.ArtifactSecret;
import io.tensorcast.operator.trust.ArtifactKeys;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Creates and updates a ModelArtifact's Secret ({@link ArtifactSecret}) and NetworkPolicy ({@link
 * ArtifactNetworkPolicy}) without reading either: the operator's RBAC has {@code create} and {@code
 * patch} on them, no {@code get}, {@code list} or {@code watch}.
 *
 * <p>How: {@code create}; if the name is taken (409), a JSON patch whose first operation tests that
 * the object's first owner reference is this ModelArtifact's uid and whose next operations replace
 * its labels and {@code data} (Secret) or {@code spec} (NetworkPolicy). The API server applies the
 * patch atomically, so an object of the same name that the artifact does not own (a user's Secret)
 * is never changed: the test fails and the artifact reports {@link Reason#NameConflict}.
 *
 * <p>What was applied is remembered per artifact (a digest of the desired objects), so in steady
 * state nothing is sent: the objects are written on the first reconcile after the operator starts,
 * when the generation (and so the peer secret) changes, and, as a create only, before pods are
 * created (which re-creates a Secret someone deleted).
 *
 * <p>Thread-safe: JOSDK reconciles different artifacts in parallel, one artifact at a time.
 */
final class ArtifactObjects {
  private static final Logger log = LoggerFactory.getLogger(ArtifactObjects.class);

  private final OperatorConfig config;
  private final ObjectMapper json = new ObjectMapper();

  /** Per artifact ("namespace/name"): digest of what was last applied. */
  private final Map<String, String> applied = new ConcurrentHashMap<>();

  ArtifactObjects(OperatorConfig config) {
    this.config = config;
  }

  /**
   * Brings the artifact's Secret (and NetworkPolicy, when enabled) to what it should be.
   *
   * @param force send a create even when this state was applied already (pods are about to be
   *     created and need the Secret)
   * @return a message naming the object when its name is taken by one the artifact does not own
   */
  Optional<String> ensure(
      KubernetesClient client, ModelArtifact artifact, ArtifactKeys keys, boolean force) {
    Secret secret = ArtifactSecret.desired(artifact, keys);
    NetworkPolicy policy =
        config.networkPolicy() ? ArtifactNetworkPolicy.desired(artifact, config) : null;
    return ensure(client, artifact, secret, policy, force);
  }

  /**
   * As {@link #ensure(KubernetesClient, ModelArtifact, ArtifactKeys, boolean)} for the Secret and
   * NetworkPolicy (null: none) of any owner (a TensorShardSet's), both owned by {@code owner}.
   */
  Optional<String> ensure(
      KubernetesClient client,
      HasMetadata owner,
      Secret secret,
      NetworkPolicy policy,
      boolean force) {
    HasMetadata artifact = owner;
    String id = artifact.getMetadata().getNamespace() + "/" + artifact.getMetadata().getName();
    String digest =
        digest(Serialization.asJson(secret) + (policy == null ? "" : Serialization.asJson(policy)));
    boolean known = digest.equals(applied.get(id));
    if (known && !force) {
      return Optional.empty();
    }
    String uid = artifact.getMetadata().getUid();
    String kind = artifact.getKind();
    Optional<String> conflict = apply(client, secret, kind, uid, known, "data", secret.getData());
    if (conflict.isEmpty() && policy != null) {
      conflict = apply(client, policy, kind, uid, known, "spec", policy.getSpec());
    }
    if (conflict.isPresent()) {
      applied.remove(id);
      return conflict;
    }
    applied.put(id, digest);
    return Optional.empty();
  }

  /** Forgets what was applied for {@code artifact} ("namespace/name"): it was deleted. */
  void forget(String artifact) {
    applied.remove(artifact);
  }

  private Optional<String> apply(
      KubernetesClient client,
      HasMetadata desired,
      String ownerKind,
      String ownerUid,
      boolean knownCurrent,
      String field,
      Object value) {
    String what =
        desired.getKind()
            + " "
            + desired.getMetadata().getNamespace()
            + "/"
            + desired.getMetadata().getName();
    try {
      client.resource(desired).create();
      log.info("created {}", what);
      return Optional.empty();
    } catch (KubernetesClientException e) {
      if (e.getCode() != 409) {
        throw e;
      }
    }
    if (knownCurrent) {
      return Optional.empty();
    }
    ArrayNode ops = json.createArrayNode();
    ObjectNode test = ops.addObject();
    test.put("op", "test");
    test.put("path", "/metadata/ownerReferences/0/uid");
    test.put("value", ownerUid);
    ObjectNode labels = ops.addObject();
    labels.put("op", "replace");
    labels.put("path", "/metadata/labels");
    labels.set("value", tree(desired.getMetadata().getLabels()));
    ObjectNode replace = ops.addObject();
    replace.put("op", "replace");
    replace.put("path", "/" + field);
    replace.set("value", tree(value));
    try {
      patch(client, desired, ops.toString());
      log.info("updated {}", what);
      return Optional.empty();
    } catch (KubernetesClientException e) {
      if (e.getCode() == 404) {
        // Deleted between the create and the patch: create it now.
        client.resource(desired).create();
        log.info("created {}", what);
        return Optional.empty();
      }
      if (e.getCode() == 422 || e.getCode() == 409 || e.getCode() == 500) {
        log.warn(
            "{} exists and is not owned by {} uid {}: the guarded patch was refused (HTTP {})",
            what,
            ownerKind,
            ownerUid,
            e.getCode());
        return Optional.of(
            what
                + " exists and is not this "
                + ownerKind
                + "'s (its first owner reference is not uid "
                + ownerUid
                + "); the operator keeps the "
                + ("ModelArtifact".equals(ownerKind) ? "artifact's " : "set's ")
                + (desired instanceof Secret ? "peer secret and tokens" : "network isolation")
                + " under that name: delete or rename that "
                + desired.getKind());
      }
      throw e;
    }
  }

  /** {@code value} as fabric8 writes it (e.g. IntOrString ports as numbers). */
  private com.fasterxml.jackson.databind.JsonNode tree(Object value) {
    try {
      return json.readTree(Serialization.asJson(value));
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException("cannot write " + value + " as JSON", e);
    }
  }

  /**
   * Sends the JSON patch. Through {@code resource(desired)}: fabric8's {@code withName(...).patch}
   * reads the object first (a GET), which the operator may not do on Secrets.
   */
  private static void patch(KubernetesClient client, HasMetadata desired, String jsonPatch) {
    client.resource(desired).patch(PatchContext.of(PatchType.JSON), jsonPatch);
  }

  private static String digest(String s) {
    try {
      return HexFormat.of()
          .formatHex(
              MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
