package io.tensorcast.e2e.operator;

import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpServer;
import io.fabric8.kubernetes.api.model.BindingBuilder;
import io.fabric8.kubernetes.api.model.NamespaceBuilder;
import io.fabric8.kubernetes.api.model.NodeBuilder;
import io.fabric8.kubernetes.api.model.NodeStatusBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.dsl.base.PatchContext;
import io.fabric8.kubernetes.client.dsl.base.PatchType;
import io.javaoperatorsdk.operator.Operator;
import io.javaoperatorsdk.operator.api.reconciler.Reconciler;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.e2e.cluster.Crds;
import io.tensorcast.e2e.cluster.LocalControlPlane;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.desired.PodPlan;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * A control plane of its own for the ITs of one reconciler each, shared by those ITs in a JVM: the
 * shared cluster runs the E2E operator, which would reconcile the same objects. Nothing runs the
 * pods: a test plays the kubelet ({@link #running}) and the data plane ({@link #reports}: what
 * {@code /status} answers, by the address of the node the pod is on; one HTTP server on every
 * loopback address at the operator's control port).
 *
 * <p>Each test works in its own namespace ({@link #namespace}) on its own nodes ({@link #node},
 * labelled {@link #GROUP_LABEL} = namespace).
 */
final class ReconcilerCluster {
  /** Label of a test's nodes; its value is the test's namespace. */
  static final String GROUP_LABEL = "tensorcast.io/reconciler-test";

  private static final ObjectMapper JSON = new ObjectMapper();
  private static ReconcilerCluster instance;

  private final LocalControlPlane controlPlane;
  private final HttpServer dataPlane;
  private final OperatorConfig config;
  private final AtomicInteger nodeAddresses = new AtomicInteger(10);

  /** What each node's data plane answers on {@code /status}, by the node's address. */
  final Map<String, DataPlaneStatus> reports = new ConcurrentHashMap<>();

  private ReconcilerCluster(Path workDir) throws IOException {
    controlPlane = LocalControlPlane.start(workDir);
    try {
      Crds.applyModelArtifact(controlPlane.client());
      Crds.applyTensorShardSet(controlPlane.client());
      dataPlane = HttpServer.create(new InetSocketAddress(0), 16);
    } catch (IOException | RuntimeException e) {
      controlPlane.close();
      throw e;
    }
    dataPlane.createContext(
        "/status",
        exchange -> {
          DataPlaneStatus s = reports.get(exchange.getLocalAddress().getAddress().getHostAddress());
          byte[] body = s == null ? new byte[0] : JSON.writeValueAsBytes(s);
          exchange.getResponseHeaders().set("Content-Type", "application/json");
          exchange.sendResponseHeaders(s == null ? 503 : 200, s == null ? -1 : body.length);
          exchange.getResponseBody().write(body);
          exchange.close();
        });
    dataPlane.start();
    config =
        OperatorConfig.fromLookup(
            Map.of(
                    "TENSORCAST_DATAPLANE_IMAGE", "tensorcast/dataplane:reconciler-test",
                    "TENSORCAST_CONTROL_PORT", Integer.toString(dataPlane.getAddress().getPort()),
                    "TENSORCAST_MEMORY_OVERHEAD", Long.toString(OperatorEnvironment.OVERHEAD),
                    "TENSORCAST_POLL_INTERVAL", "PT0.5S",
                    "TENSORCAST_READY_RESYNC", "PT2S",
                    "TENSORCAST_STATUS_TIMEOUT", "PT1S")
                ::get);
  }

  /** The JVM's instance, started on first use (about 5 s) and stopped at JVM exit. */
  static synchronized ReconcilerCluster get() {
    if (instance == null) {
      try {
        Path workDir = Files.createTempDirectory("tensorcast-reconciler-it-");
        ReconcilerCluster c = new ReconcilerCluster(workDir);
        Runtime.getRuntime()
            .addShutdownHook(
                new Thread(
                    () -> {
                      c.dataPlane.stop(0);
                      c.controlPlane.close();
                      try (var s = Files.walk(workDir)) {
                        s.sorted((a, b) -> b.compareTo(a)).forEach(p -> p.toFile().delete());
                      } catch (IOException e) {
                        // a leftover temp directory is harmless
                      }
                    },
                    "tensorcast-reconciler-cluster-stop"));
        instance = c;
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    return instance;
  }

  KubernetesClient client() {
    return controlPlane.client();
  }

  /** Operator settings pointing the data-plane client at {@link #reports}; short poll intervals. */
  OperatorConfig config() {
    return config;
  }

  /** A started JOSDK operator running {@code reconciler} alone; stop it after the test class. */
  Operator operator(Reconciler<?> reconciler) {
    Operator operator =
        new Operator(
            o ->
                o.withKubernetesClient(client())
                    .withCloseClientOnStop(false)
                    .withUseSSAToPatchPrimaryResource(false)
                    .withStopOnInformerErrorDuringStartup(true));
    operator.register(reconciler);
    operator.start();
    return operator;
  }

  /** Creates namespace {@code r<hash of name>} and returns its name. */
  String namespace(String testName) {
    String ns = "r" + Integer.toHexString(testName.hashCode() & 0xfffffff);
    client()
        .namespaces()
        .resource(new NamespaceBuilder().withNewMetadata().withName(ns).endMetadata().build())
        .create();
    return ns;
  }

  /**
   * A Ready node {@code <ns>-<suffix>} of the test in {@code ns}, 4 GiB allocatable memory, 8 CPUs,
   * RDMA-capable or not; its data-plane pods answer on the returned loopback address.
   */
  String node(String ns, String suffix, boolean rdma) {
    String address = "127.0.1." + nodeAddresses.incrementAndGet();
    NodeBuilder b =
        new NodeBuilder()
            .withNewMetadata()
            .withName(ns + "-" + suffix)
            .withLabels(
                Map.of(GROUP_LABEL, ns, "kubernetes.io/hostname", ns + "-" + suffix, "ip", address))
            .endMetadata()
            .withNewSpec()
            .endSpec();
    Map<String, Quantity> allocatable =
        rdma
            ? Map.of(
                "memory",
                new Quantity("4Gi"),
                "cpu",
                new Quantity("8"),
                TensorcastConstants.RDMA_RESOURCE,
                new Quantity("1"))
            : Map.of("memory", new Quantity("4Gi"), "cpu", new Quantity("8"));
    var node = client().nodes().resource(b.build()).create();
    node.setStatus(
        new NodeStatusBuilder()
            .withAllocatable(allocatable)
            .withCapacity(allocatable)
            .addNewCondition()
            .withType("Ready")
            .withStatus("True")
            .withReason("KubeletReady")
            .endCondition()
            .build());
    client().nodes().resource(node).updateStatus();
    return address;
  }

  /** Deletes the nodes of the test in {@code ns}. */
  void removeNodes(String ns) {
    client().nodes().withLabel(GROUP_LABEL, ns).withGracePeriod(0).delete();
  }

  /** The scheduler's part: binds {@code pod} to {@code node}, so that it is deleted gracefully. */
  void bind(Pod pod, String node) {
    client()
        .bindings()
        .inNamespace(pod.getMetadata().getNamespace())
        .resource(
            new BindingBuilder()
                .withNewMetadata()
                .withName(pod.getMetadata().getName())
                .endMetadata()
                .withNewTarget()
                .withKind("Node")
                .withName(node)
                .endTarget()
                .build())
        .create();
  }

  /**
   * What {@link #awaitDeletion} saw.
   *
   * @param podsLeftBehind pods still there once the owner was gone
   * @param heldForTerminatingPods pods seen terminating while the owner was still there
   */
  record Deletion(List<String> podsLeftBehind, List<String> heldForTerminatingPods) {}

  /**
   * Waits (at most {@code wait}) until {@code owner} reads null, playing the kubelet: each
   * terminating pod of {@code pods} is confirmed gone. The owner is read first on every poll: a pod
   * seen after it was gone was there when it went.
   */
  Deletion awaitDeletion(Supplier<?> owner, Supplier<List<Pod>> pods, Duration wait) {
    List<String> podsLeftBehind = new ArrayList<>();
    List<String> heldForTerminatingPods = new ArrayList<>();
    await()
        .atMost(wait)
        .until(
            () -> {
              Object o = owner.get();
              List<Pod> left = pods.get();
              if (o == null) {
                left.forEach(p -> podsLeftBehind.add(p.getMetadata().getName()));
              } else {
                left.stream()
                    .filter(p -> p.getMetadata().getDeletionTimestamp() != null)
                    .forEach(p -> heldForTerminatingPods.add(p.getMetadata().getName()));
              }
              left.stream()
                  .filter(p -> p.getMetadata().getDeletionTimestamp() != null)
                  .forEach(p -> client().pods().resource(p).withGracePeriod(0).delete());
              return o == null;
            });
    return new Deletion(podsLeftBehind, heldForTerminatingPods);
  }

  /**
   * The kubelet's part for {@code pods}: each new one marked Running with its node's address (the
   * node of {@link PodPlan#node}).
   *
   * @return {@code pods}
   */
  List<Pod> running(List<Pod> pods) {
    for (Pod p : pods) {
      if (p.getMetadata().getDeletionTimestamp() == null
          && (p.getStatus() == null || !"Running".equals(p.getStatus().getPhase()))) {
        String address =
            client().nodes().withName(PodPlan.node(p)).get().getMetadata().getLabels().get("ip");
        running(p, address);
      }
    }
    return pods;
  }

  /** The kubelet's part for one pod: Running with {@code address} as its IP. */
  void running(Pod p, String address) {
    try {
      client()
          .pods()
          .inNamespace(p.getMetadata().getNamespace())
          .withName(p.getMetadata().getName())
          .subresource("status")
          .patch(
              PatchContext.of(PatchType.JSON_MERGE),
              client()
                  .getKubernetesSerialization()
                  .asJson(
                      Map.of(
                          "status",
                          Map.of(
                              "phase",
                              "Running",
                              "podIP",
                              address,
                              "podIPs",
                              List.of(Map.of("ip", address))))));
    } catch (KubernetesClientException e) {
      if (e.getCode() != 404) {
        throw e;
      }
    }
  }
}
