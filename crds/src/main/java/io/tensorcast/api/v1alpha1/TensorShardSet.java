package io.tensorcast.api.v1alpha1;

import io.fabric8.crd.generator.annotation.AdditionalPrinterColumn;
import io.fabric8.kubernetes.api.model.Namespaced;
import io.fabric8.kubernetes.client.CustomResource;
import io.fabric8.kubernetes.model.annotation.Categories;
import io.fabric8.kubernetes.model.annotation.Group;
import io.fabric8.kubernetes.model.annotation.Plural;
import io.fabric8.kubernetes.model.annotation.ShortNames;
import io.fabric8.kubernetes.model.annotation.Version;

/**
 * A parallel layout of an artifact, materialised rank by rank on the nodes where the ranks run, so
 * that a node holds only the bytes its ranks need: each node's store gets the TP shard layout of
 * the unified artifact IO RFC ({@code manifest.json} + {@code rank_NNNNN.safetensors}) for its
 * ranks only, each rank file cut from the source by ranged reads. Namespaced; {@code kubectl get
 * tss}. The CRD is generated from this class into {@code
 * crds/generated/tensorshardsets.tensorcast.io-v1.yml}.
 */
@Group(TensorShardSet.GROUP)
@Version(TensorShardSet.VERSION)
@ShortNames("tss")
@Plural(TensorShardSet.PLURAL)
@Categories(TensorShardSet.CATEGORY)
@AdditionalPrinterColumn(
    name = "ARTIFACT",
    jsonPath = ".spec.artifactRef.name",
    type = AdditionalPrinterColumn.Type.STRING,
    priority = 1)
@AdditionalPrinterColumn(
    name = "AGE",
    jsonPath = ".metadata.creationTimestamp",
    type = AdditionalPrinterColumn.Type.DATE)
public class TensorShardSet extends CustomResource<TensorShardSetSpec, TensorShardSetStatus>
    implements Namespaced {

  /** API group, {@code tensorcast.io}. */
  public static final String GROUP = ModelArtifact.GROUP;

  /** API version within {@link #GROUP}. */
  public static final String VERSION = ModelArtifact.VERSION;

  /** Plural resource name, as in {@code /apis/tensorcast.io/v1alpha1/.../tensorshardsets}. */
  public static final String PLURAL = "tensorshardsets";

  /** Name of the CRD object, {@code tensorshardsets.tensorcast.io}. */
  public static final String CRD_NAME = PLURAL + "." + GROUP;

  /** The category shared by every Tensorcast resource: {@code kubectl get tensorcast}. */
  public static final String CATEGORY = "tensorcast";

  @Override
  protected TensorShardSetSpec initSpec() {
    return new TensorShardSetSpec();
  }

  @Override
  protected TensorShardSetStatus initStatus() {
    return null;
  }
}
