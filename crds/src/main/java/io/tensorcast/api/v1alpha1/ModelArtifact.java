package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonClassDescription;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.crd.generator.annotation.AdditionalPrinterColumn;
import io.fabric8.generator.annotation.ValidationRule;
import io.fabric8.kubernetes.api.model.Namespaced;
import io.fabric8.kubernetes.client.CustomResource;
import io.fabric8.kubernetes.model.annotation.Categories;
import io.fabric8.kubernetes.model.annotation.Group;
import io.fabric8.kubernetes.model.annotation.Plural;
import io.fabric8.kubernetes.model.annotation.ShortNames;
import io.fabric8.kubernetes.model.annotation.Version;
import io.tensorcast.api.PrinterColumnOrder;

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
@Categories(ModelArtifact.CATEGORY)
@JsonClassDescription(
    "One ML artifact (model weights, KV-cache snapshot, RL checkpoint) held in full, in"
        + " page-locked host memory, on a set of nodes. The operator picks the nodes, runs one"
        + " data-plane pod per node that loads the artifact from its source (and from the other"
        + " pods, peer to peer), and reports progress in status; Ready=True means every byte is"
        + " present and verified on every chosen node.")
@AdditionalPrinterColumn(
    name = "SOURCE",
    jsonPath = ".spec.source.uri",
    type = AdditionalPrinterColumn.Type.STRING,
    priority = 1)
@AdditionalPrinterColumn(
    name = "AGE",
    jsonPath = ".metadata.creationTimestamp",
    type = AdditionalPrinterColumn.Type.DATE)
@PrinterColumnOrder({
  "READY",
  "PHASE",
  "PROGRESS",
  "SIZE",
  "SOURCE",
  "FROM-SOURCE",
  "CONSUMERS",
  "AGE"
})
@ValidationRule(
    value = "size(self.metadata.name) <= 63",
    message =
        "metadata.name must be at most 63 characters: it is the value of the label"
            + " tensorcast.io/artifact on the data-plane pods")
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

  /** The category of every Tensorcast resource: {@code kubectl get tensorcast}. */
  public static final String CATEGORY = "tensorcast";

  @Override
  @JsonPropertyDescription(
      "The desired state: what to load (source, kind, format), onto which nodes (placement),"
          + " held how (memory) and distributed how (distribution). Written by users or GitOps;"
          + " the operator never writes it.")
  public ModelArtifactSpec getSpec() {
    return super.getSpec();
  }

  @Override
  @JsonPropertyDescription(
      "The observed state, written by the operator only: phase, conditions (Ready among them),"
          + " the resolved revision and size, and one entry per node with its bytes loaded.")
  public ModelArtifactStatus getStatus() {
    return super.getStatus();
  }

  @Override
  protected ModelArtifactSpec initSpec() {
    return new ModelArtifactSpec();
  }

  @Override
  protected ModelArtifactStatus initStatus() {
    return null;
  }
}
