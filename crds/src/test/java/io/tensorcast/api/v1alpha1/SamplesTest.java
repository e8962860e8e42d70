package io.tensorcast.api.v1alpha1;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import io.fabric8.kubernetes.api.model.apiextensions.v1.JSONSchemaProps;
import io.fabric8.kubernetes.client.utils.Serialization;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every {@code samples/*.yaml} reads into the Java model with no unknown field, and passes the
 * generated CRD's schema (unknown fields, enums, patterns, minimums) as the API server would check
 * it.
 */
class SamplesTest {

  /** fabric8's mapper, made to refuse fields our model does not have. */
  @SuppressWarnings("deprecation") // the only public handle on fabric8's configured mapper
  static final ObjectMapper STRICT =
      Serialization.jsonMapper().copy().enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

  static JSONSchemaProps schema;
  static JSONSchemaProps shardSetSchema;

  @BeforeAll
  static void loadSchema() throws IOException {
    schema =
        CrdFiles.generatedCrd().getSpec().getVersions().get(0).getSchema().getOpenAPIV3Schema();
    shardSetSchema =
        CrdFiles.generatedCrd(CrdFiles.TSS_CRD_FILE)
            .getSpec()
            .getVersions()
            .get(0)
            .getSchema()
            .getOpenAPIV3Schema();
  }

  static Stream<Path> samples() throws IOException {
    Path dir = CrdFiles.samples();
    assertThat(dir).as("samples folder").isDirectory();
    List<Path> files;
    try (Stream<Path> list = Files.list(dir)) {
      files = list.filter(p -> p.toString().endsWith(".yaml")).sorted().toList();
    }
    assertThat(files).as("samples/*.yaml in " + dir.toAbsolutePath()).isNotEmpty();
    return files.stream();
  }

  @ParameterizedTest
  @MethodSource("samples")
  void sampleFitsModelAndSchema(Path file) throws IOException {
    JsonNode tree = Serialization.unmarshal(Files.readString(file), JsonNode.class);
    assertThat(tree.at("/apiVersion").asText())
        .as(file.toString())
        .isEqualTo("tensorcast.io/v1alpha1");
    String kind = tree.at("/kind").asText();
    assertThat(kind).as(file.toString()).isIn("ModelArtifact", "TensorShardSet");
    if (kind.equals("TensorShardSet")) {
      TensorShardSet tss = STRICT.treeToValue(tree, TensorShardSet.class);
      assertThat(tss.getMetadata().getName()).as(file + ": metadata.name").isNotBlank();
      assertThat(
              SchemaCheck.violations(
                  tree.get("spec"), shardSetSchema.getProperties().get("spec"), "spec"))
          .as(file.toString())
          .isEmpty();
      return;
    }

    ModelArtifact ma = STRICT.treeToValue(tree, ModelArtifact.class);
    assertThat(ma.getMetadata().getName()).as(file + ": metadata.name").isNotBlank();
    assertThat(ma.getMetadata().getAdditionalProperties()).as(file + ": metadata").isEmpty();
    ma.getSpec()
        .getPlacement()
        .getTolerations()
        .forEach(t -> assertThat(t.getAdditionalProperties()).as(file + ": toleration").isEmpty());

    assertThat(SchemaCheck.violations(tree.get("spec"), schema.getProperties().get("spec"), "spec"))
        .as(file.toString())
        .isEmpty();
  }

  @Test
  void s3SampleSaysWhatTheBriefPromises() throws IOException {
    ModelArtifact ma =
        Serialization.unmarshal(
            Files.newInputStream(CrdFiles.samples().resolve("modelartifact-s3.yaml")),
            ModelArtifact.class);
    assertThat(ma.getSpec().getSource().getUri()).startsWith("s3://");
    assertThat(ma.getSpec().getSource().getEndpoint()).isNotBlank();
    assertThat(ma.getSpec().getPlacement().getReplicas()).isEqualTo(2);
    assertThat(ma.getSpec().getPlacement().getRdma()).isEqualTo(RdmaPolicy.Required);
  }

  /** The checks above can fail: a misspelt field and a bad value are caught. */
  @Test
  void unknownFieldsAndBadValuesAreCaught() throws IOException {
    String yaml =
        """
        apiVersion: tensorcast.io/v1alpha1
        kind: ModelArtifact
        metadata:
          name: bad
        spec:
          source:
            uri: ftp://models/x
          placement:
            replica: 2
            replicas: 0
            rdma: Maybe
        """;
    JsonNode tree = Serialization.unmarshal(yaml, JsonNode.class);

    assertThatThrownBy(() -> STRICT.treeToValue(tree, ModelArtifact.class))
        .isInstanceOf(UnrecognizedPropertyException.class)
        .hasMessageContaining("\"replica\"");
    assertThat(SchemaCheck.violations(tree.get("spec"), schema.getProperties().get("spec"), "spec"))
        .containsExactlyInAnyOrder(
            "spec.source.uri: 'ftp://models/x' does not match " + SourceSpec.URI_SCHEME_PATTERN,
            "spec.placement.replica: unknown field (the API server would drop it)",
            "spec.placement.replicas: 0 is below the minimum 1.0",
            "spec.placement.rdma: 'Maybe' is not one of [\"Disabled\", \"Preferred\", \"Required\"]");
  }
}
