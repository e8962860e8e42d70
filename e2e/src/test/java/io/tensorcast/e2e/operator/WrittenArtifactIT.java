package io.tensorcast.e2e.operator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.Quantity;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactKind;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.CredentialsSecretRef;
import io.tensorcast.api.v1alpha1.MemorySpec;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.v1alpha1.SaveSpec;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.api.v1alpha1.WritersSpec;
import io.tensorcast.api.v1alpha1.WrittenVersionsStatus;
import io.tensorcast.dataplane.write.WriteClient;
import io.tensorcast.e2e.cluster.NodeSpec;
import io.tensorcast.e2e.cluster.SimulatedNode;
import io.tensorcast.operator.desired.ArtifactChildren;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.testing.S3MockServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A written ModelArtifact ({@code spec.source.writers}, kind {@code RLCheckpoint}) end to end on
 * the local control plane: a writer pod runs on one simulated node, the operator starts a
 * data-plane pod there in the writer role and one on another node in the reader role; the test,
 * acting as the writer process on the writer node, puts tensors through that node's put API (its
 * unix socket under the artifact's store root) and seals; the artifact turns Ready with the version
 * in {@code status.versions}, the reader node serves the very bytes written, the operator saves the
 * version to the S3-compatible server, and a new ModelArtifact loads the saved version back.
 */
@Timeout(240)
class WrittenArtifactIT extends OperatorTestBase {
  static final String WRITER_IMAGE = "tensorcast-e2e/writer:1";
  static final Duration TIMEOUT = Duration.ofSeconds(90);

  private final HttpClient http = HttpClient.newHttpClient();

  @BeforeEach
  void setUp() {
    // The trainer's container: the test process does its writing, the pod only has to run.
    env.cluster.runtime().map(WRITER_IMAGE, "sleep", "600");
    for (String role : List.of("writer", "reader")) {
      nodes.add(
          env.cluster
              .kubelet()
              .addNode(
                  NodeSpec.builder(ns + "-" + role, env.cluster.nextNodeAddress())
                      .label(GROUP_LABEL, ns)
                      .allocatable("memory", "2Gi")
                      .podAddresses(
                          env.cluster.nextNodeAddress(),
                          env.cluster.nextNodeAddress(),
                          env.cluster.nextNodeAddress())
                      .build()));
    }
  }

  @Test
  void writerPutsAndSealsReaderNodeServesTheBytesAndTheSavedVersionLoadsBack() throws Exception {
    SimulatedNode writerNode = nodes.get(0);
    SimulatedNode readerNode = nodes.get(1);
    String bucket = ("written-" + ns).toLowerCase();
    env.s3.createBucket(bucket);

    ModelArtifact ma = new ModelArtifact();
    ma.getMetadata().setName("policy");
    ma.getMetadata().setNamespace(ns);
    ModelArtifactSpec spec = new ModelArtifactSpec();
    spec.setKind(ArtifactKind.RLCheckpoint);
    SourceSpec source = new SourceSpec();
    WritersSpec writers = new WritersSpec();
    writers.setPodSelector(Map.of("app", "trainer"));
    source.setWriters(writers);
    spec.setSource(source);
    spec.getPlacement().setReplicas(1);
    spec.getPlacement().setNodeSelector(Map.of(GROUP_LABEL, ns));
    spec.getPlacement().setRdma(RdmaPolicy.Disabled);
    MemorySpec memory = new MemorySpec();
    memory.setPinned(false);
    memory.setLimit(new Quantity("8Mi"));
    spec.setMemory(memory);
    SaveSpec save = new SaveSpec();
    save.setUri("s3://" + bucket + "/steps/");
    save.setEndpoint(env.s3.endpoint().toString());
    save.setRegion(S3MockServer.REGION);
    save.setPathStyle(true);
    save.setInsecureEndpoint(true); // S3Mock serves plain http on loopback
    save.setCredentialsSecretRef(new CredentialsSecretRef(CREDENTIALS));
    spec.setSave(save);
    ma.setSpec(spec);
    client.resource(ma).create();

    // The writer pod, bound to the writer node.
    client
        .resource(
            new PodBuilder()
                .withNewMetadata()
                .withName("trainer-0")
                .withNamespace(ns)
                .withLabels(Map.of("app", "trainer"))
                .endMetadata()
                .withNewSpec()
                .withNodeName(writerNode.name())
                .addNewContainer()
                .withName("trainer")
                .withImage(WRITER_IMAGE)
                .endContainer()
                .endSpec()
                .build())
        .create();

    // A data-plane pod in each role: the writer's on the writer node, the reader's elsewhere.
    await()
        .atMost(TIMEOUT)
        .until(
            () ->
                dataPlanePods().stream().filter(this::running).count() == 2
                    && dataPlanePod(writerNode) != null
                    && dataPlanePod(readerNode) != null);

    // Write step-1 through the writer node's put API and seal it.
    Map<String, byte[]> tensors = new LinkedHashMap<>();
    tensors.put("policy.embed.weight", floats(64 * 32, 1.0f));
    tensors.put("policy.head.bias", floats(32, -3.0f));
    ModelArtifact created = artifact("policy");
    Path socket =
        writerNode
            .hostPath(DataPlanePod.storeRoot(created, env.config))
            .resolve(".writes/write.sock");
    await().atMost(TIMEOUT).until(() -> Files.exists(socket));
    String writeToken = secret(created, TensorcastConstants.SECRET_WRITE_TOKEN);
    try (WriteClient w = WriteClient.unix(socket, writeToken)) {
      assertThat(w.create("step-1", null, Map.of("step", "1")).ok().json().get("kind").asText())
          .as("a version created without a kind is the artifact's spec.kind")
          .isEqualTo("RLCheckpoint");
      w.putTensor(
              "step-1",
              new WriteClient.Tensor(
                  "policy.embed.weight",
                  "F32",
                  new long[] {64, 32},
                  null,
                  null,
                  ByteBuffer.wrap(tensors.get("policy.embed.weight"))),
              false)
          .ok();
      w.putTensor(
              "step-1",
              new WriteClient.Tensor(
                  "policy.head.bias",
                  "F32",
                  new long[] {32},
                  null,
                  null,
                  ByteBuffer.wrap(tensors.get("policy.head.bias"))),
              false)
          .ok();
      w.seal("step-1").ok();
    }

    // Ready, the version listed, the reader node's copy equal to what was written.
    ModelArtifact ready =
        awaitArtifact(
            "policy",
            a ->
                a.getStatus().getPhase() == ArtifactPhase.Ready
                    && a.getStatus().getVersions() != null
                    && "step-1".equals(a.getStatus().getVersions().getServing()));
    WrittenVersionsStatus versions = ready.getStatus().getVersions();
    assertThat(versions.getLatest()).isEqualTo("step-1");
    assertThat(versions.getWriterNodes()).containsExactly(writerNode.name());
    assertThat(ready.getStatus().getResolvedRevision()).isEqualTo("step-1");
    String readToken = secret(ready, TensorcastConstants.SECRET_READ_TOKEN);
    Pod reader = dataPlanePod(readerNode);
    for (Map.Entry<String, byte[]> t : tensors.entrySet()) {
      assertThat(tensor(reader, t.getKey(), readToken))
          .as("%s on the reader node %s", t.getKey(), readerNode.name())
          .isEqualTo(t.getValue());
    }

    // Saved to the S3-compatible server, listed in the status.
    ModelArtifact saved =
        awaitArtifact(
            "policy",
            a ->
                a.getStatus().getVersions() != null
                    && a.getStatus().getVersions().getSaved().stream()
                        .anyMatch(s -> "step-1".equals(s.getVersion())));
    String savedUri =
        saved.getStatus().getVersions().getSaved().stream()
            .filter(s -> "step-1".equals(s.getVersion()))
            .findFirst()
            .orElseThrow()
            .getUri();
    assertThat(savedUri).isEqualTo("s3://" + bucket + "/steps/step-1/");

    // A new ModelArtifact loads the saved version back, bytes equal.
    ModelArtifact back = new ModelArtifact();
    back.getMetadata().setName("policy-step-1");
    back.getMetadata().setNamespace(ns);
    ModelArtifactSpec backSpec = new ModelArtifactSpec();
    SourceSpec backSource = new SourceSpec();
    backSource.setUri(savedUri);
    backSource.setEndpoint(env.s3.endpoint().toString());
    backSource.setRegion(S3MockServer.REGION);
    backSource.setPathStyle(true);
    backSource.setInsecureEndpoint(true);
    backSource.setCredentialsSecretRef(new CredentialsSecretRef(CREDENTIALS));
    backSpec.setSource(backSource);
    backSpec.getPlacement().setReplicas(1);
    backSpec.getPlacement().setNodeSelector(Map.of(GROUP_LABEL, ns));
    backSpec.getPlacement().setRdma(RdmaPolicy.Disabled);
    MemorySpec backMemory = new MemorySpec();
    backMemory.setPinned(false);
    backSpec.setMemory(backMemory);
    back.setSpec(backSpec);
    client.resource(back).create();
    ModelArtifact loaded =
        awaitArtifact("policy-step-1", a -> a.getStatus().getPhase() == ArtifactPhase.Ready);
    String backToken = secret(loaded, TensorcastConstants.SECRET_READ_TOKEN);
    Pod backPod =
        client
            .pods()
            .inNamespace(ns)
            .withLabel(TensorcastConstants.LABEL_ARTIFACT)
            .list()
            .getItems()
            .stream()
            .filter(
                p ->
                    "policy-step-1"
                        .equals(
                            p.getMetadata().getLabels().get(TensorcastConstants.LABEL_ARTIFACT)))
            .filter(this::running)
            .findFirst()
            .orElseThrow();
    for (Map.Entry<String, byte[]> t : tensors.entrySet()) {
      assertThat(tensor(backPod, t.getKey(), backToken))
          .as("%s loaded back from %s", t.getKey(), savedUri)
          .isEqualTo(t.getValue());
    }
  }

  /** {@code n} little-endian F32 values {@code start, start + 0.5, ...}. */
  private static byte[] floats(int n, float start) {
    ByteBuffer b = ByteBuffer.allocate(4 * n).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < n; i++) {
      b.putFloat(start + 0.5f * i);
    }
    return b.array();
  }

  private List<Pod> dataPlanePods() {
    return client
        .pods()
        .inNamespace(ns)
        .withLabel(TensorcastConstants.LABEL_ARTIFACT, "policy")
        .list()
        .getItems();
  }

  private Pod dataPlanePod(SimulatedNode node) {
    return dataPlanePods().stream()
        .filter(p -> node.name().equals(p.getSpec().getNodeName()))
        .filter(this::running)
        .findFirst()
        .orElse(null);
  }

  private boolean running(Pod p) {
    return p.getStatus() != null
        && "Running".equals(p.getStatus().getPhase())
        && p.getStatus().getPodIP() != null;
  }

  private ModelArtifact artifact(String name) {
    return client.resources(ModelArtifact.class).inNamespace(ns).withName(name).get();
  }

  private ModelArtifact awaitArtifact(String name, Predicate<ModelArtifact> test) {
    return await()
        .atMost(TIMEOUT)
        .until(() -> artifact(name), a -> a != null && a.getStatus() != null && test.test(a));
  }

  private String secret(ModelArtifact a, String key) {
    String value =
        await()
            .atMost(TIMEOUT)
            .until(
                () -> {
                  var s = client.secrets().inNamespace(ns).withName(ArtifactChildren.name(a)).get();
                  return s == null || s.getData() == null ? null : s.getData().get(key);
                },
                v -> v != null);
    return new String(java.util.Base64.getDecoder().decode(value), StandardCharsets.UTF_8).trim();
  }

  private byte[] tensor(Pod p, String name, String token) throws Exception {
    HttpResponse<byte[]> r =
        http.send(
            HttpRequest.newBuilder(
                    URI.create(
                        "http://"
                            + p.getStatus().getPodIP()
                            + ":"
                            + env.config.controlPort()
                            + "/v1/tensors/"
                            + name))
                .header("Authorization", "Bearer " + token)
                .timeout(Duration.ofSeconds(10))
                .build(),
            HttpResponse.BodyHandlers.ofByteArray());
    assertThat(r.statusCode())
        .as("GET /v1/tensors/%s on %s: %s", name, p.getMetadata().getName(), new String(r.body()))
        .isEqualTo(200);
    return r.body();
  }
}
