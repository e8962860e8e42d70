package io.tensorcast.e2e.operator;

import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.javaoperatorsdk.operator.Operator;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.tensorcast.e2e.cluster.Crds;
import io.tensorcast.e2e.cluster.SharedCluster;
import io.tensorcast.operator.OperatorMain;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.metrics.MetricsServer;
import io.tensorcast.operator.metrics.OperatorMetrics;
import io.tensorcast.testing.S3MockServer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * What every operator E2E test of this JVM shares, set up once: the shared local control plane
 * ({@link SharedCluster}), the ModelArtifact CRD applied from the crds jar's generated YAML, the
 * image {@value #IMAGE} mapped to {@code java -jar tensorcast-dataplane.jar} on the simulated nodes
 * (and its {@code chown}, which the store-owner init container runs), a real S3-compatible server
 * ({@link S3MockServer}), and the operator itself, running in this JVM against the API server with
 * its own client, which acts as the Helm chart's operator ServiceAccount (impersonated) bound to
 * the chart's ClusterRole: every E2E test runs the operator with exactly the chart's RBAC, which
 * has no read access to Secrets.
 *
 * <p>The data-plane jar is found through system property {@value #DATAPLANE_JAR_PROPERTY} (set by
 * the e2e pom to the reactor's {@code dataplane/target/tensorcast-dataplane.jar}).
 */
final class OperatorEnvironment {
  static final String IMAGE = "tensorcast/dataplane:e2e";

  /** Namespace of the operator's ServiceAccount (and of the NetworkPolicies' operator peer). */
  static final String OPERATOR_NAMESPACE = "tensorcast-system";

  /** Helm release name the chart's RBAC is rendered with. */
  static final String RELEASE = "e2e";

  static final String DATAPLANE_JAR_PROPERTY = "tensorcast.dataplane.jar";

  /** 64 MiB besides the artifact per data-plane pod: the test artifacts are a few MiB. */
  static final long OVERHEAD = 64L * 1024 * 1024;

  private static OperatorEnvironment instance;

  final SharedCluster cluster;
  final S3MockServer s3;
  final OperatorConfig config;

  /**
   * The operator's meters, as its process has them: JOSDK's reconcile meters, JVM and process
   * meters, the per-artifact gauges and the time-to-Ready histograms ({@link OperatorMetrics}).
   */
  final PrometheusMeterRegistry meters =
      (PrometheusMeterRegistry)
          OperatorMetrics.bind(new PrometheusMeterRegistry(PrometheusConfig.DEFAULT));

  /** Serves {@link #meters} on {@code GET /metrics} of an ephemeral port, as the operator does. */
  final MetricsServer metricsServer;

  private final Operator operator;
  private final KubernetesClient operatorClient;

  private OperatorEnvironment() {
    cluster = SharedCluster.get();
    applyCrd(cluster.client());
    Path jar = dataPlaneJar();
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    cluster
        .runtime()
        .map(
            "tensorcast/dataplane",
            List.of(
                java,
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Xss512k",
                "-Xmx192m",
                "-jar",
                jar.toString()))
        .mapProgram("tensorcast/dataplane", "chown", "chown");
    s3 = S3MockServer.shared();
    config =
        OperatorConfig.fromLookup(
            Map.of(
                    "TENSORCAST_DATAPLANE_IMAGE",
                    IMAGE,
                    "TENSORCAST_MEMORY_OVERHEAD",
                    Long.toString(OVERHEAD),
                    "TENSORCAST_POLL_INTERVAL",
                    "PT1S",
                    "TENSORCAST_READY_RESYNC",
                    "PT5S",
                    "TENSORCAST_STATUS_TIMEOUT",
                    "PT1S",
                    "TENSORCAST_OPERATOR_NAMESPACE",
                    OPERATOR_NAMESPACE)
                ::get);
    operatorClient = chartOperatorClient(cluster);
    operator = OperatorMain.create(operatorClient, config, OperatorMetrics.josdk(meters), meters);
    try {
      metricsServer = MetricsServer.start(0, meters);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    operator.start();
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  operator.stop();
                  metricsServer.close();
                  operatorClient.close();
                },
                "tensorcast-e2e-operator-stop"));
  }

  static synchronized OperatorEnvironment get() {
    if (instance == null) {
      instance = new OperatorEnvironment();
    }
    return instance;
  }

  KubernetesClient client() {
    return cluster.client();
  }

  /** The user the operator's client acts as. */
  static String operatorUser() {
    return "system:serviceaccount:" + OPERATOR_NAMESPACE + ":" + RELEASE + "-operator";
  }

  /**
   * Applies the chart's operator ServiceAccount, ClusterRole and ClusterRoleBinding (rendered by
   * real Helm) and returns a client that impersonates that ServiceAccount, so the API server
   * authorizes the operator's every request against the chart's RBAC.
   */
  private static KubernetesClient chartOperatorClient(SharedCluster cluster) {
    KubernetesClient admin = cluster.client();
    if (admin.namespaces().withName(OPERATOR_NAMESPACE).get() == null) {
      admin
          .namespaces()
          .resource(
              new io.fabric8.kubernetes.api.model.NamespaceBuilder()
                  .withNewMetadata()
                  .withName(OPERATOR_NAMESPACE)
                  .endMetadata()
                  .build())
          .create();
    }
    Path chart = Path.of(System.getProperty("tensorcast.chart.dir", "../charts/tensorcast"));
    String yaml =
        new com.marcnuri.helm.Helm(chart.toAbsolutePath().normalize())
            .template()
            .withName(RELEASE)
            .withNamespace(OPERATOR_NAMESPACE)
            .call();
    for (var o :
        admin
            .load(new java.io.ByteArrayInputStream(yaml.getBytes(StandardCharsets.UTF_8)))
            .items()) {
      if (o instanceof io.fabric8.kubernetes.api.model.ServiceAccount
          || o instanceof io.fabric8.kubernetes.api.model.rbac.ClusterRole
          || o instanceof io.fabric8.kubernetes.api.model.rbac.ClusterRoleBinding) {
        admin.resource(o).inNamespace(OPERATOR_NAMESPACE).forceConflicts().serverSideApply();
      }
    }
    try {
      Config config = Config.fromKubeconfig(Files.readString(cluster.controlPlane().kubeconfig()));
      config.setImpersonateUsername(operatorUser());
      config.setImpersonateGroups(
          "system:serviceaccounts",
          "system:serviceaccounts:" + OPERATOR_NAMESPACE,
          "system:authenticated");
      return new KubernetesClientBuilder().withConfig(config).build();
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  private static Path dataPlaneJar() {
    String p = System.getProperty(DATAPLANE_JAR_PROPERTY);
    Path jar = p == null ? Path.of("../dataplane/target/tensorcast-dataplane.jar") : Path.of(p);
    if (!Files.isRegularFile(jar)) {
      throw new IllegalStateException(
          "data-plane jar not found at "
              + jar.toAbsolutePath()
              + " (system property "
              + DATAPLANE_JAR_PROPERTY
              + "="
              + p
              + "); build it first: mvn -pl dataplane -am package -DskipTests");
    }
    return jar.toAbsolutePath();
  }

  private static void applyCrd(KubernetesClient client) {
    Crds.applyModelArtifact(client);
    Crds.applyTensorShardSet(client);
  }
}
