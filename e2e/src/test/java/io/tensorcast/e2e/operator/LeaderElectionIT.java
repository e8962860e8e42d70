package io.tensorcast.e2e.operator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.coordination.v1.Lease;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.javaoperatorsdk.operator.Operator;
import io.javaoperatorsdk.operator.api.monitoring.Metrics;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.e2e.cluster.Crds;
import io.tensorcast.e2e.cluster.LocalClusterExtension;
import io.tensorcast.e2e.cluster.LocalClusterExtension.TestNamespace;
import io.tensorcast.e2e.cluster.SharedCluster;
import io.tensorcast.operator.OperatorMain;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.health.HealthServer;
import io.tensorcast.operator.trust.MasterKey;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Two operator replicas with leader election against the real API server: one holds the Lease and
 * reconciles, the other keeps its informers warm, reports ready and does not reconcile; when the
 * leader stops, the other takes the Lease within the lease duration and reconciles. Both serve
 * {@code /healthz} and {@code /readyz} from JOSDK's runtime info.
 */
@ExtendWith(LocalClusterExtension.class)
class LeaderElectionIT {

  static final Duration LEASE = Duration.ofSeconds(3);

  /** Counts reconciles of ModelArtifacts in one namespace. */
  static final class Reconciles implements Metrics {
    final String namespace;
    final AtomicInteger count = new AtomicInteger();

    Reconciles(String namespace) {
      this.namespace = namespace;
    }

    @Override
    public void reconciliationExecutionStarted(HasMetadata resource, Map<String, Object> metadata) {
      if (resource instanceof ModelArtifact
          && namespace.equals(resource.getMetadata().getNamespace())) {
        count.incrementAndGet();
      }
    }
  }

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void oneReplicaLeadsAndTheOtherTakesOverWhenItStops(SharedCluster cluster, TestNamespace ns)
      throws Exception {
    Crds.applyModelArtifact(cluster.client());
    String lease = "tensorcast-operator";
    Reconciles reconcilesA = new Reconciles(ns.name());
    Reconciles reconcilesB = new Reconciles(ns.name());
    MasterKey masterKey = MasterKey.random();
    try (KubernetesClient clientA = cluster.controlPlane().newClient();
        KubernetesClient clientB = cluster.controlPlane().newClient()) {
      Operator a =
          OperatorMain.create(
              clientA,
              config(ns, lease, "replica-a"),
              reconcilesA,
              new SimpleMeterRegistry(),
              masterKey,
              false);
      Operator b =
          OperatorMain.create(
              clientB,
              config(ns, lease, "replica-b"),
              reconcilesB,
              new SimpleMeterRegistry(),
              masterKey,
              false);
      try (HealthServer healthA = HealthServer.start(0, a);
          HealthServer healthB = HealthServer.start(0, b)) {
        assertThat(get(healthA, "/readyz")).as("/readyz before start").isEqualTo(503);
        assertThat(get(healthA, "/healthz")).as("/healthz while starting").isEqualTo(200);
        a.start();
        await()
            .atMost(Duration.ofSeconds(60))
            .until(() -> holder(cluster, ns, lease), "replica-a"::equals);
        b.start();

        ModelArtifact artifact = unschedulableArtifact(ns.name());
        cluster.client().resource(artifact).create();
        await()
            .atMost(Duration.ofSeconds(30))
            .until(
                () ->
                    phase(cluster, ns.name()) == ArtifactPhase.Pending
                        && reconcilesA.count.get() >= 3);
        assertThat(reconcilesB.count.get()).as("reconciles by the standby").isZero();
        assertThat(holder(cluster, ns, lease)).isEqualTo("replica-a");
        assertThat(get(healthA, "/readyz")).isEqualTo(200);
        assertThat(get(healthB, "/readyz")).as("the standby is ready").isEqualTo(200);
        assertThat(get(healthB, "/healthz")).isEqualTo(200);

        a.stop();
        assertThat(get(healthA, "/healthz")).as("/healthz of a stopped operator").isEqualTo(503);
        await()
            .atMost(LEASE.multipliedBy(4))
            .until(() -> holder(cluster, ns, lease), "replica-b"::equals);
        int before = reconcilesA.count.get();
        cluster
            .client()
            .resource(artifact)
            .edit(
                m -> {
                  m.getMetadata().getLabels().put("touched", "yes");
                  return m;
                });
        await().atMost(Duration.ofSeconds(60)).until(() -> reconcilesB.count.get() > 0);
        assertThat(reconcilesA.count.get())
            .as("reconciles by the stopped replica")
            .isEqualTo(before);
      } finally {
        a.stop();
        b.stop();
      }
    }
  }

  private static OperatorConfig config(TestNamespace ns, String lease, String identity) {
    return OperatorConfig.fromLookup(
            Map.of(
                    "TENSORCAST_POLL_INTERVAL", "PT0.5S",
                    "TENSORCAST_STATUS_TIMEOUT", "PT1S")
                ::get)
        .withLeaderElection(
            Optional.of(
                new OperatorConfig.LeaderElection(
                    lease, Optional.of(ns.name()), LEASE, Optional.of(identity))));
  }

  /** An artifact no node can hold (its nodeSelector matches nothing): Pending, no pods. */
  private static ModelArtifact unschedulableArtifact(String namespace) {
    ModelArtifact m = new ModelArtifact();
    m.getMetadata().setName("le");
    m.getMetadata().setNamespace(namespace);
    m.getMetadata().setLabels(new java.util.HashMap<>());
    ModelArtifactSpec spec = new ModelArtifactSpec();
    SourceSpec source = new SourceSpec();
    source.setUri("s3://bucket/model/");
    spec.setSource(source);
    spec.getPlacement().getNodeSelector().put("tensorcast.io/leader-election-it", "nowhere");
    m.setSpec(spec);
    return m;
  }

  private static ArtifactPhase phase(SharedCluster cluster, String namespace) {
    ModelArtifact m =
        cluster.client().resources(ModelArtifact.class).inNamespace(namespace).withName("le").get();
    return m == null || m.getStatus() == null ? null : m.getStatus().getPhase();
  }

  private static String holder(SharedCluster cluster, TestNamespace ns, String lease) {
    Lease l = cluster.client().leases().inNamespace(ns.name()).withName(lease).get();
    return l == null || l.getSpec() == null ? null : l.getSpec().getHolderIdentity();
  }

  private static int get(HealthServer server, String path) throws Exception {
    return HttpClient.newHttpClient()
        .send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + path))
                .timeout(Duration.ofSeconds(5))
                .build(),
            HttpResponse.BodyHandlers.discarding())
        .statusCode();
  }
}
