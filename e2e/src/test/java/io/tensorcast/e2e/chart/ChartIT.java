package io.tensorcast.e2e.chart;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.marcnuri.helm.Helm;
import com.marcnuri.helm.LintResult;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.ServiceAccount;
import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinition;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.rbac.ClusterRole;
import io.fabric8.kubernetes.api.model.rbac.ClusterRoleBinding;
import io.fabric8.kubernetes.api.model.rbac.PolicyRule;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.e2e.cluster.LocalClusterExtension;
import io.tensorcast.e2e.cluster.LocalClusterExtension.TestNamespace;
import io.tensorcast.e2e.cluster.SharedCluster;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The Helm chart {@code charts/tensorcast}, rendered by real Helm (helm-java embeds Helm's Go
 * library) and sent to the shared local kube-apiserver: {@code helm lint --strict} passes, every
 * rendered object passes a server-side dry run after the chart's CRD is applied for real, the
 * chart's CRD is the crds jar's, and the operator's RBAC, applied for real, grants what the
 * operator uses and no read access to Secrets (only create and patch, for each artifact's own
 * Secret; asked of the API server's authorizer with {@code kubectl auth can-i}).
 */
@ExtendWith(LocalClusterExtension.class)
class ChartIT {

  static final String CRD_FILE = ModelArtifact.CRD_NAME + "-v1.yml";

  static Path chartDir() {
    Path dir = Path.of(System.getProperty("tensorcast.chart.dir", "../charts/tensorcast"));
    assertThat(dir.resolve("Chart.yaml"))
        .as("chart directory (system property tensorcast.chart.dir)")
        .isRegularFile();
    return dir.toAbsolutePath().normalize();
  }

  @Test
  void lintPassesStrict() {
    LintResult result = new Helm(chartDir()).lint().strict().call();
    assertThat(result.isFailed()).as(String.join("\n", result.getMessages())).isFalse();
    assertThat(result.getMessages())
        .as("lint messages")
        .noneMatch(m -> m.contains("[ERROR]") || m.contains("[WARNING]"));
  }

  @Test
  void chartCrdIsTheCrdsJarCrd() throws IOException {
    byte[] chart = Files.readAllBytes(chartDir().resolve("crds").resolve(CRD_FILE));
    byte[] jar;
    try (InputStream in =
        ModelArtifact.class.getClassLoader().getResourceAsStream("META-INF/fabric8/" + CRD_FILE)) {
      assertThat(in).as("META-INF/fabric8/" + CRD_FILE + " in the crds jar").isNotNull();
      jar = in.readAllBytes();
    }
    assertThat(new String(chart, StandardCharsets.UTF_8))
        .as(
            "charts/tensorcast/crds/%s vs the crds jar (refresh: mvn -pl crds test"
                + " -Dtensorcast.crd.update=true)",
            CRD_FILE)
        .isEqualTo(new String(jar, StandardCharsets.UTF_8));
  }

  @Test
  void everyRenderedObjectPassesServerSideDryRun(SharedCluster cluster, TestNamespace ns)
      throws Exception {
    applyChartCrd(cluster.client());
    for (Map<String, Object> values :
        List.of(
            Map.<String, Object>of(),
            Map.<String, Object>of(
                "operator.masterKey.existingSecret", "my-master-key",
                "source.allowedEndpoints[0]", "https://s3.*.amazonaws.com",
                "source.allowedEndpoints[1]", "https://minio.storage:9000",
                "networkPolicy.enabled", "false",
                "dataplane.runAsUser", "20002",
                "rdmaDevicePlugin.enabled", "false",
                "csiDriver.enabled", "false",
                "operator.nodeSelector.role", "control",
                "dataplane.formatLimits.max-zip-ratio", "200",
                "dataplane.formatLimits.max-tensors", "2000000"))) {
      String release = "tc" + Integer.toHexString(values.hashCode() & 0xfff);
      String yaml = render(release, ns.name(), values);
      List<HasMetadata> objects = load(cluster.client(), yaml);
      List<String> expected = new ArrayList<>();
      for (HasMetadata o : objects) {
        expected.add(o.getKind() + "/" + o.getMetadata().getName());
      }
      assertThat(expected)
          .contains(
              "Deployment/" + release + "-operator",
              "ServiceAccount/" + release + "-operator",
              "ClusterRole/" + release + "-operator",
              "ClusterRoleBinding/" + release + "-operator")
          .noneMatch(k -> k.startsWith("CustomResourceDefinition/"));
      boolean rdma = !values.containsKey("rdmaDevicePlugin.enabled");
      assertThat(expected.contains("DaemonSet/" + release + "-rdma-device-plugin"))
          .as("device plugin rendered with values %s", values)
          .isEqualTo(rdma);
      boolean csi = !values.containsKey("csiDriver.enabled");
      assertThat(
              expected.containsAll(
                  List.of(
                      "DaemonSet/" + release + "-csi-driver",
                      "CSIDriver/csi.tensorcast.io",
                      "ClusterRole/" + release + "-csi-driver")))
          .as("CSI driver rendered with values %s", values)
          .isEqualTo(csi);
      if (csi) {
        var ds =
            find(
                objects,
                io.fabric8.kubernetes.api.model.apps.DaemonSet.class,
                release + "-csi-driver");
        var pod = ds.getSpec().getTemplate().getSpec();
        var driver = pod.getContainers().get(0);
        assertThat(driver.getSecurityContext().getPrivileged()).isTrue();
        assertThat(driver.getArgs())
            .contains("--store-root=/dev/shm/tensorcast", "--kubelet-root=/var/lib/kubelet");
        assertThat(driver.getVolumeMounts())
            .anySatisfy(
                m -> {
                  assertThat(m.getMountPath()).isEqualTo("/var/lib/kubelet/pods");
                  assertThat(m.getMountPropagation()).isEqualTo("Bidirectional");
                })
            .anySatisfy(
                m -> {
                  assertThat(m.getMountPath()).isEqualTo("/dev/shm/tensorcast");
                  assertThat(m.getReadOnly()).isTrue();
                });
        assertThat(pod.getContainers().get(1).getImage())
            .matches(
                "registry\\.k8s\\.io/sig-storage/csi-node-driver-registrar:v\\d+\\.\\d+\\.\\d+");
        var csiDriver =
            find(
                objects,
                io.fabric8.kubernetes.api.model.storage.CSIDriver.class,
                "csi.tensorcast.io");
        assertThat(csiDriver.getSpec().getPodInfoOnMount()).isTrue();
        assertThat(csiDriver.getSpec().getVolumeLifecycleModes()).containsExactly("Ephemeral");
        assertThat(csiDriver.getSpec().getAttachRequired()).isFalse();
      }

      Result r =
          kubectl(
              cluster,
              yaml,
              "apply",
              "--dry-run=server",
              "--server-side",
              "--field-manager=chart-it",
              "-n",
              ns.name(),
              "-f",
              "-");
      assertThat(r.exit()).as(r.out() + r.err()).isZero();
      List<String> lines = r.out().lines().filter(l -> !l.isBlank()).toList();
      assertThat(lines).as(r.out()).hasSize(objects.size()).allMatch(l -> l.contains("dry run"));

      Deployment d = find(objects, Deployment.class, release + "-operator");
      var c = d.getSpec().getTemplate().getSpec().getContainers().get(0);
      Map<String, String> env =
          c.getEnv().stream()
              .filter(e -> e.getValue() != null)
              .collect(Collectors.toMap(e -> e.getName(), e -> e.getValue()));
      assertThat(env)
          .containsEntry("TENSORCAST_DATAPLANE_IMAGE", "tensorcast/dataplane:0.1.0")
          .containsEntry("TENSORCAST_STORE_ROOT", "/dev/shm/tensorcast")
          .containsEntry("TENSORCAST_MEMORY_OVERHEAD", "256Mi")
          .containsEntry("TENSORCAST_CONTROL_PORT", "8471")
          .containsEntry("TENSORCAST_PEER_PORT", "8472")
          .containsEntry("TENSORCAST_METRICS_PORT", "8080");
      assertThat(c.getImage()).isEqualTo("tensorcast/operator:0.1.0");
      assertThat(c.getSecurityContext().getReadOnlyRootFilesystem()).isTrue();
      assertThat(c.getSecurityContext().getAllowPrivilegeEscalation()).isFalse();
      assertThat(c.getSecurityContext().getCapabilities().getDrop()).containsExactly("ALL");
      assertThat(c.getSecurityContext().getCapabilities().getAdd()).isNullOrEmpty();
      assertThat(d.getSpec().getTemplate().getSpec().getSecurityContext().getRunAsNonRoot())
          .isTrue();
      assertThat(d.getSpec().getReplicas()).isEqualTo(1);
      assertThat(env)
          .containsEntry(
              "TENSORCAST_MASTER_KEY_FILE", "/var/run/secrets/tensorcast/master-key/master-key")
          .doesNotContainKeys("TENSORCAST_CONTROL_TOKEN_SECRET", "TENSORCAST_CONTROL_TOKEN_FILE");
      assertThat(c.getEnv())
          .anySatisfy(
              e -> {
                assertThat(e.getName()).isEqualTo("TENSORCAST_OPERATOR_NAMESPACE");
                assertThat(e.getValueFrom().getFieldRef().getFieldPath())
                    .isEqualTo("metadata.namespace");
              });
      assertThat(d.getSpec().getTemplate().getMetadata().getLabels())
          .containsEntry("app.kubernetes.io/name", "tensorcast-operator");
      String keySecret =
          d.getSpec().getTemplate().getSpec().getVolumes().stream()
              .filter(v -> v.getSecret() != null)
              .findFirst()
              .orElseThrow()
              .getSecret()
              .getSecretName();
      if (values.containsKey("operator.masterKey.existingSecret")) {
        assertThat(keySecret).isEqualTo("my-master-key");
        assertThat(expected).noneMatch(k -> k.startsWith("Secret/"));
        assertThat(env)
            .containsEntry(
                "TENSORCAST_ALLOWED_ENDPOINTS",
                "https://s3.*.amazonaws.com,https://minio.storage:9000")
            .containsEntry("TENSORCAST_NETWORK_POLICY", "false")
            .containsEntry("TENSORCAST_DATAPLANE_USER", "20002");
        assertThat(d.getSpec().getTemplate().getSpec().getNodeSelector())
            .containsEntry("role", "control");
        assertThat(env)
            .containsEntry("TENSORCAST_FORMAT_LIMITS", "max-tensors=2000000,max-zip-ratio=200");
      } else {
        // The key Secret itself is a pre-install hook (not in the rendered manifest):
        // masterKeyIsMadeOnceAtInstallAndKeptOnUpgrade installs the chart for real.
        assertThat(keySecret).isEqualTo(release + "-master-key");
        assertThat(env)
            .containsEntry("TENSORCAST_ALLOWED_ENDPOINTS", "")
            .containsEntry("TENSORCAST_NETWORK_POLICY", "true")
            .containsEntry("TENSORCAST_DATAPLANE_USER", "10001");
        assertThat(env).doesNotContainKey("TENSORCAST_FORMAT_LIMITS");
      }
    }
  }

  /**
   * A real {@code helm install} into the local API server runs the chart's pre-install hook, which
   * makes the operator's master key (64 random characters); {@code helm upgrade} keeps it (a new
   * key would replace every data-plane pod) and {@code helm uninstall} leaves it.
   */
  @Test
  void masterKeyIsMadeOnceAtInstallAndKeptOnUpgrade(SharedCluster cluster, TestNamespace ns)
      throws Exception {
    applyChartCrd(cluster.client());
    String release = "tckey" + Integer.toHexString(ns.name().hashCode() & 0xfff);
    Path kubeconfig = cluster.controlPlane().kubeconfig();
    try {
      new Helm(chartDir())
          .install()
          .withName(release)
          .withNamespace(ns.name())
          .withKubeConfig(kubeconfig)
          .set("rdmaDevicePlugin.enabled", "false")
          .call();
      String key = masterKey(cluster.client(), ns.name(), release);
      assertThat(key).matches("[A-Za-z0-9]{64}");

      new Helm(chartDir())
          .upgrade()
          .withName(release)
          .withNamespace(ns.name())
          .withKubeConfig(kubeconfig)
          .set("rdmaDevicePlugin.enabled", "false")
          .set("operator.pollInterval", "PT3S")
          .call();
      assertThat(masterKey(cluster.client(), ns.name(), release))
          .as("master key after upgrade")
          .isEqualTo(key);
    } finally {
      try {
        Helm.uninstall(release).withNamespace(ns.name()).withKubeConfig(kubeconfig).call();
      } catch (IllegalStateException e) {
        // Install failed: its exception is the one to report, not that there is nothing to remove.
      }
    }
    assertThat(masterKey(cluster.client(), ns.name(), release))
        .as("master key after uninstall")
        .matches("[A-Za-z0-9]{64}");
  }

  private static String masterKey(KubernetesClient client, String namespace, String release) {
    var secret = client.secrets().inNamespace(namespace).withName(release + "-master-key").get();
    assertThat(secret).as("Secret %s-master-key", release).isNotNull();
    return new String(
        java.util.Base64.getDecoder().decode(secret.getData().get("master-key")),
        StandardCharsets.UTF_8);
  }

  @Test
  void operatorRoleGrantsWhatTheOperatorUsesAndNoSecretReads(
      SharedCluster cluster, KubernetesClient client, TestNamespace ns) throws Exception {
    applyChartCrd(client);
    String release = "tcrbac" + Integer.toHexString(ns.name().hashCode() & 0xfff);
    List<HasMetadata> objects = load(client, render(release, ns.name(), Map.of()));
    ClusterRole role = find(objects, ClusterRole.class, release + "-operator");
    for (PolicyRule rule : role.getRules()) {
      assertThat(rule.getResources()).as("rule %s", rule).doesNotContain("*");
      assertThat(rule.getVerbs()).as("rule %s", rule).doesNotContain("*");
      assertThat(rule.getApiGroups()).as("rule %s", rule).doesNotContain("*");
      if (rule.getResources().contains("secrets")) {
        assertThat(rule.getVerbs())
            .as("rule %s", rule)
            .containsExactlyInAnyOrder("create", "patch");
        assertThat(rule.getResourceNames()).as("rule %s", rule).isNullOrEmpty();
      }
    }
    ServiceAccount sa = find(objects, ServiceAccount.class, release + "-operator");
    ClusterRoleBinding binding = find(objects, ClusterRoleBinding.class, release + "-operator");
    try {
      client.resource(sa).create();
      client.resource(role).create();
      client.resource(binding).create();
      String as = "system:serviceaccount:" + ns.name() + ":" + sa.getMetadata().getName();
      String[][] allowed = {
        {"list", "modelartifacts.tensorcast.io"},
        {"watch", "modelartifacts.tensorcast.io"},
        {"get", "modelartifacts.tensorcast.io"},
        {"patch", "modelartifacts.tensorcast.io"},
        {"patch", "modelartifacts.tensorcast.io", "status"},
        {"update", "modelartifacts.tensorcast.io", "finalizers"},
        {"create", "pods"},
        {"delete", "pods"},
        {"list", "pods"},
        {"watch", "pods"},
        {"list", "nodes"},
        {"watch", "nodes"},
        {"patch", "nodes"},
        {"create", "secrets"},
        {"patch", "secrets"},
        {"create", "networkpolicies.networking.k8s.io"},
        {"patch", "networkpolicies.networking.k8s.io"},
      };
      String[][] denied = {
        {"get", "secrets"},
        {"list", "secrets"},
        {"watch", "secrets"},
        {"update", "secrets"},
        {"delete", "secrets"},
        {"get", "networkpolicies.networking.k8s.io"},
        {"delete", "networkpolicies.networking.k8s.io"},
        {"create", "modelartifacts.tensorcast.io"},
        {"delete", "modelartifacts.tensorcast.io"},
        {"update", "modelartifacts.tensorcast.io"},
        {"patch", "pods"},
        {"update", "pods"},
        {"update", "nodes"},
        {"delete", "nodes"},
        {"create", "pods", "exec"},
        {"create", "configmaps"},
      };
      // The authorizer may lag the binding by a moment: wait until the first allowed check passes.
      await()
          .atMost(Duration.ofSeconds(20))
          .until(() -> canI(cluster, as, ns.name(), new String[] {"list", "pods"}));
      for (String[] a : allowed) {
        assertThat(canI(cluster, as, ns.name(), a)).as("%s may %s", as, List.of(a)).isTrue();
      }
      for (String[] d : denied) {
        assertThat(canI(cluster, as, ns.name(), d)).as("%s may not %s", as, List.of(d)).isFalse();
      }
    } finally {
      client.resource(binding).delete();
      client.resource(role).delete();
    }
  }

  @Test
  void csiDriverRoleReadsArtifactsAndWritesEventsOnly(
      SharedCluster cluster, KubernetesClient client, TestNamespace ns) throws Exception {
    applyChartCrd(client);
    String release = "tccsi" + Integer.toHexString(ns.name().hashCode() & 0xfff);
    List<HasMetadata> objects = load(client, render(release, ns.name(), Map.of()));
    ClusterRole role = find(objects, ClusterRole.class, release + "-csi-driver");
    ServiceAccount sa = find(objects, ServiceAccount.class, release + "-csi-driver");
    ClusterRoleBinding binding = find(objects, ClusterRoleBinding.class, release + "-csi-driver");
    try {
      client.resource(sa).create();
      client.resource(role).create();
      client.resource(binding).create();
      String as = "system:serviceaccount:" + ns.name() + ":" + sa.getMetadata().getName();
      String[][] allowed = {
        {"get", "modelartifacts.tensorcast.io"},
        {"list", "modelartifacts.tensorcast.io"},
        {"watch", "modelartifacts.tensorcast.io"},
        {"create", "events"},
      };
      String[][] denied = {
        {"get", "secrets"},
        {"list", "pods"},
        {"patch", "modelartifacts.tensorcast.io"},
        {"patch", "modelartifacts.tensorcast.io", "status"},
        {"patch", "nodes"},
        {"create", "pods"},
      };
      await()
          .atMost(Duration.ofSeconds(20))
          .until(() -> canI(cluster, as, ns.name(), new String[] {"create", "events"}));
      for (String[] a : allowed) {
        assertThat(canI(cluster, as, ns.name(), a)).as("%s may %s", as, List.of(a)).isTrue();
      }
      for (String[] d : denied) {
        assertThat(canI(cluster, as, ns.name(), d)).as("%s may not %s", as, List.of(d)).isFalse();
      }
    } finally {
      client.resource(binding).delete();
      client.resource(role).delete();
    }
  }

  /**
   * The consumer samples ({@code samples/consumers/*.yaml}: vLLM, SGLang, a training Job) pass a
   * server-side dry run, and each workload mounts a ModelArtifact the samples define through a
   * {@code csi.tensorcast.io} volume and asks for the nodes carrying that artifact's ready label.
   */
  @Test
  void consumerSamplesPassServerSideDryRunAndNameTheirArtifact(
      SharedCluster cluster, KubernetesClient client, TestNamespace ns) throws Exception {
    applyChartCrd(client);
    Path samples = chartDir().resolve("../../samples").normalize();
    List<Path> files;
    try (var list = Files.list(samples.resolve("consumers"))) {
      files = list.filter(p -> p.toString().endsWith(".yaml")).sorted().toList();
    }
    assertThat(files)
        .extracting(p -> p.getFileName().toString())
        .contains("vllm-deployment.yaml", "sglang-deployment.yaml", "rl-checkpoint-job.yaml");
    java.util.Set<String> artifacts = new java.util.HashSet<>();
    for (Path f :
        List.of(
            samples.resolve("modelartifact-s3.yaml"), samples.resolve("modelartifact-hf.yaml"))) {
      artifacts.add(load(client, Files.readString(f)).get(0).getMetadata().getName());
    }
    for (Path f : files) {
      String yaml = Files.readString(f);
      List<HasMetadata> objects = load(client, yaml);
      objects.stream()
          .filter(o -> o.getKind().equals("ModelArtifact"))
          .forEach(o -> artifacts.add(o.getMetadata().getName()));
      Result r =
          kubectl(
              cluster,
              yaml,
              "apply",
              "--dry-run=server",
              "--server-side",
              "--field-manager=chart-it",
              "-n",
              ns.name(),
              "-f",
              "-");
      assertThat(r.exit()).as(f + ": " + r.out() + r.err()).isZero();
      for (HasMetadata o : objects) {
        io.fabric8.kubernetes.api.model.PodTemplateSpec template =
            o instanceof Deployment d
                ? d.getSpec().getTemplate()
                : o instanceof io.fabric8.kubernetes.api.model.batch.v1.Job j
                    ? j.getSpec().getTemplate()
                    : null;
        if (template == null) {
          continue;
        }
        io.fabric8.kubernetes.api.model.Pod pod = new io.fabric8.kubernetes.api.model.Pod();
        pod.setMetadata(
            new io.fabric8.kubernetes.api.model.ObjectMetaBuilder()
                .withNamespace("default")
                .build());
        pod.setSpec(template.getSpec());
        java.util.Set<String> named = io.tensorcast.api.ConsumerVolumes.modelArtifactsNamed(pod);
        assertThat(named).as(f + " mounts a sample ModelArtifact").hasSize(1).isSubsetOf(artifacts);
        String key =
            io.tensorcast.api.ConsumerVolumes.nodeLabelKey("default", named.iterator().next());
        assertThat(
                template
                    .getSpec()
                    .getAffinity()
                    .getNodeAffinity()
                    .getRequiredDuringSchedulingIgnoredDuringExecution()
                    .getNodeSelectorTerms()
                    .get(0)
                    .getMatchExpressions())
            .as(f + " asks for nodes with " + key)
            .anyMatch(e -> key.equals(e.getKey()) && "Exists".equals(e.getOperator()));
      }
    }
  }

  /**
   * Asks the API server's authorizer (SubjectAccessReview through {@code kubectl auth can-i}).
   *
   * @param check verb, resource and optionally a subresource
   */
  private static boolean canI(SharedCluster cluster, String as, String namespace, String[] check)
      throws Exception {
    List<String> args =
        new ArrayList<>(List.of("auth", "can-i", check[0], check[1], "--as", as, "-n", namespace));
    if (check.length > 2) {
      args.add("--subresource=" + check[2]);
    }
    Result r = kubectl(cluster, null, args.toArray(String[]::new));
    String answer = r.out().strip();
    assertThat(answer).as("kubectl %s: %s %s", args, r.out(), r.err()).isIn("yes", "no");
    return answer.equals("yes");
  }

  private static String render(String release, String namespace, Map<String, Object> values) {
    var template = new Helm(chartDir()).template().withName(release).withNamespace(namespace);
    values.forEach(template::set);
    String yaml = template.call();
    assertThat(yaml).as("rendered chart").isNotBlank();
    return yaml;
  }

  private static List<HasMetadata> load(KubernetesClient client, String yaml) {
    List<HasMetadata> items =
        client.load(new ByteArrayInputStream(yaml.getBytes(StandardCharsets.UTF_8))).items();
    assertThat(items).as(yaml).isNotEmpty();
    return items;
  }

  private static <T extends HasMetadata> T find(
      List<HasMetadata> objects, Class<T> type, String name) {
    return objects.stream()
        .filter(type::isInstance)
        .map(type::cast)
        .filter(o -> o.getMetadata().getName().equals(name))
        .findFirst()
        .orElseThrow(
            () -> new AssertionError("no " + type.getSimpleName() + " " + name + " rendered"));
  }

  /** Creates or updates the chart's CRD for real and waits until it is Established. */
  private static void applyChartCrd(KubernetesClient client) throws IOException {
    try (InputStream in = Files.newInputStream(chartDir().resolve("crds").resolve(CRD_FILE))) {
      CustomResourceDefinition crd =
          client.apiextensions().v1().customResourceDefinitions().load(in).item();
      client.resource(crd).forceConflicts().serverSideApply();
      client
          .apiextensions()
          .v1()
          .customResourceDefinitions()
          .withName(ModelArtifact.CRD_NAME)
          .waitUntilCondition(
              c ->
                  c != null
                      && c.getStatus() != null
                      && c.getStatus().getConditions() != null
                      && c.getStatus().getConditions().stream()
                          .anyMatch(
                              x ->
                                  "Established".equals(x.getType())
                                      && "True".equals(x.getStatus())),
              30,
              TimeUnit.SECONDS);
    }
  }

  /** Exit code, stdout and stderr of one kubectl run. */
  record Result(int exit, String out, String err) {}

  private static Result kubectl(SharedCluster cluster, String stdin, String... args)
      throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add("kubectl");
    cmd.add("--kubeconfig");
    cmd.add(cluster.controlPlane().kubeconfig().toString());
    cmd.addAll(List.of(args));
    Path err = Files.createTempFile("kubectl", ".err");
    try {
      Process p = new ProcessBuilder(cmd).redirectError(err.toFile()).start();
      if (stdin != null) {
        p.getOutputStream().write(stdin.getBytes(StandardCharsets.UTF_8));
      }
      p.getOutputStream().close();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("kubectl %s finished", cmd).isTrue();
      return new Result(p.exitValue(), out, Files.readString(err));
    } finally {
      Files.deleteIfExists(err);
    }
  }
}
