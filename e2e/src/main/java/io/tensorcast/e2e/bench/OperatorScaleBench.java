package io.tensorcast.e2e.bench;

import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.NamespaceBuilder;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.http.AsyncBody;
import io.fabric8.kubernetes.client.http.HttpRequest;
import io.fabric8.kubernetes.client.http.HttpResponse;
import io.fabric8.kubernetes.client.http.Interceptor;
import io.javaoperatorsdk.operator.Operator;
import io.javaoperatorsdk.operator.api.monitoring.Metrics;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.pod.LoadRetry;
import io.tensorcast.dataplane.pod.ServeSettings;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.synthetic.SyntheticModel;
import io.tensorcast.e2e.cluster.Crds;
import io.tensorcast.e2e.cluster.InProcessContainerRuntime;
import io.tensorcast.e2e.cluster.LocalControlPlane;
import io.tensorcast.e2e.cluster.NodeSpec;
import io.tensorcast.e2e.cluster.SimulatedKubelet;
import io.tensorcast.operator.OperatorMain;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.io.ByteArrayInputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Operator scale check (a benchmark, not a test): many small ModelArtifacts, one replica each,
 * reconciled to Ready on the local control plane with many simulated RDMA nodes, the operator and
 * every data-plane pod in this JVM ({@link InProcessContainerRuntime}).
 *
 * <p>Phases: (1) control plane, S3Mock with a tiny generated model, nodes; (2) baseline: the same
 * number of {@link DataPlaneServer}s started directly (no operator, no pods) until all loaded, to
 * show what the data planes alone cost in this heap; (3) the operator starts, all artifacts are
 * created at once, and the run waits until every one is Ready; (4) all are deleted and the pods
 * must go away. Prints one table; exit code 0 when every artifact became Ready and cleanup
 * completed, 1 otherwise.
 *
 * <p>Counted: reconciliations per artifact (JOSDK {@link Metrics}, {@code
 * reconciliationExecutionStarted}), status writes and pod creations per artifact (HTTP requests the
 * operator's own client sent and the API server answered with 2xx). Heap: {@link MemoryMXBean} heap
 * used sampled every 100 ms (peak, garbage included) and live heap after a {@code System.gc()} at
 * the phase ends.
 */
@Command(
    name = "operator-scale-bench",
    mixinStandardHelpOptions = true,
    description = "Time N ModelArtifacts to Ready on a local control plane with simulated nodes.")
public final class OperatorScaleBench implements Callable<Integer> {
  private static final String NAMESPACE = "scale-bench";
  private static final String BUCKET = "models";
  private static final String PREFIX = "bench/tiny/";
  private static final Pattern STATUS_PATH =
      Pattern.compile(
          ".*/apis/tensorcast\\.io/[^/]+/namespaces/[^/]+/modelartifacts/([^/?]+)/status.*");
  private static final Pattern POD_CREATE_PATH =
      Pattern.compile(".*/api/v1/namespaces/[^/]+/pods$");

  @Option(names = "--artifacts", defaultValue = "100", description = "ModelArtifacts to create.")
  int artifacts;

  @Option(names = "--nodes", defaultValue = "50", description = "Simulated RDMA nodes.")
  int nodes;

  @Option(
      names = "--create-threads",
      defaultValue = "8",
      description = "Threads creating the ModelArtifacts.")
  int createThreads;

  @Option(names = "--skip-baseline", description = "Skip the data-planes-alone phase.")
  boolean skipBaseline;

  @Option(
      names = "--workdir",
      defaultValue = ".tensorcast/bench-scale",
      description = "Logs, node roots, kubeconfig (default ${DEFAULT-VALUE}).")
  Path workDir;

  @Option(
      names = "--s3mock-jar",
      defaultValue = "e2e/target/test-servers/s3mock-exec.jar",
      description = "S3Mock's exec jar.")
  Path s3mockJar;

  @Option(names = "--timeout", defaultValue = "PT10M", description = "Bound on each wait.")
  Duration timeout;

  private final PrintStream out = System.out;
  private final List<String> failures = new ArrayList<>();
  private final HeapSampler heap = new HeapSampler();
  private final Map<String, String> results = new java.util.LinkedHashMap<>();

  public static void main(String[] args) {
    System.exit(new CommandLine(new OperatorScaleBench()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    require(nodes >= 1 && nodes <= 250, "--nodes must be 1..250");
    require(artifacts >= 1 && artifacts <= 4 * nodes, "--artifacts must be 1..4 x --nodes");
    workDir = workDir.toAbsolutePath();
    TestFiles.deleteTree(workDir);
    Files.createDirectories(workDir);
    require(Files.isRegularFile(s3mockJar), "S3Mock jar not found: " + s3mockJar);
    System.setProperty("tensorcast.s3mock.jar", s3mockJar.toAbsolutePath().toString());
    Path model = workDir.resolve("model");
    long modelBytes = SyntheticModel.write(model, SyntheticModel.Config.TINY, 1);
    heap.start();
    try (S3MockServer s3 = S3MockServer.start()) {
      s3.createBucket(BUCKET);
      int files = 0;
      try (Stream<Path> walk = Files.walk(model)) {
        for (Path f : walk.filter(Files::isRegularFile).toList()) {
          s3.putFile(BUCKET, PREFIX + model.relativize(f), f);
          files++;
        }
      }
      results.put("model", files + " files, " + modelBytes + " B of weights (SyntheticModel TINY)");
      step("control plane, " + nodes + " simulated RDMA nodes");
      try (LocalControlPlane cp = LocalControlPlane.start(workDir.resolve("cluster"));
          InProcessContainerRuntime runtime = new InProcessContainerRuntime();
          SimulatedKubelet kubelet =
              new SimulatedKubelet(cp.client(), workDir.resolve("cluster"), runtime)) {
        applyCrd(cp.client());
        for (int i = 1; i <= nodes; i++) {
          kubelet.addNode(node(i));
        }
        long setupLive = heap.liveAfterGc();
        results.put(
            "live heap after setup (control-plane clients, kubelet, S3Mock client)",
            mib(setupLive));
        if (!skipBaseline) {
          baseline(s3.endpoint(), setupLive);
        }
        runOperator(cp, kubelet, runtime, s3.endpoint(), setupLive);
      }
    } catch (Exception e) {
      failures.add("bench aborted: " + e);
      throw e;
    } finally {
      heap.stop();
      printTable();
    }
    return failures.isEmpty() ? 0 : 1;
  }

  /** Phase 2: the data planes alone, started directly with the settings a pod would get. */
  private void baseline(URI s3Endpoint, long setupLive) throws Exception {
    step("baseline: " + artifacts + " DataPlaneServers without operator or pods");
    heap.resetPeak();
    List<DataPlaneServer> servers = new ArrayList<>();
    long t0 = System.nanoTime();
    try {
      for (int i = 0; i < artifacts; i++) {
        ServeSettings s =
            new ServeSettings(
                "baseline-" + i,
                new InetSocketAddress("127.3." + (i / 250) + "." + (1 + i % 250), 8471),
                "s3://" + BUCKET + "/" + PREFIX,
                List.of(),
                List.of(),
                s3Endpoint,
                S3MockServer.REGION,
                true,
                Optional.of(
                    new SourceOptions.StaticCredentials(
                        S3MockServer.ACCESS_KEY, S3MockServer.SECRET_KEY, Optional.empty())),
                ReadOptions.DEFAULTS,
                workDir.resolve("baseline").resolve("store-" + i),
                "1Gi",
                0,
                LockPolicy.REQUIRED,
                null,
                null,
                LoadRetry.DEFAULTS,
                true, // S3Mock: plain http on loopback
                null,
                io.tensorcast.dataplane.format.FormatLimits.DEFAULT);
        servers.add(DataPlaneServer.start(s));
      }
      long deadline = System.nanoTime() + timeout.toNanos();
      while (servers.stream().anyMatch(s -> s.status().phase() != DataPlaneStatus.Phase.Ready)) {
        if (servers.stream().anyMatch(s -> s.status().phase() == DataPlaneStatus.Phase.Failed)) {
          failures.add("baseline: a data plane failed: " + firstFailed(servers));
          break;
        }
        if (System.nanoTime() > deadline) {
          failures.add("baseline: data planes not all Ready within " + timeout);
          break;
        }
        Thread.sleep(50);
      }
      results.put("baseline: time to all loaded", ms(System.nanoTime() - t0));
      results.put("baseline: peak heap used (sampled, incl. garbage)", mib(heap.peak()));
      long live = heap.liveAfterGc();
      results.put(
          "baseline: live heap with " + artifacts + " data planes (delta over setup)",
          mib(live) + " (+" + mib(live - setupLive) + ")");
    } finally {
      // In parallel: each close waits out its event loop's 2 s quiet period.
      List<Thread> closing = new ArrayList<>();
      for (DataPlaneServer s : servers) {
        Thread t = new Thread(s::close, "close-baseline");
        t.start();
        closing.add(t);
      }
      for (Thread t : closing) {
        t.join(timeout.toMillis());
      }
    }
  }

  private static String firstFailed(List<DataPlaneServer> servers) {
    return servers.stream()
        .map(DataPlaneServer::status)
        .filter(s -> s.phase() == DataPlaneStatus.Phase.Failed)
        .map(s -> s.artifactId() + " " + s.reason() + ": " + s.message())
        .findFirst()
        .orElse("?");
  }

  /** Phases 3 and 4. */
  private void runOperator(
      LocalControlPlane cp,
      SimulatedKubelet kubelet,
      InProcessContainerRuntime runtime,
      URI s3Endpoint,
      long setupLive)
      throws Exception {
    KubernetesClient client = cp.client();
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
    long beforeOperator = heap.liveAfterGc();

    RequestCounter requests = new RequestCounter();
    ReconcileCounter reconciles = new ReconcileCounter();
    step("operator in process; creating " + artifacts + " ModelArtifacts (replicas 1)");
    try (KubernetesClient operatorClient =
        new KubernetesClientBuilder()
            .withConfig(client.getConfiguration())
            .withHttpClientBuilderConsumer(b -> b.addOrReplaceInterceptor("bench-count", requests))
            .build()) {
      Operator operator =
          OperatorMain.create(operatorClient, OperatorConfig.defaults(), reconciles);
      operator.start();
      try {
        heap.resetPeak();
        Map<String, Long> readyAt = new ConcurrentHashMap<>();
        long t0 = System.nanoTime();
        createAll(client, s3Endpoint);
        long created = System.nanoTime() - t0;
        long deadline = t0 + timeout.toNanos();
        while (readyAt.size() < artifacts && System.nanoTime() < deadline) {
          for (ModelArtifact ma :
              client.resources(ModelArtifact.class).inNamespace(NAMESPACE).list().getItems()) {
            if (ma.getStatus() != null && ma.getStatus().getPhase() == ArtifactPhase.Ready) {
              readyAt.putIfAbsent(ma.getMetadata().getName(), System.nanoTime() - t0);
            }
          }
          Thread.sleep(200);
        }
        long allReady = System.nanoTime() - t0;
        Map<String, Integer> reconcilesAtReady = reconciles.snapshot();
        Map<String, Integer> statusAtReady = requests.statusWrites();
        int podCreatesAtReady = requests.podCreates.get();
        long peak = heap.peak();
        long live = heap.liveAfterGc();
        if (readyAt.size() < artifacts) {
          failures.add("only " + readyAt.size() + " of " + artifacts + " Ready within " + timeout);
        }
        results.put("operator run: create calls (" + createThreads + " threads)", ms(created));
        results.put(
            "operator run: time from first create to all Ready",
            readyAt.size() < artifacts
                ? "NOT REACHED (" + readyAt.size() + " Ready)"
                : ms(allReady));
        long[] times = readyAt.values().stream().mapToLong(Long::longValue).sorted().toArray();
        if (times.length > 0) {
          results.put(
              "operator run: per-artifact time to Ready p50 / p90 / max",
              ms(times[times.length / 2])
                  + " / "
                  + ms(times[(int) Math.min(times.length - 1, Math.floor(times.length * 0.9))])
                  + " / "
                  + ms(times[times.length - 1]));
        }
        results.put(
            "reconciles per artifact until all Ready (mean / min / max)", stats(reconcilesAtReady));
        results.put(
            "status writes per artifact until all Ready (mean / min / max)", stats(statusAtReady));
        results.put("pod creations until all Ready", Integer.toString(podCreatesAtReady));
        results.put(
            "events received by the operator until all Ready",
            Long.toString(reconciles.events.get()));
        results.put(
            "peak heap used, operator + "
                + artifacts
                + " in-process data planes + harness (sampled)",
            mib(peak));
        results.put(
            "live heap at all Ready (delta over before operator)",
            mib(live) + " (+" + mib(live - beforeOperator) + ")");

        step("deleting all ModelArtifacts");
        long d0 = System.nanoTime();
        deleteAll(client);
        boolean gone = false;
        long deleteDeadline = d0 + timeout.toNanos();
        while (System.nanoTime() < deleteDeadline) {
          if (client
                  .resources(ModelArtifact.class)
                  .inNamespace(NAMESPACE)
                  .list()
                  .getItems()
                  .isEmpty()
              && client.pods().inNamespace(NAMESPACE).list().getItems().isEmpty()
              && runtime.runningContainers() == 0) {
            gone = true;
            break;
          }
          Thread.sleep(200);
        }
        if (!gone) {
          failures.add(
              "after delete: "
                  + client
                      .resources(ModelArtifact.class)
                      .inNamespace(NAMESPACE)
                      .list()
                      .getItems()
                      .size()
                  + " ModelArtifacts, "
                  + client.pods().inNamespace(NAMESPACE).list().getItems().size()
                  + " pods, "
                  + runtime.runningContainers()
                  + " data planes left after "
                  + timeout);
        }
        results.put(
            "delete all: time until artifacts, pods and data planes gone",
            gone ? ms(System.nanoTime() - d0) : "NOT REACHED");
        results.put(
            "reconciles per artifact, whole run incl. delete (mean / min / max)",
            stats(reconciles.snapshot()));
        results.put(
            "status writes per artifact, whole run (mean / min / max)",
            stats(requests.statusWrites()));
        long after = heap.liveAfterGc();
        results.put(
            "live heap after delete, operator still running (delta over before operator)",
            mib(after) + " (+" + mib(after - beforeOperator) + ")");
      } finally {
        operator.stop();
      }
    }
  }

  /** One DELETE per artifact (a collection DELETE of 100 finalized objects outlasts 10 s). */
  private void deleteAll(KubernetesClient client) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(createThreads);
    try {
      List<Future<?>> fs = new ArrayList<>();
      for (ModelArtifact ma :
          client.resources(ModelArtifact.class).inNamespace(NAMESPACE).list().getItems()) {
        String name = ma.getMetadata().getName();
        fs.add(
            pool.submit(
                () ->
                    client
                        .resources(ModelArtifact.class)
                        .inNamespace(NAMESPACE)
                        .withName(name)
                        .delete()));
      }
      for (Future<?> f : fs) {
        f.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  private void createAll(KubernetesClient client, URI s3Endpoint) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(createThreads);
    try {
      List<Future<?>> fs = new ArrayList<>();
      for (int i = 0; i < artifacts; i++) {
        String yaml = manifest(String.format("tiny-%03d", i), nodeName(1 + i % nodes), s3Endpoint);
        fs.add(
            pool.submit(
                () -> {
                  client
                      .resources(ModelArtifact.class)
                      .inNamespace(NAMESPACE)
                      .load(new ByteArrayInputStream(yaml.getBytes(StandardCharsets.UTF_8)))
                      .create();
                  return null;
                }));
      }
      for (Future<?> f : fs) {
        f.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * One artifact pinned to one node by {@code placement.nodeSelector}, so that the bench measures
   * reconciling, not placement races: 100 concurrent first reconciles do not yet see each other's
   * new pods in their informer caches, however node selection counts other artifacts' requests.
   */
  private static String manifest(String name, String node, URI s3Endpoint) {
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
            replicas: 1
            rdma: Required
            nodeSelector:
              kubernetes.io/hostname: %s
          memory:
            pinned: true
            limit: 64Mi
        """
        .formatted(name, BUCKET, PREFIX, s3Endpoint, node);
  }

  private static NodeSpec node(int i) {
    String[] pods = new String[4];
    for (int k = 0; k < pods.length; k++) {
      pods[k] = "127.2." + i + "." + (k + 1);
    }
    return NodeSpec.builder(nodeName(i), "127.1." + i + ".1")
        .allocatable("memory", "64Gi")
        .allocatable("cpu", "16")
        .allocatable(TensorcastConstants.RDMA_RESOURCE, "4")
        .label(TensorcastConstants.RDMA_NODE_LABEL, TensorcastConstants.RDMA_NODE_LABEL_VALUE)
        .label("topology.kubernetes.io/zone", "zone-" + (i % 3))
        .podAddresses(pods)
        .build();
  }

  private static String nodeName(int i) {
    return String.format("node-%03d", i);
  }

  private void printTable() {
    out.println();
    out.println(
        "== operator scale: " + artifacts + " ModelArtifacts x 1 replica, " + nodes + " nodes");
    out.printf(
        "   JVM: %s, %d CPUs, max heap %s, GC %s%n",
        System.getProperty("java.vm.version"),
        Runtime.getRuntime().availableProcessors(),
        mib(Runtime.getRuntime().maxMemory()),
        String.join(
            "+",
            ManagementFactory.getGarbageCollectorMXBeans().stream()
                .map(g -> g.getName())
                .toList()));
    int w = results.keySet().stream().mapToInt(String::length).max().orElse(10);
    for (Map.Entry<String, String> e : results.entrySet()) {
      out.printf("| %-" + w + "s | %s |%n", e.getKey(), e.getValue());
    }
    out.println(failures.isEmpty() ? "RESULT: OK" : "RESULT: FAILED");
    failures.forEach(f -> out.println("  - " + f));
  }

  private void applyCrd(KubernetesClient client) {
    Crds.applyModelArtifact(client);
    Crds.applyTensorShardSet(client);
  }

  private static String stats(Map<String, Integer> perArtifact) {
    if (perArtifact.isEmpty()) {
      return "none";
    }
    int[] v = perArtifact.values().stream().mapToInt(Integer::intValue).toArray();
    return String.format(
        "%.2f / %d / %d (n=%d)",
        Arrays.stream(v).average().orElse(0),
        Arrays.stream(v).min().orElse(0),
        Arrays.stream(v).max().orElse(0),
        v.length);
  }

  private static String ms(long nanos) {
    return String.format("%.1f s", nanos / 1e9);
  }

  private static String mib(long bytes) {
    return String.format("%.1f MiB", bytes / 1048576.0);
  }

  private void step(String what) {
    out.println("==> " + what);
  }

  private static void require(boolean ok, String message) {
    if (!ok) {
      throw new IllegalArgumentException(message);
    }
  }

  /** Reconciliations (started executions) and events per ModelArtifact, from JOSDK. */
  static final class ReconcileCounter implements Metrics {
    final Map<String, AtomicInteger> executions = new ConcurrentHashMap<>();
    final AtomicLong events = new AtomicLong();

    @Override
    public void receivedEvent(
        io.javaoperatorsdk.operator.processing.event.Event event, Map<String, Object> metadata) {
      events.incrementAndGet();
    }

    @Override
    public void reconciliationExecutionStarted(HasMetadata resource, Map<String, Object> metadata) {
      if (resource instanceof ModelArtifact) {
        executions
            .computeIfAbsent(resource.getMetadata().getName(), k -> new AtomicInteger())
            .incrementAndGet();
      }
    }

    Map<String, Integer> snapshot() {
      Map<String, Integer> m = new HashMap<>();
      executions.forEach((k, v) -> m.put(k, v.get()));
      return m;
    }
  }

  /** Counts the operator client's successful status writes and pod creations. */
  static final class RequestCounter implements Interceptor {
    final Map<String, AtomicInteger> statusWrites = new ConcurrentHashMap<>();
    final AtomicInteger podCreates = new AtomicInteger();

    @Override
    public void after(
        HttpRequest request,
        HttpResponse<?> response,
        AsyncBody.Consumer<List<ByteBuffer>> consumer) {
      if (response.code() >= 300) {
        return;
      }
      String method = request.method();
      String path = request.uri().getPath();
      var m = STATUS_PATH.matcher(path);
      if (("PATCH".equals(method) || "PUT".equals(method)) && m.matches()) {
        statusWrites.computeIfAbsent(m.group(1), k -> new AtomicInteger()).incrementAndGet();
      } else if ("POST".equals(method) && POD_CREATE_PATH.matcher(path).matches()) {
        podCreates.incrementAndGet();
      }
    }

    Map<String, Integer> statusWrites() {
      Map<String, Integer> m = new HashMap<>();
      statusWrites.forEach((k, v) -> m.put(k, v.get()));
      return m;
    }
  }

  /** Heap used, sampled every 100 ms, with a resettable peak. */
  static final class HeapSampler {
    private final MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
    private final AtomicLong peak = new AtomicLong();
    private volatile Thread thread;

    void start() {
      Thread t =
          new Thread(
              () -> {
                while (!Thread.currentThread().isInterrupted()) {
                  sample();
                  try {
                    Thread.sleep(100);
                  } catch (InterruptedException e) {
                    return;
                  }
                }
              },
              "heap-sampler");
      t.setDaemon(true);
      t.start();
      thread = t;
    }

    void sample() {
      long used = memory.getHeapMemoryUsage().getUsed();
      peak.accumulateAndGet(used, Math::max);
    }

    long peak() {
      sample();
      return peak.get();
    }

    void resetPeak() {
      peak.set(0);
    }

    /** Heap used after two full collections: what is still reachable. */
    long liveAfterGc() throws InterruptedException {
      System.gc();
      Thread.sleep(200);
      System.gc();
      long used = memory.getHeapMemoryUsage().getUsed();
      return used;
    }

    void stop() {
      Thread t = thread;
      if (t != null) {
        t.interrupt();
      }
    }
  }
}
