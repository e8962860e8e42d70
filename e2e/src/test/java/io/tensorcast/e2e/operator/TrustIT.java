package io.tensorcast.e2e.operator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.sun.net.httpserver.HttpServer;
import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.CredentialsSecretRef;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.e2e.cluster.NodeSpec;
import io.tensorcast.e2e.cluster.SimulatedNode;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Trust on a real API server, with the operator running under the Helm chart's RBAC (no read access
 * to Secrets) and data-plane processes that the simulated kubelet starts with the pods' security
 * context (user, groups, capabilities, {@code no_new_privs}), their Secret volume and their one
 * host directory: each ModelArtifact gets its own Secret and NetworkPolicy (owned by it, gone with
 * it), its pods run unprivileged and mount only their own store directory, and specs that would
 * make the operator a confused deputy are {@code InvalidSpec} before any request leaves.
 */
class TrustIT extends OperatorTestBase {
  static final Duration TIMEOUT = Duration.ofSeconds(90);
  static final long UID = 10001;

  @Test
  void eachArtifactGetsItsOwnSecretDirectoryNetworkPolicyAndUnprivilegedPods() throws Exception {
    SimulatedNode node = node("trust");
    String bucket = seed();
    ModelArtifact created = client.resource(artifact("own", "s3://" + bucket + "/model/")).create();
    ModelArtifact ready = awaitPhase("own", ArtifactPhase.Ready);
    String uid = created.getMetadata().getUid();

    // The Secret: owned by the artifact, labelled, four values of the documented sizes.
    Secret secret = client.secrets().inNamespace(ns).withName("own-tensorcast").get();
    assertThat(secret).as("Secret own-tensorcast").isNotNull();
    assertThat(secret.getMetadata().getOwnerReferences())
        .singleElement()
        .satisfies(
            o -> {
              assertThat(o.getUid()).isEqualTo(uid);
              assertThat(o.getKind()).isEqualTo("ModelArtifact");
              assertThat(o.getController()).isTrue();
            });
    assertThat(secret.getMetadata().getLabels())
        .containsEntry(TensorcastConstants.LABEL_MANAGED_BY, "tensorcast-operator")
        .containsEntry(TensorcastConstants.LABEL_ARTIFACT, "own");
    Map<String, String> values = decoded(secret);
    assertThat(values).containsOnlyKeys("peer-secret", "read-token", "admin-token", "write-token");
    assertThat(Base64.getDecoder().decode(values.get("peer-secret"))).hasSize(32);
    assertThat(values.get("read-token")).hasSizeGreaterThanOrEqualTo(32);
    assertThat(values.get("admin-token"))
        .hasSizeGreaterThanOrEqualTo(32)
        .isNotEqualTo(values.get("read-token"));

    // The pod: one host directory, the artifact's own; the Secret read-only; unprivileged.
    Pod pod = pods().get(0);
    String storeRoot = DataPlanePod.storeRoot(ready, env.config);
    assertThat(storeRoot).isEqualTo("/dev/shm/tensorcast/" + ns + ".own");
    assertThat(pod.getSpec().getVolumes())
        .filteredOn(v -> v.getHostPath() != null)
        .extracting(v -> v.getHostPath().getPath())
        .containsExactly(storeRoot);
    Volume secretVolume =
        pod.getSpec().getVolumes().stream()
            .filter(v -> v.getSecret() != null)
            .findFirst()
            .orElseThrow();
    assertThat(secretVolume.getSecret().getSecretName()).isEqualTo("own-tensorcast");
    var container = pod.getSpec().getContainers().get(0);
    assertThat(container.getVolumeMounts())
        .anySatisfy(
            m -> {
              assertThat(m.getMountPath()).isEqualTo("/var/run/secrets/tensorcast");
              assertThat(m.getReadOnly()).isTrue();
            });
    assertThat(pod.getSpec().getSecurityContext().getRunAsNonRoot()).isTrue();
    assertThat(pod.getSpec().getSecurityContext().getSeccompProfile().getType())
        .isEqualTo("RuntimeDefault");
    assertThat(container.getSecurityContext().getAllowPrivilegeEscalation()).isFalse();
    assertThat(container.getSecurityContext().getReadOnlyRootFilesystem()).isTrue();
    assertThat(container.getSecurityContext().getCapabilities().getDrop()).containsExactly("ALL");
    assertThat(container.getSecurityContext().getCapabilities().getAdd())
        .containsExactly("IPC_LOCK");

    // The process the kubelet started: uid/gid 10001, fsGroup, no_new_privs, only IPC_LOCK.
    long pid = env.cluster.kubelet().podProcesses(ns, name(pod)).get(DataPlanePod.CONTAINER);
    Map<String, String> proc = procStatus(pid);
    assertThat(proc.get("Uid")).isEqualTo("10001\t10001\t10001\t10001");
    assertThat(proc.get("Gid")).isEqualTo("10001\t10001\t10001\t10001");
    assertThat(proc.get("Groups")).isEqualTo("10001");
    assertThat(proc.get("NoNewPrivs")).isEqualTo("1");
    assertThat(proc.get("CapBnd")).isEqualTo("0000000000004000");
    assertThat(proc.get("CapEff")).isEqualTo("0000000000004000");

    // It sees the Secret's files (mode 0400 + group read for fsGroup) and its one directory,
    // which the init container gave to uid 10001; the store it wrote is there.
    Path hostStore = node.hostPath(storeRoot);
    assertThat(Files.getAttribute(hostStore, "unix:uid")).isEqualTo((int) UID);
    Path copy = hostStore.resolve(DataPlanePod.artifactId(ready));
    assertThat(copy).isDirectory();
    assertThat(Files.getAttribute(copy, "unix:uid")).isEqualTo((int) UID);
    Path volume =
        env.cluster
            .controlPlane()
            .workDir()
            .resolve("nodes")
            .resolve(node.name())
            .resolve("pods")
            .resolve(ns + "_" + name(pod) + "_" + pod.getMetadata().getUid())
            .resolve("volumes")
            .resolve(DataPlanePod.SECRET_VOLUME);
    for (String key : List.of("peer-secret", "read-token", "admin-token")) {
      Path f = volume.resolve(key);
      assertThat(Files.readString(f)).as(key).isEqualTo(values.get(key));
      assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(f)))
          .as(key)
          .isEqualTo("r--r-----");
      assertThat(Files.getAttribute(f, "unix:gid")).as(key).isEqualTo((int) UID);
    }
    String log = Files.readString(env.cluster.kubelet().podLog(ns, name(pod)));
    assertThat(log)
        .contains("--store-root, " + hostStore + ",")
        .contains("--peer-secret-file, " + volume.resolve("peer-secret") + ",")
        .contains("--admin-token-file, " + volume.resolve("admin-token"));

    // The control endpoint wants the artifact's admin token; the operator (RBAC without Secret
    // reads) derived it and got the pod Ready with it.
    assertThat(status(pod, null)).isEqualTo(401);
    assertThat(status(pod, "x".repeat(43))).isEqualTo(401);
    assertThat(status(pod, values.get("admin-token"))).isEqualTo(200);

    // The NetworkPolicy: peer port from the artifact's pods, control port from the operator's
    // namespace and pods, and from labelled consumers.
    NetworkPolicy np =
        client.network().v1().networkPolicies().inNamespace(ns).withName("own-tensorcast").get();
    assertThat(np).as("NetworkPolicy own-tensorcast").isNotNull();
    assertThat(np.getMetadata().getOwnerReferences())
        .extracting(o -> o.getUid())
        .containsExactly(uid);
    Map<String, String> members =
        Map.of("app.kubernetes.io/name", "tensorcast-dataplane", "tensorcast.io/artifact", "own");
    assertThat(np.getSpec().getPodSelector().getMatchLabels()).isEqualTo(members);
    assertThat(pod.getMetadata().getLabels()).containsAllEntriesOf(members);
    assertThat(np.getSpec().getPolicyTypes()).containsExactly("Ingress");
    var peer = np.getSpec().getIngress().get(0);
    assertThat(peer.getPorts()).extracting(p -> p.getPort().getIntVal()).containsExactly(8472);
    assertThat(peer.getFrom())
        .singleElement()
        .satisfies(f -> assertThat(f.getPodSelector().getMatchLabels()).isEqualTo(members));
    var control = np.getSpec().getIngress().get(1);
    assertThat(control.getPorts()).extracting(p -> p.getPort().getIntVal()).containsExactly(8471);
    assertThat(control.getFrom()).hasSize(2);
    assertThat(control.getFrom().get(0).getNamespaceSelector().getMatchLabels())
        .isEqualTo(Map.of("kubernetes.io/metadata.name", OperatorEnvironment.OPERATOR_NAMESPACE));
    assertThat(control.getFrom().get(0).getPodSelector().getMatchLabels())
        .isEqualTo(Map.of("app.kubernetes.io/name", "tensorcast-operator"));
    assertThat(control.getFrom().get(1).getPodSelector().getMatchLabels())
        .isEqualTo(Map.of("consumer.tensorcast.io/own", "true"));

    // kubectl delete: the garbage collector removes Secret and NetworkPolicy with the artifact.
    kubectl("delete", "modelartifact", "own", "--wait=true", "--timeout=60s");
    await()
        .atMost(Duration.ofSeconds(30))
        .until(
            () ->
                client.secrets().inNamespace(ns).withName("own-tensorcast").get() == null
                    && client
                            .network()
                            .v1()
                            .networkPolicies()
                            .inNamespace(ns)
                            .withName("own-tensorcast")
                            .get()
                        == null);
    assertThat(copy).doesNotExist();
  }

  @Test
  void specsThatWouldMakeTheOperatorAConfusedDeputyAreInvalidAndSendNothing() throws Exception {
    node("deputy");
    client
        .resource(
            new SecretBuilder()
                .withNewMetadata()
                .withName("hf-token")
                .withNamespace(ns)
                .endMetadata()
                .withStringData(Map.of("HF_TOKEN", "hf_secret_that_must_not_travel"))
                .build())
        .create();
    AtomicInteger captured = new AtomicInteger();
    HttpServer capture =
        HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    capture.createContext(
        "/",
        ex -> {
          captured.incrementAndGet();
          ex.sendResponseHeaders(404, -1);
          ex.close();
        });
    capture.start();
    try {
      String http = "http://127.0.0.1:" + capture.getAddress().getPort();
      Map<String, String> expected = new java.util.LinkedHashMap<>();

      create(
          "hub-http",
          "hf://org/model",
          s -> {
            s.setEndpoint(http);
            s.setCredentialsSecretRef(hfToken());
          });
      expected.put(
          "hub-http",
          "spec.source.endpoint: '"
              + http
              + "' is plain http: requests and the credentials of Secret 'hf-token' would travel"
              + " unencrypted; use https (hf:// sources are reached over https only)");
      create(
          "hub-insecure",
          "hf://org/model",
          s -> {
            s.setEndpoint(http);
            s.setInsecureEndpoint(true);
            s.setCredentialsSecretRef(hfToken());
          });
      expected.put(
          "hub-insecure",
          "spec.source.insecureEndpoint: is not allowed for hf:// sources: the Hugging Face Hub"
              + " and its mirrors are reached over https only, so the Hub token never travels in"
              + " clear");
      create("metadata", "s3://models/m/", s -> s.setEndpoint("https://169.254.169.254"));
      expected.put(
          "metadata",
          "spec.source.endpoint: 'https://169.254.169.254' is a link-local address"
              + " (169.254.0.0/16), where cloud metadata services answer");
      String foreign = "file:///dev/shm/tensorcast/another-team.their-model/";
      create("foreign-copy", foreign, s -> {});
      expected.put(
          "foreign-copy",
          "spec.source.uri: '"
              + foreign
              + "' is inside the store root /dev/shm/tensorcast, which holds the copies of every"
              + " ModelArtifact on a node (of every namespace); a file:// source must be a"
              + " directory outside it");

      for (Map.Entry<String, String> e : expected.entrySet()) {
        ModelArtifact a =
            await()
                .atMost(TIMEOUT)
                .until(
                    () -> get(e.getKey()),
                    m -> m.getStatus() != null && m.getStatus().getPhase() == ArtifactPhase.Failed);
        Condition ready = condition(a, "Ready");
        assertThat(ready.getStatus()).isEqualTo("False");
        assertThat(ready.getReason()).as(e.getKey()).isEqualTo("InvalidSpec");
        assertThat(ready.getMessage()).as(e.getKey()).isEqualTo("invalid spec: " + e.getValue());
      }
      // Nothing was created for them and nothing was sent anywhere.
      await()
          .during(Duration.ofSeconds(3))
          .atMost(Duration.ofSeconds(10))
          .until(() -> pods().isEmpty() && captured.get() == 0);
      assertThat(client.secrets().inNamespace(ns).list().getItems())
          .extracting(s -> s.getMetadata().getName())
          .noneMatch(n -> n.endsWith("-tensorcast"));
      assertThat(client.network().v1().networkPolicies().inNamespace(ns).list().getItems())
          .isEmpty();
    } finally {
      capture.stop(0);
    }
  }

  @Test
  void aSecretOfTheArtifactsNameThatItDoesNotOwnIsLeftAloneAndNamed() throws Exception {
    node("guarded");
    String bucket = seed();
    client
        .resource(
            new SecretBuilder()
                .withNewMetadata()
                .withName("guarded-tensorcast")
                .withNamespace(ns)
                .endMetadata()
                .withStringData(Map.of("note", "mine"))
                .build())
        .create();

    client.resource(artifact("guarded", "s3://" + bucket + "/model/")).create();

    ModelArtifact a =
        await()
            .atMost(TIMEOUT)
            .until(
                () -> get("guarded"),
                m ->
                    m.getStatus() != null
                        && m.getStatus().getConditions().stream()
                            .anyMatch(c -> "NameConflict".equals(c.getReason())));
    assertThat(condition(a, "Ready").getMessage())
        .isEqualTo(
            "Secret "
                + ns
                + "/guarded-tensorcast exists and is not this ModelArtifact's (its first owner"
                + " reference is not uid "
                + a.getMetadata().getUid()
                + "); the operator keeps the artifact's peer secret and tokens under that name:"
                + " delete or rename that Secret");
    Secret mine = client.secrets().inNamespace(ns).withName("guarded-tensorcast").get();
    assertThat(mine.getData()).containsOnlyKeys("note");
    assertThat(mine.getMetadata().getOwnerReferences()).isNullOrEmpty();
    assertThat(pods()).isEmpty();

    // Once the name is free the artifact gets its Secret and loads (the operator looks again
    // on its resync: it does not watch Secrets).
    client.resource(mine).delete();
    ModelArtifact ready = awaitPhase("guarded", ArtifactPhase.Ready);
    assertThat(
            client
                .secrets()
                .inNamespace(ns)
                .withName("guarded-tensorcast")
                .get()
                .getMetadata()
                .getOwnerReferences())
        .extracting(o -> o.getUid())
        .containsExactly(ready.getMetadata().getUid());
  }

  // ---------------------------------------------------------------------------------- helpers

  private static CredentialsSecretRef hfToken() {
    return new CredentialsSecretRef("hf-token");
  }

  private SimulatedNode node(String suffix) {
    SimulatedNode node =
        env.cluster
            .kubelet()
            .addNode(
                NodeSpec.builder(ns + "-" + suffix, env.cluster.nextNodeAddress())
                    .label(GROUP_LABEL, ns)
                    .allocatable("memory", "4Gi")
                    .allocatable(TensorcastConstants.RDMA_RESOURCE, "1")
                    .build());
    nodes.add(node);
    return node;
  }

  private ModelArtifact artifact(String name, String uri) {
    ModelArtifact a = new ModelArtifact();
    a.getMetadata().setName(name);
    a.getMetadata().setNamespace(ns);
    ModelArtifactSpec spec = new ModelArtifactSpec();
    SourceSpec source = new SourceSpec();
    source.setUri(uri);
    if (uri.startsWith("s3://")) {
      source.setEndpoint(env.s3.endpoint().toString());
      source.setInsecureEndpoint(true);
      source.setRegion(S3MockServer.REGION);
      source.setPathStyle(true);
      source.setCredentialsSecretRef(new CredentialsSecretRef(CREDENTIALS));
    }
    spec.setSource(source);
    spec.getPlacement().setReplicas(1);
    spec.getPlacement().setRdma(RdmaPolicy.Required);
    spec.getPlacement().setNodeSelector(Map.of(GROUP_LABEL, ns));
    a.setSpec(spec);
    return a;
  }

  private void create(String name, String uri, Consumer<SourceSpec> change) {
    ModelArtifact a = artifact(name, uri);
    SourceSpec s = a.getSpec().getSource();
    s.setEndpoint(null);
    s.setInsecureEndpoint(null);
    s.setRegion(null);
    s.setPathStyle(null);
    s.setCredentialsSecretRef(null);
    change.accept(s);
    client.resource(a).create();
  }

  private ModelArtifact get(String name) {
    return client.resources(ModelArtifact.class).inNamespace(ns).withName(name).get();
  }

  private ModelArtifact awaitPhase(String name, ArtifactPhase phase) {
    return await()
        .atMost(TIMEOUT)
        .pollInterval(Duration.ofMillis(250))
        .until(() -> get(name), a -> a.getStatus() != null && a.getStatus().getPhase() == phase);
  }

  private static Condition condition(ModelArtifact a, String type) {
    return a.getStatus().getConditions().stream()
        .filter(c -> type.equals(c.getType()))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no condition " + type + " in " + a.getStatus()));
  }

  private List<Pod> pods() {
    return client
        .pods()
        .inNamespace(ns)
        .withLabel(TensorcastConstants.LABEL_ARTIFACT)
        .list()
        .getItems();
  }

  private static String name(Pod p) {
    return p.getMetadata().getName();
  }

  private static Map<String, String> decoded(Secret s) {
    return s.getData().entrySet().stream()
        .collect(
            Collectors.toMap(
                Map.Entry::getKey,
                e -> new String(Base64.getDecoder().decode(e.getValue()), StandardCharsets.UTF_8)));
  }

  /** The fields of {@code /proc/<pid>/status} (name → value, trimmed). */
  private static Map<String, String> procStatus(long pid) throws IOException {
    return Files.readAllLines(Path.of("/proc", Long.toString(pid), "status")).stream()
        .filter(l -> l.contains(":"))
        .collect(
            Collectors.toMap(
                l -> l.substring(0, l.indexOf(':')),
                l -> l.substring(l.indexOf(':') + 1).strip(),
                (x, y) -> x));
  }

  /** Status code of {@code GET /status} on the pod, with {@code token} as bearer if not null. */
  private int status(Pod pod, String token) throws Exception {
    HttpRequest.Builder req =
        HttpRequest.newBuilder(
                URI.create(
                    "http://"
                        + pod.getStatus().getPodIP()
                        + ":"
                        + env.config.controlPort()
                        + "/status"))
            .timeout(Duration.ofSeconds(5));
    if (token != null) {
      req.header("Authorization", "Bearer " + token);
    }
    return HttpClient.newHttpClient()
        .send(req.build(), HttpResponse.BodyHandlers.discarding())
        .statusCode();
  }

  /** The corpus's tiny sharded model under {@code model/} in a bucket of this namespace. */
  private String seed() throws IOException {
    String bucket = ("trust-" + ns).toLowerCase();
    env.s3.createBucket(bucket);
    Set<Path> files = new TreeSet<>();
    try (Stream<Path> list = Files.list(Corpus.dir().resolve("index/safetensorsjl-tiny-sharded"))) {
      list.forEach(files::add);
    }
    for (Path f : files) {
      env.s3.putFile(bucket, "model/" + f.getFileName(), f);
    }
    return bucket;
  }

  private String kubectl(String... args) throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>();
    cmd.add("kubectl");
    cmd.add("--kubeconfig=" + env.cluster.controlPlane().kubeconfig());
    cmd.add("--namespace=" + ns);
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(90, TimeUnit.SECONDS)).as("kubectl %s finished", cmd).isTrue();
    assertThat(p.exitValue()).as("kubectl %s: %s", String.join(" ", args), out).isZero();
    return out;
  }
}
