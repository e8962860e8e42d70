package io.tensorcast.e2e.cluster;

import static io.tensorcast.e2e.cluster.TestPods.isReady;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.ConfigMapBuilder;
import io.fabric8.kubernetes.api.model.OwnerReferenceBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.tensorcast.e2e.cluster.LocalClusterExtension.TestNamespace;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The local control plane itself: kubectl access, garbage collection, namespace deletion. */
@ExtendWith(LocalClusterExtension.class)
class LocalControlPlaneIT {

  @BeforeAll
  static void images() {
    TestPods.mapImages(SharedCluster.get());
  }

  @Test
  void kubectlWorksWithTheKubeconfig(SharedCluster cluster, TestNamespace ns) throws Exception {
    Process kubectl =
        new ProcessBuilder(
                "kubectl",
                "--kubeconfig",
                cluster.controlPlane().kubeconfig().toString(),
                "get",
                "ns",
                "-o",
                "name")
            .redirectErrorStream(true)
            .start();
    assertThat(kubectl.waitFor(30, TimeUnit.SECONDS)).isTrue();
    String out = new String(kubectl.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(kubectl.exitValue()).as(out).isZero();
    assertThat(out.lines().toList())
        .contains("namespace/default", "namespace/kube-system", "namespace/" + ns.name());
    assertThat(cluster.controlPlane().isRunning()).isTrue();
  }

  @Test
  void deletingTheOwnerGarbageCollectsTheOwnedPodAndStopsItsProcess(
      SharedCluster cluster, KubernetesClient client, TestNamespace ns) {
    TestPods.addNode(cluster, ns.name(), "n1", Map.of());
    ConfigMap owner =
        client
            .resource(
                new ConfigMapBuilder()
                    .withNewMetadata()
                    .withNamespace(ns.name())
                    .withName("owner")
                    .endMetadata()
                    .withData(Map.of("k", "v"))
                    .build())
            .create();
    Pod pod =
        TestPods.httpServer(ns.name(), "owned", 18090)
            .editMetadata()
            .withOwnerReferences(
                new OwnerReferenceBuilder()
                    .withApiVersion("v1")
                    .withKind("ConfigMap")
                    .withName("owner")
                    .withUid(owner.getMetadata().getUid())
                    .build())
            .endMetadata()
            .build();
    client.resource(pod).create();
    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> isReady(client.pods().inNamespace(ns.name()).withName("owned").get()));
    ProcessHandle process =
        ProcessHandle.of(cluster.kubelet().podProcesses(ns.name(), "owned").get("http"))
            .orElseThrow();

    client.configMaps().inNamespace(ns.name()).withName("owner").delete();

    await()
        .atMost(Duration.ofSeconds(45))
        .until(() -> client.pods().inNamespace(ns.name()).withName("owned").get() == null);
    // The pod process ends shortly after its deletion: bounded generously for a loaded machine.
    await().atMost(Duration.ofSeconds(30)).until(() -> !process.isAlive());
    assertThat(client.pods().inNamespace(ns.name()).list().getItems()).isEmpty();
  }

  @Test
  void deletingANamespaceFinishesWhenItsPodsAreGone(
      SharedCluster cluster, KubernetesClient client, TestNamespace ns) {
    TestPods.addNode(cluster, ns.name(), "n1", Map.of());
    String other = cluster.createNamespace("doomed");
    // Pinned to this test's node through the group label of this test's namespace.
    client
        .resource(
            TestPods.httpServer(other, "p", 18091)
                .editSpec()
                .withNodeSelector(Map.of(TestPods.GROUP_LABEL, ns.name()))
                .endSpec()
                .build())
        .create();
    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> isReady(client.pods().inNamespace(other).withName("p").get()));

    client.namespaces().withName(other).delete();

    await()
        .atMost(Duration.ofSeconds(60))
        .until(() -> client.namespaces().withName(other).get() == null);
    assertThat(cluster.kubelet().podProcesses(other, "p")).isEmpty();
  }
}
