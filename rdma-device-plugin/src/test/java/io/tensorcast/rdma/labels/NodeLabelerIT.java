package io.tensorcast.rdma.labels;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubeapitest.KubeAPIServer;
import io.fabric8.kubeapitest.KubeAPIServerConfigBuilder;
import io.fabric8.kubernetes.api.model.NodeBuilder;
import io.fabric8.kubernetes.api.model.rbac.ClusterRole;
import io.fabric8.kubernetes.api.model.rbac.ClusterRoleBindingBuilder;
import io.fabric8.kubernetes.api.model.rbac.ClusterRoleBuilder;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.tensorcast.rdma.FakeSysfs;
import io.tensorcast.rdma.discovery.SysfsRdmaDiscovery;
import io.tensorcast.rdma.plugin.DevicePluginServer;
import io.tensorcast.rdma.plugin.PluginConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The node labels against a real etcd + kube-apiserver 1.20.2 (fabric8 kube-api-test, offline, with
 * the binaries built by {@code hack/k8s/build-binaries.sh}), written with exactly the rights of the
 * chart's ClusterRole: the labeller's client impersonates a ServiceAccount bound to a ClusterRole
 * whose rules are read from {@code charts/tensorcast/templates/rdma-device-plugin-rbac.yaml}.
 */
class NodeLabelerIT {

  private static final Path K8S_BIN =
      Path.of(System.getProperty("user.home"), ".cache", "tensorcast", "k8s-1.20.2", "bin");
  private static final Path RBAC =
      Path.of("..", "charts", "tensorcast", "templates", "rdma-device-plugin-rbac.yaml");
  private static final String SA_USER = "system:serviceaccount:tensorcast:rdma-device-plugin";

  @TempDir static Path apiDir;
  @TempDir Path dir;

  private static KubeAPIServer apiServer;
  private static KubernetesClient admin;
  private KubernetesClient plugin;
  private final String nodeName = "gpu-node-1";

  @BeforeAll
  static void startApiServer() throws Exception {
    Path etcd = K8S_BIN.resolve("etcd");
    Path apiserver = K8S_BIN.resolve("kube-apiserver");
    Path kubectl = Path.of("/usr/bin/kubectl");
    Assumptions.assumeTrue(
        Files.isExecutable(etcd) && Files.isExecutable(apiserver) && Files.isExecutable(kubectl),
        "skipped: needs etcd and kube-apiserver 1.20.2 in "
            + K8S_BIN
            + " (build them with hack/k8s/build-binaries.sh) and /usr/bin/kubectl");
    Path bin = Files.createDirectories(apiDir.resolve("k8s/1.20.2-linux-amd64"));
    Files.createSymbolicLink(bin.resolve("etcd"), etcd);
    Files.createSymbolicLink(bin.resolve("kube-apiserver"), apiserver);
    Files.createSymbolicLink(bin.resolve("kubectl"), kubectl);
    apiServer =
        new KubeAPIServer(
            KubeAPIServerConfigBuilder.anAPIServerConfig()
                .withTestDir(apiDir.toString())
                .withApiServerVersion("1.20.2")
                .withOfflineMode(true)
                .withUpdateKubeConfig(false)
                .build());
    apiServer.start();
    admin =
        new KubernetesClientBuilder()
            .withConfig(Config.fromKubeconfig(apiServer.getKubeConfigYaml()))
            .build();
    ClusterRole role =
        new ClusterRoleBuilder()
            .withNewMetadata()
            .withName("tensorcast-rdma-device-plugin")
            .endMetadata()
            .withRules(chartClusterRole().getRules())
            .build();
    admin.rbac().clusterRoles().resource(role).create();
    admin
        .rbac()
        .clusterRoleBindings()
        .resource(
            new ClusterRoleBindingBuilder()
                .withNewMetadata()
                .withName("tensorcast-rdma-device-plugin")
                .endMetadata()
                .withNewRoleRef(
                    "rbac.authorization.k8s.io", "ClusterRole", "tensorcast-rdma-device-plugin")
                .addNewSubject()
                .withKind("ServiceAccount")
                .withName("rdma-device-plugin")
                .withNamespace("tensorcast")
                .endSubject()
                .build())
        .create();
  }

  @AfterAll
  static void stopApiServer() {
    if (admin != null) {
      admin.close();
    }
    if (apiServer != null) {
      apiServer.stop();
    }
  }

  @BeforeEach
  void setUp() {
    admin
        .nodes()
        .resource(
            new NodeBuilder()
                .withNewMetadata()
                .withName(nodeName)
                .withLabels(Map.of("keep", "me", "tensorcast.io/rdma-rate", "stale"))
                .endMetadata()
                .build())
        .create();
    Config asPlugin =
        new ConfigBuilder(admin.getConfiguration())
            .withImpersonateUsername(SA_USER)
            .withImpersonateGroups("system:serviceaccounts", "system:authenticated")
            .build();
    plugin = new KubernetesClientBuilder().withConfig(asPlugin).build();
  }

  @AfterEach
  void tearDown() {
    if (plugin != null) {
      plugin.close();
    }
    admin.nodes().withName(nodeName).delete();
    await().until(() -> admin.nodes().withName(nodeName).get() == null);
  }

  /** The ClusterRole document of the chart template, with template expressions filled in. */
  private static ClusterRole chartClusterRole() throws Exception {
    // Lines that are only a template action (includes of label blocks, conditionals) go; the
    // expressions left inside lines become "x".
    String text =
        Files.readString(RBAC)
            .replaceAll("(?m)^\\s*\\{\\{[^}]*}}\\s*$\\n?", "")
            .replaceAll("\\{\\{[^}]*}}", "x");
    return Arrays.stream(text.split("(?m)^---\\s*$"))
        .filter(doc -> doc.contains("kind: ClusterRole\n"))
        .map(doc -> Serialization.unmarshal(doc, ClusterRole.class))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no ClusterRole in " + RBAC));
  }

  private Map<String, String> labels() {
    return admin.nodes().withName(nodeName).get().getMetadata().getLabels();
  }

  @Test
  void labelsFollowTheDevicesAndTouchNothingElse() throws Exception {
    FakeSysfs sysfs =
        new FakeSysfs(dir)
            .device("mlx5_0", 0, 0, "4: ACTIVE", "InfiniBand", "200 Gb/sec (4X HDR)")
            .device("mlx5_1", 1, 1, "4: ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)");
    Path pluginDir = Files.createDirectories(dir.resolve("device-plugins"));
    PluginConfig config =
        new PluginConfig(
            pluginDir,
            "tensorcast-rdma.sock",
            "tensorcast.io/rdma",
            4,
            "/dev",
            Duration.ofMillis(100));

    try (DevicePluginServer server =
        new DevicePluginServer(
            config,
            new SysfsRdmaDiscovery(sysfs.sysRoot(), sysfs.devRoot()),
            new NodeLabeler(plugin, nodeName))) {
      server.start();
      await()
          .untilAsserted(
              () ->
                  assertThat(labels())
                      .containsExactlyInAnyOrderEntriesOf(
                          Map.of(
                              "keep", "me",
                              "tensorcast.io/rdma", "true",
                              "tensorcast.io/rdma-link-layer", "InfiniBand",
                              "tensorcast.io/rdma-rate", "200",
                              "tensorcast.io/rdma-devices", "2")));

      // Steady state: polls go on (100 ms) and the Node is not written again.
      String version = admin.nodes().withName(nodeName).get().getMetadata().getResourceVersion();
      await().pollDelay(Duration.ofMillis(800)).until(() -> true);
      assertThat(admin.nodes().withName(nodeName).get().getMetadata().getResourceVersion())
          .isEqualTo(version);

      // The InfiniBand port goes down: the RoCE device is what is left.
      sysfs.state("mlx5_0", "1: DOWN");
      await()
          .untilAsserted(
              () ->
                  assertThat(labels())
                      .containsEntry("tensorcast.io/rdma-link-layer", "Ethernet")
                      .containsEntry("tensorcast.io/rdma-rate", "100")
                      .containsEntry("tensorcast.io/rdma-devices", "1"));

      // No usable device left: every label of ours goes, the others stay.
      sysfs.state("mlx5_1", "1: DOWN");
      await()
          .untilAsserted(() -> assertThat(labels()).containsExactlyEntriesOf(Map.of("keep", "me")));

      // A device comes back.
      sysfs.state("mlx5_1", "4: ACTIVE");
      await().untilAsserted(() -> assertThat(labels()).containsEntry("tensorcast.io/rdma", "true"));
    }
  }

  @Test
  void theChartRoleAllowsGetAndPatchOfNodesAndNothingElse() throws Exception {
    assertThat(chartClusterRole().getRules())
        .singleElement()
        .satisfies(
            r -> {
              assertThat(r.getApiGroups()).containsExactly("");
              assertThat(r.getResources()).containsExactly("nodes");
              assertThat(r.getVerbs()).containsExactlyInAnyOrder("get", "patch");
            });
    assertThat(plugin.nodes().withName(nodeName).get()).isNotNull();
    assertThatThrownBy(() -> plugin.nodes().list())
        .isInstanceOfSatisfying(
            KubernetesClientException.class, e -> assertThat(e.getCode()).isEqualTo(403));
    assertThatThrownBy(() -> plugin.nodes().withName(nodeName).delete())
        .isInstanceOfSatisfying(
            KubernetesClientException.class, e -> assertThat(e.getCode()).isEqualTo(403));
  }

  @Test
  void aMissingNodeIsReportedAndRetriedNotFatal() throws Exception {
    FakeSysfs sysfs =
        new FakeSysfs(dir).device("mlx5_0", 0, 0, "4: ACTIVE", "InfiniBand", "200 Gb/sec");
    NodeLabeler labeler = new NodeLabeler(plugin, "no-such-node");
    labeler.accept(new SysfsRdmaDiscovery(sysfs.sysRoot(), sysfs.devRoot()).discover());
    assertThat(admin.nodes().withName("no-such-node").get()).isNull();
  }
}
