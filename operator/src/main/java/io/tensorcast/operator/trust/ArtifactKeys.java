package io.tensorcast.operator.trust;

import io.fabric8.kubernetes.api.model.HasMetadata;
import io.tensorcast.api.TensorcastConstants;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The four values of a ModelArtifact's Secret, derived from the operator's {@link MasterKey} so
 * that the operator never reads them back:
 *
 * <ul>
 *   <li>{@code peer-secret} = base64(HMAC(master, "tensorcast/v1 peer-secret\n" + uid + "\n" +
 *       generation)): 32 bytes as 44 characters of base64, where generation is the artifact's copy
 *       generation (a ModelArtifact's {@code CopyGeneration}, a TensorShardSet's metadata
 *       generation). New with every generation that changes the copy's content, so a pod of an
 *       earlier generation, once gone, learns no later secret; a change of replicas alone keeps it,
 *       so new pods join the swarm of the copies that stay.
 *   <li>{@code read-token} = base64url(HMAC(master, "tensorcast/v1 read-token\n" + uid)), 43
 *       characters; {@code admin-token} and {@code write-token} (the put API of a written artifact,
 *       for its writer pods) likewise with "admin-token" and "write-token". Fixed for the life of
 *       the ModelArtifact (its uid), so consumers and the operator never hold a token that a pod
 *       whose Secret volume has not been refreshed yet would refuse.
 * </ul>
 *
 * HMAC-SHA256 is a pseudo-random function: without the master key the values cannot be told from
 * random ones, and one artifact's values say nothing about another's. The uid (not the name) makes
 * a ModelArtifact deleted and created again under the same name get new values.
 *
 * @param peerSecret value of {@value TensorcastConstants#SECRET_PEER_SECRET}
 * @param readToken value of {@value TensorcastConstants#SECRET_READ_TOKEN}
 * @param adminToken value of {@value TensorcastConstants#SECRET_ADMIN_TOKEN}
 * @param writeToken value of {@value TensorcastConstants#SECRET_WRITE_TOKEN}
 * @param keyId {@link MasterKey#id()} of the key they came from
 */
public record ArtifactKeys(
    String peerSecret, String readToken, String adminToken, String writeToken, String keyId) {

  public ArtifactKeys {
    Objects.requireNonNull(peerSecret, "peerSecret");
    Objects.requireNonNull(readToken, "readToken");
    Objects.requireNonNull(adminToken, "adminToken");
    Objects.requireNonNull(writeToken, "writeToken");
    Objects.requireNonNull(keyId, "keyId");
  }

  /**
   * The values for {@code artifact}: a ModelArtifact, or a TensorShardSet (whose uid differs from
   * every ModelArtifact's, so its values are its own).
   *
   * @throws IllegalArgumentException when the artifact has no uid (it was not read from the API
   *     server)
   */
  public static ArtifactKeys derive(MasterKey key, HasMetadata artifact, long generation) {
    String uid = artifact.getMetadata().getUid();
    if (uid == null || uid.isEmpty()) {
      throw new IllegalArgumentException(
          artifact.getKind()
              + " "
              + artifact.getMetadata().getNamespace()
              + "/"
              + artifact.getMetadata().getName()
              + " has no uid");
    }
    return new ArtifactKeys(
        Base64.getEncoder()
            .encodeToString(key.hmac("tensorcast/v1 peer-secret\n" + uid + "\n" + generation)),
        token(key, "read-token", uid),
        token(key, "admin-token", uid),
        token(key, "write-token", uid),
        key.id());
  }

  private static String token(MasterKey key, String purpose, String uid) {
    return Base64.getUrlEncoder()
        .withoutPadding()
        .encodeToString(key.hmac("tensorcast/v1 " + purpose + "\n" + uid));
  }

  /** The Secret's data: key name → value (UTF-8 text), in a fixed order. */
  public Map<String, String> asData() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put(TensorcastConstants.SECRET_PEER_SECRET, peerSecret);
    m.put(TensorcastConstants.SECRET_READ_TOKEN, readToken);
    m.put(TensorcastConstants.SECRET_ADMIN_TOKEN, adminToken);
    m.put(TensorcastConstants.SECRET_WRITE_TOKEN, writeToken);
    return m;
  }

  @Override
  public String toString() {
    return "ArtifactKeys[keyId=" + keyId + ", values hidden]";
  }
}
