package io.tensorcast.api.v1alpha1;

import io.fabric8.crd.generator.annotation.AdditionalPrinterColumn;
import io.fabric8.kubernetes.api.model.Namespaced;
import io.fabric8.kubernetes.client.CustomResource;
import io.fabric8.kubernetes.model.annotation.Group;
import io.fabric8.kubernetes.model.annotation.Plural;
import io.fabric8.kubernetes.model.annotation.ShortNames;
import io.fabric8.kubernetes.model.annotation.Version;

/**
 * One ML artifact (model weights, KV-cache snapshot, RL checkpoint) held in full, in page-locked
 * host memory, on a set of nodes. Namespaced; {@code kubectl get ma}. The CRD is generated from
 * this class into {@code crds/generated/modelartifacts.tensorcast.io-v1.yml} (see ARCHITECTURE.md,
 * "Custom resources").
 */
@Group(ModelArtifact.GROUP)
@Version(ModelArtifact.VERSION)
@ShortNames("ma")
@Plural(ModelArtifact.PLURAL)
@AdditionalPrinterColumn(
    name = "SOURCE",
    jsonPath = ".spec.source.uri",
    type = AdditionalPrinterColumn.Type.STRING,
    priority = 1)
@AdditionalPrinterColumn(
    name = "AGE",
    jsonPath = ".metadata.creationTimestamp",
    type = AdditionalPrinterColumn.Type.DATE)
public class ModelArtifact extends CustomResource<ModelArtifactSpec, ModelArtifactStatus>
    implements Namespaced {

  /** API group, {@code tensorcast.io}. */
  public static final String GROUP = "tensorcast.io";

  /** API version within {@link #GROUP}. */
  public static final String VERSION = "v1alpha1";

  /** Plural resource name, as in {@code /apis/tensorcast.io/v1alpha1/.../modelartifacts}. */
  public static final String PLURAL = "modelartifacts";

  /** Name of the CRD object, {@code modelartifacts.tensorcast.io}. */
  public static final String CRD_NAME = PLURAL + "." + GROUP;

  @Override
  protected ModelArtifactSpec initSpec() {
    return new ModelArtifactSpec();
  }

  @Override
  protected ModelArtifactStatus initStatus() {
    return null;
  }
}
