package io.tensorcast.operator.validation;

import io.tensorcast.operator.config.OperatorConfig;
import java.util.Objects;

/**
 * The operator settings that decide which sources a ModelArtifact may name: the store root (no
 * {@code file://} source may reach into or above it) and the endpoint allowlist.
 *
 * @param storeRoot absolute host path of the page-locked store of all artifacts
 * @param allowedEndpoints endpoints sources may use
 */
public record SourcePolicy(String storeRoot, EndpointAllowlist allowedEndpoints) {

  /** The defaults: {@value OperatorConfig#DEFAULT_STORE_ROOT}, any endpoint. */
  public static final SourcePolicy DEFAULT =
      new SourcePolicy(OperatorConfig.DEFAULT_STORE_ROOT, EndpointAllowlist.ANY);

  public SourcePolicy {
    Objects.requireNonNull(storeRoot, "storeRoot");
    Objects.requireNonNull(allowedEndpoints, "allowedEndpoints");
  }

  /** The policy of {@code config}. */
  public static SourcePolicy of(OperatorConfig config) {
    return new SourcePolicy(config.storeRoot(), config.allowedEndpoints());
  }
}
