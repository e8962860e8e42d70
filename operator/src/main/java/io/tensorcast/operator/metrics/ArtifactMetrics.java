package io.tensorcast.operator.metrics;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The operator's per-artifact gauges. Today one: {@value #SOURCE_BYTES} (Prometheus name {@code
 * tensorcast_operator_artifact_source_bytes}), tags {@code namespace} and {@code name}: bytes the
 * artifact's current pods read from its source, as in {@code status.bytesFromSource} (0 while
 * unknown). With PeerToPeer it stays near the artifact's size whatever the replicas; a value
 * growing towards replicas × size says the swarm is not sharing (P2P contract, issue 6).
 *
 * <p>A gauge is registered on an artifact's first reconcile and removed when the artifact is
 * deleted.
 */
public final class ArtifactMetrics {

  /** Micrometer name of the source-bytes gauge. */
  public static final String SOURCE_BYTES = "tensorcast.operator.artifact.source.bytes";

  private final MeterRegistry registry;
  private final Map<Key, Entry> entries = new ConcurrentHashMap<>();

  private record Key(String namespace, String name) {}

  private record Entry(AtomicLong sourceBytes, Gauge gauge) {}

  public ArtifactMetrics(MeterRegistry registry) {
    this.registry = Objects.requireNonNull(registry, "registry");
  }

  /** Sets the source-bytes gauge of {@code namespace/name}, registering it on first use. */
  public void sourceBytes(String namespace, String name, long bytes) {
    entries
        .computeIfAbsent(
            new Key(namespace, name),
            k -> {
              AtomicLong value = new AtomicLong();
              Gauge g =
                  Gauge.builder(SOURCE_BYTES, value, AtomicLong::doubleValue)
                      .description(
                          "Bytes the ModelArtifact's current data-plane pods read from its source")
                      .baseUnit("bytes")
                      .tags(Tags.of("namespace", namespace, "name", name))
                      .register(registry);
              return new Entry(value, g);
            })
        .sourceBytes()
        .set(bytes);
  }

  /** Removes the gauges of {@code namespace/name}. */
  public void remove(String namespace, String name) {
    Entry e = entries.remove(new Key(namespace, name));
    if (e != null) {
      registry.remove(e.gauge());
    }
  }
}
