package io.tensorcast.api.v1alpha1;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceColumnDefinition;
import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinition;
import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinitionVersion;
import io.fabric8.kubernetes.api.model.apiextensions.v1.JSONSchemaProps;
import java.io.IOException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** What the generated TensorShardSet CRD tells the API server: names, columns, schema rules. */
class GeneratedShardSetCrdTest {

  static CustomResourceDefinition crd;
  static CustomResourceDefinitionVersion version;
  static JSONSchemaProps spec;

  @BeforeAll
  static void load() throws IOException {
    crd = CrdFiles.generatedCrd(CrdFiles.TSS_CRD_FILE);
    version = crd.getSpec().getVersions().get(0);
    spec = version.getSchema().getOpenAPIV3Schema().getProperties().get("spec");
  }

  @Test
  void namesShortNameAndCategorySharedWithModelArtifact() throws IOException {
    assertThat(crd.getMetadata().getName()).isEqualTo("tensorshardsets.tensorcast.io");
    assertThat(crd.getSpec().getScope()).isEqualTo("Namespaced");
    assertThat(crd.getSpec().getNames().getKind()).isEqualTo("TensorShardSet");
    assertThat(crd.getSpec().getNames().getShortNames()).containsExactly("tss");
    assertThat(crd.getSpec().getNames().getCategories()).containsExactly(TensorShardSet.CATEGORY);
    assertThat(version.getName()).isEqualTo("v1alpha1");
    assertThat(version.getSubresources().getStatus()).isNotNull();
  }

  @Test
  void printerColumnsShowRanksReadyAndSizePerRank() {
    assertThat(version.getAdditionalPrinterColumns())
        .extracting(
            CustomResourceColumnDefinition::getName,
            CustomResourceColumnDefinition::getJsonPath,
            CustomResourceColumnDefinition::getPriority)
        .containsExactlyInAnyOrder(
            tuple("PHASE", ".status.phase", 0),
            tuple("PARALLELISM", ".status.parallelism", 0),
            tuple("RANKS READY", ".status.ranksReady", 0),
            tuple("SIZE PER RANK", ".status.sizePerRank", 0),
            tuple("AMPLIFICATION", ".status.fetchAmplification", 1),
            tuple("ARTIFACT", ".spec.artifactRef.name", 1),
            tuple("AGE", ".metadata.creationTimestamp", 0));
  }

  @Test
  void axisSizesAreBoundedAndDefaultToOne() {
    JSONSchemaProps p = spec.getProperties().get("parallelism");
    assertThat(spec.getRequired()).contains("parallelism");
    for (String axis : new String[] {"tp", "pp", "dp", "ep"}) {
      JSONSchemaProps a = p.getProperties().get(axis);
      assertThat(a.getMinimum()).as(axis).isEqualTo(1.0);
      assertThat(a.getMaximum()).as(axis).isEqualTo(4096.0);
      assertThat(a.getDefault().asInt()).as(axis).isEqualTo(1);
    }
    JSONSchemaProps rule = spec.getProperties().get("rules").getItems().getSchema();
    assertThat(rule.getRequired()).containsExactly("pattern");
    assertThat(rule.getProperties().get("splitDim").getMinimum()).isEqualTo(0.0);
    assertThat(
            spec.getProperties()
                .get("placement")
                .getProperties()
                .get("ranksPerNode")
                .getDefault()
                .asInt())
        .isEqualTo(8);
  }

  @Test
  void worldSizeAndDescriptionFollowCanonicalOrder() {
    ParallelismSpec p = new ParallelismSpec(4, 1, 2, 2);
    assertThat(p.worldSize()).isEqualTo(16);
    assertThat(p.describe()).isEqualTo("dp:2,ep:2,tp:4");
    assertThat(new ParallelismSpec().describe()).isEqualTo("tp:1");
  }
}
