package io.tensorcast.e2e.operator;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.javaoperatorsdk.operator.Operator;
import io.javaoperatorsdk.operator.api.monitoring.Metrics;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.dataplane.testing.S3MockServer;
import io.tensorcast.e2e.cluster.Crds;
import io.tensorcast.e2e.cluster.SharedCluster;
import io.tensorcast.operator.OperatorMain;
import io.tensorcast.operator.config.OperatorConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * What every operator E2E test of this JVM shares, set up once: the shared local control plane
 * ({@link SharedCluster}), the ModelArtifact CRD applied from the crds jar's generated YAML, the
 * image {@value #IMAGE} mapped to {@code java -jar tensorcast-dataplane.jar} on the simulated
 * nodes, a real S3-compatible server ({@link S3MockServer}), and the operator itself, running in
 * this JVM against the API server with its own client.
 *
 * <p>The data-plane jar is found through system property {@value #DATAPLANE_JAR_PROPERTY} (set by
 * the e2e pom to the reactor's {@code dataplane/target/tensorcast-dataplane.jar}).
 */
final class OperatorEnvironment {
  static final String IMAGE = "tensorcast/dataplane:e2e";
  static final String DATAPLANE_JAR_PROPERTY = "tensorcast.dataplane.jar";

  /** 64 MiB besides the artifact per data-plane pod: the test artifacts are a few MiB. */
  static final long OVERHEAD = 64L * 1024 * 1024;

  private static OperatorEnvironment instance;

  final SharedCluster cluster;
  final S3MockServer s3;
  final OperatorConfig config;

  /** The operator's own meters (tensorcast_operator_*). */
  final SimpleMeterRegistry meters = new SimpleMeterRegistry();

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
                jar.toString()));
    s3 = S3MockServer.shared();
    config =
        OperatorConfig.fromLookup(
            Map.of(
                    "TENSORCAST_DATAPLANE_IMAGE", IMAGE,
                    "TENSORCAST_MEMORY_OVERHEAD", Long.toString(OVERHEAD),
                    "TENSORCAST_POLL_INTERVAL", "PT1S",
                    "TENSORCAST_READY_RESYNC", "PT5S",
                    "TENSORCAST_STATUS_TIMEOUT", "PT1S")
                ::get);
    operatorClient = cluster.controlPlane().newClient();
    operator = OperatorMain.create(operatorClient, config, Metrics.NOOP, meters);
    operator.start();
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  operator.stop();
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
