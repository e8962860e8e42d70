package io.tensorcast.dataplane.load;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;

/**
 * Prometheus-facing metrics of a load (Micrometer). Names follow Prometheus conventions (base
 * units, {@code _bytes}, {@code _total}) under the data plane's one prefix {@code
 * tensorcast_dataplane_}; every series carries the {@code artifact} tag.
 *
 * <ul>
 *   <li>{@code tensorcast_dataplane_artifact_bytes}: artifact size
 *   <li>{@code tensorcast_dataplane_artifact_loaded_bytes}: bytes in the store
 *   <li>{@code tensorcast_dataplane_artifact_locked_bytes}: bytes of the store locked in memory
 *   <li>{@code tensorcast_dataplane_artifact_ready}: 1 when Ready, else 0
 *   <li>{@code tensorcast_dataplane_source_bytes_total}: bytes read from the source that are in the
 *       store (the bytes on the wire, retries included, are {@code
 *       tensorcast_dataplane_source_wire_bytes_total})
 *   <li>{@code tensorcast_dataplane_source_retries_total}: ranged reads retried
 * </ul>
 *
 * <p>One instance may serve several loads of the same artifact one after the other ({@code
 * dataplane serve} loading again after a transient failure): the series then follow the latest
 * load, and {@code tensorcast_dataplane_source_retries_total} keeps counting across them.
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
    Gauge.builder("tensorcast.dataplane.artifact", this, m -> m.current.bytesTotal())
        .baseUnit("bytes")
        .tags(tags)
        .description("Artifact size")
        .register(registry);
    Gauge.builder("tensorcast.dataplane.artifact.loaded", this, m -> m.current.bytesLoaded())
        .baseUnit("bytes")
        .tags(tags)
        .description("Bytes of the artifact in the page-locked store")
        .register(registry);
    Gauge.builder("tensorcast.dataplane.artifact.locked", this, m -> m.current.lockedBytes())
        .baseUnit("bytes")
        .tags(tags)
        .description("Bytes of the artifact's store locked in memory (mlock)")
        .register(registry);
    Gauge.builder(
            "tensorcast.dataplane.artifact.ready",
            this,
            m -> m.current.phase() == Phase.Ready ? 1 : 0)
        .tags(tags)
        .description("1 when every byte is in the store and verified")
        .register(registry);
    FunctionCounter.builder(
            "tensorcast.dataplane.source", this, m -> (double) m.current.bytesFromSource())
        .baseUnit("bytes")
        .tags(tags)
        .description("Bytes read from the artifact's source that became store bytes")
        .register(registry);
    FunctionCounter.builder(
            "tensorcast.dataplane.source.retries",
            this,
            m -> (double) (m.retriesOfEarlierLoads + m.current.retries()))
        .tags(tags)
        .description(
            "Ranged source reads retried after a failure (each resumes at its first missing byte)")
        .register(registry);
  }
}
