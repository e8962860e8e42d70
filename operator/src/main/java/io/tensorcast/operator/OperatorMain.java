package io.tensorcast.operator;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.javaoperatorsdk.operator.Operator;
import io.javaoperatorsdk.operator.api.config.LeaderElectionConfiguration;
import io.javaoperatorsdk.operator.api.monitoring.Metrics;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.health.HealthServer;
import io.tensorcast.operator.metrics.MetricsServer;
import io.tensorcast.operator.metrics.OperatorMetrics;
import io.tensorcast.operator.reconciler.ModelArtifactReconciler;
import io.tensorcast.operator.trust.MasterKey;
import java.io.IOException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Entry point of the operator process. Connects with the fabric8 client's usual configuration
 * (in-cluster service account, else {@code KUBECONFIG} / {@code ~/.kube/config}), reads {@link
 * OperatorConfig} from the environment, serves its Prometheus metrics on {@code GET /metrics} of
 * {@link OperatorConfig#metricsPort()} (unless 0) and its probes on {@link HealthServer} of {@link
 * OperatorConfig#healthPort()} (unless 0), registers {@link ModelArtifactReconciler} and runs until
 * the JVM stops; with {@link OperatorConfig#leaderElection()} set it reconciles only while it holds
 * the Lease, and exits when it loses it.
 *
 * <p>RBAC the operator needs (the chart's ClusterRole, checked by e2e's ChartIT): {@code
 * modelartifacts} get/list/watch/patch (JOSDK adds and removes the finalizer by JSON patch), {@code
 * modelartifacts/status} patch (server-side apply), {@code modelartifacts/finalizers} update (the
 * pods' blocking owner references); {@code pods} get/list/watch/create/delete (list/watch over all
 * pods also finds the artifacts' consumers); {@code nodes} get/list/watch/patch (patch: the
 * per-artifact ready labels only); {@code secrets} and {@code networkpolicies} create/patch (each
 * artifact's own); {@code events} create/get/patch (status events, deduplicated by count); with
 * leader election {@code coordination.k8s.io} {@code leases} get/create/update in the Lease's
 * namespace (JOSDK checks them with a SelfSubjectRulesReview at start). It reads no Secret.
 */
public final class OperatorMain {
  private static final Logger log = LoggerFactory.getLogger(OperatorMain.class);

  private OperatorMain() {}

  public static void main(String[] args) {
    OperatorConfig config;
    try {
      config = OperatorConfig.fromEnvironment();
    } catch (IllegalArgumentException e) {
      System.err.println("tensorcast-operator: " + e.getMessage());
      System.exit(2);
      return;
    }
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    OperatorMetrics.bind(registry);
    if (config.metricsPort() != 0) {
      try {
        MetricsServer.start(config.metricsPort(), registry);
      } catch (IOException e) {
        System.err.println("tensorcast-operator: " + e.getMessage() + " (TENSORCAST_METRICS_PORT)");
        System.exit(2);
        return;
      }
    }
    MasterKey key;
    try {
      key = masterKey(config);
    } catch (IllegalArgumentException e) {
      System.err.println(
          "tensorcast-operator: " + e.getMessage() + " (TENSORCAST_MASTER_KEY_FILE)");
      System.exit(2);
      return;
    }
    KubernetesClient client = new KubernetesClientBuilder().build();
    Operator operator =
        create(client, config, OperatorMetrics.josdk(registry), registry, key, true);
    if (config.healthPort() != 0) {
      try {
        HealthServer.start(config.healthPort(), operator);
      } catch (IOException e) {
        System.err.println("tensorcast-operator: " + e.getMessage() + " (TENSORCAST_HEALTH_PORT)");
        System.exit(2);
        return;
      }
    }
    // JOSDK installs no shutdown hook of its own when leader election is on.
    Runtime.getRuntime().addShutdownHook(new Thread(operator::stop, "tensorcast-operator-stop"));
    operator.start();
    log.info(
        "tensorcast operator started against {} (data-plane image {}, leader election {})",
        client.getMasterUrl(),
        config.dataPlaneImage(),
        config
            .leaderElection()
            .map(l -> "on, Lease " + l.namespace().map(n -> n + "/").orElse("") + l.lease())
            .orElse("off"));
  }

  /**
   * Builds an operator with the ModelArtifact reconciler registered, not yet started; the caller
   * calls {@link Operator#start()} and {@link Operator#stop()}. Used by {@link #main} and by tests
   * that run the operator in their own JVM.
   *
   * <p>JOSDK's own server-side apply of the ModelArtifact is off, so its finalizer is added with a
   * JSON patch: JOSDK builds that apply patch from a new instance of the class, whose Java field
   * defaults would be applied as {@code spec} with force — overwriting what the user wrote and
   * taking ownership of spec fields from GitOps (seen on a 1.20 API server: {@code replicas} reset
   * to 1). The reconciler writes status itself, by server-side apply of identity + status only.
   *
   * @param client client to the API server; the operator does not close it on stop
   * @param config operator settings
   */
  public static Operator create(KubernetesClient client, OperatorConfig config) {
    return create(client, config, Metrics.NOOP);
  }

  /**
   * {@link #create(KubernetesClient, OperatorConfig)} reporting to {@code metrics}: JOSDK calls it
   * for every event received, reconciliation started and finished, and cleanup (the scale benchmark
   * counts reconciliations per ModelArtifact with it).
   *
   * @param metrics JOSDK's monitoring hook; {@link Metrics#NOOP} for none
   */
  public static Operator create(KubernetesClient client, OperatorConfig config, Metrics metrics) {
    return create(client, config, metrics, new SimpleMeterRegistry());
  }

  /**
   * {@link #create(KubernetesClient, OperatorConfig, Metrics)} with the operator's own gauges (see
   * {@link io.tensorcast.operator.metrics.ArtifactMetrics}) in {@code registry}.
   */
  public static Operator create(
      KubernetesClient client, OperatorConfig config, Metrics metrics, MeterRegistry registry) {
    return create(client, config, metrics, registry, masterKey(config), false);
  }

  /**
   * The operator of {@link #create(KubernetesClient, OperatorConfig, Metrics, MeterRegistry)}, with
   * the master key already loaded. With {@link OperatorConfig#leaderElection()} set, only the
   * replica holding the Lease reconciles; the others keep their informers warm and take over when
   * the Lease expires. Every replica must hold the same master key.
   *
   * @param exitOnLostLease whether losing the Lease ends the JVM (JOSDK's default, so that a
   *     replica that lost leadership never reconciles next to the new leader); {@code false} for
   *     operators that share a JVM with tests, which then only log the loss
   */
  public static Operator create(
      KubernetesClient client,
      OperatorConfig config,
      Metrics metrics,
      MeterRegistry registry,
      MasterKey masterKey,
      boolean exitOnLostLease) {
    Operator operator =
        new Operator(
            o -> {
              o.withKubernetesClient(client)
                  .withCloseClientOnStop(false)
                  .withUseSSAToPatchPrimaryResource(false)
                  .withStopOnInformerErrorDuringStartup(true)
                  .withMetrics(metrics);
              config
                  .leaderElection()
                  .ifPresent(
                      l ->
                          o.withLeaderElectionConfiguration(
                              new LeaderElectionConfiguration(
                                  l.lease(),
                                  l.namespace().orElse(null),
                                  l.leaseDuration(),
                                  l.renewDeadline(),
                                  l.retryPeriod(),
                                  l.identity().orElse(null),
                                  null,
                                  exitOnLostLease)));
            });
    operator.register(new ModelArtifactReconciler(config, masterKey, registry));
    operator.register(
        new io.tensorcast.operator.reconciler.TensorShardSetReconciler(
            config, masterKey, registry));
    return operator;
  }

  /**
   * The master key of {@code config}: read from {@link OperatorConfig#masterKeyFile()}, else random
   * for this process (logged as a warning: a restart then replaces every data-plane pod).
   *
   * @throws IllegalArgumentException when the file cannot be read or is too short
   */
  static MasterKey masterKey(OperatorConfig config) {
    if (config.masterKeyFile().isPresent()) {
      return MasterKey.fromFile(config.masterKeyFile().get());
    }
    log.warn(
        "no master key file (TENSORCAST_MASTER_KEY_FILE): using a random key for this process;"
            + " after a restart every ModelArtifact's Secret is rewritten and its pods replaced");
    return MasterKey.random();
  }
}
