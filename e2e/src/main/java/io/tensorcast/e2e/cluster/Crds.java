package io.tensorcast.e2e.cluster;

import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinition;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.concurrent.TimeUnit;

/** Installs Tensorcast's CRDs on a cluster the way the demo, benchmarks and tests need them. */
public final class Crds {
  /** Where the crds jar carries the generated ModelArtifact CRD (with CEL rules). */
  public static final String MODEL_ARTIFACT_RESOURCE =
      "META-INF/fabric8/" + ModelArtifact.CRD_NAME + "-v1.yml";

  /** The same CRD without CEL rules, for API servers before 1.25. */
  public static final String MODEL_ARTIFACT_RESOURCE_WITHOUT_CEL =
      "META-INF/fabric8/"
          + ModelArtifact.CRD_NAME
          + "-v1"
          + TensorcastConstants.CRD_WITHOUT_CEL_SUFFIX
          + ".yml";

  private Crds() {}

  /**
   * Server-side applies the generated ModelArtifact CRD and waits (at most 30 s) until it is {@code
   * Established}. Conditions may be absent for a moment after an apply; that is waited out. An API
   * server before 1.25 gets the variant without CEL rules: it refuses {@code
   * x-kubernetes-validations} in a server-side apply.
   *
   * @throws IllegalStateException if the CRD YAML is not on the classpath
   */
  public static CustomResourceDefinition applyModelArtifact(KubernetesClient client) {
    return apply(client, resourceFor(client));
  }

  /** Where the crds jar carries the generated TensorShardSet CRD (with CEL rules). */
  public static final String TENSOR_SHARD_SET_RESOURCE =
      "META-INF/fabric8/" + io.tensorcast.api.v1alpha1.TensorShardSet.CRD_NAME + "-v1.yml";

  /** The TensorShardSet CRD without CEL rules, for API servers before 1.25. */
  public static final String TENSOR_SHARD_SET_RESOURCE_WITHOUT_CEL =
      "META-INF/fabric8/"
          + io.tensorcast.api.v1alpha1.TensorShardSet.CRD_NAME
          + "-v1"
          + TensorcastConstants.CRD_WITHOUT_CEL_SUFFIX
          + ".yml";

  /** As {@link #applyModelArtifact}, for the TensorShardSet CRD. */
  public static CustomResourceDefinition applyTensorShardSet(KubernetesClient client) {
    return apply(
        client,
        celSupported(client) ? TENSOR_SHARD_SET_RESOURCE : TENSOR_SHARD_SET_RESOURCE_WITHOUT_CEL);
  }

  private static CustomResourceDefinition apply(KubernetesClient client, String resource) {
    try (InputStream in = ModelArtifact.class.getClassLoader().getResourceAsStream(resource)) {
      if (in == null) {
        throw new IllegalStateException(resource + " is not on the classpath (crds jar)");
      }
      CustomResourceDefinition crd =
          client.apiextensions().v1().customResourceDefinitions().load(in).item();
      client.resource(crd).serverSideApply();
      return client
          .apiextensions()
          .v1()
          .customResourceDefinitions()
          .withName(crd.getMetadata().getName())
          .waitUntilCondition(Crds::established, 30, TimeUnit.SECONDS);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The CRD file for {@code client}'s API server: with CEL rules from 1.25 on. */
  public static String resourceFor(KubernetesClient client) {
    return celSupported(client) ? MODEL_ARTIFACT_RESOURCE : MODEL_ARTIFACT_RESOURCE_WITHOUT_CEL;
  }

  /** Whether {@code client}'s API server takes CEL rules (1.25 on). */
  private static boolean celSupported(KubernetesClient client) {
    String minor = client.getKubernetesVersion().getMinor().replaceAll("[^0-9]", "");
    return Integer.parseInt(minor) >= TensorcastConstants.CEL_MINOR_VERSION;
  }

  /** Whether the CRD reports {@code Established=True}. */
  public static boolean established(CustomResourceDefinition c) {
    return c != null
        && c.getStatus() != null
        && c.getStatus().getConditions() != null
        && c.getStatus().getConditions().stream()
            .anyMatch(k -> "Established".equals(k.getType()) && "True".equals(k.getStatus()));
  }
}
