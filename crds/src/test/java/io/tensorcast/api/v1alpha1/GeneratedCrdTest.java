package io.tensorcast.api.v1alpha1;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.TextNode;
import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceColumnDefinition;
import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinition;
import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinitionVersion;
import io.fabric8.kubernetes.api.model.apiextensions.v1.JSONSchemaProps;
import io.fabric8.kubernetes.client.utils.Serialization;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** What the generated CRD tells the API server: names, scope, subresources, columns, schema. */
class GeneratedCrdTest {

  static CustomResourceDefinition crd;
  static CustomResourceDefinitionVersion version;
  static JSONSchemaProps spec;
  static JSONSchemaProps status;

  @BeforeAll
  static void load() throws IOException {
    crd = CrdFiles.generatedCrd();
    version = crd.getSpec().getVersions().get(0);
    JSONSchemaProps root = version.getSchema().getOpenAPIV3Schema();
    spec = root.getProperties().get("spec");
    status = root.getProperties().get("status");
  }

  @Test
  void namesScopeAndVersion() {
    assertThat(crd.getApiVersion()).isEqualTo("apiextensions.k8s.io/v1");
    assertThat(crd.getMetadata().getName()).isEqualTo("modelartifacts.tensorcast.io");
    assertThat(crd.getSpec().getGroup()).isEqualTo("tensorcast.io");
    assertThat(crd.getSpec().getScope()).isEqualTo("Namespaced");
    assertThat(crd.getSpec().getNames().getKind()).isEqualTo("ModelArtifact");
    assertThat(crd.getSpec().getNames().getPlural()).isEqualTo("modelartifacts");
    assertThat(crd.getSpec().getNames().getSingular()).isEqualTo("modelartifact");
    assertThat(crd.getSpec().getNames().getShortNames()).containsExactly("ma");
    assertThat(crd.getSpec().getVersions()).hasSize(1);
    assertThat(version.getName()).isEqualTo("v1alpha1");
    assertThat(version.getServed()).isTrue();
    assertThat(version.getStorage()).isTrue();
  }

  @Test
  void statusSubresourceIsEnabled() {
    assertThat(version.getSubresources()).isNotNull();
    assertThat(version.getSubresources().getStatus()).isNotNull();
    assertThat(version.getSubresources().getScale()).isNull();
  }

  @Test
  void printerColumns() {
    // fabric8 7.5.2 orders columns by jsonPath (AGE, SOURCE, then the status columns), whatever
    // the order of the annotations; the set is what we control.
    assertThat(version.getAdditionalPrinterColumns())
        .extracting(
            CustomResourceColumnDefinition::getName,
            CustomResourceColumnDefinition::getJsonPath,
            CustomResourceColumnDefinition::getType,
            CustomResourceColumnDefinition::getPriority)
        .containsExactlyInAnyOrder(
            tuple("PHASE", ".status.phase", "string", 0),
            tuple("READY", ".status.ready", "string", 0),
            tuple("SIZE", ".status.size", "string", 0),
            tuple("PROGRESS", ".status.progress", "string", 0),
            tuple("SOURCE", ".spec.source.uri", "string", 1),
            tuple("FROM-SOURCE", ".status.bytesFromSource", "integer", 1),
            tuple("CONSUMERS", ".status.consumers", "integer", 1),
            tuple("AGE", ".metadata.creationTimestamp", "date", 0));
  }

  @Test
  void onlyOpenApiV3KeywordsThatKubernetes120Knows() throws IOException {
    String yaml = Files.readString(CrdFiles.generated());
    assertThat(yaml).doesNotContain("x-kubernetes-validations").doesNotContain("rule:");
  }

  @Test
  void sourceUriCarriesThePatternAndWritersTheirSelector() {
    assertThat(spec.getRequired()).containsExactly("source");
    JSONSchemaProps source = spec.getProperties().get("source");
    // Exactly one of uri and writers: the operator checks it (no CEL on Kubernetes 1.20).
    assertThat(source.getRequired()).isNullOrEmpty();
    assertThat(source.getProperties().get("writers").getRequired()).containsExactly("podSelector");
    assertThat(spec.getProperties().get("save").getProperties().get("uri").getPattern())
        .isEqualTo(SourceSpec.URI_PATTERN);
    assertThat(source.getProperties().get("uri").getPattern()).isEqualTo(SourceSpec.URI_PATTERN);
    assertThat(source.getProperties().get("endpoint").getPattern())
        .isEqualTo(SourceSpec.ENDPOINT_PATTERN);
    JSONSchemaProps secretRef = source.getProperties().get("credentialsSecretRef");
    assertThat(secretRef.getRequired()).containsExactly("name");
    assertThat(secretRef.getProperties())
        .containsOnlyKeys(
            "name", "accessKeyIdKey", "secretAccessKeyKey", "sessionTokenKey", "tokenKey");
  }

  @Test
  void enumsAndDefaults() {
    assertEnum(spec.getProperties().get("kind"), "ModelWeights", "KVCache", "RLCheckpoint");
    assertThat(spec.getProperties().get("kind").getDefault().asText()).isEqualTo("ModelWeights");
    assertEnum(spec.getProperties().get("format"), "Auto", "Safetensors", "Torch");
    assertThat(spec.getProperties().get("format").getDefault().asText()).isEqualTo("Auto");

    Map<String, JSONSchemaProps> placement = spec.getProperties().get("placement").getProperties();
    assertEnum(placement.get("rdma"), "Required", "Preferred", "Disabled");
    assertThat(placement.get("rdma").getDefault().asText()).isEqualTo("Required");
    assertThat(placement.get("replicas").getDefault().asInt()).isEqualTo(1);
    assertThat(placement.get("replicas").getMinimum()).isEqualTo(1.0);
    assertThat(placement.get("tolerations").getItems().getSchema().getProperties())
        .containsKeys("key", "operator", "value", "effect", "tolerationSeconds");

    Map<String, JSONSchemaProps> memory = spec.getProperties().get("memory").getProperties();
    assertThat(memory.get("pinned").getDefault().asBoolean()).isTrue();
    assertThat(memory.get("limit").getXKubernetesIntOrString()).isTrue();

    Map<String, JSONSchemaProps> distribution =
        spec.getProperties().get("distribution").getProperties();
    assertEnum(distribution.get("mode"), "PeerToPeer", "SourceOnly");
    assertThat(distribution.get("mode").getDefault().asText()).isEqualTo("PeerToPeer");
    assertThat(distribution.get("pieceSize").getXKubernetesIntOrString()).isTrue();
    assertThat(distribution.get("sourceConnections").getMinimum()).isEqualTo(1.0);

    assertEnum(status.getProperties().get("phase"), phases());
    JSONSchemaProps node = status.getProperties().get("nodes").getItems().getSchema();
    assertEnum(node.getProperties().get("phase"), phases());
  }

  /** Nested objects default to objects so that their own field defaults apply (K8s rule). */
  @Test
  void nestedObjectsHaveObjectDefaults() {
    for (String name : List.of("placement", "memory", "distribution")) {
      assertThat(spec.getProperties().get(name).getDefault()).as(name).isNotNull();
      assertThat(spec.getProperties().get(name).getDefault().isObject()).as(name).isTrue();
    }
  }

  /** Every default in the schema equals the value a spec built in Java starts with. */
  @Test
  void schemaDefaultsEqualJavaInitialValues() {
    JsonNode javaDefaults =
        Serialization.unmarshal(Serialization.asJson(new ModelArtifactSpec()), JsonNode.class);
    List<String> defaults = new ArrayList<>();
    collectDefaults(spec, "", javaDefaults, defaults);
    assertThat(defaults)
        .containsExactlyInAnyOrder(
            "/kind",
            "/format",
            "/placement",
            "/placement/replicas",
            "/placement/rdma",
            "/memory",
            "/memory/pinned",
            "/distribution",
            "/distribution/mode");
  }

  @Test
  void everyOwnFieldHasADescription() {
    List<String> missing = new ArrayList<>();
    collectMissingDescriptions(spec, "spec", missing);
    collectMissingDescriptions(status, "status", missing);
    assertThat(missing).isEmpty();
  }

  private static void collectDefaults(
      JSONSchemaProps schema, String pointer, JsonNode javaDefaults, List<String> found) {
    if (schema.getProperties() == null) {
      return;
    }
    schema
        .getProperties()
        .forEach(
            (name, child) -> {
              String at = pointer + "/" + name;
              if (child.getDefault() != null) {
                found.add(at);
                assertThat(javaDefaults.at(at))
                    .as("Java initial value at " + at)
                    .isEqualTo(child.getDefault());
              }
              collectDefaults(child, at, javaDefaults, found);
            });
  }

  /** Our own types describe every field; fabric8's (Toleration, Condition) are not ours. */
  private static void collectMissingDescriptions(
      JSONSchemaProps schema, String path, List<String> missing) {
    if (path.endsWith(".tolerations[]") || path.endsWith(".conditions[]")) {
      return;
    }
    if (schema.getProperties() != null) {
      schema
          .getProperties()
          .forEach(
              (name, child) -> {
                if (child.getDescription() == null || child.getDescription().isBlank()) {
                  missing.add(path + "." + name);
                }
                collectMissingDescriptions(child, path + "." + name, missing);
              });
    }
    if (schema.getItems() != null && schema.getItems().getSchema() != null) {
      collectMissingDescriptions(schema.getItems().getSchema(), path + "[]", missing);
    }
  }

  private static String[] phases() {
    return new String[] {"Pending", "Resolving", "Loading", "Ready", "Failed"};
  }

  private static void assertEnum(JSONSchemaProps schema, String... values) {
    assertThat(schema.getType()).isEqualTo("string");
    assertThat(schema.getEnum())
        .containsExactlyInAnyOrderElementsOf(
            java.util.Arrays.stream(values).map(v -> (JsonNode) TextNode.valueOf(v)).toList());
  }
}
