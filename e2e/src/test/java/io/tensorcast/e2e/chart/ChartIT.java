package io.tensorcast.e2e.chart;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.marcnuri.helm.Helm;
import com.marcnuri.helm.LintResult;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.ServiceAccount;
import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinition;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.rbac.ClusterRole;
import io.fabric8.kubernetes.api.model.rbac.ClusterRoleBinding;
import io.fabric8.kubernetes.api.model.rbac.PolicyRule;
import io.fabric8.kubernetes.api.model.rbac.Role;
import io.fabric8.kubernetes.api.model.rbac.RoleBinding;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.fabric8.openshift.api.model.monitoring.v1.PodMonitor;
import io.fabric8.openshift.api.model.monitoring.v1.PrometheusRule;
import io.fabric8.openshift.api.model.monitoring.v1.ServiceMonitor;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.e2e.cluster.LocalClusterExtension;
import io.tensorcast.e2e.cluster.LocalClusterExtension.TestNamespace;
import io.tensorcast.e2e.cluster.SharedCluster;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.metrics.ArtifactMetrics;
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
import org.junit.jupiter.api.io.TempDir;

/**
 * The Helm chart {@code charts/tensorcast}, rendered by real Helm (helm-java embeds Helm's Go
 * library) and sent to the shared local kube-apiserver: {@code helm lint --strict} passes, every
 * rendered object of the default and of a non-default set of values passes a server-side dry run
 * (the monitoring objects also a field-by-field check against the Prometheus Operator's API), the
 * values schema refuses typos and wrong types, the chart's CRD files are the crds jar's, a real
 * {@code helm install}/{@code upgrade}/{@code uninstall} upgrades the CRD and leaves it on
 * uninstall and keeps the master key, and the operator's RBAC, applied for real, grants what the
 * operator uses and no read access to Secrets (only create and patch, for each artifact's own
 * Secret; asked of the API server's authorizer with {@code kubectl auth can-i}).
 */
@ExtendWith(LocalClusterExtension.class)
class ChartIT {

  static final String CRD_FILE = ModelArtifact.CRD_NAME + "-v1.yml";

  static final String CRD_FILE_WITHOUT_CEL =
      ModelArtifact.CRD_NAME + "-v1" + TensorcastConstants.CRD_WITHOUT_CEL_SUFFIX + ".yml";

  /** The version of the local control plane: the chart renders for it as Helm would against it. */
  static final String KUBE_VERSION = "1.20.2";

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
    for (String file : List.of(CRD_FILE, CRD_FILE_WITHOUT_CEL)) {
      byte[] chart = Files.readAllBytes(chartDir().resolve("files/crds").resolve(file));
      byte[] jar;
      try (InputStream in =
          ModelArtifact.class.getClassLoader().getResourceAsStream("META-INF/fabric8/" + file)) {
        assertThat(in).as("META-INF/fabric8/" + file + " in the crds jar").isNotNull();
        jar = in.readAllBytes();
      }
      assertThat(new String(chart, StandardCharsets.UTF_8))
          .as(
              "charts/tensorcast/files/crds/%s vs the crds jar (refresh: mvn -pl crds test"
                  + " -Dtensorcast.crd.update=true)",
              file)
          .isEqualTo(new String(jar, StandardCharsets.UTF_8));
    }
  }

  /** The template picks the CRD variant by the cluster's version: CEL rules only from 1.25 on. */
  @Test
  void crdTemplateRendersCelRulesOnlyFromKubernetes125() {
    String old = render("tcv", "default", Map.of(), "1.24.9");
    String current = render("tcv", "default", Map.of(), "1.25.0");
    assertThat(old)
        .contains("kind: CustomResourceDefinition")
        .doesNotContain("x-kubernetes-validations");
    assertThat(current).contains("x-kubernetes-validations");
    assertThat(render("tcv", "default", Map.of("crds.install", "false"), KUBE_VERSION))
        .doesNotContain("kind: CustomResourceDefinition");
  }

  /** values.schema.json refuses wrong types, unknown keys and out-of-range values, naming them. */
  @Test
  void schemaRefusesBadValues(@TempDir Path dir) throws IOException {
    assertRefused(Map.of("operator.metricsPort", "abc"), "/operator/metricsPort", "want integer");
    assertRefused(Map.of("operator.metricPort", "9090"), "/operator", "metricPort");
    assertRefused(Map.of("operator.healthPort", "70000"), "/operator/healthPort", "maximum");
    assertRefused(Map.of("dataplane.cpuRequest", "lots"), "/dataplane/cpuRequest", "");
    assertRefused(Map.of("dataplane.storeRoot", "relative"), "/dataplane/storeRoot", "");
    assertRefused(
        Map.of("operator.image.pullPolicy", "Sometimes"), "/operator/image/pullPolicy", "");
    assertRefused(Map.of("operatr.replicas", "2"), "operatr", "");
    assertRefused(
        Map.of("operator.controlTokenSecret", "tensorcast-control"),
        "/operator",
        "controlTokenSecret");
    assertRefused(
        Map.of("source.allowedEndpoints[0]", "s3.amazonaws.com"), "/source/allowedEndpoints/0", "");
    assertRefused(Map.of("networkPolicy.enabled", "maybe"), "/networkPolicy/enabled", "");
    assertRefused(Map.of("dataplane.runAsUser", "0"), "/dataplane/runAsUser", "minimum");
    assertRefused(
        Map.of("dataplane.formatLimits.max-tensor", "5"), "/dataplane/formatLimits", "max-tensor");
    assertRefused(
        Map.of("dataplane.formatLimits.max-tensors", "lots"),
        "/dataplane/formatLimits/max-tensors",
        "");
    assertRefused(Map.of("csiDriver.kubeletDir", "var/lib/kubelet"), "/csiDriver/kubeletDir", "");
    assertRefused(Map.of("csiDriver.registrar", "x"), "/csiDriver", "registrar");
    assertRefused(
        Map.of("operator.replicas", "2", "operator.leaderElection.enabled", "false"),
        "operator.replicas > 1 needs operator.leaderElection.enabled=true",
        "");

    Path bad = dir.resolve("bad-values.yaml");
    Files.writeString(
        bad,
        """
        operator:
          metricsPort: abc
          replicas: "2"
        dataplane:
          imagePullSecret: regcred
        """);
    assertThatThrownBy(
            () -> new Helm(chartDir()).template().withName("tcbad").withValuesFile(bad).call())
        .hasMessageContaining("/operator/metricsPort")
        .hasMessageContaining("/operator/replicas")
        .hasMessageContaining("imagePullSecret");
  }

  private static void assertRefused(Map<String, Object> values, String where, String what) {
    assertThatThrownBy(() -> render("tcbad", "default", values, KUBE_VERSION))
        .as("values %s", values)
        .hasMessageContaining(where)
        .hasMessageContaining(what);
  }

  @Test
  void everyRenderedObjectPassesServerSideDryRun(SharedCluster cluster, TestNamespace ns)
      throws Exception {
    applyChartCrd(cluster.client());
    applyMonitoringCrds(cluster.client());
    for (Map<String, Object> values : List.of(Map.<String, Object>of(), NON_DEFAULT)) {
      boolean defaults = values.isEmpty();
      String release = defaults ? "tcdefault" : "tcother";
      String prefix = defaults ? release : "tcx";
      String yaml = render(release, ns.name(), values, KUBE_VERSION);
      List<HasMetadata> objects = load(cluster.client(), yaml);
      List<String> kinds =
          objects.stream().map(o -> o.getKind() + "/" + o.getMetadata().getName()).toList();
      assertThat(kinds)
          .contains(
              "CustomResourceDefinition/" + ModelArtifact.CRD_NAME,
              "Deployment/" + prefix + "-operator",
              "ServiceAccount/" + prefix + "-operator",
              "ClusterRole/" + prefix + "-operator",
              "ClusterRoleBinding/" + prefix + "-operator",
              "Role/" + prefix + "-operator-leader-election",
              "RoleBinding/" + prefix + "-operator-leader-election");
      assertThat(kinds.contains("DaemonSet/" + prefix + "-rdma-device-plugin"))
          .as("device plugin rendered with values %s", values)
          .isEqualTo(defaults);
      assertThat(kinds)
          .contains(
              "DaemonSet/" + prefix + "-csi-driver",
              "CSIDriver/csi.tensorcast.io",
              "ClusterRole/" + prefix + "-csi-driver");
      assertCsiDriver(objects, prefix, defaults);
      assertThat(kinds.stream().filter(k -> k.startsWith("PodDisruptionBudget/")).count())
          .as("a PodDisruptionBudget only with replicas > 1")
          .isEqualTo(defaults ? 0 : 1);
      assertThat(
              kinds.stream()
                  .filter(k -> k.matches("(ServiceMonitor|PodMonitor|PrometheusRule)/.*")))
          .hasSize(defaults ? 0 : 4);

      Result r =
          kubectl(
              cluster,
              yaml,
              "apply",
              "--dry-run=server",
              "--server-side",
              // The shared cluster's CRD was applied by the tests' own manager (fabric8).
              "--force-conflicts",
              "--field-manager=chart-it",
              "-n",
              ns.name(),
              "-f",
              "-");
      assertThat(r.exit()).as(r.out() + r.err()).isZero();
      List<String> lines = r.out().lines().filter(l -> !l.isBlank()).toList();
      assertThat(lines).as(r.out()).hasSize(objects.size()).allMatch(l -> l.contains("dry run"));

      Deployment d = find(objects, Deployment.class, prefix + "-operator");
      PodSpec pod = d.getSpec().getTemplate().getSpec();
      var c = pod.getContainers().get(0);
      Map<String, String> env =
          c.getEnv().stream()
              .filter(e -> e.getValue() != null)
              .collect(Collectors.toMap(e -> e.getName(), e -> e.getValue()));
      assertThat(env)
          .containsEntry("TENSORCAST_STORE_ROOT", "/dev/shm/tensorcast")
          .containsEntry("TENSORCAST_MEMORY_OVERHEAD", "256Mi")
          .containsEntry("TENSORCAST_CONTROL_PORT", "8471")
          .containsEntry("TENSORCAST_PEER_PORT", "8472")
          .containsEntry("TENSORCAST_METRICS_PORT", "8080")
          .containsEntry("TENSORCAST_HEALTH_PORT", "8081")
          .containsEntry("TENSORCAST_LEADER_ELECTION_LEASE", prefix + "-operator")
          .containsEntry("TENSORCAST_LEADER_ELECTION_NAMESPACE", ns.name());
      assertThat(c.getLivenessProbe().getHttpGet().getPath()).isEqualTo("/healthz");
      assertThat(c.getReadinessProbe().getHttpGet().getPath()).isEqualTo("/readyz");
      assertThat(c.getLivenessProbe().getHttpGet().getPort().getStrVal()).isEqualTo("health");
      assertThat(c.getPorts())
          .extracting(p -> p.getName() + ":" + p.getContainerPort())
          .containsExactly("metrics:8080", "health:8081");
      assertThat(c.getSecurityContext().getReadOnlyRootFilesystem()).isTrue();
      assertThat(c.getSecurityContext().getAllowPrivilegeEscalation()).isFalse();
      assertThat(c.getSecurityContext().getCapabilities().getDrop()).containsExactly("ALL");
      assertThat(c.getSecurityContext().getCapabilities().getAdd()).isNullOrEmpty();
      assertThat(pod.getSecurityContext().getRunAsNonRoot()).isTrue();
      assertThat(d.getSpec().getStrategy().getType()).isEqualTo("RollingUpdate");
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
      String keySecret =
          pod.getVolumes().stream()
              .filter(v -> v.getSecret() != null)
              .findFirst()
              .orElseThrow()
              .getSecret()
              .getSecretName();
      if (defaults) {
        assertThat(d.getSpec().getReplicas()).isEqualTo(1);
        assertThat(c.getImage()).isEqualTo("tensorcast/operator:0.1.0");
        assertThat(env)
            .containsEntry("TENSORCAST_DATAPLANE_IMAGE", "tensorcast/dataplane:0.1.0")
            .containsEntry("TENSORCAST_LEADER_ELECTION_LEASE_DURATION", "PT15S")
            .containsEntry("TENSORCAST_ALLOWED_ENDPOINTS", "")
            .containsEntry("TENSORCAST_NETWORK_POLICY", "true")
            .containsEntry("TENSORCAST_DATAPLANE_USER", "10001")
            .doesNotContainKeys(
                "TENSORCAST_FORMAT_LIMITS",
                "TENSORCAST_DATAPLANE_IMAGE_PULL_SECRETS",
                "TENSORCAST_DATAPLANE_PRIORITY_CLASS",
                "TENSORCAST_DATAPLANE_CPU_REQUEST");
        // The key Secret itself is a pre-install hook (not in the rendered manifest):
        // masterKeyIsMadeOnceAtInstallAndKeptOnUpgrade installs the chart for real.
        assertThat(keySecret).isEqualTo(release + "-master-key");
        assertThat(kinds).noneMatch(k -> k.startsWith("Secret/"));
        assertThat(pod.getImagePullSecrets()).isEmpty();
        assertThat(d.getSpec().getTemplate().getMetadata().getLabels())
            .containsEntry("app.kubernetes.io/name", "tensorcast-operator");
        CustomResourceDefinition crd =
            find(objects, CustomResourceDefinition.class, ModelArtifact.CRD_NAME);
        assertThat(crd.getMetadata().getAnnotations())
            .containsEntry("helm.sh/resource-policy", "keep");
      } else {
        assertThat(keySecret).isEqualTo("my-master-key");
        assertThat(kinds).noneMatch(k -> k.startsWith("Secret/"));
        assertNonDefaults(objects, ns.name(), d, env);
      }
    }
  }

  /** Every value that changes what the chart renders, set away from its default. */
  static final Map<String, Object> NON_DEFAULT =
      Map.ofEntries(
          Map.entry("fullnameOverride", "tcx"),
          Map.entry("nameOverride", "tcn"),
          Map.entry("global.imageRegistry", "registry.example.com/mirror"),
          Map.entry("global.imagePullSecrets[0].name", "regcred"),
          Map.entry("dataplane.imagePullSecrets[0].name", "dpcred"),
          Map.entry("dataplane.priorityClassName", "tensorcast-dataplane"),
          Map.entry("dataplane.cpuRequest", "500m"),
          Map.entry("operator.replicas", "3"),
          Map.entry("operator.podAnnotations.example\\.com/team", "ml"),
          Map.entry("operator.podLabels.team", "ml"),
          Map.entry("operator.masterKey.existingSecret", "my-master-key"),
          Map.entry("source.allowedEndpoints[0]", "https://s3.*.amazonaws.com"),
          Map.entry("source.allowedEndpoints[1]", "https://minio.storage:9000"),
          Map.entry("networkPolicy.enabled", "false"),
          Map.entry("dataplane.runAsUser", "20002"),
          Map.entry("dataplane.formatLimits.max-zip-ratio", "200"),
          Map.entry("dataplane.formatLimits.max-tensors", "2000000"),
          Map.entry("csiDriver.imagePullSecrets[0].name", "csicred"),
          Map.entry("csiDriver.podLabels.team", "ml"),
          Map.entry("csiDriver.kubeletDir", "/var/lib/k0s/kubelet"),
          Map.entry("operator.nodeSelector.role", "control"),
          Map.entry("operator.leaderElection.leaseDuration", "PT30S"),
          Map.entry("rdmaDevicePlugin.enabled", "false"),
          Map.entry("crds.keep", "false"),
          Map.entry("monitoring.serviceMonitor.enabled", "true"),
          Map.entry("monitoring.serviceMonitor.labels.release", "prom"),
          Map.entry("monitoring.podMonitor.enabled", "true"),
          Map.entry("monitoring.dataplanePodMonitor.enabled", "true"),
          Map.entry("monitoring.prometheusRule.enabled", "true"),
          Map.entry("monitoring.prometheusRule.loadingFor", "45m"));

  private static void assertNonDefaults(
      List<HasMetadata> objects, String namespace, Deployment d, Map<String, String> env) {
    PodSpec pod = d.getSpec().getTemplate().getSpec();
    assertThat(d.getSpec().getReplicas()).isEqualTo(3);
    assertThat(pod.getContainers().get(0).getImage())
        .isEqualTo("registry.example.com/mirror/tensorcast/operator:0.1.0");
    assertThat(pod.getImagePullSecrets()).extracting(r -> r.getName()).containsExactly("regcred");
    assertThat(pod.getNodeSelector()).containsEntry("role", "control");
    assertThat(d.getSpec().getTemplate().getMetadata().getAnnotations())
        .containsEntry("example.com/team", "ml");
    assertThat(d.getSpec().getTemplate().getMetadata().getLabels())
        .containsEntry("team", "ml")
        .containsEntry("app.kubernetes.io/name", "tcn-operator");
    assertThat(env)
        .containsEntry(
            "TENSORCAST_DATAPLANE_IMAGE", "registry.example.com/mirror/tensorcast/dataplane:0.1.0")
        .containsEntry("TENSORCAST_DATAPLANE_IMAGE_PULL_SECRETS", "regcred,dpcred")
        .containsEntry("TENSORCAST_DATAPLANE_PRIORITY_CLASS", "tensorcast-dataplane")
        .containsEntry("TENSORCAST_DATAPLANE_CPU_REQUEST", "500m")
        .containsEntry("TENSORCAST_LEADER_ELECTION_LEASE_DURATION", "PT30S")
        .containsEntry(
            "TENSORCAST_ALLOWED_ENDPOINTS", "https://s3.*.amazonaws.com,https://minio.storage:9000")
        .containsEntry("TENSORCAST_NETWORK_POLICY", "false")
        .containsEntry("TENSORCAST_DATAPLANE_USER", "20002")
        .containsEntry("TENSORCAST_FORMAT_LIMITS", "max-tensors=2000000,max-zip-ratio=200");
    // The operator reads its environment the way the chart writes it.
    OperatorConfig config = OperatorConfig.fromLookup(env::get);
    assertThat(config.dataPlanePod().imagePullSecrets()).containsExactly("regcred", "dpcred");
    assertThat(config.dataPlanePod().cpuRequest()).contains(new Quantity("500m"));
    assertThat(config.leaderElection().orElseThrow().lease()).isEqualTo("tcx-operator");
    assertThat(config.formatLimits())
        .containsExactly(Map.entry("max-tensors", "2000000"), Map.entry("max-zip-ratio", "200"));
    assertThat(config.dataPlaneUser()).isEqualTo(20002);
    assertThat(config.networkPolicy()).isFalse();
    HasMetadata pdb =
        objects.stream().filter(o -> o.getKind().equals("PodDisruptionBudget")).findFirst().get();
    assertThat(pdb.getApiVersion())
        .as("Kubernetes 1.20 has no policy/v1")
        .isEqualTo("policy/v1beta1");
    CustomResourceDefinition crd =
        find(objects, CustomResourceDefinition.class, ModelArtifact.CRD_NAME);
    assertThat(crd.getMetadata().getAnnotations()).doesNotContainKey("helm.sh/resource-policy");
    assertThat(Serialization.asYaml(crd)).doesNotContain("x-kubernetes-validations");

    ServiceMonitor sm = find(objects, ServiceMonitor.class, "tcx-operator");
    assertThat(sm.getMetadata().getLabels()).containsEntry("release", "prom");
    assertThat(sm.getSpec().getEndpoints())
        .singleElement()
        .satisfies(
            e -> {
              assertThat(e.getPort()).isEqualTo("metrics");
              assertThat(e.getHonorLabels()).isTrue();
            });
    io.fabric8.kubernetes.api.model.Service svc =
        find(objects, io.fabric8.kubernetes.api.model.Service.class, "tcx-operator-metrics");
    assertThat(svc.getSpec().getSelector()).isEqualTo(d.getSpec().getSelector().getMatchLabels());
    assertThat(svc.getMetadata().getLabels())
        .containsAllEntriesOf(sm.getSpec().getSelector().getMatchLabels());
    PodMonitor dataplane = find(objects, PodMonitor.class, "tcx-dataplane");
    assertThat(dataplane.getSpec().getNamespaceSelector().getAny()).isTrue();
    assertThat(dataplane.getSpec().getSelector().getMatchLabels())
        .containsEntry(TensorcastConstants.LABEL_NAME, TensorcastConstants.LABEL_NAME_DATAPLANE)
        .containsEntry(
            TensorcastConstants.LABEL_MANAGED_BY, TensorcastConstants.LABEL_MANAGED_BY_OPERATOR);
    PrometheusRule rule = find(objects, PrometheusRule.class, "tcx");
    List<String> alerts = new ArrayList<>();
    rule.getSpec().getGroups().forEach(g -> g.getRules().forEach(x -> alerts.add(x.getAlert())));
    assertThat(alerts)
        .containsExactly(
            "TensorcastArtifactFailed",
            "TensorcastArtifactLoadingTooLong",
            "TensorcastSourceBytesAboveSize");
    String exprs =
        rule.getSpec().getGroups().get(0).getRules().stream()
            .map(x -> x.getExpr().getStrVal() + " for " + x.getFor())
            .collect(Collectors.joining("\n"));
    assertThat(exprs)
        .contains("tensorcast_operator_artifact_phase{phase=\"Failed\"}")
        .contains("for 45m")
        .contains("1.1 * max by (namespace, name) (tensorcast_operator_artifact_size_bytes)");
    // Every operator metric the rules name is one the operator exports.
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    ArtifactMetrics metrics = new ArtifactMetrics(registry);
    metrics.sourceBytes("ns", "a", 1);
    metrics.status("ns", "a", true, new ModelArtifactStatus());
    String scrape = registry.scrape();
    java.util.regex.Matcher m =
        java.util.regex.Pattern.compile("tensorcast_[a-z_]+").matcher(exprs);
    int named = 0;
    while (m.find()) {
      named++;
      assertThat(scrape).as("metric %s named by the alerts", m.group()).contains(m.group() + "{");
    }
    assertThat(named).isGreaterThanOrEqualTo(5);
    for (HasMetadata o : objects) {
      if (o instanceof ServiceMonitor || o instanceof PodMonitor || o instanceof PrometheusRule) {
        assertThat(unknownFields(o, o.getKind()))
            .as("fields the Prometheus Operator's %s does not have", o.getKind())
            .isEmpty();
      }
    }
  }

  /**
   * The CSI node driver as rendered: privileged with the mounts a kubelet's CSI driver needs, the
   * CSIDriver object for inline ephemeral volumes, and with non-default values the mirror registry
   * on both images (replacing {@code registry.k8s.io} on the registrar's) and the pull Secrets.
   */
  private static void assertCsiDriver(List<HasMetadata> objects, String prefix, boolean defaults) {
    var ds =
        find(objects, io.fabric8.kubernetes.api.model.apps.DaemonSet.class, prefix + "-csi-driver");
    var pod = ds.getSpec().getTemplate().getSpec();
    var driver = pod.getContainers().get(0);
    String kubeletDir = defaults ? "/var/lib/kubelet" : "/var/lib/k0s/kubelet";
    assertThat(driver.getSecurityContext().getPrivileged()).isTrue();
    assertThat(driver.getArgs())
        .contains("--store-root=/dev/shm/tensorcast", "--kubelet-root=" + kubeletDir);
    assertThat(driver.getVolumeMounts())
        .anySatisfy(
            m -> {
              assertThat(m.getMountPath()).isEqualTo(kubeletDir + "/pods");
              assertThat(m.getMountPropagation()).isEqualTo("Bidirectional");
            })
        .anySatisfy(
            m -> {
              assertThat(m.getMountPath()).isEqualTo("/dev/shm/tensorcast");
              assertThat(m.getReadOnly()).isTrue();
            });
    String registrar = pod.getContainers().get(1).getImage();
    if (defaults) {
      assertThat(driver.getImage()).isEqualTo("tensorcast/csi-driver:0.1.0");
      assertThat(registrar)
          .matches("registry\\.k8s\\.io/sig-storage/csi-node-driver-registrar:v\\d+\\.\\d+\\.\\d+");
      assertThat(pod.getImagePullSecrets()).isEmpty();
    } else {
      assertThat(driver.getImage())
          .isEqualTo("registry.example.com/mirror/tensorcast/csi-driver:0.1.0");
      assertThat(registrar)
          .matches(
              "registry\\.example\\.com/mirror/sig-storage/csi-node-driver-registrar:v[0-9.]+");
      assertThat(pod.getImagePullSecrets())
          .extracting(r -> r.getName())
          .containsExactly("regcred", "csicred");
      assertThat(ds.getSpec().getTemplate().getMetadata().getLabels())
          .containsEntry("team", "ml")
          .containsEntry("app.kubernetes.io/name", "tcn-csi-driver");
    }
    var csiDriver =
        find(objects, io.fabric8.kubernetes.api.model.storage.CSIDriver.class, "csi.tensorcast.io");
    assertThat(csiDriver.getSpec().getPodInfoOnMount()).isTrue();
    assertThat(csiDriver.getSpec().getVolumeLifecycleModes()).containsExactly("Ephemeral");
    assertThat(csiDriver.getSpec().getAttachRequired()).isFalse();
  }

  /** {@code csiDriver.enabled=false} and {@code rdmaDevicePlugin.enabled=false} leave them out. */
  @Test
  void daemonSetsCanBeLeftOut() {
    String yaml =
        render(
            "tcoff",
            "default",
            Map.of("csiDriver.enabled", "false", "rdmaDevicePlugin.enabled", "false"),
            KUBE_VERSION);
    assertThat(yaml)
        .contains("kind: Deployment")
        .doesNotContain("kind: DaemonSet")
        .doesNotContain("kind: CSIDriver")
        .doesNotContain("tcoff-csi-driver");
  }

  /**
   * Where a fabric8 model object kept fields its type does not declare ({@code
   * additionalProperties}).
   */
  static List<String> unknownFields(Object o, String path) {
    List<String> out = new ArrayList<>();
    if (o == null || !o.getClass().getPackageName().startsWith("io.fabric8")) {
      return out;
    }
    for (java.lang.reflect.Method m : o.getClass().getMethods()) {
      if (m.getParameterCount() != 0
          || !m.getName().startsWith("get")
          || m.getName().equals("getClass")) {
        continue;
      }
      Object v;
      try {
        v = m.invoke(o);
      } catch (ReflectiveOperationException e) {
        continue;
      }
      if (m.getName().equals("getAdditionalProperties")) {
        if (v instanceof Map<?, ?> extra && !extra.isEmpty()) {
          out.add(path + ": " + extra.keySet());
        }
      } else if (v instanceof List<?> list) {
        for (int i = 0; i < list.size(); i++) {
          out.addAll(
              unknownFields(list.get(i), path + "." + m.getName().substring(3) + "[" + i + "]"));
        }
      } else if (v != null && v.getClass().getPackageName().startsWith("io.fabric8")) {
        out.addAll(unknownFields(v, path + "." + m.getName().substring(3)));
      }
    }
    return out;
  }

  /**
   * A real {@code helm install}, {@code upgrade} and {@code uninstall} against the API server: the
   * CRD is a release object (adopted here, since the shared cluster already has it), an upgrade
   * puts back what was changed on the cluster, and uninstall leaves it (helm.sh/resource-policy:
   * keep) while removing the rest.
   */
  @Test
  void helmUpgradeUpgradesTheCrdAndUninstallKeepsIt(
      SharedCluster cluster, KubernetesClient client, TestNamespace ns) throws Exception {
    applyChartCrd(client);
    String release = "tcinst";
    var crds = client.apiextensions().v1().customResourceDefinitions();
    // Every CRD of the chart that other tests of the shared cluster applied is adopted.
    for (String name :
        List.of(ModelArtifact.CRD_NAME, io.tensorcast.api.v1alpha1.TensorShardSet.CRD_NAME)) {
      if (crds.withName(name).get() == null) {
        continue;
      }
      crds.withName(name)
          .edit(
              c -> {
                if (c.getMetadata().getLabels() == null) {
                  c.getMetadata().setLabels(new java.util.HashMap<>());
                }
                if (c.getMetadata().getAnnotations() == null) {
                  c.getMetadata().setAnnotations(new java.util.HashMap<>());
                }
                c.getMetadata().getLabels().put("app.kubernetes.io/managed-by", "Helm");
                c.getMetadata().getAnnotations().put("meta.helm.sh/release-name", release);
                c.getMetadata().getAnnotations().put("meta.helm.sh/release-namespace", ns.name());
                return c;
              });
    }
    Path kubeconfig = cluster.controlPlane().kubeconfig();
    Map<String, Object> values =
        Map.of(
            "rdmaDevicePlugin.enabled", "false",
            "csiDriver.enabled", "false",
            // No node carries this label: the operator pod stays Pending.
            "operator.nodeSelector.tensorcast\\.io/chart-it", "none");
    var install =
        new Helm(chartDir())
            .install()
            .withName(release)
            .withNamespace(ns.name())
            .withKubeConfig(kubeconfig);
    values.forEach(install::set);
    install.call();
    try {
      CustomResourceDefinition crd = crds.withName(ModelArtifact.CRD_NAME).get();
      assertThat(crd.getMetadata().getAnnotations())
          .containsEntry("helm.sh/resource-policy", "keep");
      assertThat(crd.getMetadata().getLabels()).containsEntry("helm.sh/chart", "tensorcast-0.1.0");
      assertThat(
              client
                  .apps()
                  .deployments()
                  .inNamespace(ns.name())
                  .withName(release + "-operator")
                  .get())
          .isNotNull();

      // Drift on the cluster (an older CRD, a hand edit): the next upgrade puts the chart's back.
      crds.withName(ModelArtifact.CRD_NAME)
          .edit(
              c -> {
                c.getSpec().getNames().setCategories(new ArrayList<>());
                c.getSpec().getVersions().get(0).getAdditionalPrinterColumns().remove(0);
                return c;
              });
      assertThat(crds.withName(ModelArtifact.CRD_NAME).get().getSpec().getNames().getCategories())
          .isEmpty();
      var upgrade =
          new Helm(chartDir())
              .upgrade()
              .withName(release)
              .withNamespace(ns.name())
              .withKubeConfig(kubeconfig);
      values.forEach(upgrade::set);
      upgrade.call();
      CustomResourceDefinition upgraded = crds.withName(ModelArtifact.CRD_NAME).get();
      assertThat(upgraded.getSpec().getNames().getCategories()).containsExactly("tensorcast");
      assertThat(upgraded.getSpec().getVersions().get(0).getAdditionalPrinterColumns())
          .extracting(col -> col.getName())
          .startsWith("READY")
          .endsWith("AGE");
    } finally {
      Helm.uninstall(release).withNamespace(ns.name()).withKubeConfig(kubeconfig).call();
    }
    assertThat(crds.withName(ModelArtifact.CRD_NAME).get()).as("CRD after uninstall").isNotNull();
    await()
        .atMost(Duration.ofSeconds(30))
        .until(
            () ->
                client
                        .apps()
                        .deployments()
                        .inNamespace(ns.name())
                        .withName(release + "-operator")
                        .get()
                    == null);
    assertThat(client.rbac().clusterRoles().withName(release + "-operator").get()).isNull();
  }

  /**
   * The Prometheus Operator's CRDs, with their schemas left open: enough for the API server to take
   * ServiceMonitor, PodMonitor and PrometheusRule objects; their fields are checked against the
   * typed model ({@link #unknownFields}).
   */
  private static void applyMonitoringCrds(KubernetesClient client) {
    for (String[] kind :
        List.of(
            new String[] {"ServiceMonitor", "servicemonitors"},
            new String[] {"PodMonitor", "podmonitors"},
            new String[] {"PrometheusRule", "prometheusrules"})) {
      CustomResourceDefinition crd =
          new io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinitionBuilder()
              .withNewMetadata()
              .withName(kind[1] + ".monitoring.coreos.com")
              .endMetadata()
              .withNewSpec()
              .withGroup("monitoring.coreos.com")
              .withScope("Namespaced")
              .withNewNames()
              .withKind(kind[0])
              .withPlural(kind[1])
              .endNames()
              .addNewVersion()
              .withName("v1")
              .withServed(true)
              .withStorage(true)
              .withNewSchema()
              .withNewOpenAPIV3Schema()
              .withType("object")
              .withXKubernetesPreserveUnknownFields(true)
              .endOpenAPIV3Schema()
              .endSchema()
              .endVersion()
              .endSpec()
              .build();
      client.resource(crd).forceConflicts().serverSideApply();
      client
          .apiextensions()
          .v1()
          .customResourceDefinitions()
          .withName(crd.getMetadata().getName())
          .waitUntilCondition(io.tensorcast.e2e.cluster.Crds::established, 30, TimeUnit.SECONDS);
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
          // Cluster-wide objects that other tests of the shared cluster own already.
          .set("csiDriver.enabled", "false")
          .set("crds.install", "false")
          .call();
      String key = masterKey(cluster.client(), ns.name(), release);
      assertThat(key).matches("[A-Za-z0-9]{64}");

      new Helm(chartDir())
          .upgrade()
          .withName(release)
          .withNamespace(ns.name())
          .withKubeConfig(kubeconfig)
          .set("rdmaDevicePlugin.enabled", "false")
          // Cluster-wide objects that other tests of the shared cluster own already.
          .set("csiDriver.enabled", "false")
          .set("crds.install", "false")
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
    Role leaseRole = find(objects, Role.class, release + "-operator-leader-election");
    RoleBinding leaseBinding =
        find(objects, RoleBinding.class, release + "-operator-leader-election");
    try {
      client.resource(sa).create();
      client.resource(role).create();
      client.resource(binding).create();
      client.resource(leaseRole).create();
      client.resource(leaseBinding).create();
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
        {"create", "events"},
        {"get", "events"},
        {"patch", "events"},
        {"get", "leases.coordination.k8s.io"},
        {"create", "leases.coordination.k8s.io"},
        {"update", "leases.coordination.k8s.io"},
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
        {"delete", "leases.coordination.k8s.io"},
      };
      // The authorizer may lag the binding by a moment: wait until the first allowed check passes.
      await()
          .atMost(Duration.ofSeconds(60))
          .until(() -> canI(cluster, as, ns.name(), new String[] {"list", "pods"}));
      for (String[] a : allowed) {
        assertThat(canI(cluster, as, ns.name(), a)).as("%s may %s", as, List.of(a)).isTrue();
      }
      for (String[] d : denied) {
        assertThat(canI(cluster, as, ns.name(), d)).as("%s may not %s", as, List.of(d)).isFalse();
      }
      assertThat(
              canI(cluster, as, "default", new String[] {"update", "leases.coordination.k8s.io"}))
          .as("Lease access outside the release namespace")
          .isFalse();
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
          .atMost(Duration.ofSeconds(60))
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
    return render(release, namespace, values, KUBE_VERSION);
  }

  private static String render(
      String release, String namespace, Map<String, Object> values, String kubeVersion) {
    var template =
        new Helm(chartDir())
            .template()
            .withName(release)
            .withNamespace(namespace)
            .withKubeVersion(kubeVersion);
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
    try (InputStream in =
        Files.newInputStream(chartDir().resolve("files/crds").resolve(CRD_FILE_WITHOUT_CEL))) {
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
