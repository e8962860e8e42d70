package io.tensorcast.operator.metrics;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The operator's per-artifact gauges, tags {@code namespace} and {@code name}:
 *
 * <ul>
 *   <li>{@value #SOURCE_BYTES} (Prometheus {@code tensorcast_operator_artifact_source_bytes}):
 *       bytes the artifact's current pods read from its source, as in {@code
 *       status.bytesFromSource} (0 while unknown). With PeerToPeer it stays near the artifact's
 *       size whatever the replicas; a value growing towards replicas × size says the swarm is not
 *       sharing.
 *   <li>{@value #SIZE_BYTES} ({@code tensorcast_operator_artifact_size_bytes}): one copy's size, as
 *       in {@code status.totalBytes} (0 while unknown); the alert on source bytes above 1.1 × size
 *       divides by it.
 *   <li>{@value #PHASE} ({@code tensorcast_operator_artifact_phase}), one series per phase (tag
 *       {@code phase}): 1 for the artifact's {@code status.phase}, 0 for the others, so alerts on
 *       Failed and on Loading for too long need no status scraping.
 *   <li>{@value #PEER_TO_PEER} ({@code tensorcast_operator_artifact_peer_to_peer}): 1 when {@code
 *       spec.distribution.mode} is PeerToPeer, 0 for SourceOnly (where every replica reads the
 *       whole artifact from the source by design).
 * </ul>
 *
 * <p>The gauges are registered on an artifact's first status and removed when the artifact is
 * deleted.
 */
public final class ArtifactMetrics {

  /** Micrometer name of the source-bytes gauge. */
  public static final String SOURCE_BYTES = "tensorcast.operator.artifact.source.bytes";

  /** Micrometer name of the size gauge. */
  public static final String SIZE_BYTES = "tensorcast.operator.artifact.size";

  /** Micrometer name of the phase gauges. */
  public static final String PHASE = "tensorcast.operator.artifact.phase";

  /** Micrometer name of the distribution-mode gauge. */
  public static final String PEER_TO_PEER = "tensorcast.operator.artifact.peer.to.peer";

  private final MeterRegistry registry;
  private final Map<Key, Entry> entries = new ConcurrentHashMap<>();

  private record Key(String namespace, String name) {}

  private record Entry(AtomicLong sourceBytes, Gauge gauge) {}

  private record Facts(
      AtomicLong size,
      AtomicReference<ArtifactPhase> phase,
      AtomicLong peerToPeer,
      List<Gauge> gauges) {}

  private final Map<Key, Facts> facts = new ConcurrentHashMap<>();

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

  /**
   * Sets the size, phase and distribution gauges of {@code namespace/name} from a status the
   * operator computed for it, registering them on first use.
   *
   * @param peerToPeer whether the artifact's distribution mode is PeerToPeer
   */
  public void status(
      String namespace, String name, boolean peerToPeer, ModelArtifactStatus status) {
    Facts f =
        facts.computeIfAbsent(
            new Key(namespace, name),
            k -> {
              AtomicLong size = new AtomicLong();
              AtomicReference<ArtifactPhase> phase = new AtomicReference<>();
              AtomicLong p2p = new AtomicLong();
              Tags tags = Tags.of("namespace", namespace, "name", name);
              List<Gauge> gauges = new ArrayList<>();
              gauges.add(
                  Gauge.builder(SIZE_BYTES, size, AtomicLong::doubleValue)
                      .description("Size of one copy of the ModelArtifact (status.totalBytes)")
                      .baseUnit("bytes")
                      .tags(tags)
                      .register(registry));
              for (ArtifactPhase p : ArtifactPhase.values()) {
                gauges.add(
                    Gauge.builder(PHASE, phase, r -> r.get() == p ? 1 : 0)
                        .description("1 for the ModelArtifact's status.phase, 0 for the others")
                        .tags(tags.and("phase", p.name()))
                        .register(registry));
              }
              gauges.add(
                  Gauge.builder(PEER_TO_PEER, p2p, AtomicLong::doubleValue)
                      .description("1 when the ModelArtifact's distribution mode is PeerToPeer")
                      .tags(tags)
                      .register(registry));
              return new Facts(size, phase, p2p, gauges);
            });
    f.size().set(status.getTotalBytes() == null ? 0 : status.getTotalBytes());
    f.phase().set(status.getPhase());
    f.peerToPeer().set(peerToPeer ? 1 : 0);
  }

  /** Removes the gauges of {@code namespace/name}. */
  public void remove(String namespace, String name) {
    Entry e = entries.remove(new Key(namespace, name));
    if (e != null) {
      registry.remove(e.gauge());
    }
    Facts f = facts.remove(new Key(namespace, name));
    if (f != null) {
      f.gauges().forEach(registry::remove);
    }
  }
}
