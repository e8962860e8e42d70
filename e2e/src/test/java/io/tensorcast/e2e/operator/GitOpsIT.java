package io.tensorcast.e2e.operator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.ManagedFieldsEntry;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.e2e.cluster.NodeSpec;
import io.tensorcast.e2e.cluster.SimulatedNode;
import io.tensorcast.e2e.gitops.ArgoCdHealth;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What a GitOps tool sees of a ModelArtifact, against the real API server with the operator
 * running: applying the same manifest twice changes nothing (client-side and server-side apply,
 * {@code kubectl diff} empty), the operator's field managers own only {@code status} and the
 * finalizer (never {@code spec}), and the chart's Argo CD health check, run on the live objects,
 * follows them through Progressing, Healthy, Degraded and Failed.
 *
 * <p>With system property {@value #FIXTURES_PROPERTY} set to a directory, the live objects are also
 * written there as YAML: that is how the Argo CD health check's test fixtures
 * (charts/tensorcast/argocd/tensorcast.io/ModelArtifact/testdata/) were taken.
 */
class GitOpsIT extends OperatorTestBase {
  static final String FIXTURES_PROPERTY = "tensorcast.argocd.fixtures";
  static final Duration LOAD_TIMEOUT = Duration.ofSeconds(90);

  private ArgoCdHealth health;

  @BeforeEach
  void setUp() throws IOException {
    health = ArgoCdHealth.of(ModelArtifact.GROUP, "ModelArtifact");
  }

  @Test
  void applyTwiceChangesNothingTheOperatorOwnsOnlyStatusAndArgoCdHealthFollows() throws Exception {
    SimulatedNode node =
        env.cluster
            .kubelet()
            .addNode(
                NodeSpec.builder(ns + "-rdma", env.cluster.nextNodeAddress())
                    .label(GROUP_LABEL, ns)
                    .allocatable("memory", "4Gi")
                    .allocatable(TensorcastConstants.RDMA_RESOURCE, "1")
                    .build());
    nodes.add(node);
    String bucket = seed();
    String manifest = manifest("tiny", "s3://" + bucket + "/model/", "");

    assertThat(kubectl(manifest, "apply", "-f", "-")).contains("created");
    ModelArtifact fresh = get("tiny");
    if (fresh.getStatus() == null) {
      assertHealth(fresh, "Progressing", "Waiting for the operator to report status");
      keep("created", fresh);
    }

    ModelArtifact ready = awaitPhase("tiny", ArtifactPhase.Ready);
    ArgoCdHealth.Result healthy = health.evaluate(ready);
    assertThat(healthy.status()).isEqualTo("Healthy");
    assertThat(healthy.message())
        .isEqualTo(describe(condition(ready, "Ready")) + " (1/1 ready)")
        .startsWith("AllReplicasReady: ");
    keep("ready", ready);
    // Steady state: the operator writes nothing more.
    String version = ready.getMetadata().getResourceVersion();
    await()
        .during(Duration.ofSeconds(6))
        .atMost(Duration.ofSeconds(9))
        .until(() -> version.equals(get("tiny").getMetadata().getResourceVersion()));

    // Client-side apply of the same manifest: nothing to do.
    assertThat(kubectl(manifest, "apply", "-f", "-")).contains("unchanged");
    assertThat(get("tiny").getMetadata().getResourceVersion()).isEqualTo(version);
    // Server-side apply, as Argo CD and Flux do: the first one takes co-ownership of the spec
    // fields (managedFields change); the second changes nothing at all.
    kubectl(manifest, "apply", "--server-side", "--field-manager=gitops", "-f", "-");
    String afterFirstSsa = get("tiny").getMetadata().getResourceVersion();
    kubectl(manifest, "apply", "--server-side", "--field-manager=gitops", "-f", "-");
    ModelArtifact after = get("tiny");
    assertThat(after.getMetadata().getResourceVersion()).isEqualTo(afterFirstSsa);
    assertThat(after.getMetadata().getGeneration()).isEqualTo(1L);
    assertThat(kubectlExit(manifest, "diff", "-f", "-")).as("kubectl diff exit code").isZero();

    // The operator's managers own status (through the status subresource) and the finalizer.
    Set<String> operatorFields = new TreeSet<>();
    boolean ownsStatus = false;
    for (ManagedFieldsEntry m : after.getMetadata().getManagedFields()) {
      if (m.getManager().startsWith("kubectl") || m.getManager().equals("gitops")) {
        continue;
      }
      JsonNode fields = Serialization.jsonMapper().valueToTree(m.getFieldsV1());
      fields.fieldNames().forEachRemaining(f -> operatorFields.add(m.getManager() + " " + f));
      JsonNode metadata = fields.path("f:metadata");
      for (Iterator<String> it = metadata.fieldNames(); it.hasNext(); ) {
        operatorFields.add(m.getManager() + " f:metadata." + it.next());
      }
      // (managedFields name the subresource only from Kubernetes 1.22 on.)
      ownsStatus |= fields.has("f:status");
    }
    assertThat(ownsStatus).as("an operator manager owns f:status: %s", operatorFields).isTrue();
    assertThat(operatorFields)
        .as("fields owned by the operator's managers")
        .allMatch(
            f ->
                f.endsWith(" f:status")
                    || f.endsWith(" f:metadata")
                    || f.endsWith(" f:metadata.f:finalizers"))
        .noneMatch(f -> f.contains("f:spec"));

    // A copy lost after Ready: Degraded until it is loaded again.
    Pod pod = client.pods().inNamespace(ns).list().getItems().get(0);
    client.resource(pod).withGracePeriod(0).delete();
    ModelArtifact degraded = awaitCondition("tiny", "Degraded", c -> "True".equals(c.getStatus()));
    assertThat(health.evaluate(degraded).status()).isEqualTo("Degraded");
    assertThat(health.evaluate(degraded).message()).startsWith("ReplicaLost: ");
    keep("degraded-replica-lost", degraded);
    ModelArtifact again = awaitPhase("tiny", ArtifactPhase.Ready);
    assertThat(health.evaluate(again).status()).isEqualTo("Healthy");

    // A spec the operator refuses (the CRD cannot check a string quantity's range): Failed.
    kubectl(
        manifest(
            "badpiece", "s3://" + bucket + "/model/", "  distribution:\n    pieceSize: 128Ki\n"),
        "apply",
        "-f",
        "-");
    ModelArtifact failed = awaitPhase("badpiece", ArtifactPhase.Failed);
    assertThat(health.evaluate(failed).status()).isEqualTo("Degraded");
    assertThat(health.evaluate(failed).message())
        .startsWith("InvalidSpec: ")
        .contains("spec.distribution.pieceSize");
    keep("failed-invalid-spec", failed);

    // No node fits: Stalled, so Degraded (it cannot reach its replicas without a change).
    kubectl(
        manifest("nowhere", "s3://" + bucket + "/model/", "")
            .replace("tensorcast.io/e2e-group: " + ns, "tensorcast.io/e2e-group: nowhere"),
        "apply",
        "-f",
        "-");
    ModelArtifact pending =
        awaitCondition("nowhere", "Scheduled", c -> "InsufficientNodes".equals(c.getReason()));
    ArgoCdHealth.Result r = health.evaluate(pending);
    assertThat(r.status()).isEqualTo("Degraded");
    assertThat(r.message()).isEqualTo(describe(condition(pending, "Stalled")));
    assertThat(condition(pending, "Stalled").getReason()).isEqualTo("InsufficientNodes");
    keep("pending-insufficient-nodes", pending);
  }

  // ---------------------------------------------------------------------------------- helpers

  private void assertHealth(ModelArtifact a, String status, String message) {
    ArgoCdHealth.Result r = health.evaluate(a);
    assertThat(r.status()).as("Argo CD health of %s", a.getMetadata().getName()).isEqualTo(status);
    assertThat(r.message()).isEqualTo(message);
  }

  private static String describe(Condition c) {
    return c.getReason() + ": " + c.getMessage();
  }

  private String manifest(String name, String uri, String extraSpec) {
    return """
        apiVersion: tensorcast.io/v1alpha1
        kind: ModelArtifact
        metadata:
          name: %s
          namespace: %s
        spec:
          source:
            uri: %s
            endpoint: %s
            insecureEndpoint: true
            region: %s
            pathStyle: true
            credentialsSecretRef:
              name: %s
          placement:
            replicas: 1
            nodeSelector:
              tensorcast.io/e2e-group: %s
        %s"""
        .formatted(
            name, ns, uri, env.s3.endpoint(), S3MockServer.REGION, CREDENTIALS, ns, extraSpec);
  }

  private String seed() throws IOException {
    String bucket = ("gitops-" + ns).toLowerCase();
    env.s3.createBucket(bucket);
    try (Stream<Path> list = Files.list(Corpus.dir().resolve("index/safetensorsjl-tiny-sharded"))) {
      list.forEach(p -> env.s3.putFile(bucket, "model/" + p.getFileName(), p));
    }
    return bucket;
  }

  private ModelArtifact get(String name) {
    return client.resources(ModelArtifact.class).inNamespace(ns).withName(name).get();
  }

  private ModelArtifact awaitPhase(String name, ArtifactPhase phase) {
    return await()
        .atMost(LOAD_TIMEOUT)
        .pollInterval(Duration.ofMillis(200))
        .until(() -> get(name), a -> a.getStatus() != null && a.getStatus().getPhase() == phase);
  }

  private ModelArtifact awaitCondition(String name, String type, Predicate<Condition> test) {
    return await()
        .atMost(LOAD_TIMEOUT)
        .pollInterval(Duration.ofMillis(100))
        .until(
            () -> get(name),
            a -> {
              Condition c = a == null || a.getStatus() == null ? null : condition(a, type);
              return c != null && test.test(c);
            });
  }

  private static Condition condition(ModelArtifact a, String type) {
    return a.getStatus().getConditions().stream()
        .filter(c -> c.getType().equals(type))
        .findFirst()
        .orElse(null);
  }

  /** Writes {@code a} as a health-check fixture when {@value #FIXTURES_PROPERTY} is set. */
  private void keep(String name, ModelArtifact a) throws IOException {
    String dir = System.getProperty(FIXTURES_PROPERTY);
    if (dir == null || dir.isBlank()) {
      return;
    }
    ObjectNode tree = Serialization.jsonMapper().valueToTree(a);
    ObjectNode meta = (ObjectNode) tree.get("metadata");
    meta.remove(List.of("managedFields", "uid", "resourceVersion", "selfLink"));
    meta.put("namespace", "models");
    String yaml = Serialization.asYaml(tree).replace(ns, "models");
    Files.createDirectories(Path.of(dir));
    Files.writeString(Path.of(dir, name + ".yaml"), yaml);
  }

  private String kubectl(String stdin, String... args) throws Exception {
    Run r = run(stdin, args);
    assertThat(r.exit()).as("kubectl %s: %s", String.join(" ", args), r.out()).isZero();
    return r.out();
  }

  private int kubectlExit(String stdin, String... args) throws Exception {
    Run r = run(stdin, args);
    assertThat(r.exit()).as("kubectl %s: %s", String.join(" ", args), r.out()).isIn(0, 1);
    return r.exit();
  }

  private record Run(int exit, String out) {}

  private Run run(String stdin, String... args) throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add("kubectl");
    cmd.add("--kubeconfig=" + env.cluster.controlPlane().kubeconfig());
    cmd.add("--namespace=" + ns);
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    p.getOutputStream().write(stdin.getBytes(StandardCharsets.UTF_8));
    p.getOutputStream().close();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).as("kubectl %s finished", cmd).isTrue();
    return new Run(p.exitValue(), out);
  }
}
