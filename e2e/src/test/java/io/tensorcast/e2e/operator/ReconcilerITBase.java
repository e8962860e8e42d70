package io.tensorcast.e2e.operator;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.javaoperatorsdk.operator.Operator;
import io.javaoperatorsdk.operator.api.reconciler.Reconciler;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.status.DataPlaneClient;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.TestInfo;

/**
 * What the reconcilers' own ITs share: the {@link ReconcilerCluster}, an operator running the one
 * reconciler of the class (started by the class's {@code @BeforeAll} with {@link #startOperator},
 * stopped after the class), a namespace per test ({@link #ns}) whose nodes go after the test.
 */
abstract class ReconcilerITBase {
  /** The instant of the reconcilers' fixed clock. */
  static final Instant NOW = Instant.parse("2026-12-02T00:00:00Z");

  /** How long a test waits for the reconciler's next step. */
  static final Duration WAIT = Duration.ofSeconds(30);

  static ReconcilerCluster cluster;
  static KubernetesClient client;
  private static Operator operator;

  /** This test's namespace. */
  String ns;

  /** Builds the reconciler under test from the cluster's settings. */
  interface ReconcilerFactory {
    Reconciler<?> create(OperatorConfig config, DataPlaneClient dataPlane, Clock clock);
  }

  /**
   * Starts the cluster (once per JVM) and an operator running what {@code factory} builds from the
   * cluster's settings, a data-plane client on them and a clock fixed at {@link #NOW}.
   */
  static void startOperator(ReconcilerFactory factory) {
    cluster = ReconcilerCluster.get();
    client = cluster.client();
    OperatorConfig config = cluster.config();
    operator =
        cluster.operator(
            factory.create(
                config,
                new DataPlaneClient(config.controlPort(), config.statusTimeout()),
                Clock.fixed(NOW, ZoneOffset.UTC)));
  }

  @AfterAll
  static void stopOperator() {
    if (operator != null) {
      operator.stop();
      operator = null;
    }
  }

  @BeforeEach
  void namespace(TestInfo test) {
    ns = cluster.namespace(test.getDisplayName());
  }

  @AfterEach
  void removeNodes() {
    cluster.removeNodes(ns);
  }
}
