package io.tensorcast.api.v1alpha1;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fabric8.kubernetes.api.model.ConditionBuilder;
import io.fabric8.kubernetes.api.model.ObjectMetaBuilder;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.TolerationBuilder;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.tensorcast.api.Reason;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The wire form of a ModelArtifact: field names, enum names, quantities, and a full round trip. */
class ModelArtifactJsonTest {

  static ModelArtifact full() {
    ModelArtifact ma = new ModelArtifact();
    ma.setMetadata(new ObjectMetaBuilder().withName("llama").withNamespace("ml").build());

    CredentialsSecretRef secret = new CredentialsSecretRef("hub-token");
    secret.setTokenKey("token");
    secret.setAccessKeyIdKey("id");
    secret.setSecretAccessKeyKey("secret");
    secret.setSessionTokenKey("session");
    SourceSpec source = new SourceSpec();
    source.setUri("hf://meta-llama/Llama-3.1-8B/original");
    source.setRevision("refs/pr/1");
    source.setEndpoint("https://hub.example.com");
    source.setRegion("eu-west-1");
    source.setPathStyle(true);
    source.setCredentialsSecretRef(secret);
    source.setInclude(List.of("*.safetensors", "config.json"));
    source.setExclude(List.of("*.bin"));

    ModelArtifactSpec spec = ma.getSpec();
    spec.setSource(source);
    spec.setKind(ArtifactKind.KVCache);
    spec.getPlacement().setNodeSelector(Map.of("zone", "a"));
    spec.getPlacement()
        .setTolerations(
            List.of(
                new TolerationBuilder()
                    .withKey("gpu")
                    .withOperator("Exists")
                    .withEffect("NoExecute")
                    .withTolerationSeconds(30L)
                    .build()));
    spec.getPlacement().setReplicas(3);
    spec.getPlacement().setRdma(RdmaPolicy.Preferred);
    spec.getMemory().setPinned(false);
    spec.getMemory().setLimit(new Quantity("200Gi"));
    spec.getDistribution().setMode(DistributionMode.SourceOnly);
    spec.getDistribution().setPieceSize(new Quantity("64Mi"));
    spec.getDistribution().setSourceConnections(8);

    ArtifactNodeStatus node = new ArtifactNodeStatus();
    node.setNode("gpu-1");
    node.setPod("llama-gpu-1");
    node.setPhase(ArtifactPhase.Ready);
    node.setBytesLoaded(16_060_522_496L);
    node.setBytesFromSource(8_000_000_000L);
    node.setBytesFromPeers(8_060_522_496L);
    node.setReadyTime("2025-01-02T03:04:05Z");
    node.setMessage("verified");

    ModelArtifactStatus status = new ModelArtifactStatus();
    status.setPhase(ArtifactPhase.Loading);
    status.setObservedGeneration(4L);
    status.setConditions(
        List.of(
            new ConditionBuilder()
                .withType(Conditions.LOADED)
                .withStatus(Conditions.FALSE)
                .withReason(Reason.Loading.name())
                .withMessage("1 of 3 nodes loaded")
                .withLastTransitionTime("2025-01-02T03:00:00Z")
                .withObservedGeneration(4L)
                .build()));
    status.setResolvedRevision("0e9e39f249a16976918f6564b8830bc894c89659");
    status.setFiles(7);
    status.setTensors(291);
    status.setTotalBytes(16_060_522_496L);
    status.setSize("15.0 GiB");
    status.setNodes(List.of(node));
    status.setReplicas(3);
    status.setReadyReplicas(1);
    status.setReady("1/3");
    status.setProgress("33%");
    ma.setStatus(status);
    return ma;
  }

  @Test
  void fullObjectSurvivesJsonAndYamlRoundTrips() {
    ModelArtifact original = full();

    ModelArtifact viaJson =
        Serialization.unmarshal(Serialization.asJson(original), ModelArtifact.class);
    ModelArtifact viaYaml =
        Serialization.unmarshal(Serialization.asYaml(original), ModelArtifact.class);

    for (ModelArtifact copy : List.of(viaJson, viaYaml)) {
      assertThat(copy.getMetadata()).isEqualTo(original.getMetadata());
      assertThat(copy.getSpec()).isEqualTo(original.getSpec());
      assertThat(copy.getStatus()).isEqualTo(original.getStatus());
      assertThat(Serialization.asJson(copy)).isEqualTo(Serialization.asJson(original));
    }
  }

  @Test
  void wireNamesAreTheCamelCaseNamesOfTheCrd() {
    JsonNode json = Serialization.unmarshal(Serialization.asJson(full()), JsonNode.class);

    assertThat(json.at("/apiVersion").asText()).isEqualTo("tensorcast.io/v1alpha1");
    assertThat(json.at("/kind").asText()).isEqualTo("ModelArtifact");
    assertThat(json.at("/spec/kind").asText()).isEqualTo("KVCache");
    assertThat(json.at("/spec").has("format")).isFalse();
    assertThat(json.at("/spec/placement/rdma").asText()).isEqualTo("Preferred");
    assertThat(json.at("/spec/distribution/mode").asText()).isEqualTo("SourceOnly");
    assertThat(json.at("/spec/memory/limit").isTextual()).isTrue();
    assertThat(json.at("/spec/memory/limit").asText()).isEqualTo("200Gi");
    assertThat(json.at("/spec/distribution/pieceSize").asText()).isEqualTo("64Mi");
    assertThat(json.at("/spec/source/credentialsSecretRef/tokenKey").asText()).isEqualTo("token");
    assertThat(json.at("/spec/placement/tolerations/0/tolerationSeconds").asLong()).isEqualTo(30);
    assertThat(json.at("/status/phase").asText()).isEqualTo("Loading");
    assertThat(json.at("/status/nodes/0/phase").asText()).isEqualTo("Ready");
    assertThat(json.at("/status/nodes/0/bytesLoaded").asLong()).isEqualTo(16_060_522_496L);
    assertThat(json.at("/status/conditions/0/reason").asText()).isEqualTo("Loading");
    // Helper methods are not properties.
    assertThat(json.at("/spec/source/credentialsSecretRef").has("tokenKeyOrDefault")).isFalse();
  }

  @Test
  void readsAMinimalManifestAndKeepsDefaultsOutOfNothing() {
    String yaml =
        """
        apiVersion: tensorcast.io/v1alpha1
        kind: ModelArtifact
        metadata:
          name: tiny
        spec:
          source:
            uri: file:///models/tiny
        """;
    ModelArtifact ma = Serialization.unmarshal(yaml, ModelArtifact.class);

    assertThat(ma.getSpec().getSource().getUri()).isEqualTo("file:///models/tiny");
    assertThat(ma.getSpec().getSource().getCredentialsSecretRef()).isNull();
    // Java initial values mirror the CRD defaults the API server would fill in.
    assertThat(ma.getSpec().getKind()).isEqualTo(ArtifactKind.ModelWeights);
    assertThat(ma.getSpec().getPlacement().getReplicas()).isEqualTo(1);
    assertThat(ma.getSpec().getPlacement().getRdma()).isEqualTo(RdmaPolicy.Required);
    assertThat(ma.getSpec().getMemory().getPinned()).isTrue();
    assertThat(ma.getSpec().getDistribution().getMode()).isEqualTo(DistributionMode.PeerToPeer);
    assertThat(ma.getStatus()).isNull();
  }

  @Test
  void secretKeyNamesFallBackToTheToolsEnvironmentNames() {
    CredentialsSecretRef ref = new CredentialsSecretRef("s");
    assertThat(ref.accessKeyIdKeyOrDefault()).isEqualTo("AWS_ACCESS_KEY_ID");
    assertThat(ref.secretAccessKeyKeyOrDefault()).isEqualTo("AWS_SECRET_ACCESS_KEY");
    assertThat(ref.sessionTokenKeyOrDefault()).isEqualTo("AWS_SESSION_TOKEN");
    assertThat(ref.tokenKeyOrDefault()).isEqualTo("HF_TOKEN");
    ref.setTokenKey("hf");
    assertThat(ref.tokenKeyOrDefault()).isEqualTo("hf");
  }
}
