package io.tensorcast.dataplane.load;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;

/**
 * Prometheus-facing metrics of a load (Micrometer). Names follow Prometheus conventions (base
 * units, {@code _bytes}, {@code _total}); every series carries the {@code artifact} tag.
 *
 * <ul>
 *   <li>{@code tensorcast_artifact_bytes}: artifact size
 *   <li>{@code tensorcast_artifact_loaded_bytes}: bytes in the store
 *   <li>{@code tensorcast_source_read_bytes_total}: bytes read from the source that are in the
 *       store (the same as {@code tensorcast_dataplane_source_bytes_total}, kept for dashboards)
 *   <li>{@code tensorcast_dataplane_source_bytes_total}: bytes read from the source that are in the
 *       store (P2P contract)
 *   <li>{@code tensorcast_source_retries_total}: ranged reads retried
 *   <li>{@code tensorcast_artifact_ready}: 1 when Ready, else 0
 * </ul>
 *
 * <p>One instance may serve several loads of the same artifact one after the other ({@code
 * dataplane serve} loading again after a transient failure): the series then follow the latest
 * load, and {@code tensorcast_source_retries_total} keeps counting across them.
 */
public final class LoadMetrics {
  private final MeterRegistry registry;
  private volatile LoadState current;
  private volatile long retriesOfEarlierLoads;

  public LoadMetrics(MeterRegistry registry) {
    this.registry = registry;
  }

  synchronized void bind(LoadState s) {
    LoadState previous = current;
    current = s;
    if (previous != null) {
      retriesOfEarlierLoads += previous.retries();
      return; // the meters read the current load
    }
    Tags tags = Tags.of("artifact", s.snapshot().artifactId());
    Gauge.builder("tensorcast.artifact.bytes", this, m -> m.current.bytesTotal())
        .baseUnit("bytes")
        .tags(tags)
        .description("Artifact size")
        .register(registry);
    Gauge.builder("tensorcast.artifact.loaded", this, m -> m.current.bytesLoaded())
        .baseUnit("bytes")
        .tags(tags)
        .description("Bytes of the artifact in the page-locked store")
        .register(registry);
    FunctionCounter.builder(
            "tensorcast.source.read", this, m -> (double) m.current.bytesFromSource())
        .baseUnit("bytes")
        .tags(tags)
        .description("Bytes read from the source that are in the store (same as dataplane.source)")
        .register(registry);
    FunctionCounter.builder(
            "tensorcast.dataplane.source", this, m -> (double) m.current.bytesFromSource())
        .baseUnit("bytes")
        .tags(tags)
        .description("Bytes read from the artifact's source that became store bytes")
        .register(registry);
    FunctionCounter.builder(
            "tensorcast.source.retries",
            this,
            m -> (double) (m.retriesOfEarlierLoads + m.current.retries()))
        .tags(tags)
        .description(
            "Ranged source reads retried after a failure (each resumes at its first missing byte)")
        .register(registry);
    Gauge.builder("tensorcast.artifact.ready", this, m -> m.current.phase() == Phase.Ready ? 1 : 0)
        .tags(tags)
        .description("1 when every byte is in the store and verified")
        .register(registry);
  }
}
