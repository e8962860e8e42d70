package io.tensorcast.e2e.demo;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.fabric8.kubernetes.api.model.NamespaceBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinition;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.javaoperatorsdk.operator.Operator;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactNodeStatus;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.dataplane.cli.ProgressRenderer;
import io.tensorcast.dataplane.cli.ProgressSnapshot;
import io.tensorcast.dataplane.cli.TransferRate;
import io.tensorcast.dataplane.synthetic.SyntheticModel;
import io.tensorcast.e2e.cluster.Crds;
import io.tensorcast.e2e.cluster.LocalControlPlane;
import io.tensorcast.e2e.cluster.NodeSpec;
import io.tensorcast.e2e.cluster.ProcessContainerRuntime;
import io.tensorcast.e2e.cluster.SimulatedKubelet;
import io.tensorcast.operator.OperatorMain;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The main job on one machine: a real control plane (etcd, kube-apiserver, controller-manager,
 * scheduler), an S3-compatible server holding a model, the Tensorcast operator, three simulated
 * nodes (two RDMA-capable) whose kubelet runs data-plane pods as local processes; a ModelArtifact
 * applied with {@code kubectl}; progress until Ready; the {@code kubectl get} table; every node's
 * bytes checked against the source; cleanup checked after delete.
 *
 * <p>Exit code 0 when every check passed, 1 otherwise.
 */
@Command(
    name = "./tensorcast demo",
    mixinStandardHelpOptions = true,
    description = "Run Tensorcast end to end on a local control plane with simulated nodes.")
public final class ClusterDemo implements Callable<Integer> {
  private static final String NAMESPACE = "tensorcast-demo";
  private static final String BUCKET = "models";
  private static final String PREFIX = "demo/llama-small/";
  private static final String ARTIFACT = "llama-small";

  @Option(
      names = "--model",
      description =
          "A local model directory to serve instead of the generated one (all its files are"
              + " uploaded).")
  Path model;

  @Option(
      names = "--preset",
      defaultValue = "small-llama",
      description = "Generated model preset: tiny, small-llama (default), medium-llama.")
  String preset;

  @Option(names = "--replicas", defaultValue = "2", description = "Nodes holding a copy (1-2).")
  int replicas;

  @Option(
      names = "--keep-running",
      description = "Leave the cluster running for kubectl until Ctrl-C (skips the delete step).")
  boolean keepRunning;

  @Option(
      names = "--workdir",
      defaultValue = ".tensorcast/demo",
      description =
          "Working directory for logs, node roots, kubeconfig (default ${DEFAULT-VALUE}).")
  Path workDir;

  @Option(
      names = "--node-root",
      defaultValue = "/dev/shm/tensorcast-demo",
      description =
          "Where the simulated nodes' file systems (and so their page-locked stores) live; on a"
              + " memory-backed file system like a real node's store (default ${DEFAULT-VALUE}).")
  Path nodeRoot;

  @Option(
      names = "--dataplane-jar",
      defaultValue = "dataplane/target/tensorcast-dataplane.jar",
      description =
          "The data-plane jar the simulated kubelet runs for tensorcast/dataplane images.")
  Path dataplaneJar;

  @Option(
      names = "--s3mock-jar",
      defaultValue = "e2e/target/test-servers/s3mock-exec.jar",
      description = "S3Mock's exec jar (the S3-compatible server).")
  Path s3mockJar;

  @Option(names = "--timeout", defaultValue = "PT10M", description = "Bound on the wait for Ready.")
  Duration timeout;

  /** Exit code when a signal stopped the demo before it finished. */
  static final int STOPPED = 130;

  /** The demo's log file, under the working directory. */
  static final String LOG_FILE = "demo.log";

  /** The system property the demo's logback configuration reads the log file's path from. */
  static final String LOG_FILE_PROPERTY = "tensorcast.demo.log";

  /** The demo's logback configuration (a class-path resource of this module). */
  static final String LOGBACK_CONFIG = "tensorcast-demo-logback.xml";

  private final PrintStream out = System.out;
  private final List<String> failures = new ArrayList<>();

  /** What the demo started and has not stopped yet, last started first. */
  private final Deque<AutoCloseable> running = new ArrayDeque<>();

  private volatile boolean stopping;

  /** Where the bytes came from, per node and in total; printed at the end. */
  private final List<String> distribution = new ArrayList<>();

  public static void main(String[] args) {
    System.exit(new CommandLine(new ClusterDemo()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    workDir = workDir.toAbsolutePath();
    TestFiles.deleteTree(workDir.resolve("cluster"));
    nodeRoot = nodeRoot.toAbsolutePath();
    TestFiles.deleteTree(nodeRoot);
    Files.createDirectories(workDir);
    Path logFile = workDir.resolve(LOG_FILE);
    routeLogsTo(logFile);
    require(Files.isRegularFile(dataplaneJar), "data-plane jar not found: " + dataplaneJar);
    require(Files.isRegularFile(s3mockJar), "S3Mock jar not found: " + s3mockJar);
    System.setProperty("tensorcast.s3mock.jar", s3mockJar.toAbsolutePath().toString());
    out.println("Logs of the operator and the demo's own components: " + logFile);
    Thread stopHook = new Thread(this::stopOnSignal, "tensorcast-demo-stop");
    Runtime.getRuntime().addShutdownHook(stopHook);

    try {
      Path modelDir = model != null ? model.toAbsolutePath() : generatedModel();
      Map<String, String> sourceDigests = digests(modelDir);

      step("starting an S3-compatible server (S3Mock) on loopback and uploading " + modelDir);
      S3MockServer s3 = started(S3MockServer.start());
      s3.createBucket(BUCKET);
      for (String rel : sourceDigests.keySet()) {
        s3.putFile(BUCKET, PREFIX + rel, modelDir.resolve(rel));
      }
      out.printf(
          "    %d files at s3://%s/%s on %s%n",
          sourceDigests.size(), BUCKET, PREFIX, s3.endpoint());

      step("starting the control plane (etcd, kube-apiserver, controller-manager, scheduler)");
      LocalControlPlane cp = started(LocalControlPlane.start(workDir.resolve("cluster")));
      KubernetesClient client = cp.client();
      out.println("    kubeconfig: " + cp.kubeconfig());
      applyCrd(client);

      step(
          "adding 3 simulated nodes: node-a, node-b advertise tensorcast.io/rdma; node-c does not");
      ProcessContainerRuntime runtime =
          new ProcessContainerRuntime()
              .map(
                  "tensorcast/dataplane",
                  javaBin(),
                  "-Xmx256m",
                  "-jar",
                  dataplaneJar.toAbsolutePath().toString())
              .mapProgram("tensorcast/dataplane", "chown", "chown");
      SimulatedKubelet kubelet = started(new SimulatedKubelet(client, nodeRoot, runtime));
      out.println("    node file systems (and pod logs) under " + nodeRoot);
      out.println(
          "    each simulated node holds one artifact at a time: its data-plane pod listens on"
              + " the node's own address, port 8471, which a second pod on that node cannot take");
      kubelet.addNode(node("node-a", "127.0.42.1", true));
      kubelet.addNode(node("node-b", "127.0.42.2", true));
      kubelet.addNode(node("node-c", "127.0.42.3", false));

      step("starting the Tensorcast operator (its log: " + logFile + ")");
      Operator operator = OperatorMain.create(client, OperatorConfig.fromEnvironment());
      started(operator::stop);
      operator.start();
      return runScenario(cp, client, kubelet, s3.endpoint(), sourceDigests);
    } catch (Exception e) {
      if (stopping) {
        return STOPPED;
      }
      throw e;
    } finally {
      if (!stopping) {
        try {
          Runtime.getRuntime().removeShutdownHook(stopHook);
        } catch (IllegalStateException shuttingDown) {
          // the hook runs now and stops everything itself
        }
        stopAll();
        finish(logFile);
      }
    }
  }

  /** Registers something the demo started; {@link #stopAll()} stops it, last started first. */
  private <T extends AutoCloseable> T started(T resource) {
    synchronized (running) {
      if (stopping) {
        closeQuietly(resource);
        throw new IllegalStateException("the demo is stopping");
      }
      running.push(resource);
    }
    return resource;
  }

  /**
   * Stops everything the demo started, last started first: the operator, the simulated nodes (and
   * so the data-plane pod processes), the control plane, S3Mock (which deletes its store).
   * Idempotent; safe from the main thread and the shutdown hook at once.
   */
  private void stopAll() {
    synchronized (running) {
      while (!running.isEmpty()) {
        closeQuietly(running.pop());
      }
    }
  }

  private static void closeQuietly(AutoCloseable resource) {
    try {
      resource.close();
    } catch (Exception e) {
      System.err.println("tensorcast demo: while stopping: " + e);
    }
  }

  /**
   * The shutdown hook (SIGINT, SIGTERM, or an exit while the demo runs): stops every process the
   * demo started and removes the nodes' file systems, whatever the main thread is doing.
   */
  private void stopOnSignal() {
    stopping = true;
    out.println();
    out.println("==> stopping: the operator, the simulated nodes' pods, the control plane, S3Mock");
    stopAll();
    TestFiles.deleteTreeQuietly(nodeRoot);
    out.println("    stopped; removed " + nodeRoot + " (logs stay in " + workDir + ")");
    out.flush();
  }

  private void finish(Path logFile) {
    if (failures.isEmpty()) {
      TestFiles.deleteTreeQuietly(nodeRoot);
    } else {
      out.println(
          "pod logs kept under " + nodeRoot.resolve("pods") + "; the demo's log: " + logFile);
    }
    out.println();
    if (!distribution.isEmpty()) {
      out.println("Where the bytes came from (status.nodes[].bytesFromSource / bytesFromPeers):");
      distribution.forEach(out::println);
      out.println();
    }
    if (failures.isEmpty()) {
      out.println("DEMO PASSED");
    } else {
      out.println("DEMO FAILED:");
      failures.forEach(f -> out.println("  - " + f));
    }
  }

  /**
   * Sends every log line of this JVM (the operator's, the harness's) to {@code file} instead of the
   * terminal, so the demo's own lines are the only ones on screen. Takes effect because nothing has
   * logged yet: logback reads {@code logback.configurationFile} when it first starts.
   */
  static void routeLogsTo(Path file) {
    System.setProperty(LOG_FILE_PROPERTY, file.toString());
    System.setProperty("logback.configurationFile", LOGBACK_CONFIG);
  }

  private int runScenario(
      LocalControlPlane cp,
      KubernetesClient client,
      SimulatedKubelet kubelet,
      URI s3Endpoint,
      Map<String, String> sourceDigests)
      throws Exception {
    client
        .namespaces()
        .resource(
            new NamespaceBuilder().withNewMetadata().withName(NAMESPACE).endMetadata().build())
        .create();
    client
        .secrets()
        .inNamespace(NAMESPACE)
        .resource(
            new SecretBuilder()
                .withNewMetadata()
                .withName("model-store-credentials")
                .endMetadata()
                .addToStringData("AWS_ACCESS_KEY_ID", S3MockServer.ACCESS_KEY)
                .addToStringData("AWS_SECRET_ACCESS_KEY", S3MockServer.SECRET_KEY)
                .build())
        .create();

    Path manifest = workDir.resolve("modelartifact.yaml");
    Files.writeString(manifest, manifest(s3Endpoint), StandardCharsets.UTF_8);
    step("kubectl apply -f " + manifest);
    out.print(indent(Files.readString(manifest)));
    kubectl(cp, "apply", "-n", NAMESPACE, "-f", manifest.toString());

    step("waiting for Ready (progress from the data-plane pods' own reports)");
    ModelArtifact ready = awaitTerminal(client);
    kubectl(cp, "get", "modelartifacts", "-n", NAMESPACE, "-o", "wide");
    kubectl(cp, "get", "pods", "-n", NAMESPACE, "-o", "wide");
    if (ready == null || ready.getStatus().getPhase() != ArtifactPhase.Ready) {
      failures.add(
          "the ModelArtifact did not become Ready: "
              + (ready == null ? "timed out" : describe(ready.getStatus())));
      return 1;
    }

    step("verifying every node's copy against the source, byte for byte (SHA-256)");
    verifyCopies(client, sourceDigests);
    recordDistribution(ready.getStatus());

    if (keepRunning) {
      step("cluster left running; Ctrl-C to stop");
      out.println("    export KUBECONFIG=" + cp.kubeconfig());
      out.println("    kubectl get modelartifacts -A -o wide");
      Thread.currentThread().join();
    }

    step("kubectl delete modelartifact " + ARTIFACT + " (finalizer frees the nodes' memory)");
    List<Path> storeDirs = storeDirectories(client);
    kubectl(
        cp, "delete", "modelartifact", ARTIFACT, "-n", NAMESPACE, "--wait=true", "--timeout=120s");
    awaitPodsGone(client);
    for (Path dir : storeDirs) {
      if (Files.exists(dir)) {
        failures.add("store directory still present after delete: " + dir);
      } else {
        out.println("    removed: " + dir);
      }
    }
    return failures.isEmpty() ? 0 : 1;
  }

  private String manifest(URI s3Endpoint) {
    return """
        apiVersion: tensorcast.io/v1alpha1
        kind: ModelArtifact
        metadata:
          name: %s
        spec:
          source:
            uri: s3://%s/%s
            endpoint: %s
            insecureEndpoint: true
            region: us-east-1
            pathStyle: true
            credentialsSecretRef:
              name: model-store-credentials
          kind: ModelWeights
          placement:
            replicas: %d
            rdma: Required
          memory:
            pinned: true
            limit: 8Gi
          distribution:
            mode: PeerToPeer
            pieceSize: 1Mi
        """
        .formatted(ARTIFACT, BUCKET, PREFIX, s3Endpoint, replicas);
  }

  /**
   * Polls the artifact until Ready or Failed (null after {@link #timeout}). Prints its status line
   * whenever the phase, READY, size or a failing condition changes, and the bytes the nodes have
   * loaded with the rate of the last 8 s and the ETA from it: as one bar redrawn in place on a
   * console (the status lines appear above it), as a plain line every 5 s otherwise.
   */
  private ModelArtifact awaitTerminal(KubernetesClient client) throws InterruptedException {
    Instant deadline = Instant.now().plus(timeout);
    PrintWriter terminal = new PrintWriter(out, true, StandardCharsets.UTF_8);
    ProgressRenderer renderer =
        System.console() != null
            ? new ProgressRenderer.Bar(terminal)
            : new ProgressRenderer.Plain(terminal, System::nanoTime, Duration.ofSeconds(5));
    PrintStream lines =
        renderer instanceof ProgressRenderer.Bar bar
            ? new PrintStream(bar.logSink(), true, StandardCharsets.UTF_8)
            : out;
    TransferRate rate = new TransferRate(TransferRate.DEFAULT_WINDOW);
    String last = "";
    ProgressSnapshot snapshot = null;
    try {
      while (Instant.now().isBefore(deadline)) {
        ModelArtifact ma =
            client.resources(ModelArtifact.class).inNamespace(NAMESPACE).withName(ARTIFACT).get();
        if (ma != null && ma.getStatus() != null) {
          ModelArtifactStatus s = ma.getStatus();
          String key = s.getPhase() + "|" + s.getReady() + "|" + s.getSize() + "|" + failed(s);
          if (!key.equals(last)) {
            lines.println("    " + describe(s));
            last = key;
          }
          snapshot = bytes(s, rate);
          if (s.getPhase() == ArtifactPhase.Ready || s.getPhase() == ArtifactPhase.Failed) {
            renderer.finish(snapshot);
            snapshot = null;
            return ma;
          }
          renderer.update(snapshot);
        }
        Thread.sleep(500);
      }
      return null;
    } finally {
      if (snapshot != null) {
        renderer.finish(snapshot);
      }
      if (lines != out) {
        lines.close(); // the bar's log sink: flushed, never the demo's own output
      }
    }
  }

  /** The bytes all nodes have loaded of {@code replicas} copies, with the windowed rate. */
  private ProgressSnapshot bytes(ModelArtifactStatus s, TransferRate rate) {
    long done = 0;
    for (ArtifactNodeStatus n : s.getNodes()) {
      done += n.getBytesLoaded() == null ? 0 : n.getBytesLoaded();
    }
    long total = s.getTotalBytes() == null ? 0 : s.getTotalBytes() * replicas;
    rate.record(System.nanoTime(), done);
    return ProgressSnapshot.of("    bytes", done, total, rate);
  }

  private static String failed(ModelArtifactStatus s) {
    return s.getConditions() == null
        ? ""
        : s.getConditions().stream()
            .filter(c -> "False".equals(c.getStatus()) && c.getReason() != null)
            .map(c -> c.getType() + "=False " + c.getReason() + ": " + c.getMessage())
            .findFirst()
            .orElse("");
  }

  static String describe(ModelArtifactStatus s) {
    return String.format(
        "phase=%-9s ready=%-4s size=%-10s progress=%-5s %s",
        s.getPhase(),
        s.getReady(),
        s.getSize() == null ? "unknown" : s.getSize(),
        s.getProgress() == null ? "-" : s.getProgress(),
        s.getPhase() == ArtifactPhase.Ready ? "" : failed(s));
  }

  private void verifyCopies(KubernetesClient client, Map<String, String> sourceDigests)
      throws Exception {
    int copies = 0;
    for (Pod pod : dataPlanePods(client)) {
      DataPlaneStatus st = podStatus(client, pod);
      Path dir = Path.of(st.storeDirectory());
      Map<String, String> got = digests(dir);
      if (got.equals(sourceDigests)) {
        copies++;
        out.printf(
            "    %s on %s: %d files identical in %s%n",
            pod.getMetadata().getName(), pod.getSpec().getNodeName(), got.size(), dir);
      } else {
        failures.add("copy on " + pod.getSpec().getNodeName() + " differs from the source: " + dir);
      }
      Boolean rdmaNode =
          client
              .nodes()
              .withName(pod.getSpec().getNodeName())
              .get()
              .getMetadata()
              .getLabels()
              .containsKey(TensorcastConstants.RDMA_NODE_LABEL);
      if (!rdmaNode) {
        failures.add("pod " + pod.getMetadata().getName() + " ran on a node without RDMA");
      }
    }
    if (copies != replicas) {
      failures.add("expected " + replicas + " verified copies, found " + copies);
    }
  }

  /**
   * Per node: bytes read from the source and bytes received from peers; in total: bytes read from
   * the source over the artifact's size (about 1.0 with PeerToPeer, about replicas with
   * SourceOnly).
   */
  private void recordDistribution(ModelArtifactStatus s) {
    for (ArtifactNodeStatus n : s.getNodes()) {
      distribution.add(
          String.format(
              "    %-28s from source %8.1f MiB   from peers %8.1f MiB",
              n.getNode(), mib(n.getBytesFromSource()), mib(n.getBytesFromPeers())));
    }
    long total = s.getTotalBytes() == null ? 0 : s.getTotalBytes();
    long source = s.getBytesFromSource() == null ? 0 : s.getBytesFromSource();
    distribution.add(
        String.format(
            "    total from source %.1f MiB for a %.1f MiB artifact on %d node(s): %.2f x its size",
            mib(source),
            mib(total),
            s.getNodes().size(),
            total == 0 ? 0.0 : (double) source / total));
  }

  private static double mib(Long bytes) {
    return bytes == null ? 0.0 : bytes / 1048576.0;
  }

  private List<Path> storeDirectories(KubernetesClient client) throws Exception {
    List<Path> dirs = new ArrayList<>();
    for (Pod pod : dataPlanePods(client)) {
      dirs.add(Path.of(podStatus(client, pod).storeDirectory()));
    }
    return dirs;
  }

  private List<Pod> dataPlanePods(KubernetesClient client) {
    return client
        .pods()
        .inNamespace(NAMESPACE)
        .withLabel(TensorcastConstants.LABEL_ARTIFACT, ARTIFACT)
        .list()
        .getItems();
  }

  /**
   * {@code GET /status} of a data-plane pod with the artifact's admin token, which the demo (as
   * cluster admin) reads from the artifact's Secret {@code <name>-tensorcast}.
   */
  private static DataPlaneStatus podStatus(KubernetesClient client, Pod pod) throws Exception {
    var secret = client.secrets().inNamespace(NAMESPACE).withName(ARTIFACT + "-tensorcast").get();
    String token =
        new String(
            java.util.Base64.getDecoder()
                .decode(secret.getData().get(TensorcastConstants.SECRET_ADMIN_TOKEN)),
            java.nio.charset.StandardCharsets.UTF_8);
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    HttpResponse<String> r =
        http.send(
            HttpRequest.newBuilder(
                    URI.create("http://" + pod.getStatus().getPodIP() + ":8471/status"))
                .header("Authorization", "Bearer " + token)
                .timeout(Duration.ofSeconds(5))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    return new ObjectMapper().readValue(r.body(), DataPlaneStatus.class);
  }

  private void awaitPodsGone(KubernetesClient client) throws InterruptedException {
    Instant deadline = Instant.now().plusSeconds(120);
    while (Instant.now().isBefore(deadline)) {
      if (dataPlanePods(client).isEmpty()) {
        out.println("    data-plane pods gone");
        return;
      }
      Thread.sleep(500);
    }
    failures.add("data-plane pods still present 120 s after delete");
  }

  private Path generatedModel() throws IOException {
    Path dir =
        Path.of(System.getProperty("user.home"), ".cache", "tensorcast", "demo-model-" + preset);
    if (!Files.isRegularFile(dir.resolve("model.safetensors.index.json"))) {
      step("generating a deterministic " + preset + " model in " + dir);
      long bytes = SyntheticModel.write(dir, SyntheticModel.Config.preset(preset), 1);
      out.printf("    %.1f MiB of BF16 weights%n", bytes / 1048576.0);
    } else {
      step("using the generated " + preset + " model in " + dir);
    }
    return dir;
  }

  private void applyCrd(KubernetesClient client) {
    CustomResourceDefinition crd = Crds.applyModelArtifact(client);
    Crds.applyTensorShardSet(client);
    out.println("    CRD " + crd.getMetadata().getName() + " established");
  }

  private static NodeSpec node(String name, String address, boolean rdma) {
    NodeSpec.Builder b =
        NodeSpec.builder(name, address)
            .allocatable("memory", "16Gi")
            .allocatable("cpu", "8")
            .label("topology.kubernetes.io/zone", rdma ? "zone-" + name.charAt(5) : "zone-c");
    if (rdma) {
      b.allocatable(TensorcastConstants.RDMA_RESOURCE, "4")
          .label(TensorcastConstants.RDMA_NODE_LABEL, TensorcastConstants.RDMA_NODE_LABEL_VALUE);
    }
    return b.build();
  }

  private void kubectl(LocalControlPlane cp, String... args) throws Exception {
    List<String> cmd =
        new ArrayList<>(List.of("kubectl", "--kubeconfig", cp.kubeconfig().toString()));
    cmd.addAll(List.of(args));
    out.println("    $ kubectl " + String.join(" ", args));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    int rc = p.waitFor();
    out.print(indent(text));
    if (rc != 0) {
      failures.add("kubectl " + String.join(" ", args) + " exited " + rc);
    }
  }

  private static Map<String, String> digests(Path dir) throws IOException {
    Map<String, String> out = new TreeMap<>();
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path f : files.filter(Files::isRegularFile).toList()) {
        out.put(dir.relativize(f).toString().replace('\\', '/'), sha256(f));
      }
    }
    return out;
  }

  private static String sha256(Path f) throws IOException {
    try (InputStream in = Files.newInputStream(f)) {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      byte[] buf = new byte[1 << 20];
      for (int n; (n = in.read(buf)) > 0; ) {
        md.update(buf, 0, n);
      }
      return HexFormat.of().formatHex(md.digest());
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private void step(String what) {
    out.println();
    out.println("==> " + what);
  }

  private static String indent(String text) {
    StringBuilder b = new StringBuilder();
    for (String line : text.split("\n", -1)) {
      if (!line.isEmpty()) {
        b.append("    ").append(line).append('\n');
      }
    }
    return b.toString();
  }

  private static String javaBin() {
    return Path.of(System.getProperty("java.home"), "bin", "java").toString();
  }

  private static void require(boolean ok, String message) {
    if (!ok) {
      throw new IllegalStateException(message);
    }
  }
}
