package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.client.utils.Serialization;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;

/**
 * The generation a ModelArtifact's copies belong to: the last {@code metadata.generation} whose
 * spec differed from the one before in anything but {@code spec.placement.replicas}. Data-plane
 * pods (their name and {@link DataPlanePod#LABEL_GENERATION}), the data plane's artifact id, the
 * peer secret and the ready node labels are keyed by it, so that changing only the number of
 * replicas (by hand, {@code kubectl scale} or an autoscaler) keeps every copy: up adds pods on new
 * nodes, down removes the surplus. Pure.
 *
 * <p>How it is known: the status records the copy generation and the {@linkplain #specDigest
 * digest} of the spec without replicas ({@code status.copyGeneration}, {@code status.specDigest}).
 * A generation whose digest equals the recorded one keeps the recorded copy generation; any other
 * (or no record, e.g. a status written by an older operator) starts a new one at {@code
 * metadata.generation}.
 *
 * @param generation the copy generation, ≥ 1
 * @param specDigest digest of the spec without replicas
 */
public record CopyGeneration(long generation, String specDigest) {

  /** The copy generation of {@code artifact} as it is now (spec and recorded status). */
  public static CopyGeneration of(ModelArtifact artifact) {
    long current = metadataGeneration(artifact);
    String digest = specDigest(artifact.getSpec());
    ModelArtifactStatus status = artifact.getStatus();
    if (status != null
        && status.getCopyGeneration() != null
        && digest.equals(status.getSpecDigest())
        && status.getCopyGeneration() >= 1
        && status.getCopyGeneration() <= current) {
      return new CopyGeneration(status.getCopyGeneration(), digest);
    }
    return new CopyGeneration(current, digest);
  }

  /** {@code metadata.generation}, 1 when the server gave none. */
  public static long metadataGeneration(ModelArtifact artifact) {
    Long g = artifact.getMetadata().getGeneration();
    return g == null ? 1 : g;
  }

  /**
   * The copy generation a previous status recorded: {@code status.copyGeneration}, or for a status
   * without it its {@code observedGeneration}; empty when neither is there.
   */
  public static java.util.OptionalLong recorded(ModelArtifactStatus status) {
    if (status == null) {
      return java.util.OptionalLong.empty();
    }
    if (status.getCopyGeneration() != null) {
      return java.util.OptionalLong.of(status.getCopyGeneration());
    }
    return status.getObservedGeneration() == null
        ? java.util.OptionalLong.empty()
        : java.util.OptionalLong.of(status.getObservedGeneration());
  }

  /**
   * First 16 hex of the SHA-256 of the spec's JSON with {@code placement.replicas} left out. The
   * spec comes from the API server with its defaults applied, so equal specs give equal JSON.
   */
  public static String specDigest(ModelArtifactSpec spec) {
    if (spec == null) {
      return DataPlanePod.sha256("null").substring(0, 16);
    }
    ModelArtifactSpec copy = Serialization.clone(spec);
    if (copy.getPlacement() != null) {
      copy.getPlacement().setReplicas(null);
    }
    return DataPlanePod.sha256(Serialization.asJson(copy)).substring(0, 16);
  }
}
