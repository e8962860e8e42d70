package io.tensorcast.operator;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.javaoperatorsdk.operator.Operator;
import io.javaoperatorsdk.operator.api.monitoring.Metrics;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.metrics.MetricsServer;
import io.tensorcast.operator.reconciler.ModelArtifactReconciler;
import java.io.IOException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Entry point of the operator process. Connects with the fabric8 client's usual configuration
 * (in-cluster service account, else {@code KUBECONFIG} / {@code ~/.kube/config}), reads {@link
 * OperatorConfig} from the environment, serves its Prometheus metrics on {@code GET /metrics} of
 * {@link OperatorConfig#metricsPort()} (unless 0), registers {@link ModelArtifactReconciler} and
 * runs until the JVM stops.
 *
 * <p>RBAC the operator needs (the chart's ClusterRole, checked by e2e's ChartIT): {@code
 * modelartifacts} get/list/watch/patch (JOSDK adds and removes the finalizer by JSON patch), {@code
 * modelartifacts/status} patch (server-side apply), {@code modelartifacts/finalizers} update (the
 * pods' blocking owner references); {@code pods} get/list/watch/create/delete (list/watch over all
 * pods also finds the artifacts' consumers); {@code nodes} get/list/watch/patch (patch: the
 * per-artifact ready labels only). It reads no Secret.
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
    if (config.metricsPort() != 0) {
      try {
        MetricsServer.start(config.metricsPort(), registry);
      } catch (IOException e) {
        System.err.println("tensorcast-operator: " + e.getMessage() + " (TENSORCAST_METRICS_PORT)");
        System.exit(2);
        return;
      }
    }
    KubernetesClient client = new KubernetesClientBuilder().build();
    Operator operator = create(client, config, Metrics.NOOP, registry);
    Runtime.getRuntime().addShutdownHook(new Thread(operator::stop, "tensorcast-operator-stop"));
    operator.start();
    log.info(
        "tensorcast operator started against {} (data-plane image {})",
        client.getMasterUrl(),
        config.dataPlaneImage());
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
    Operator operator =
        new Operator(
            o ->
                o.withKubernetesClient(client)
                    .withCloseClientOnStop(false)
                    .withUseSSAToPatchPrimaryResource(false)
                    .withStopOnInformerErrorDuringStartup(true)
                    .withMetrics(metrics));
    operator.register(new ModelArtifactReconciler(config, registry));
    operator.register(new io.tensorcast.operator.reconciler.TensorShardSetReconciler(config));
    return operator;
  }
}
