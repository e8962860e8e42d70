package io.tensorcast.e2e.cluster;

import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.NodeBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.Taint;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.dsl.base.PatchContext;
import io.fabric8.kubernetes.client.dsl.base.PatchType;
import io.fabric8.kubernetes.client.informers.ResourceEventHandler;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Plays the kubelet for any number of simulated nodes of one control plane: registers each Node,
 * runs the containers of pods the scheduler binds to them as local processes through a {@link
 * ContainerRuntime}, and writes pod status through {@code pods/status}.
 *
 * <h2>What it does, per pod bound to one of its nodes</h2>
 *
 * <ul>
 *   <li>Volumes are prepared as in {@link PodVolumes}; env, {@code $(VAR)} expansion and mount-path
 *       rewriting as in {@link ContainerConfig} and {@link MountTable} (there is no mount
 *       namespace: paths in env values and args under a {@code mountPath} are rewritten to the host
 *       directory). A missing Secret/ConfigMap (or key) keeps the container waiting with reason
 *       {@code CreateContainerConfigError} and the kubelet's message; it is retried every {@link
 *       Options#configRetry()} so creating the object later starts the pod.
 *   <li>Inline ephemeral {@code csi} volumes are published through the node's registered CSI driver
 *       ({@link SimulatedNode#registerCsiDriver}, {@link CsiPlugins}) before any container starts,
 *       as a kubelet's volume manager does: a failed {@code NodePublishVolume} keeps the containers
 *       waiting ({@code ContainerCreating} with the kubelet's message), is recorded as a {@code
 *       Warning FailedMount} Event on the pod (repeats of one message raise its {@code count}) and
 *       is retried every {@link Options#configRetry()}. When the pod goes away, every such volume
 *       gets {@code NodeUnpublishVolume} after the containers have stopped and before the pod
 *       object is deleted.
 *   <li>{@code initContainers} run one by one to completion first; then all containers start.
 *   <li>{@code hostIP} is the node's loopback address, {@code podIP} too unless the node has {@link
 *       NodeSpec#podAddresses()} (then one of those per pod); {@code HOSTNAME} is the pod name;
 *       {@code KUBERNETES_SERVICE_HOST}/{@code _PORT} point at the API server. Processes start with
 *       the host's {@code PATH}, {@code HOME}, {@code LANG} and {@code JAVA_HOME} only.
 *   <li>Status: phase ({@code Pending} until a container has started, {@code Running}, {@code
 *       Succeeded}/{@code Failed} once no container will run again), {@code startTime}, conditions
 *       {@code Initialized}, {@code ContainersReady}, {@code Ready} (the scheduler's {@code
 *       PodScheduled} is kept), {@code containerStatuses} with {@code state}, {@code lastState},
 *       {@code ready}, {@code started}, {@code restartCount} and {@code containerID:
 *       process://<pid>}. A status is written only when it changed.
 *   <li>Readiness: a container with a {@code readinessProbe} is ready after {@code
 *       successThreshold} successes and unready after {@code failureThreshold} failures, probed
 *       every {@code periodSeconds} after {@code initialDelaySeconds} (see {@link Probes}); one
 *       without a probe is ready while its process is alive. A {@code livenessProbe} that fails
 *       {@code failureThreshold} times in a row kills the container, which is then restarted per
 *       {@code restartPolicy}. {@code startupProbe} is not supported (ignored).
 *   <li>Exit: restarted per {@code restartPolicy} ({@code Always}; {@code OnFailure} for a non-zero
 *       status; never for {@code Never}) with the kubelet's back-off: the first restart at once,
 *       then {@link Options#initialRestartBackoff()} doubling up to {@link
 *       Options#maxRestartBackoff()} (waiting reason {@code CrashLoopBackOff}); the back-off resets
 *       after a container ran 10 minutes. {@code restartCount} counts restarts.
 *   <li>Deletion: when the pod gets a {@code deletionTimestamp}, every container gets SIGTERM, then
 *       SIGKILL after the pod's grace period (capped at {@link Options#maxTerminationGrace()});
 *       once all have exited the pod is deleted with {@code gracePeriodSeconds: 0} and a UID
 *       precondition, and its per-pod directories are removed.
 *   <li>Logs: stdout and stderr of all containers of a pod are appended to {@code
 *       <workDir>/pods/<namespace>_<pod>.log}, each start preceded by a {@code ---} header line.
 * </ul>
 *
 * <p>Not simulated: resource limits, cgroups and OOM kills, image pulls, {@code kubectl
 * logs/exec/port-forward} (there is no kubelet API), lifecycle hooks, ephemeral containers, Events
 * other than {@code FailedMount}, per-pod network namespaces (two pods on one node that listen on
 * the same port collide), node heartbeats and Leases (not needed with node lifecycle off).
 */
public final class SimulatedKubelet implements AutoCloseable {

  /**
   * Timing knobs.
   *
   * @param maxTerminationGrace upper bound on the SIGTERM→SIGKILL grace at pod deletion (the pod's
   *     own {@code terminationGracePeriodSeconds}/deletion grace applies when shorter)
   * @param initialRestartBackoff back-off before the second restart of a container (the first is
   *     immediate); doubles per restart
   * @param maxRestartBackoff cap of the restart back-off
   * @param configRetry how often a container waiting on a config error or a start error is retried
   */
  public record Options(
      Duration maxTerminationGrace,
      Duration initialRestartBackoff,
      Duration maxRestartBackoff,
      Duration configRetry) {

    /** The kubelet's values (back-off 10 s → 5 min) with grace capped at 10 s, config retry 2 s. */
    public static Options defaults() {
      return new Options(
          Duration.ofSeconds(10),
          Duration.ofSeconds(10),
          Duration.ofMinutes(5),
          Duration.ofSeconds(2));
    }
  }

  private static final Logger LOG = LoggerFactory.getLogger(SimulatedKubelet.class);
  private static final Duration BACKOFF_RESET_AFTER = Duration.ofMinutes(10);
  private static final String NOT_READY_TAINT = "node.kubernetes.io/not-ready";

  private final KubernetesClient client;
  private final Path workDir;
  private final ContainerRuntime runtime;
  private final Options options;
  private final Map<String, SimulatedNode> nodes = new ConcurrentHashMap<>();

  /** Pod key (namespace/name) → worker; touched only on the sync thread. */
  private final Map<String, PodWorker> workers = new HashMap<>();

  private final ScheduledExecutorService sync;
  private final ScheduledExecutorService probes;
  private final SharedIndexInformer<Pod> informer;
  private final ObjectLookup lookup;
  private final Map<String, String> serviceEnv;
  private final CsiPlugins csi;
  private volatile boolean closed;

  /** A kubelet with {@link Options#defaults()}. */
  public SimulatedKubelet(KubernetesClient client, Path workDir, ContainerRuntime runtime) {
    this(client, workDir, runtime, Options.defaults());
  }

  /**
   * Starts watching all pods; pods bound to nodes added later with {@link #addNode} are run.
   *
   * @param client a client with rights to nodes, nodes/status, pods, pods/status, secrets and
   *     configmaps in all namespaces (the control plane's admin client)
   * @param workDir where node roots ({@code nodes/<node>/root}), per-pod directories and pod logs
   *     ({@code pods/}) go
   */
  public SimulatedKubelet(
      KubernetesClient client, Path workDir, ContainerRuntime runtime, Options options) {
    this.client = client;
    this.workDir = workDir.toAbsolutePath();
    this.runtime = runtime;
    this.options = options;
    this.lookup = new ApiLookup(client);
    this.csi = new CsiPlugins(client);
    URL master = client.getMasterUrl();
    int port = master.getPort() > 0 ? master.getPort() : 443;
    Map<String, String> svc = new LinkedHashMap<>();
    svc.put("KUBERNETES_SERVICE_HOST", master.getHost());
    svc.put("KUBERNETES_SERVICE_PORT", String.valueOf(port));
    svc.put("KUBERNETES_SERVICE_PORT_HTTPS", String.valueOf(port));
    svc.put("KUBERNETES_PORT", "tcp://" + master.getHost() + ":" + port);
    this.serviceEnv = Map.copyOf(svc);
    AtomicInteger probeThreads = new AtomicInteger();
    this.sync =
        Executors.newSingleThreadScheduledExecutor(r -> daemon(r, "simulated-kubelet-sync"));
    this.probes =
        Executors.newScheduledThreadPool(
            2, r -> daemon(r, "simulated-kubelet-probe-" + probeThreads.incrementAndGet()));
    this.informer =
        client
            .pods()
            .inAnyNamespace()
            .inform(
                new ResourceEventHandler<>() {
                  @Override
                  public void onAdd(Pod pod) {
                    enqueue(pod);
                  }

                  @Override
                  public void onUpdate(Pod oldPod, Pod newPod) {
                    enqueue(newPod);
                  }

                  @Override
                  public void onDelete(Pod pod, boolean deletedFinalStateUnknown) {
                    enqueue(pod);
                  }
                },
                0);
  }

  private static Thread daemon(Runnable r, String name) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    return t;
  }

  // ------------------------------------------------------------------------------------- nodes

  /**
   * Registers a Node (replacing one of the same name) with the spec's labels and taints, then
   * writes its status through {@code nodes/status}: capacity = allocatable = the spec's resources,
   * {@code Ready=True} (and the pressure conditions False), addresses {@code InternalIP} = the
   * spec's address and {@code Hostname} = its name. From then on pods bound to it are run.
   *
   * @throws IllegalStateException when a node of that name or address is already simulated here
   */
  public SimulatedNode addNode(NodeSpec spec) {
    for (SimulatedNode n : nodes.values()) {
      if (n.address().equals(spec.address())) {
        throw new IllegalStateException(
            "NodeSpec "
                + spec.name()
                + ": address "
                + spec.address()
                + " is already used by simulated node "
                + n.name());
      }
    }
    Path root = workDir.resolve("nodes").resolve(spec.name()).resolve("root");
    try {
      Files.createDirectories(root);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot create node root " + root, e);
    }
    SimulatedNode node = new SimulatedNode(this, spec, root);
    if (nodes.putIfAbsent(spec.name(), node) != null) {
      throw new IllegalStateException("node " + spec.name() + " is already simulated");
    }
    try {
      Node existing = client.nodes().withName(spec.name()).get();
      if (existing != null) {
        client.nodes().withName(spec.name()).withGracePeriod(0).delete();
        client
            .nodes()
            .withName(spec.name())
            .waitUntilCondition(n -> n == null, 30, TimeUnit.SECONDS);
      }
      Node created =
          client
              .nodes()
              .resource(
                  new NodeBuilder()
                      .withNewMetadata()
                      .withName(spec.name())
                      .withLabels(registeredLabels(spec))
                      .endMetadata()
                      .withNewSpec()
                      .withTaints(spec.taints())
                      .endSpec()
                      .build())
              .create();
      List<Taint> taints = created.getSpec().getTaints();
      boolean unwanted =
          taints != null
              && taints.stream().anyMatch(t -> NOT_READY_TAINT.equals(t.getKey()))
              && spec.taints().stream().noneMatch(t -> NOT_READY_TAINT.equals(t.getKey()));
      if (unwanted) {
        // Only when the API server runs the TaintNodesByCondition admission plugin (see
        // LocalControlPlane): nothing else would ever remove the taint.
        client
            .nodes()
            .withName(spec.name())
            .edit(
                n -> {
                  n.getSpec().getTaints().removeIf(t -> NOT_READY_TAINT.equals(t.getKey()));
                  return n;
                });
      }
      writeNodeStatus(spec, true);
    } catch (RuntimeException e) {
      nodes.remove(spec.name());
      throw e;
    }
    // Pods may have been bound before the node was simulated here.
    sync.execute(() -> informer.getStore().list().forEach(p -> syncPod(key(p))));
    LOG.info("simulated node {} at {} (root {})", spec.name(), spec.address(), root);
    return node;
  }

  /** The simulated node of that name, if any. */
  public Optional<SimulatedNode> node(String name) {
    return Optional.ofNullable(nodes.get(name));
  }

  void registerCsiDriver(String node, String driver, Path socket) {
    csi.register(node, driver, socket);
  }

  void unregisterCsiDriver(String node, String driver) {
    csi.unregister(node, driver);
  }

  Map<String, String> registeredLabels(NodeSpec spec) {
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put("kubernetes.io/hostname", spec.name());
    labels.put("kubernetes.io/os", "linux");
    labels.put("kubernetes.io/arch", "amd64");
    labels.put("beta.kubernetes.io/os", "linux");
    labels.put("beta.kubernetes.io/arch", "amd64");
    labels.putAll(spec.labels());
    return labels;
  }

  void writeNodeStatus(NodeSpec spec, boolean ready) {
    String now = now();
    List<Map<String, Object>> conditions = new ArrayList<>();
    conditions.add(
        condition(
            "Ready",
            ready ? "True" : "False",
            ready ? "KubeletReady" : "KubeletNotReady",
            ready ? "simulated kubelet is posting ready status" : "simulated node set not ready",
            now,
            now));
    for (String[] c :
        new String[][] {
          {"MemoryPressure", "KubeletHasSufficientMemory"},
          {"DiskPressure", "KubeletHasNoDiskPressure"},
          {"PIDPressure", "KubeletHasSufficientPID"}
        }) {
      conditions.add(condition(c[0], "False", c[1], "simulated", now, now));
    }
    Map<String, Object> nodeInfo = new LinkedHashMap<>();
    nodeInfo.put("machineID", spec.name());
    nodeInfo.put("systemUUID", spec.name());
    nodeInfo.put("bootID", spec.name());
    nodeInfo.put("kernelVersion", System.getProperty("os.version"));
    nodeInfo.put("osImage", "Tensorcast simulated node");
    nodeInfo.put("containerRuntimeVersion", "process://" + runtime.getClass().getSimpleName());
    nodeInfo.put("kubeletVersion", "v1.20.2");
    nodeInfo.put("kubeProxyVersion", "v1.20.2");
    nodeInfo.put("operatingSystem", "linux");
    nodeInfo.put("architecture", "amd64");
    Map<String, Object> status = new LinkedHashMap<>();
    status.put("capacity", spec.allocatable());
    status.put("allocatable", spec.allocatable());
    status.put("conditions", conditions);
    status.put(
        "addresses",
        List.of(
            Map.of("type", "InternalIP", "address", spec.address()),
            Map.of("type", "Hostname", "address", spec.name())));
    status.put("nodeInfo", nodeInfo);
    client
        .nodes()
        .withName(spec.name())
        .subresource("status")
        .patch(
            PatchContext.of(PatchType.STRATEGIC_MERGE),
            client.getKubernetesSerialization().asJson(Map.of("status", status)));
  }

  void removeNode(String name) {
    SimulatedNode node = nodes.remove(name);
    if (node == null) {
      return;
    }
    onSync(
        () -> {
          for (var it = workers.values().iterator(); it.hasNext(); ) {
            PodWorker w = it.next();
            if (w.node == node) {
              w.killAll();
              it.remove();
            }
          }
          return null;
        });
    try {
      client.nodes().withName(name).withGracePeriod(0).delete();
    } catch (KubernetesClientException e) {
      LOG.warn("cannot delete Node {}: {}", name, e.getMessage());
    }
  }

  // -------------------------------------------------------------------------------- pods (API)

  /** {@code <workDir>/pods/<namespace>_<pod>.log}: stdout and stderr of the pod's containers. */
  public Path podLog(String namespace, String name) {
    return workDir.resolve("pods").resolve(namespace + "_" + name + ".log");
  }

  /**
   * Simulates a crash: SIGKILL to every running container process of the pod. The kubelet then
   * restarts them per {@code restartPolicy}, as it would after a real crash.
   *
   * @return the PIDs killed
   * @throws IllegalStateException when the pod has no running container on a simulated node
   */
  public List<Long> killPodProcess(String namespace, String name) {
    List<Long> killed =
        onSync(
            () -> {
              PodWorker w = workers.get(namespace + "/" + name);
              List<Long> pids = new ArrayList<>();
              if (w != null) {
                for (ContainerState cs : w.containers) {
                  ContainerProcess p = cs.process;
                  if (p != null && p.isAlive()) {
                    pids.add(p.pid());
                    p.kill();
                  }
                }
              }
              return pids;
            });
    if (killed.isEmpty()) {
      throw new IllegalStateException(
          "pod " + namespace + "/" + name + " has no running container on a simulated node");
    }
    return killed;
  }

  /** PIDs of the pod's running container processes (container name → pid); empty when none runs. */
  public Map<String, Long> podProcesses(String namespace, String name) {
    return onSync(
        () -> {
          Map<String, Long> out = new LinkedHashMap<>();
          PodWorker w = workers.get(namespace + "/" + name);
          if (w != null) {
            for (ContainerState cs : w.containers) {
              ContainerProcess p = cs.process;
              if (p != null && p.isAlive()) {
                out.put(cs.spec.getName(), p.pid());
              }
            }
          }
          return out;
        });
  }

  /**
   * Stops watching and kills every container process (SIGTERM, SIGKILL after 5 s). Leaves Nodes and
   * pods in the API as they are (the control plane may already be gone). Idempotent.
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    informer.close();
    List<ContainerProcess> all = new ArrayList<>();
    try {
      sync.submit(
              () -> {
                for (PodWorker w : workers.values()) {
                  w.cancelTimers();
                  for (ContainerState cs : w.containers) {
                    if (cs.process != null) {
                      all.add(cs.process);
                      cs.process.terminate();
                    }
                  }
                }
                workers.clear();
              })
          .get(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      LOG.warn("simulated kubelet: could not stop pods cleanly: {}", e.toString());
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    for (ContainerProcess p : all) {
      long left = Math.max(0, deadline - System.nanoTime());
      try {
        p.onExit().get(left, TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (ExecutionException | TimeoutException e) {
        p.kill();
      }
    }
    sync.shutdownNow();
    probes.shutdownNow();
    csi.close();
    unmountEverythingUnder(workDir.resolve("nodes"));
  }

  /**
   * Unmounts whatever is still mounted under {@code dir} (volumes of pods whose driver was gone
   * when they ended), deepest first, as a kubelet cleans up orphaned pod volumes.
   */
  static void unmountEverythingUnder(Path dir) {
    io.tensorcast.csi.mount.LinuxMounter mounter = new io.tensorcast.csi.mount.LinuxMounter();
    try {
      List<Path> under =
          io.tensorcast.csi.mount.MountTable.mountPoints(Path.of("/proc/self/mountinfo")).stream()
              .filter(p -> p.startsWith(dir))
              .sorted(java.util.Comparator.comparingInt(Path::getNameCount).reversed())
              .toList();
      for (Path p : under) {
        try {
          mounter.unmount(p);
          LOG.info("unmounted orphaned volume {}", p);
        } catch (IOException e) {
          LOG.warn("cannot unmount {}: {}", p, e.getMessage());
        }
      }
    } catch (IOException e) {
      LOG.warn("cannot read the mount table: {}", e.getMessage());
    }
  }

  // ------------------------------------------------------------------------------- sync loop

  private static String key(Pod pod) {
    return pod.getMetadata().getNamespace() + "/" + pod.getMetadata().getName();
  }

  private void enqueue(Pod pod) {
    if (closed) {
      return;
    }
    String key = key(pod);
    try {
      sync.execute(() -> syncPod(key));
    } catch (java.util.concurrent.RejectedExecutionException e) {
      // closing
    }
  }

  private <T> T onSync(java.util.concurrent.Callable<T> task) {
    try {
      return sync.submit(task).get(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    } catch (ExecutionException | TimeoutException e) {
      throw new IllegalStateException("simulated kubelet task failed: " + e, e);
    }
  }

  private void later(Duration delay, Runnable task) {
    if (closed) {
      return;
    }
    try {
      sync.schedule(task, delay.toMillis(), TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      // closing
    }
  }

  /** Reconciles one pod key with what runs locally. Runs on the sync thread only. */
  private void syncPod(String key) {
    if (closed) {
      return;
    }
    try {
      Pod pod = informer.getStore().getByKey(key);
      PodWorker w = workers.get(key);
      if (pod == null) {
        if (w != null) {
          w.killAll(); // deleted without our help (forced): stop what still runs
          workers.remove(key);
          w.node.releasePodAddress(w.uid);
        }
        return;
      }
      if (w != null && !w.uid.equals(pod.getMetadata().getUid())) {
        w.killAll();
        workers.remove(key);
        w.node.releasePodAddress(w.uid);
        w = null;
      }
      String nodeName = pod.getSpec().getNodeName();
      SimulatedNode node = nodeName == null ? null : nodes.get(nodeName);
      if (node == null) {
        return;
      }
      if (w == null) {
        String phase = pod.getStatus() == null ? null : pod.getStatus().getPhase();
        boolean terminal = "Succeeded".equals(phase) || "Failed".equals(phase);
        if (terminal && pod.getMetadata().getDeletionTimestamp() == null) {
          return;
        }
        w = new PodWorker(pod, node);
        workers.put(key, w);
      }
      w.sync(pod);
    } catch (RuntimeException e) {
      LOG.warn("simulated kubelet: sync of pod {} failed; retrying in 1 s", key, e);
      later(Duration.ofSeconds(1), () -> syncPod(key));
    }
  }

  private static String now() {
    return Instant.now().truncatedTo(ChronoUnit.SECONDS).toString();
  }

  private static Map<String, Object> condition(
      String type,
      String status,
      String reason,
      String message,
      String probeTime,
      String transition) {
    Map<String, Object> c = new LinkedHashMap<>();
    c.put("type", type);
    c.put("status", status);
    if (reason != null) {
      c.put("reason", reason);
    }
    if (message != null) {
      c.put("message", message);
    }
    if (probeTime != null) {
      c.put("lastHeartbeatTime", probeTime);
    }
    c.put("lastTransitionTime", transition);
    return c;
  }

  // --------------------------------------------------------------------------- per-container

  /** A container's terminated state. */
  private record Termination(int exitCode, String reason, Instant startedAt, Instant finishedAt) {}

  /** Local state of one container of a pod. Mutated on the sync thread only. */
  private static final class ContainerState {
    final Container spec;
    final boolean init;
    volatile ContainerProcess process;
    int generation;
    Instant startedAt;
    int restartCount;
    int backoffStep;
    String waitingReason = "ContainerCreating";
    String waitingMessage;
    Termination current;
    Termination last;
    boolean done;
    boolean everStarted;
    boolean ready;
    int probeSuccesses;
    int probeFailures;
    int livenessFailures;
    ContainerConfig.Resolved resolved;
    final List<ScheduledFuture<?>> timers = new ArrayList<>();

    ContainerState(Container spec, boolean init) {
      this.spec = spec;
      this.init = init;
    }

    void cancelTimers() {
      timers.forEach(t -> t.cancel(false));
      timers.clear();
    }
  }

  // --------------------------------------------------------------------------------- per-pod

  /** Runs one pod (one UID). Every method runs on the sync thread. */
  private final class PodWorker {
    final String uid;
    final String namespace;
    final String name;
    final SimulatedNode node;
    final String podIp;
    final Path podDir;
    final List<ContainerState> initContainers = new ArrayList<>();
    final List<ContainerState> containers = new ArrayList<>();
    Pod pod;
    PodVolumes volumes;
    boolean started;
    String startTime;
    boolean terminating;
    boolean deleted;
    boolean failedInit;
    String lastStatusJson;
    final Map<String, String[]> conditionState = new HashMap<>(); // type → {status, time}
    final java.util.Set<String> csiPublished = new java.util.HashSet<>();
    final Map<String, java.util.concurrent.Future<?>> csiInFlight = new HashMap<>();
    boolean csiTornDown;
    final Map<String, Object[]> events = new HashMap<>(); // reason+message → {name, count}
    final List<ScheduledFuture<?>> podTimers = new ArrayList<>();

    PodWorker(Pod pod, SimulatedNode node) {
      this.pod = pod;
      this.uid = pod.getMetadata().getUid();
      this.namespace = pod.getMetadata().getNamespace();
      this.name = pod.getMetadata().getName();
      this.node = node;
      this.podIp = node.podAddress(uid);
      this.podDir =
          workDir
              .resolve("nodes")
              .resolve(node.name())
              .resolve("pods")
              .resolve(namespace + "_" + name + "_" + uid);
      if (pod.getSpec().getInitContainers() != null) {
        pod.getSpec()
            .getInitContainers()
            .forEach(c -> initContainers.add(new ContainerState(c, true)));
      }
      pod.getSpec().getContainers().forEach(c -> containers.add(new ContainerState(c, false)));
    }

    String restartPolicy() {
      String p = pod.getSpec().getRestartPolicy();
      return p == null ? "Always" : p;
    }

    void sync(Pod latest) {
      this.pod = latest;
      if (deleted) {
        return;
      }
      if (latest.getMetadata().getDeletionTimestamp() != null) {
        beginTermination();
        return;
      }
      if (!started) {
        started = true;
        startTime = now();
        startPod();
      }
      writeStatus();
    }

    void startPod() {
      if (terminating || closed) {
        return;
      }
      try {
        volumes = PodVolumes.prepare(pod, node.root(), podDir, lookup);
      } catch (ContainerStartException e) {
        for (ContainerState cs : all()) {
          cs.waitingReason = e.reason();
          cs.waitingMessage = e.getMessage();
        }
        schedule(podTimers, options.configRetry(), this::startPod);
        writeStatus();
        return;
      }
      mountThenStart();
      writeStatus();
    }

    /** Publishes the CSI volumes not yet published; starts the containers once all are. */
    void mountThenStart() {
      if (terminating || deleted || closed || started(all())) {
        return;
      }
      boolean pending = false;
      for (PodVolumes.CsiVolume v : volumes.csiVolumes()) {
        if (csiPublished.contains(v.name())) {
          continue;
        }
        pending = true;
        if (!csiInFlight.containsKey(v.name())) {
          csiInFlight.put(
              v.name(),
              csi.publish(
                  node.name(),
                  pod,
                  v,
                  err -> {
                    try {
                      sync.execute(() -> onPublished(v, err));
                    } catch (java.util.concurrent.RejectedExecutionException e) {
                      // closing
                    }
                  }));
        }
      }
      if (pending) {
        return;
      }
      if (!initContainers.isEmpty()) {
        startContainer(initContainers.get(0));
      } else {
        containers.forEach(this::startContainer);
      }
    }

    boolean started(List<ContainerState> states) {
      return states.stream().anyMatch(cs -> cs.everStarted || cs.process != null);
    }

    void onPublished(PodVolumes.CsiVolume v, Throwable err) {
      csiInFlight.remove(v.name());
      if (err == null) {
        csiPublished.add(v.name());
      }
      if (terminating || deleted || closed) {
        finishTerminationIfDone();
        return;
      }
      if (err == null) {
        LOG.info("pod {}/{}: volume {} published at {}", namespace, name, v.name(), v.target());
        for (ContainerState cs : all()) {
          if ("ContainerCreating".equals(cs.waitingReason)) {
            cs.waitingMessage = null;
          }
        }
        mountThenStart();
      } else {
        String message = err.getMessage();
        LOG.info("pod {}/{}: {}", namespace, name, message);
        for (ContainerState cs : all()) {
          cs.waitingReason = "ContainerCreating";
          cs.waitingMessage = message;
        }
        recordEvent("Warning", "FailedMount", message);
        schedule(podTimers, options.configRetry(), this::mountThenStart);
      }
      writeStatus();
    }

    /**
     * Records an Event on the pod from the kubelet of its node; a repeat of the same reason and
     * message raises the first one's {@code count} and {@code lastTimestamp}, as the kubelet's
     * event correlator does.
     */
    void recordEvent(String type, String reason, String message) {
      String key = reason + "\n" + message;
      Object[] seen = events.get(key);
      String now = now();
      try {
        if (seen == null) {
          String eventName = name + "." + Long.toHexString(System.nanoTime());
          client
              .v1()
              .events()
              .inNamespace(namespace)
              .resource(
                  new io.fabric8.kubernetes.api.model.EventBuilder()
                      .withNewMetadata()
                      .withName(eventName)
                      .withNamespace(namespace)
                      .endMetadata()
                      .withNewInvolvedObject()
                      .withApiVersion("v1")
                      .withKind("Pod")
                      .withNamespace(namespace)
                      .withName(name)
                      .withUid(uid)
                      .endInvolvedObject()
                      .withType(type)
                      .withReason(reason)
                      .withMessage(message)
                      .withNewSource()
                      .withComponent("kubelet")
                      .withHost(node.name())
                      .endSource()
                      .withFirstTimestamp(now)
                      .withLastTimestamp(now)
                      .withCount(1)
                      .build())
              .create();
          events.put(key, new Object[] {eventName, 1});
        } else {
          int count = (Integer) seen[1] + 1;
          seen[1] = count;
          client
              .v1()
              .events()
              .inNamespace(namespace)
              .withName((String) seen[0])
              .patch(
                  PatchContext.of(PatchType.JSON_MERGE),
                  client
                      .getKubernetesSerialization()
                      .asJson(Map.of("count", count, "lastTimestamp", now)));
        }
      } catch (KubernetesClientException e) {
        LOG.debug("pod {}/{}: event not recorded: {}", namespace, name, e.getMessage());
      }
    }

    List<ContainerState> all() {
      List<ContainerState> all = new ArrayList<>(initContainers);
      all.addAll(containers);
      return all;
    }

    void schedule(List<ScheduledFuture<?>> timers, Duration delay, Runnable task) {
      if (closed) {
        return;
      }
      try {
        timers.add(
            sync.schedule(
                () -> {
                  if (!deleted && !terminating && !closed) {
                    task.run();
                  }
                },
                delay.toMillis(),
                TimeUnit.MILLISECONDS));
      } catch (java.util.concurrent.RejectedExecutionException e) {
        // closing
      }
    }

    void startContainer(ContainerState cs) {
      if (terminating || deleted || closed) {
        return;
      }
      Container c = cs.spec;
      Path log = podLog(namespace, name);
      try {
        MountTable mounts = volumes.mountsFor(c);
        ProcessIdentity identity = ProcessIdentity.of(pod, c).orElse(null);
        Map<String, String> base = new LinkedHashMap<>();
        for (String k : List.of("PATH", "HOME", "LANG", "JAVA_HOME")) {
          String v = System.getenv(k);
          if (v != null) {
            base.put(k, v);
          }
        }
        if (identity != null && identity.uid() != 0) {
          // Without a passwd entry for the user, container runtimes set HOME=/.
          base.put("HOME", "/");
        }
        base.putIfAbsent("PATH", "/usr/local/bin:/usr/bin:/bin");
        base.put("HOSTNAME", name);
        Path cwd = podDir.resolve("workdir").resolve(c.getName());
        ContainerConfig.Resolved r =
            ContainerConfig.resolve(
                pod,
                c,
                new ContainerConfig.PodContext(podIp, node.address(), node.spec().allocatable()),
                mounts,
                lookup,
                base,
                serviceEnv,
                cwd);
        Files.createDirectories(r.workingDir());
        Files.createDirectories(log.getParent());
        boolean restart = cs.everStarted;
        Files.writeString(
            log,
            "--- "
                + Instant.now()
                + " container "
                + c.getName()
                + (restart ? " restart " + (cs.restartCount + 1) : " start")
                + " on node "
                + node.name()
                + ": image "
                + c.getImage()
                + " command "
                + r.command()
                + " args "
                + r.args()
                + "\n",
            StandardCharsets.UTF_8,
            StandardOpenOption.CREATE,
            StandardOpenOption.APPEND);
        ContainerProcess p =
            runtime.start(
                new ContainerLaunch(
                    namespace,
                    name,
                    uid,
                    node.name(),
                    c.getName(),
                    c.getImage(),
                    r.command(),
                    r.args(),
                    r.env(),
                    r.workingDir(),
                    log,
                    identity));
        if (restart) {
          cs.restartCount++;
        }
        cs.everStarted = true;
        cs.resolved = r;
        cs.process = p;
        cs.generation++;
        cs.startedAt = Instant.now();
        cs.waitingReason = null;
        cs.waitingMessage = null;
        cs.current = null;
        cs.ready = false;
        cs.probeSuccesses = 0;
        cs.probeFailures = 0;
        cs.livenessFailures = 0;
        int gen = cs.generation;
        p.onExit()
            .whenComplete(
                (code, err) -> {
                  int exit = code == null ? -1 : code;
                  try {
                    sync.execute(() -> onExit(cs, gen, exit));
                  } catch (java.util.concurrent.RejectedExecutionException e) {
                    // closing
                  }
                });
        if (!cs.init) {
          startProbes(cs, gen);
        }
        LOG.debug(
            "pod {}/{} container {} started as pid {}", namespace, name, c.getName(), p.pid());
      } catch (ContainerStartException e) {
        cs.waitingReason = e.reason();
        cs.waitingMessage = e.getMessage();
        LOG.info("pod {}/{}: {} {}", namespace, name, e.reason(), e.getMessage());
        schedule(cs.timers, options.configRetry(), () -> retryStart(cs));
      } catch (IOException e) {
        cs.waitingReason = "RunContainerError";
        cs.waitingMessage = "cannot prepare container " + c.getName() + ": " + e.getMessage();
        schedule(cs.timers, options.configRetry(), () -> retryStart(cs));
      }
    }

    void retryStart(ContainerState cs) {
      if (cs.process == null && !cs.done) {
        startContainer(cs);
        writeStatus();
      }
    }

    void startProbes(ContainerState cs, int gen) {
      var readiness = cs.spec.getReadinessProbe();
      if (readiness != null) {
        periodic(cs, gen, readiness, true);
      }
      var liveness = cs.spec.getLivenessProbe();
      if (liveness != null) {
        periodic(cs, gen, liveness, false);
      }
    }

    void periodic(
        ContainerState cs,
        int gen,
        io.fabric8.kubernetes.api.model.Probe probe,
        boolean readiness) {
      Map<String, String> env = cs.resolved.env();
      Path cwd = cs.resolved.workingDir();
      try {
        cs.timers.add(
            probes.scheduleWithFixedDelay(
                () -> {
                  boolean ok = Probes.run(probe, cs.spec, podIp, env, cwd);
                  try {
                    sync.execute(() -> onProbe(cs, gen, probe, readiness, ok));
                  } catch (java.util.concurrent.RejectedExecutionException e) {
                    // closing
                  }
                },
                Probes.initialDelaySeconds(probe) * 1000L,
                Probes.periodSeconds(probe) * 1000L,
                TimeUnit.MILLISECONDS));
      } catch (java.util.concurrent.RejectedExecutionException e) {
        // closing
      }
    }

    void onProbe(
        ContainerState cs,
        int gen,
        io.fabric8.kubernetes.api.model.Probe probe,
        boolean readiness,
        boolean ok) {
      if (cs.generation != gen || cs.process == null || deleted || terminating) {
        return;
      }
      if (readiness) {
        if (ok) {
          cs.probeFailures = 0;
          cs.probeSuccesses++;
          if (cs.probeSuccesses >= Probes.successThreshold(probe)) {
            cs.ready = true;
          }
        } else {
          cs.probeSuccesses = 0;
          cs.probeFailures++;
          if (cs.probeFailures >= Probes.failureThreshold(probe)) {
            cs.ready = false;
          }
        }
        writeStatus();
      } else {
        cs.livenessFailures = ok ? 0 : cs.livenessFailures + 1;
        if (cs.livenessFailures >= Probes.failureThreshold(probe)) {
          LOG.info(
              "pod {}/{} container {} failed its liveness probe {} times; killing it",
              namespace,
              name,
              cs.spec.getName(),
              cs.livenessFailures);
          cs.livenessFailures = 0;
          ContainerProcess p = cs.process;
          p.terminate();
          schedule(cs.timers, terminationGrace(), p::kill);
        }
      }
    }

    void onExit(ContainerState cs, int gen, int exitCode) {
      if (cs.generation != gen) {
        return;
      }
      cs.cancelTimers();
      cs.process = null;
      cs.ready = false;
      Instant finished = Instant.now();
      Termination t =
          new Termination(exitCode, exitCode == 0 ? "Completed" : "Error", cs.startedAt, finished);
      if (terminating || deleted) {
        cs.current = t;
        finishTerminationIfDone();
        return;
      }
      if (closed) {
        return;
      }
      String policy = restartPolicy();
      boolean restart =
          "Always".equals(policy) && !cs.init
              || ("OnFailure".equals(policy) || "Always".equals(policy)) && exitCode != 0;
      if (cs.init && exitCode == 0) {
        cs.current = t;
        cs.done = true;
        int next = initContainers.indexOf(cs) + 1;
        if (next < initContainers.size()) {
          startContainer(initContainers.get(next));
        } else {
          containers.forEach(this::startContainer);
        }
      } else if (restart) {
        cs.last = t;
        cs.current = null;
        if (Duration.between(cs.startedAt, finished).compareTo(BACKOFF_RESET_AFTER) >= 0) {
          cs.backoffStep = 0;
        }
        Duration delay = backoff(cs.backoffStep++);
        if (delay.isZero()) {
          startContainer(cs);
        } else {
          cs.waitingReason = "CrashLoopBackOff";
          cs.waitingMessage =
              "back-off "
                  + delay.toSeconds()
                  + "s restarting failed container="
                  + cs.spec.getName()
                  + " pod="
                  + name
                  + "_"
                  + namespace
                  + "("
                  + uid
                  + ")";
          schedule(cs.timers, delay, () -> retryStart(cs));
        }
      } else {
        cs.current = t;
        cs.done = true;
        if (cs.init) {
          failedInit = true;
        }
      }
      writeStatus();
    }

    Duration backoff(int step) {
      if (step == 0) {
        return Duration.ZERO;
      }
      Duration d = options.initialRestartBackoff();
      for (int i = 1; i < step && d.compareTo(options.maxRestartBackoff()) < 0; i++) {
        d = d.multipliedBy(2);
      }
      return d.compareTo(options.maxRestartBackoff()) > 0 ? options.maxRestartBackoff() : d;
    }

    Duration terminationGrace() {
      Long seconds = pod.getMetadata().getDeletionGracePeriodSeconds();
      if (seconds == null) {
        seconds = pod.getSpec().getTerminationGracePeriodSeconds();
      }
      Duration grace = Duration.ofSeconds(seconds == null ? 30 : Math.max(0, seconds));
      return grace.compareTo(options.maxTerminationGrace()) > 0
          ? options.maxTerminationGrace()
          : grace;
    }

    void cancelTimers() {
      podTimers.forEach(t -> t.cancel(false));
      podTimers.clear();
      all().forEach(ContainerState::cancelTimers);
    }

    void beginTermination() {
      if (terminating) {
        finishTerminationIfDone();
        return;
      }
      terminating = true;
      cancelTimers();
      List<ContainerProcess> running = new ArrayList<>();
      for (ContainerState cs : all()) {
        cs.ready = false;
        if (cs.process != null) {
          running.add(cs.process);
          cs.process.terminate();
        }
      }
      if (!running.isEmpty()) {
        Duration grace = terminationGrace();
        LOG.debug(
            "pod {}/{} deleted: SIGTERM to {} process(es), grace {}",
            namespace,
            name,
            running.size(),
            grace);
        later(grace, () -> running.forEach(ContainerProcess::kill));
        // If a process ignores even SIGKILL's aftermath, finish anyway (bounded).
        later(grace.plusSeconds(10), this::finishDeletion);
        writeStatus();
      }
      finishTerminationIfDone();
    }

    void finishTerminationIfDone() {
      for (ContainerState cs : all()) {
        if (cs.process != null && cs.process.isAlive()) {
          return;
        }
      }
      if (!csiTornDown) {
        tearDownCsi(() -> sync.execute(this::finishDeletion));
        return;
      }
      finishDeletion();
    }

    /**
     * Cancels publishes in flight and unpublishes every CSI volume of the pod (idempotent on the
     * driver's side), then runs {@code then}; at most once.
     */
    void tearDownCsi(Runnable then) {
      if (csiTornDown) {
        return;
      }
      csiTornDown = true;
      csiInFlight.values().forEach(f -> f.cancel(true));
      csiInFlight.clear();
      if (volumes == null || volumes.csiVolumes().isEmpty()) {
        then.run();
        return;
      }
      List<java.util.concurrent.CompletableFuture<Void>> calls = new ArrayList<>();
      for (PodVolumes.CsiVolume v : volumes.csiVolumes()) {
        calls.add(csi.unpublish(node.name(), v));
      }
      java.util.concurrent.CompletableFuture.allOf(
              calls.toArray(new java.util.concurrent.CompletableFuture<?>[0]))
          .whenComplete(
              (ok, err) -> {
                Path kubeletPodDir =
                    PodVolumes.kubeletRoot(node.root()).resolve("pods").resolve(uid);
                unmountEverythingUnder(kubeletPodDir);
                try {
                  TestFiles.deleteTree(kubeletPodDir);
                } catch (IOException e) {
                  LOG.debug("cannot remove {}: {}", kubeletPodDir, e.toString());
                }
                try {
                  then.run();
                } catch (java.util.concurrent.RejectedExecutionException e) {
                  // closing
                }
              });
    }

    void finishDeletion() {
      if (deleted) {
        return;
      }
      deleted = true;
      cancelTimers();
      try {
        Map<String, Object> options = new LinkedHashMap<>();
        options.put("apiVersion", "v1");
        options.put("kind", "DeleteOptions");
        options.put("gracePeriodSeconds", 0);
        options.put("preconditions", Map.of("uid", uid));
        client.raw("/api/v1/namespaces/" + namespace + "/pods/" + name, "DELETE", options);
      } catch (KubernetesClientException e) {
        if (e.getCode() != 404 && e.getCode() != 409) {
          LOG.warn("pod {}/{}: final delete failed: {}", namespace, name, e.getMessage());
          deleted = false;
          later(Duration.ofSeconds(1), () -> syncPod(namespace + "/" + name));
          return;
        }
      }
      try {
        TestFiles.deleteTree(podDir);
      } catch (IOException e) {
        LOG.debug("cannot remove {}: {}", podDir, e.toString());
      }
    }

    /** Immediate SIGKILL of everything, no API writes (node gone, pod force-deleted). */
    void killAll() {
      cancelTimers();
      tearDownCsi(() -> {});
      deleted = true;
      for (ContainerState cs : all()) {
        ContainerProcess p = cs.process;
        if (p != null) {
          p.kill();
        }
      }
    }

    // ----------------------------------------------------------------------------- status

    String phase() {
      if (failedInit) {
        return "Failed";
      }
      boolean allDone = containers.stream().allMatch(cs -> cs.done);
      if (allDone) {
        return containers.stream().allMatch(cs -> cs.current != null && cs.current.exitCode() == 0)
            ? "Succeeded"
            : "Failed";
      }
      return containers.stream().anyMatch(cs -> cs.everStarted) ? "Running" : "Pending";
    }

    Map<String, Object> conditionEntry(String type, boolean value, String reason) {
      String status = value ? "True" : "False";
      String[] prev = conditionState.get(type);
      String time = prev != null && prev[0].equals(status) ? prev[1] : now();
      conditionState.put(type, new String[] {status, time});
      Map<String, Object> c = new LinkedHashMap<>();
      c.put("type", type);
      c.put("status", status);
      c.put("lastTransitionTime", time);
      if (!value && reason != null) {
        c.put("reason", reason);
      }
      return c;
    }

    Map<String, Object> containerStatus(ContainerState cs) {
      Map<String, Object> s = new LinkedHashMap<>();
      s.put("name", cs.spec.getName());
      s.put("image", cs.spec.getImage());
      s.put("imageID", "process://" + cs.spec.getImage());
      ContainerProcess p = cs.process;
      if (p != null) {
        s.put("containerID", "process://" + p.pid());
        s.put("state", Map.of("running", Map.of("startedAt", ts(cs.startedAt))));
      } else if (cs.current != null) {
        s.put("state", Map.of("terminated", termination(cs.current)));
      } else {
        Map<String, Object> waiting = new LinkedHashMap<>();
        waiting.put("reason", cs.waitingReason == null ? "ContainerCreating" : cs.waitingReason);
        if (cs.waitingMessage != null) {
          waiting.put("message", cs.waitingMessage);
        }
        s.put("state", Map.of("waiting", waiting));
      }
      s.put("lastState", cs.last == null ? Map.of() : Map.of("terminated", termination(cs.last)));
      s.put("ready", cs.ready && p != null);
      s.put("started", p != null);
      s.put("restartCount", cs.restartCount);
      return s;
    }

    Map<String, Object> termination(Termination t) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("exitCode", t.exitCode());
      m.put("reason", t.reason());
      m.put("startedAt", ts(t.startedAt()));
      m.put("finishedAt", ts(t.finishedAt()));
      return m;
    }

    String ts(Instant i) {
      return i == null ? null : i.truncatedTo(ChronoUnit.SECONDS).toString();
    }

    void writeStatus() {
      if (deleted || closed) {
        return;
      }
      for (ContainerState cs : containers) {
        if (cs.process != null && cs.spec.getReadinessProbe() == null) {
          cs.ready = cs.process.isAlive();
        }
      }
      String phase = phase();
      boolean initialized = initContainers.stream().allMatch(cs -> cs.done && !failedInit);
      boolean containersReady = containers.stream().allMatch(cs -> cs.ready && cs.process != null);
      Map<String, Object> status = new LinkedHashMap<>();
      status.put("phase", phase);
      status.put("hostIP", node.address());
      status.put("podIP", podIp);
      status.put("podIPs", List.of(Map.of("ip", podIp)));
      status.put("startTime", startTime);
      status.put(
          "conditions",
          List.of(
              conditionEntry("Initialized", initialized, "ContainersNotInitialized"),
              conditionEntry("ContainersReady", containersReady, "ContainersNotReady"),
              conditionEntry("Ready", containersReady, "ContainersNotReady")));
      if (!initContainers.isEmpty()) {
        status.put(
            "initContainerStatuses", initContainers.stream().map(this::containerStatus).toList());
      }
      status.put("containerStatuses", containers.stream().map(this::containerStatus).toList());
      Map<String, Object> patch = new LinkedHashMap<>();
      patch.put("metadata", Map.of("uid", uid));
      patch.put("status", status);
      String json = client.getKubernetesSerialization().asJson(patch);
      if (json.equals(lastStatusJson)) {
        return;
      }
      try {
        client
            .pods()
            .inNamespace(namespace)
            .withName(name)
            .subresource("status")
            .patch(PatchContext.of(PatchType.STRATEGIC_MERGE), json);
        lastStatusJson = json;
      } catch (KubernetesClientException e) {
        if (e.getCode() == 404 || e.getCode() == 409 || e.getCode() == 422) {
          LOG.debug(
              "pod {}/{}: status not written ({}): {}",
              namespace,
              name,
              e.getCode(),
              e.getMessage());
          return;
        }
        LOG.warn(
            "pod {}/{}: status write failed, retrying in 1 s: {}", namespace, name, e.getMessage());
        later(Duration.ofSeconds(1), this::writeStatus);
      }
    }
  }

  // ----------------------------------------------------------------------------- API lookups

  private static final class ApiLookup implements ObjectLookup {
    private final KubernetesClient client;

    ApiLookup(KubernetesClient client) {
      this.client = client;
    }

    @Override
    public Map<String, byte[]> secret(String namespace, String name) {
      Secret s = client.secrets().inNamespace(namespace).withName(name).get();
      if (s == null) {
        return null;
      }
      Map<String, byte[]> out = new LinkedHashMap<>();
      if (s.getData() != null) {
        s.getData().forEach((k, v) -> out.put(k, Base64.getDecoder().decode(v)));
      }
      if (s.getStringData() != null) {
        s.getStringData().forEach((k, v) -> out.put(k, v.getBytes(StandardCharsets.UTF_8)));
      }
      return out;
    }

    @Override
    public Map<String, byte[]> configMap(String namespace, String name) {
      ConfigMap cm = client.configMaps().inNamespace(namespace).withName(name).get();
      if (cm == null) {
        return null;
      }
      Map<String, byte[]> out = new LinkedHashMap<>();
      if (cm.getData() != null) {
        cm.getData().forEach((k, v) -> out.put(k, v.getBytes(StandardCharsets.UTF_8)));
      }
      if (cm.getBinaryData() != null) {
        cm.getBinaryData().forEach((k, v) -> out.put(k, Base64.getDecoder().decode(v)));
      }
      return out;
    }
  }
}
