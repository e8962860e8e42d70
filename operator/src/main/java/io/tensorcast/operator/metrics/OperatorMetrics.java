package io.tensorcast.operator.metrics;

import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.javaoperatorsdk.operator.api.monitoring.Metrics;
import io.javaoperatorsdk.operator.monitoring.micrometer.MicrometerMetrics;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.jvm.ClassLoaderMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.FileDescriptorMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.core.instrument.config.MeterFilter;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.Conditions;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * The operator's process-wide meters, besides the per-artifact gauges of {@link ArtifactMetrics}.
 * Every name the operator defines starts with {@code tensorcast.operator.} ({@code
 * tensorcast_operator_} in Prometheus):
 *
 * <ul>
 *   <li>JOSDK's reconcile meters ({@link MicrometerMetrics}, per kind, not per resource: counts of
 *       events, reconciliations started, succeeded, failed and retried, and the duration of each
 *       reconcile and cleanup), renamed from {@code operator.sdk.*} to {@code
 *       tensorcast.operator.*} by a {@link MeterFilter} — e.g. {@code
 *       tensorcast_operator_reconciliations_started_total{kind="ModelArtifact"}}, {@code
 *       tensorcast_operator_controllers_execution_reconcile_seconds_count{controller="modelartifact"}};
 *   <li>{@value #TIME_TO_READY}: seconds from the moment an object's {@code Ready} condition went
 *       {@code False} (its creation, or the spec change that replaced its copies) until its phase
 *       became {@code Ready}, a histogram per {@code kind} ({@code ModelArtifact}, {@code
 *       TensorShardSet}) with buckets from 1 s to 1 h.
 * </ul>
 *
 * JVM and process meters ({@code jvm_*}, {@code process_*}, {@code system_*}) keep Micrometer's
 * standard names, which the usual JVM dashboards and alerts expect.
 */
public final class OperatorMetrics {

  /** Time from not Ready to Ready, per kind. */
  public static final String TIME_TO_READY = "tensorcast.operator.time.to.ready";

  /** Prefix of JOSDK's own meter names, replaced by {@link #PREFIX}. */
  static final String JOSDK_PREFIX = "operator.sdk.";

  /** Prefix of every meter the operator defines. */
  public static final String PREFIX = "tensorcast.operator.";

  private OperatorMetrics() {}

  /**
   * Prepares {@code registry} for the operator: the renaming of JOSDK's meters (before any is
   * registered) and the JVM and process binders. Call once per registry, before {@link #josdk}.
   */
  public static MeterRegistry bind(MeterRegistry registry) {
    registry.config().meterFilter(renameJosdk());
    new JvmMemoryMetrics().bindTo(registry);
    new JvmGcMetrics().bindTo(registry);
    new JvmThreadMetrics().bindTo(registry);
    new ClassLoaderMetrics().bindTo(registry);
    new ProcessorMetrics().bindTo(registry);
    new UptimeMetrics().bindTo(registry);
    new FileDescriptorMetrics().bindTo(registry);
    return registry;
  }

  /** JOSDK's monitoring hook reporting to {@code registry}, without per-resource tags. */
  public static Metrics josdk(MeterRegistry registry) {
    return MicrometerMetrics.withoutPerResourceMetrics(registry);
  }

  static MeterFilter renameJosdk() {
    return new MeterFilter() {
      @Override
      public Meter.Id map(Meter.Id id) {
        return id.getName().startsWith(JOSDK_PREFIX)
            ? id.withName(PREFIX + id.getName().substring(JOSDK_PREFIX.length()))
            : id;
      }
    };
  }

  /**
   * Records the time to Ready of {@code object} when its phase turns Ready: from the {@code
   * lastTransitionTime} of the {@code Ready=False} condition it had (else its creation) to {@code
   * now}. Does nothing for any other change.
   */
  public static void readyTransition(
      MeterRegistry registry,
      HasMetadata object,
      ArtifactPhase oldPhase,
      List<Condition> oldConditions,
      ArtifactPhase newPhase,
      Instant now) {
    if (newPhase != ArtifactPhase.Ready || oldPhase == ArtifactPhase.Ready) {
      return;
    }
    Optional<Instant> since =
        (oldConditions == null ? List.<Condition>of() : oldConditions)
            .stream()
                .filter(c -> Conditions.READY.equals(c.getType()))
                .filter(c -> Conditions.FALSE.equals(c.getStatus()))
                .map(Condition::getLastTransitionTime)
                .filter(Objects::nonNull)
                .findFirst()
                .flatMap(OperatorMetrics::instant)
                .or(() -> instant(object.getMetadata().getCreationTimestamp()));
    if (since.isEmpty() || since.get().isAfter(now)) {
      return;
    }
    Timer.builder(TIME_TO_READY)
        .description("Time from Ready=False (creation or spec change) to phase Ready")
        .tag("kind", object.getKind())
        .publishPercentileHistogram()
        .minimumExpectedValue(Duration.ofSeconds(1))
        .maximumExpectedValue(Duration.ofHours(1))
        .register(registry)
        .record(Duration.between(since.get(), now));
  }

  private static Optional<Instant> instant(String time) {
    try {
      return time == null ? Optional.empty() : Optional.of(Instant.parse(time));
    } catch (DateTimeParseException e) {
      return Optional.empty();
    }
  }
}
