package io.tensorcast.e2e.operator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.Event;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.storage.CSIDriverBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.tensorcast.api.ConsumerVolumes;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.CredentialsSecretRef;
import io.tensorcast.api.v1alpha1.DistributionMode;
import io.tensorcast.api.v1alpha1.DistributionSpec;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.csi.CsiDriver;
import io.tensorcast.csi.DriverConfig;
import io.tensorcast.csi.artifacts.InformerArtifactSource;
import io.tensorcast.csi.mount.LinuxMounter;
import io.tensorcast.csi.mount.MountTable;
import io.tensorcast.csi.node.KubernetesPodEvents;
import io.tensorcast.e2e.cluster.NodeSpec;
import io.tensorcast.e2e.cluster.SimulatedNode;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.awaitility.core.ConditionTimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Consumers end to end: the real CSI node driver (one per simulated node, in this JVM, on its own
 * unix socket) that the simulated kubelet calls as a kubelet does, the operator, data-plane
 * processes loading a real sharded safetensors model from S3Mock, and consumer pods that run a
 * Python process reading every tensor of every safetensors file from their read-only mount and
 * comparing it with the source files.
 */
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class ConsumerVolumeIT extends OperatorTestBase {
  static final String CONSUMER_IMAGE = "tensorcast/e2e-consumer";

  private final List<String> otherNamespaces = new ArrayList<>();
  private Path source;

  @BeforeEach
  void setUp() throws Exception {
    source = Corpus.dir().resolve("index/safetensorsjl-tiny-sharded");
    env.cluster
        .runtime()
        .map(CONSUMER_IMAGE, List.of("/usr/bin/python3", consumerScript().toString()));
    client
        .resource(
            new CSIDriverBuilder()
                .withNewMetadata()
                .withName(ConsumerVolumes.DRIVER)
                .endMetadata()
                .withNewSpec()
                .withAttachRequired(false)
                .withPodInfoOnMount(true)
                .withVolumeLifecycleModes("Ephemeral")
                .endSpec()
                .build())
        .serverSideApply();
  }

  @AfterEach
  void deleteOtherNamespaces() {
    otherNamespaces.forEach(env.cluster::deleteNamespace);
  }

  @Test
  void consumersGetTheReadyCopyReadOnlyAndKeepItWhileTheyRun() throws Exception {
    SimulatedNode holder = node("holder", Map.of("role", "store"));
    SimulatedNode elsewhere = node("elsewhere", Map.of());
    String bucket = ("e2e-" + ns).toLowerCase();
    env.s3.createBucket(bucket);
    try (Stream<Path> files = Files.list(source)) {
      files.forEach(f -> env.s3.putFile(bucket, "model/" + f.getFileName(), f));
    }

    // 1. A consumer scheduled before the artifact exists waits; the kubelet records why.
    Pod first = client.resource(consumer("first", ns, holder, "tiny", "30s")).create();
    Event notFound = awaitEvent(ns, "first", "FailedMount");
    assertThat(notFound.getType()).isEqualTo("Warning");
    assertThat(notFound.getMessage())
        .isEqualTo(
            "MountVolume.SetUp failed for volume \"model\" : rpc error: code = NotFound desc ="
                + " ModelArtifact "
                + ns
                + "/tiny not found: create it in namespace "
                + ns
                + ", or fix volumeAttributes.modelArtifact");
    assertThat(phase(ns, "first")).isEqualTo("Pending");

    // 2. The artifact loads on the holder node only; then the consumer starts and verifies.
    client.resource(artifact("tiny", "s3://" + bucket + "/model/")).create();
    ModelArtifact ready =
        await()
            .atMost(Duration.ofSeconds(120))
            .until(
                () -> get("tiny"),
                a -> a.getStatus() != null && a.getStatus().getPhase() == ArtifactPhase.Ready);
    Instant readyAt = Instant.parse(ready.getStatus().getNodes().get(0).getReadyTime());
    awaitLog(ns, "first", "verified 36 tensors in 6 files", Duration.ofSeconds(60));
    // The container's output can come before the kubelet's next status sync posts Running.
    Pod running =
        await()
            .atMost(Duration.ofSeconds(30))
            .until(
                () -> client.pods().inNamespace(ns).withName("first").get(),
                p -> "Running".equals(p.getStatus().getPhase()));
    Instant started =
        Instant.parse(
            running
                .getStatus()
                .getContainerStatuses()
                .get(0)
                .getState()
                .getRunning()
                .getStartedAt());
    assertThat(started)
        .as("container start vs copy Ready")
        .isAfterOrEqualTo(readyAt.minusSeconds(1));
    assertThat(events(ns, "first"))
        .anySatisfy(
            e ->
                assertThat(e.getReason() + ": " + e.getMessage())
                    .isEqualTo(
                        "ModelArtifactMounted: mounted ModelArtifact "
                            + ns
                            + "/tiny generation 1 ("
                            + ns
                            + "-tiny-g1) read-only from node "
                            + holder.name()));
    Path target = target(holder, running);
    assertThat(MountTable.mountPoints(Path.of("/proc/self/mountinfo"))).contains(target);
    assertThat(Files.isWritable(target.resolve("model.safetensors.index.json")))
        .as("read-only mount")
        .isFalse();

    // 3. Scheduling hint: the holder carries the per-artifact label, the other node does not.
    String label = ConsumerVolumes.nodeLabelKey(ns, "tiny");
    await()
        .atMost(Duration.ofSeconds(30))
        .untilAsserted(
            () -> {
              assertThat(client.nodes().withName(holder.name()).get().getMetadata().getLabels())
                  .containsEntry(label, "1");
              assertThat(get("tiny").getStatus().getReadyNodes()).containsExactly(holder.name());
            });
    assertThat(client.nodes().withName(elsewhere.name()).get().getMetadata().getLabels())
        .doesNotContainKey(label);

    // 4. A consumer on a node without a copy is told where the copy is, within its readyTimeout.
    client.resource(consumer("stray", ns, elsewhere, "tiny", "2s")).create();
    Event stray = awaitEvent(ns, "stray", "FailedMount");
    assertThat(stray.getMessage())
        .contains(
            "rpc error: code = FailedPrecondition desc = ModelArtifact "
                + ns
                + "/tiny has no copy on node "
                + elsewhere.name()
                + " (phase Ready; Ready on nodes "
                + holder.name()
                + "): schedule the pod onto a node with label "
                + label,
            "gave up after 2");
    client.pods().inNamespace(ns).withName("stray").delete();

    // 5. A pod of another namespace naming the artifact is refused, visibly in kubectl describe.
    String foreign = env.cluster.createNamespace("foreign");
    otherNamespaces.add(foreign);
    client.resource(consumer("intruder", foreign, holder, ns + "/tiny", "2s")).create();
    Event refused = awaitEvent(foreign, "intruder", "FailedMount");
    assertThat(refused.getMessage())
        .isEqualTo(
            "MountVolume.SetUp failed for volume \"model\" : rpc error: code = PermissionDenied"
                + " desc = pod "
                + foreign
                + "/intruder may not use ModelArtifact "
                + ns
                + "/tiny: a pod can mount only ModelArtifacts of its own namespace ("
                + foreign
                + "); create the artifact there");
    assertThat(kubectl(foreign, "describe", "pod", "intruder"))
        .contains("FailedMount", "may not use ModelArtifact " + ns + "/tiny");
    assertThat(phase(foreign, "intruder")).isEqualTo("Pending");

    // 6. kubectl get ma -o wide counts the consumers (the stray one is gone).
    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> Integer.valueOf(1).equals(get("tiny").getStatus().getConsumers()));
    assertThat(ModelArtifactIT.row(kubectl(ns, "get", "ma", "-o", "wide"), "tiny"))
        .containsEntry("CONSUMERS", "1");
    assertThat(condition(get("tiny"), "InUse").getMessage())
        .isEqualTo("1 consumer pod(s): first (node " + holder.name() + ")");

    // 7. A new generation does not replace the copy the running consumer uses.
    String oldPod = dataPlanePods().get(0).getMetadata().getName();
    client
        .resources(ModelArtifact.class)
        .inNamespace(ns)
        .withName("tiny")
        .edit(
            a -> {
              a.getSpec().getSource().setExclude(List.of("*.json"));
              return a;
            });
    ModelArtifact held =
        await()
            .atMost(Duration.ofSeconds(30))
            .until(
                () -> get("tiny"),
                a ->
                    a.getStatus() != null
                        && Long.valueOf(2).equals(a.getStatus().getObservedGeneration())
                        && "CopyKeptForConsumers".equals(condition(a, "InUse").getReason()));
    assertThat(condition(held, "InUse").getMessage())
        .isEqualTo(
            "copies kept for running consumers until they are gone: node "
                + holder.name()
                + " (pod "
                + oldPod
                + ", generation 1); consumer pods: first (node "
                + holder.name()
                + ")");
    assertThat(held.getStatus().getReadyNodes()).isEmpty();
    await()
        .during(Duration.ofSeconds(4))
        .atMost(Duration.ofSeconds(8))
        .until(
            () ->
                dataPlanePods().size() == 1
                    && dataPlanePods().get(0).getMetadata().getName().equals(oldPod)
                    && dataPlanePods().get(0).getMetadata().getDeletionTimestamp() == null
                    && "Running".equals(phase(ns, "first")));
    assertThat(client.nodes().withName(holder.name()).get().getMetadata().getLabels())
        .as("generation 1's copy is not the current generation's")
        .doesNotContainKey(label);
    assertThat(log(ns, "first")).doesNotContain("FAILED");

    // 8. Deleting the artifact while the consumer runs waits for it, saying so.
    client.resources(ModelArtifact.class).inNamespace(ns).withName("tiny").delete();
    ModelArtifact waiting =
        await()
            .atMost(Duration.ofSeconds(30))
            .until(
                () -> get("tiny"),
                a ->
                    a.getStatus() != null
                        && "DeletionWaitsForConsumers".equals(condition(a, "InUse").getReason()));
    assertThat(condition(waiting, "InUse").getMessage())
        .isEqualTo(
            "deletion waits for 1 consumer pod(s) to go: first (node "
                + holder.name()
                + "); delete them or scale their workloads down");
    String logBefore = log(ns, "first");
    await()
        .during(Duration.ofSeconds(6))
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                get("tiny") != null
                    && "Running".equals(phase(ns, "first"))
                    && dataPlanePods().stream()
                        .allMatch(p -> p.getMetadata().getDeletionTimestamp() == null)
                    && dataPlanePods().size() == 1);
    assertThat(log(ns, "first")).doesNotContain("FAILED").startsWith(logBefore);

    // 9. The last consumer goes: its volume is unpublished, then the artifact and its copy go.
    client.pods().inNamespace(ns).withName("first").delete();
    await()
        .atMost(Duration.ofSeconds(60))
        .until(() -> get("tiny") == null && dataPlanePods().isEmpty());
    assertThat(MountTable.mountPoints(Path.of("/proc/self/mountinfo"))).doesNotContain(target);
    assertThat(target).doesNotExist();
  }

  // --------------------------------------------------------------------------------- helpers

  private SimulatedNode node(String suffix, Map<String, String> labels) throws IOException {
    SimulatedNode node =
        env.cluster
            .kubelet()
            .addNode(
                NodeSpec.builder(ns + "-" + suffix, env.cluster.nextNodeAddress())
                    .label(GROUP_LABEL, ns)
                    .labels(labels)
                    .allocatable("memory", "4Gi")
                    .build());
    nodes.add(node);
    KubernetesClient driverClient = env.cluster.controlPlane().newClient();
    InformerArtifactSource artifacts = new InformerArtifactSource(driverClient);
    KubernetesPodEvents events = new KubernetesPodEvents(driverClient, node.name());
    Path socket = Files.createTempDirectory(Path.of("/tmp"), "tc-csi-").resolve("csi.sock");
    CsiDriver driver =
        CsiDriver.start(
            socket,
            DriverConfig.of(node.name(), node.hostPath(env.config.storeRoot()), node.kubeletRoot()),
            artifacts,
            new LinuxMounter(),
            events);
    node.registerCsiDriver(ConsumerVolumes.DRIVER, socket);
    closeAfterPods(
        () -> {
          node.unregisterCsiDriver(ConsumerVolumes.DRIVER);
          driver.close();
          events.close();
          artifacts.close();
          driverClient.close();
          Files.deleteIfExists(socket.getParent());
        });
    return node;
  }

  private ModelArtifact artifact(String name, String uri) {
    ModelArtifact a = new ModelArtifact();
    a.getMetadata().setName(name);
    a.getMetadata().setNamespace(ns);
    ModelArtifactSpec spec = new ModelArtifactSpec();
    SourceSpec s = new SourceSpec();
    s.setUri(uri);
    s.setEndpoint(env.s3.endpoint().toString());
    s.setInsecureEndpoint(true); // S3Mock on loopback: plain http
    s.setRegion(S3MockServer.REGION);
    s.setPathStyle(true);
    s.setCredentialsSecretRef(new CredentialsSecretRef(CREDENTIALS));
    spec.setSource(s);
    spec.getPlacement().setReplicas(1);
    spec.getPlacement().setRdma(RdmaPolicy.Disabled);
    spec.getPlacement().setNodeSelector(Map.of(GROUP_LABEL, ns, "role", "store"));
    // One copy: no peers to wait for.
    DistributionSpec distribution = new DistributionSpec();
    distribution.setMode(DistributionMode.SourceOnly);
    spec.setDistribution(distribution);
    a.setSpec(spec);
    return a;
  }

  /** A consumer pod pinned to {@code node}: the Python verifier over {@code /models/tiny}. */
  private Pod consumer(
      String name, String namespace, SimulatedNode node, String artifact, String readyTimeout) {
    return new PodBuilder()
        .withNewMetadata()
        .withName(name)
        .withNamespace(namespace)
        .withLabels(Map.of("app", "consumer"))
        .endMetadata()
        .withNewSpec()
        .withNodeSelector(Map.of("kubernetes.io/hostname", node.name()))
        .withRestartPolicy("Never")
        .withTerminationGracePeriodSeconds(2L)
        .addNewContainer()
        .withName("server")
        .withImage(CONSUMER_IMAGE)
        .withArgs("/models/tiny", source.toString(), "1")
        .addNewVolumeMount()
        .withName("model")
        .withMountPath("/models/tiny")
        .withReadOnly(true)
        .endVolumeMount()
        .endContainer()
        .addNewVolume()
        .withName("model")
        .withNewCsi()
        .withDriver(ConsumerVolumes.DRIVER)
        .withReadOnly(true)
        .withVolumeAttributes(Map.of("modelArtifact", artifact, "readyTimeout", readyTimeout))
        .endCsi()
        .endVolume()
        .endSpec()
        .build();
  }

  private static Path target(SimulatedNode node, Pod pod) {
    return node.kubeletRoot()
        .resolve("pods")
        .resolve(pod.getMetadata().getUid())
        .resolve("volumes/kubernetes.io~csi/model/mount");
  }

  private ModelArtifact get(String name) {
    return client.resources(ModelArtifact.class).inNamespace(ns).withName(name).get();
  }

  private List<Pod> dataPlanePods() {
    return client
        .pods()
        .inNamespace(ns)
        .withLabel(TensorcastConstants.LABEL_ARTIFACT)
        .list()
        .getItems();
  }

  private static Condition condition(ModelArtifact a, String type) {
    return a.getStatus().getConditions().stream()
        .filter(c -> type.equals(c.getType()))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no condition " + type + " in " + a.getStatus()));
  }

  private String phase(String namespace, String pod) {
    Pod p = client.pods().inNamespace(namespace).withName(pod).get();
    return p == null || p.getStatus() == null ? null : p.getStatus().getPhase();
  }

  private List<Event> events(String namespace, String pod) {
    return client.v1().events().inNamespace(namespace).list().getItems().stream()
        .filter(e -> pod.equals(e.getInvolvedObject().getName()))
        .toList();
  }

  private Event awaitEvent(String namespace, String pod, String reason) {
    return await()
        .atMost(Duration.ofSeconds(60))
        .until(
            () ->
                events(namespace, pod).stream()
                    .filter(e -> reason.equals(e.getReason()))
                    .findFirst()
                    .orElse(null),
            e -> e != null);
  }

  private String log(String namespace, String pod) throws IOException {
    Path p = env.cluster.kubelet().podLog(namespace, pod);
    return Files.exists(p) ? Files.readString(p, StandardCharsets.UTF_8) : "";
  }

  /**
   * Waits until the pod's log holds {@code text}; fails at once when the verifier printed a
   * failure, and on timeout with what the pod, its events and its log show.
   */
  private void awaitLog(String namespace, String pod, String text, Duration atMost)
      throws IOException {
    try {
      await()
          .atMost(atMost)
          .until(
              () -> {
                String log = log(namespace, pod);
                assertThat(log).as("log of pod " + namespace + "/" + pod).doesNotContain("FAILED");
                return log.contains(text);
              });
    } catch (ConditionTimeoutException e) {
      Pod p = client.pods().inNamespace(namespace).withName(pod).get();
      throw new AssertionError(
          "pod "
              + namespace
              + "/"
              + pod
              + " did not log \""
              + text
              + "\" within "
              + atMost
              + "\nstatus: "
              + (p == null ? "gone" : p.getStatus())
              + "\nevents: "
              + events(namespace, pod).stream()
                  .map(ev -> ev.getReason() + " x" + ev.getCount() + ": " + ev.getMessage())
                  .toList()
              + "\nlog:\n"
              + log(namespace, pod),
          e);
    }
  }

  private String kubectl(String namespace, String... args)
      throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>();
    cmd.add("kubectl");
    cmd.add("--kubeconfig=" + env.cluster.controlPlane().kubeconfig());
    cmd.add("--namespace=" + namespace);
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    byte[] out;
    try (var in = p.getInputStream()) {
      out = in.readAllBytes();
    }
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
    String text = new String(out, StandardCharsets.UTF_8);
    assertThat(p.exitValue()).as("kubectl %s: %s", String.join(" ", args), text).isZero();
    return text;
  }

  private static Path consumerScript() throws URISyntaxException {
    return Path.of(ConsumerVolumeIT.class.getResource("/consumer/verify_safetensors.py").toURI());
  }
}
