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
    assertThat(crd.getSpec().getNames().getCategories()).containsExactly("tensorcast");
    assertThat(crd.getSpec().getVersions()).hasSize(1);
    assertThat(version.getName()).isEqualTo("v1alpha1");
    assertThat(version.getServed()).isTrue();
    assertThat(version.getStorage()).isTrue();
  }

  @Test
  void statusSubresourceIsEnabled() {
    assertThat(version.getSubresources()).isNotNull();
    assertThat(version.getSubresources().getStatus()).isNotNull();
  }

  /** kubectl scale and autoscalers change spec.placement.replicas through /scale. */
  @Test
  void scaleSubresourceMapsPlacementReplicas() {
    var scale = version.getSubresources().getScale();
    assertThat(scale).isNotNull();
    assertThat(scale.getSpecReplicasPath()).isEqualTo(".spec.placement.replicas");
    assertThat(scale.getStatusReplicasPath()).isEqualTo(".status.replicas");
    assertThat(scale.getLabelSelectorPath()).isEqualTo(".status.selector");
  }

  /** kubectl shows columns in this order: READY next to NAME, AGE last (API conventions). */
  @Test
  void printerColumnsInOrderReadyFirstAgeLast() {
    assertThat(version.getAdditionalPrinterColumns())
        .extracting(
            CustomResourceColumnDefinition::getName,
            CustomResourceColumnDefinition::getJsonPath,
            CustomResourceColumnDefinition::getType,
            CustomResourceColumnDefinition::getPriority)
        .containsExactly(
            tuple("READY", ".status.ready", "string", 0),
            tuple("PHASE", ".status.phase", "string", 0),
            tuple("PROGRESS", ".status.progress", "string", 0),
            tuple("SIZE", ".status.size", "string", 0),
            tuple("SOURCE", ".spec.source.uri", "string", 1),
            tuple("FROM-SOURCE", ".status.bytesFromSource", "integer", 1),
            tuple("CONSUMERS", ".status.consumers", "integer", 1),
            tuple("AGE", ".metadata.creationTimestamp", "date", 0));
  }

  /**
   * The CEL rules are in the main file; the variant for Kubernetes before 1.25 is the same CRD
   * without them (those API servers refuse the field in server-side apply).
   */
  @Test
  void celRulesOnlyInTheMainFileOtherwiseTheSameCrd() throws IOException {
    String withCel = Files.readString(CrdFiles.generated());
    String without = Files.readString(CrdFiles.generated(CrdFiles.CRD_FILE_BELOW_CEL));
    assertThat(withCel).contains("x-kubernetes-validations");
    assertThat(without).doesNotContain("x-kubernetes-validations").doesNotContain("rule:");
    CustomResourceDefinition stripped =
        Serialization.unmarshal(withCel, CustomResourceDefinition.class);
    stripped
        .getSpec()
        .getVersions()
        .forEach(
            v ->
                io.tensorcast.api.crdgen.CrdGeneration.stripCel(
                    v.getSchema().getOpenAPIV3Schema()));
    assertThat(Serialization.asJson(stripped))
        .isEqualTo(
            Serialization.asJson(Serialization.unmarshal(without, CustomResourceDefinition.class)));
  }

  @Test
  void celRulesWhereTheyFit() {
    JSONSchemaProps root = version.getSchema().getOpenAPIV3Schema();
    assertThat(root.getXKubernetesValidations())
        .extracting(r -> r.getRule())
        .containsExactly("size(self.metadata.name) <= 63");
    JSONSchemaProps toleration =
        spec.getProperties()
            .get("placement")
            .getProperties()
            .get("tolerations")
            .getItems()
            .getSchema();
    assertThat(toleration.getXKubernetesValidations()).hasSize(3);
  }

  /** Bounds that used to be only in descriptions are OpenAPI keywords the API server checks. */
  @Test
  void boundsAreSchemaKeywords() {
    Map<String, JSONSchemaProps> distribution =
        spec.getProperties().get("distribution").getProperties();
    JSONSchemaProps pieceSize = distribution.get("pieceSize");
    assertThat(pieceSize.getMinimum()).isEqualTo((double) DistributionSpec.MIN_PIECE_SIZE);
    assertThat(pieceSize.getMaximum()).isEqualTo((double) DistributionSpec.MAX_PIECE_SIZE);
    assertThat(pieceSize.getPattern()).isEqualTo(ByteQuantity.PATTERN);
    JSONSchemaProps limit = spec.getProperties().get("memory").getProperties().get("limit");
    assertThat(limit.getPattern()).isEqualTo(ByteQuantity.PATTERN);
    assertThat(limit.getMinimum()).isEqualTo(1.0);

    Map<String, JSONSchemaProps> source = spec.getProperties().get("source").getProperties();
    assertThat(source.get("uri").getMaxLength()).isEqualTo(2048L);
    assertThat(source.get("revision").getMaxLength()).isEqualTo(255L);
    assertThat(source.get("revision").getPattern()).isEqualTo(SourceSpec.REVISION_PATTERN);
    for (String globs : List.of("include", "exclude")) {
      assertThat(source.get(globs).getMaxItems()).isEqualTo(256L);
      assertThat(source.get(globs).getItems().getSchema().getMaxLength()).isEqualTo(1024L);
      assertThat(source.get(globs).getItems().getSchema().getMinLength()).isEqualTo(1L);
    }
    Map<String, JSONSchemaProps> placement = spec.getProperties().get("placement").getProperties();
    assertThat(placement.get("nodeSelector").getMaxProperties()).isEqualTo(64L);
    assertThat(placement.get("tolerations").getMaxItems()).isEqualTo(64L);
  }

  /** Byte quantities: Kubernetes' syntax, but no sign and no sub-byte suffixes. */
  @Test
  void byteQuantityPatternAcceptsBytesAndRefusesTheRest() {
    for (String ok : List.of("1", "64Mi", "256Ki", "1.5Gi", "1e6", "2k", "+1M", ".5Gi", "1E3")) {
      assertThat(GoRegex.accepts(ByteQuantity.PATTERN, ok)).as(ok).isTrue();
    }
    for (String bad :
        List.of("", "-1Mi", "500m", "1u", "1n", "1 Mi", "1MiB", "Mi", "1mi", "0x10")) {
      assertThat(GoRegex.accepts(ByteQuantity.PATTERN, bad)).as(bad).isFalse();
    }
  }

  @Test
  void sourceUriCarriesThePatternAndWritersTheirSelector() {
    assertThat(spec.getRequired()).containsExactly("source");
    JSONSchemaProps source = spec.getProperties().get("source");
    // Exactly one of uri and writers: the operator checks it (no CEL on Kubernetes 1.20).
    assertThat(source.getRequired()).isNullOrEmpty();
    assertThat(source.getProperties().get("writers").getRequired()).containsExactly("podSelector");
    assertThat(spec.getProperties().get("save").getProperties().get("uri").getPattern())
        .isEqualTo(SourceSpec.URI_SCHEME_PATTERN);
    assertThat(source.getProperties().get("uri").getPattern())
        .isEqualTo(SourceSpec.URI_SCHEME_PATTERN);
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
    assertThat(spec.getProperties()).doesNotContainKey("format");

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
            "/placement",
            "/placement/replicas",
            "/placement/rdma",
            "/memory",
            "/memory/pinned",
            "/distribution",
            "/distribution/mode");
  }

  /** {@code kubectl explain} finds no empty description, from the root down. */
  @Test
  void everyFieldHasADescription() {
    JSONSchemaProps root = version.getSchema().getOpenAPIV3Schema();
    assertThat(root.getDescription()).isNotBlank();
    List<String> missing = new ArrayList<>();
    collectMissingDescriptions(root, "", missing);
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

  private static void collectMissingDescriptions(
      JSONSchemaProps schema, String path, List<String> missing) {
    if (schema.getProperties() != null) {
      schema
          .getProperties()
          .forEach(
              (name, child) -> {
                if (child.getDescription() == null || child.getDescription().isBlank()) {
                  missing.add(path.isEmpty() ? name : path + "." + name);
                }
                collectMissingDescriptions(
                    child, path.isEmpty() ? name : path + "." + name, missing);
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
