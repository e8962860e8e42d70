package io.tensorcast.e2e.cluster;

import static io.tensorcast.e2e.cluster.TestPods.condition;
import static io.tensorcast.e2e.cluster.TestPods.isReady;
import static io.tensorcast.e2e.cluster.TestPods.restartCount;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.ContainerStatus;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.tensorcast.e2e.cluster.LocalClusterExtension.TestNamespace;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The simulated kubelet against the real control plane, with real python3 processes. */
@ExtendWith(LocalClusterExtension.class)
class SimulatedKubeletIT {

  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  @BeforeAll
  static void images() {
    TestPods.mapImages(SharedCluster.get());
  }

  @Test
  void rdmaPodLandsOnTheRdmaNodeRunsAndBecomesReady(
      SharedCluster cluster, KubernetesClient client, TestNamespace ns) throws Exception {
    SimulatedNode plain = TestPods.addNode(cluster, ns.name(), "plain", Map.of());
    SimulatedNode rdma =
        TestPods.addNode(cluster, ns.name(), "rdma", Map.of("tensorcast.io/rdma", "1"));
    assertThat(client.nodes().withName(rdma.name()).get().getStatus().getAllocatable())
        .containsKey("tensorcast.io/rdma");

    Pod pod =
        TestPods.requesting(
                TestPods.httpServer(ns.name(), "loader", 18080), "tensorcast.io/rdma", "1")
            .build();
    client.resource(pod).create();

    await()
        .atMost(TIMEOUT)
        .until(() -> isReady(client.pods().inNamespace(ns.name()).withName("loader").get()));
    Pod ready = client.pods().inNamespace(ns.name()).withName("loader").get();
    assertThat(ready.getSpec().getNodeName()).isEqualTo(rdma.name()).isNotEqualTo(plain.name());
    assertThat(ready.getStatus().getPhase()).isEqualTo("Running");
    assertThat(ready.getStatus().getPodIP()).isEqualTo(rdma.address());
    ContainerStatus cs = ready.getStatus().getContainerStatuses().get(0);
    assertThat(cs.getReady()).isTrue();
    assertThat(cs.getState().getRunning()).isNotNull();
    long pid = Long.parseLong(cs.getContainerID().substring("process://".length()));
    assertThat(ProcessHandle.of(pid).map(ProcessHandle::isAlive)).contains(true);

    // The real process answers on the pod IP (the rdma node's loopback address), not elsewhere.
    HttpResponse<String> r =
        HttpClient.newHttpClient()
            .send(
                HttpRequest.newBuilder(URI.create("http://" + rdma.address() + ":18080/")).build(),
                HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.body()).contains("Directory listing");
  }

  @Test
  void nodeStatusCarriesAddressResourcesAndReadiness(
      SharedCluster cluster, KubernetesClient client, TestNamespace ns) {
    SimulatedNode node =
        TestPods.addNode(cluster, ns.name(), "rdma", Map.of("tensorcast.io/rdma", "1"));
    io.fabric8.kubernetes.api.model.Node n = client.nodes().withName(node.name()).get();
    assertThat(n.getStatus().getAddresses())
        .anySatisfy(
            a -> {
              assertThat(a.getType()).isEqualTo("InternalIP");
              assertThat(a.getAddress()).isEqualTo(node.address());
            });
    assertThat(n.getStatus().getAllocatable().get("tensorcast.io/rdma").toString()).isEqualTo("1");
    assertThat(n.getStatus().getCapacity().get("memory").toString()).isEqualTo("32Gi");
    assertThat(n.getMetadata().getLabels())
        .containsEntry("kubernetes.io/hostname", node.name())
        .containsEntry(TestPods.GROUP_LABEL, ns.name());
    assertThat(n.getSpec().getTaints()).isNullOrEmpty();
    assertThat(readyStatus(n)).isEqualTo("True");

    node.setReady(false);

    assertThat(readyStatus(client.nodes().withName(node.name()).get())).isEqualTo("False");
  }

  private static String readyStatus(io.fabric8.kubernetes.api.model.Node n) {
    return n.getStatus().getConditions().stream()
        .filter(c -> c.getType().equals("Ready"))
        .findFirst()
        .orElseThrow()
        .getStatus();
  }

  @Test
  void podThatFitsNoNodeStaysPendingAndUnschedulable(
      SharedCluster cluster, KubernetesClient client, TestNamespace ns) {
    TestPods.addNode(cluster, ns.name(), "rdma", Map.of("tensorcast.io/rdma", "1"));
    Pod pod =
        TestPods.requesting(
                TestPods.httpServer(ns.name(), "greedy", 18081), "tensorcast.io/rdma", "2")
            .build();
    client.resource(pod).create();

    await()
        .atMost(TIMEOUT)
        .until(
            () ->
                condition(
                        client.pods().inNamespace(ns.name()).withName("greedy").get(),
                        "PodScheduled")
                    .isPresent());
    Pod pending = client.pods().inNamespace(ns.name()).withName("greedy").get();
    PodCondition scheduled = condition(pending, "PodScheduled").orElseThrow();
    assertThat(scheduled.getStatus()).isEqualTo("False");
    assertThat(scheduled.getReason()).isEqualTo("Unschedulable");
    assertThat(scheduled.getMessage()).contains("Insufficient tensorcast.io/rdma");
    assertThat(pending.getSpec().getNodeName()).isNull();
    assertThat(pending.getStatus().getPhase()).isEqualTo("Pending");
  }

  @Test
  void deletingThePodStopsTheProcessAndThePodDisappears(
      SharedCluster cluster, KubernetesClient client, TestNamespace ns) {
    TestPods.addNode(cluster, ns.name(), "n1", Map.of());
    client.resource(TestPods.httpServer(ns.name(), "doomed", 18082).build()).create();
    await()
        .atMost(TIMEOUT)
        .until(() -> isReady(client.pods().inNamespace(ns.name()).withName("doomed").get()));
    long pid = cluster.kubelet().podProcesses(ns.name(), "doomed").get("http");
    ProcessHandle process = ProcessHandle.of(pid).orElseThrow();

    client.pods().inNamespace(ns.name()).withName("doomed").delete();

    await()
        .atMost(TIMEOUT)
        .until(() -> client.pods().inNamespace(ns.name()).withName("doomed").get() == null);
    await().atMost(TIMEOUT).until(() -> !process.isAlive());
    assertThat(cluster.kubelet().podProcesses(ns.name(), "doomed")).isEmpty();
  }

  @Test
  void killedProcessIsRestarted(SharedCluster cluster, KubernetesClient client, TestNamespace ns) {
    TestPods.addNode(cluster, ns.name(), "n1", Map.of());
    client.resource(TestPods.httpServer(ns.name(), "crashy", 18083).build()).create();
    await()
        .atMost(TIMEOUT)
        .until(() -> isReady(client.pods().inNamespace(ns.name()).withName("crashy").get()));
    long before = cluster.kubelet().podProcesses(ns.name(), "crashy").get("http");

    assertThat(cluster.kubelet().killPodProcess(ns.name(), "crashy")).containsExactly(before);

    await()
        .atMost(TIMEOUT)
        .until(
            () -> {
              Pod p = client.pods().inNamespace(ns.name()).withName("crashy").get();
              return restartCount(p) == 1 && isReady(p);
            });
    Pod p = client.pods().inNamespace(ns.name()).withName("crashy").get();
    ContainerStatus cs = p.getStatus().getContainerStatuses().get(0);
    assertThat(cs.getLastState().getTerminated().getExitCode()).isEqualTo(137);
    long after = cluster.kubelet().podProcesses(ns.name(), "crashy").get("http");
    assertThat(after).isNotEqualTo(before);
    assertThat(ProcessHandle.of(before).map(ProcessHandle::isAlive).orElse(false)).isFalse();
    assertThat(cs.getContainerID()).isEqualTo("process://" + after);
  }

  @Test
  void missingSecretBlocksTheContainerUntilItExistsAndHostPathIsPerNode(
      SharedCluster cluster, KubernetesClient client, TestNamespace ns) throws Exception {
    SimulatedNode node = TestPods.addNode(cluster, ns.name(), "n1", Map.of());
    String script =
        "import os, sys, time\n"
            + "open(sys.argv[1], 'w').write(os.environ['TOKEN'] + ' ' + os.environ['NODE'])\n"
            + "time.sleep(300)\n";
    Pod pod =
        new io.fabric8.kubernetes.api.model.PodBuilder()
            .withNewMetadata()
            .withNamespace(ns.name())
            .withName("writer")
            .endMetadata()
            .withNewSpec()
            .withNodeSelector(Map.of(TestPods.GROUP_LABEL, ns.name()))
            .withTerminationGracePeriodSeconds(1L)
            .addNewVolume()
            .withName("data")
            .withNewHostPath()
            .withPath("/var/lib/tensorcast-test")
            .withType("DirectoryOrCreate")
            .endHostPath()
            .endVolume()
            .addNewContainer()
            .withName("main")
            .withImage(TestPods.PYTHON_IMAGE)
            .withArgs("-c", script, "/data/out.txt")
            .addNewEnv()
            .withName("TOKEN")
            .withNewValueFrom()
            .withNewSecretKeyRef()
            .withName("creds")
            .withKey("token")
            .endSecretKeyRef()
            .endValueFrom()
            .endEnv()
            .addNewEnv()
            .withName("NODE")
            .withNewValueFrom()
            .withNewFieldRef()
            .withFieldPath("spec.nodeName")
            .endFieldRef()
            .endValueFrom()
            .endEnv()
            .addNewVolumeMount()
            .withName("data")
            .withMountPath("/data")
            .endVolumeMount()
            .endContainer()
            .endSpec()
            .build();
    client.resource(pod).create();

    await()
        .atMost(TIMEOUT)
        .until(
            () -> {
              ContainerStatus cs =
                  firstStatus(client.pods().inNamespace(ns.name()).withName("writer").get());
              return cs != null
                  && cs.getState().getWaiting() != null
                  && "CreateContainerConfigError".equals(cs.getState().getWaiting().getReason());
            });
    Pod blocked = client.pods().inNamespace(ns.name()).withName("writer").get();
    assertThat(blocked.getStatus().getPhase()).isEqualTo("Pending");
    assertThat(firstStatus(blocked).getState().getWaiting().getMessage())
        .contains("secret \"creds\" not found")
        .contains("TOKEN");

    client
        .resource(
            new SecretBuilder()
                .withNewMetadata()
                .withNamespace(ns.name())
                .withName("creds")
                .endMetadata()
                .withStringData(Map.of("token", "s3cr3t"))
                .build())
        .create();

    Path out = node.hostPath("/var/lib/tensorcast-test/out.txt");
    assertThat(out).startsWithRaw(node.root());
    await().atMost(TIMEOUT).until(() -> Files.exists(out) && Files.size(out) > 0);
    assertThat(Files.readString(out, StandardCharsets.UTF_8)).isEqualTo("s3cr3t " + node.name());
    assertThat(client.pods().inNamespace(ns.name()).withName("writer").get().getStatus().getPhase())
        .isEqualTo("Running");
  }

  @Test
  void containerExitingNonZeroWithRestartNeverFailsThePod(
      SharedCluster cluster, KubernetesClient client, TestNamespace ns) {
    TestPods.addNode(cluster, ns.name(), "n1", Map.of());
    Pod pod =
        new io.fabric8.kubernetes.api.model.PodBuilder()
            .withNewMetadata()
            .withNamespace(ns.name())
            .withName("job")
            .endMetadata()
            .withNewSpec()
            .withNodeSelector(Map.of(TestPods.GROUP_LABEL, ns.name()))
            .withRestartPolicy("Never")
            .addNewContainer()
            .withName("main")
            .withImage(TestPods.PYTHON_IMAGE)
            .withArgs("-c", "import sys; print('bye'); sys.exit(3)")
            .endContainer()
            .endSpec()
            .build();
    client.resource(pod).create();

    await()
        .atMost(TIMEOUT)
        .until(
            () ->
                "Failed".equals(phase(client.pods().inNamespace(ns.name()).withName("job").get())));
    ContainerStatus cs = firstStatus(client.pods().inNamespace(ns.name()).withName("job").get());
    assertThat(cs.getState().getTerminated().getExitCode()).isEqualTo(3);
    assertThat(cs.getRestartCount()).isZero();
  }

  private static String phase(Pod p) {
    return p == null || p.getStatus() == null ? null : p.getStatus().getPhase();
  }

  private static ContainerStatus firstStatus(Pod p) {
    if (p == null || p.getStatus() == null || p.getStatus().getContainerStatuses() == null) {
      return null;
    }
    return p.getStatus().getContainerStatuses().isEmpty()
        ? null
        : p.getStatus().getContainerStatuses().get(0);
  }
}
