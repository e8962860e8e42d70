package io.tensorcast.dataplane.pod;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.jvm.ClassLoaderMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.FileDescriptorMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.tensorcast.api.Reason;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.cli.Quantities;
import io.tensorcast.dataplane.consumer.DefaultTensorReadPlanner;
import io.tensorcast.dataplane.consumer.TensorEndpoint;
import io.tensorcast.dataplane.http.BodyStreaming;
import io.tensorcast.dataplane.http.ControlAuth;
import io.tensorcast.dataplane.http.ControlServer;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.LoadFailure;
import io.tensorcast.dataplane.load.LoadMetrics;
import io.tensorcast.dataplane.p2p.PeerSwarm;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoreException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One data-plane pod's work, embeddable: serves the control endpoint (health, {@code /status},
 * {@code /metrics}, consumer reads of tensors under {@code /v1/tensors}), loads one artifact into
 * the page-locked store on a thread of its own, and on {@link #close()} stops a load in flight,
 * unloads the artifact and frees everything it opened. {@code dataplane serve} runs one and closes
 * it from its SIGTERM hook.
 *
 * <p>It keeps no process-global state: settings come in as {@link ServeSettings} (nothing is read
 * from the environment), and the metrics registry, event loop, source client and store belong to
 * the instance. Several servers can therefore share a JVM when their listen addresses and store
 * artifact ids differ (the e2e harness runs many simulated pods this way).
 *
 * <p>A failure to open the source or the store does not throw: it is reported as a {@code Failed}
 * status on {@code /status} with the source's or store's reason, as the operator expects from a
 * pod.
 *
 * <p>A load that fails on a transient source error ({@link LoadFailure#TRANSIENT_REASONS}: the
 * source stayed unavailable or throttled past the per-request retries) is not {@code Failed}: the
 * server waits ({@link LoadRetry}: exponential back-off, jittered, no limit while the pod lives)
 * and loads again, reporting {@code Pending} with the failure's reason and a message such as {@code
 * "...; retrying in 40s (attempt 3)"} meanwhile, and counting each new load in {@code
 * tensorcast_dataplane_load_retries_total}. Every other failure is {@code Failed} for good.
 */
public final class DataPlaneServer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(DataPlaneServer.class);

  /** How long {@link #close()} waits for a load in flight to stop before giving up on unloading. */
  public static final long STOP_LOAD_TIMEOUT_MS = 20_000;

  private final ServeSettings settings;
  private final PrometheusMeterRegistry registry =
      new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
  private final AtomicReference<io.tensorcast.dataplane.load.Loader> loaderRef =
      new AtomicReference<>();
  private final AtomicReference<RetryWait> waiting = new AtomicReference<>();
  private final AtomicReference<Membership> lastMembership = new AtomicReference<>();
  private final LoadMetrics loadMetrics = new LoadMetrics(registry);

  /** What the loads of this artifact learnt from the source, kept from one load to the next. */
  private final io.tensorcast.dataplane.load.KeptMetadata keptMetadata =
      new io.tensorcast.dataplane.load.KeptMetadata();

  private Counter loadRetries;
  private volatile boolean stopping;
  private final AtomicReference<DataPlaneStatus> early = new AtomicReference<>();
  private final CountDownLatch loadEnded = new CountDownLatch(1);
  private final CountDownLatch closed = new CountDownLatch(1);
  private final Object closeLock = new Object();
  private ControlServer server;
  private ArtifactSource source;
  private volatile io.tensorcast.dataplane.source.WireCountingSource wire;
  private volatile PinnedStore store;
  private Thread loading;
  private boolean closing;
  private volatile PeerSwarm swarm;
  private ControlAuth controlAuth;

  private JvmGcMetrics gcMetrics;

  /**
   * JVM and process meters under Micrometer's standard names ({@code jvm_*}, {@code process_*},
   * {@code system_*}), as the operator has them: stock JVM dashboards read them as they are.
   */
  private void bindProcessMetrics() {
    new ClassLoaderMetrics().bindTo(registry);
    new JvmMemoryMetrics().bindTo(registry);
    new JvmThreadMetrics().bindTo(registry);
    new ProcessorMetrics().bindTo(registry);
    new FileDescriptorMetrics().bindTo(registry);
    new UptimeMetrics().bindTo(registry);
    gcMetrics = new JvmGcMetrics();
    gcMetrics.bindTo(registry);
  }

  private DataPlaneServer(ServeSettings settings) {
    this.settings = settings;
    this.controlAuth = settings.controlAuth();
    bindProcessMetrics();
    early.set(pending(DataPlaneStatus.Phase.Pending, (String) null, null));
  }

  /**
   * Binds the control endpoint, opens source and store, frees other artifacts the store root still
   * holds (a pod serves exactly one), and starts the load on a thread named {@code
   * load-<artifactId>}. Returns once the endpoint is listening; the load goes on in the background.
   *
   * @throws InterruptedException if interrupted while binding
   * @throws RuntimeException when the listen address cannot be bound (nothing is left open)
   */
  public static DataPlaneServer start(ServeSettings settings) throws InterruptedException {
    DataPlaneServer s = new DataPlaneServer(settings);
    s.open();
    return s;
  }

  private void open() throws InterruptedException {
    if (controlAuth == null) {
      controlAuth = ControlAuth.generated();
      log.info(
          "control endpoint of {}: no tokens given; two random tokens generated (read and admin),"
              + " handed out by DataPlaneServer.controlAuth() only",
          settings.artifactId());
    }
    TensorEndpoint tensors =
        new TensorEndpoint(
            settings.artifactId(),
            () -> status().phase(),
            () -> {
              PinnedStore s = store;
              return s == null ? Optional.empty() : s.get(settings.artifactId());
            },
            new DefaultTensorReadPlanner());
    if (settings.peer() != null) {
      swarm = new PeerSwarm(settings.artifactId(), settings.peer(), registry);
    }
    if (settings.shards() != null) {
      registerShardGauges();
    }
    loadRetries =
        Counter.builder("tensorcast.dataplane.load.retries")
            .tags(Tags.of("artifact", settings.artifactId()))
            .description(
                "Loads that failed on a transient source error (SourceUnavailable, Throttled)"
                    + " and are loaded again after a back-off")
            .register(registry);
    server =
        ControlServer.start(
            settings.listen(),
            this::status,
            registry,
            controlAuth,
            tensors,
            settings.peer() == null && settings.shards() == null ? null : this::applyMembership,
            BodyStreaming.DEFAULTS);
    source = openSource();
    store = source == null ? null : openStore();
    if (store != null) {
      releaseOtherArtifacts(store);
    }
    if (source == null || store == null) {
      loadEnded.countDown();
      return;
    }
    loading =
        new Thread(
            () -> {
              try {
                loadUntilDone();
              } catch (RuntimeException e) {
                log.warn("load of {} failed unexpectedly", settings.artifactId(), e);
              } finally {
                loadEnded.countDown();
              }
            },
            "load-" + settings.artifactId());
    loading.start();
  }

  /**
   * Loads until Ready, a failure that retrying will not fix, or {@link #close()}: after a failure
   * whose reason is transient ({@link LoadFailure#isTransient()}) waits as {@link
   * ServeSettings#loadRetry()} says and loads again with a fresh {@link ArtifactLoader} (and a
   * fresh {@link PeerSwarm}: one fills once); the loads share one {@link
   * io.tensorcast.dataplane.load.KeptMetadata}, so a load asks the source only for the metadata the
   * earlier ones did not get. The failed load left its copy in the store with the ranges or pieces
   * it stored; the next load resumes it (the new swarm confirms and announces the pieces it keeps
   * and fetches only the others), a complete one is adopted.
   */
  private void loadUntilDone() {
    int failures = 0;
    while (!stopping) {
      if (failures > 0 && settings.peer() != null) {
        swapSwarm();
      }
      io.tensorcast.dataplane.load.Loader loader =
          settings.shards() != null
              ? new io.tensorcast.dataplane.shards.ShardSetLoader(
                  source,
                  store,
                  settings.artifactId(),
                  settings.memoryLimitBytes(),
                  settings.read(),
                  settings.shards(),
                  this::copies,
                  settings.formatLimits())
              : new ArtifactLoader(
                  source,
                  store,
                  new ArtifactLoader.Options(
                      settings.artifactId(),
                      settings.memoryLimitBytes(),
                      settings.read(),
                      settings.formatLimits()),
                  loadMetrics,
                  swarm,
                  keptMetadata);
      loaderRef.set(loader);
      waiting.set(null);
      try {
        loader.load();
        return;
      } catch (LoadFailure e) {
        if (!e.isTransient() || stopping) {
          PeerSwarm p = swarm;
          if (p != null && !stopping) {
            // Its share would stall every other member: hand it over and close the peer port.
            p.leave("its load failed for good: " + e.reason() + ": " + e.getMessage());
          }
          return; // reported on /status; the server stays up so the operator can read why
        }
        failures++;
        Duration delay = settings.loadRetry().delay(failures, retryAfter(e));
        waiting.set(
            new RetryWait(
                e.reason(), e.getMessage(), failures + 1, System.nanoTime() + delay.toNanos()));
        loadRetries.increment();
        log.warn(
            "load {} of {} failed on a transient source error ({}: {}); loading again in {} ms",
            failures,
            settings.artifactId(),
            e.reason(),
            e.getMessage(),
            delay.toMillis());
        PeerSwarm p = swarm;
        if (p != null) {
          p.close(); // a swarm fills once; peers stop asking this member until the next one
        }
        try {
          Thread.sleep(delay.toMillis(), (int) (delay.toNanos() % 1_000_000));
        } catch (InterruptedException interrupted) {
          return; // close()
        }
      }
    }
  }

  /** The longest {@code Retry-After} a source sent among the causes of {@code e}, or null. */
  private static Duration retryAfter(Throwable e) {
    Duration longest = null;
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof SourceException se && se.retryAfter().isPresent()) {
        Duration d = se.retryAfter().get();
        longest = longest == null || d.compareTo(longest) > 0 ? d : longest;
      }
    }
    return longest;
  }

  /**
   * Per rank of a TensorShardSet pod: {@code tensorcast_dataplane_shard_bytes_needed}, {@code
   * _bytes_fetched} and {@code _fetch_amplification} (fetched / needed), tagged with the artifact
   * and the rank, read from the current status.
   */
  private void registerShardGauges() {
    for (int rank : settings.shards().ranks()) {
      Tags tags = Tags.of("artifact", settings.artifactId(), "rank", Integer.toString(rank));
      io.micrometer.core.instrument.Gauge.builder(
              "tensorcast.dataplane.shard.bytes.needed", this, s -> s.rankValue(rank, 0))
          .tags(tags)
          .description("Tensor bytes of the rank file")
          .baseUnit("bytes")
          .register(registry);
      io.micrometer.core.instrument.Gauge.builder(
              "tensorcast.dataplane.shard.bytes.fetched", this, s -> s.rankValue(rank, 1))
          .tags(tags)
          .description("Tensor bytes read for the rank from the source or ModelArtifact copies")
          .baseUnit("bytes")
          .register(registry);
      io.micrometer.core.instrument.Gauge.builder(
              "tensorcast.dataplane.shard.fetch.amplification", this, s -> s.rankValue(rank, 2))
          .tags(tags)
          .description("Bytes fetched over bytes needed for the rank (0 before anything is read)")
          .register(registry);
    }
  }

  private double rankValue(int rank, int which) {
    DataPlaneStatus s = status();
    if (s.shards() == null) {
      return 0;
    }
    for (io.tensorcast.api.wire.ShardReport.Rank r : s.shards().ranks()) {
      if (r.rank() == rank) {
        return switch (which) {
          case 0 -> r.bytesNeeded();
          case 1 -> r.bytesFetched();
          default -> r.bytesNeeded() == 0 ? 0 : (double) r.bytesFetched() / r.bytesNeeded();
        };
      }
    }
    return 0;
  }

  /** Replaces the closed swarm of a failed load with a new one that has the last membership. */
  private void swapSwarm() {
    PeerSwarm old = swarm;
    if (old != null) {
      old.close();
    }
    // The peers gauge holds the swarm it was registered with: let the new swarm register its own.
    registry
        .find("tensorcast.dataplane.peers")
        .tag("artifact", settings.artifactId())
        .meters()
        .forEach(registry::remove);
    swarm = new PeerSwarm(settings.artifactId(), settings.peer(), registry);
    Membership m = lastMembership.get();
    if (m != null) {
      swarm.applyMembership(m);
    }
  }

  /** {@code PUT /v1/peers}: kept for the swarm of a later load, applied to the current one. */
  private boolean applyMembership(String body) {
    Membership m = Membership.parseJson(body);
    Membership before = lastMembership.getAndSet(m);
    if (swarm == null) {
      copiesKnown.countDown();
      return before == null || !before.epoch().equals(m.epoch());
    }
    return swarm.applyMembership(m);
  }

  private final CountDownLatch copiesKnown = new CountDownLatch(1);

  /**
   * For a TensorShardSet's pod: the ModelArtifact copies to read from, the last {@code PUT
   * /v1/peers} (members' addresses are the copies' control endpoints) or else {@code --copies};
   * waits up to {@code --copy-wait} for a first membership when the pod was told to expect one.
   */
  private List<InetSocketAddress> copies() {
    io.tensorcast.dataplane.shards.ShardSettings s = settings.shards();
    if (lastMembership.get() == null && !s.copyWait().isZero()) {
      try {
        copiesKnown.await(s.copyWait().toMillis(), TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    Membership m = lastMembership.get();
    return m == null ? s.copies() : m.members().stream().map(Membership.Member::address).toList();
  }

  /**
   * A wait before loading again.
   *
   * @param reason the failed load's (transient) reason
   * @param message the failed load's message
   * @param nextAttempt number of the load after the wait (the first load is 1)
   * @param at {@link System#nanoTime()} when it starts
   */
  private record RetryWait(Reason reason, String message, int nextAttempt, long at) {}

  /** The tokens of the control endpoint's read and admin scopes (given or generated). */
  public ControlAuth controlAuth() {
    return controlAuth;
  }

  /** The bound control endpoint (useful with port 0). */
  public InetSocketAddress address() {
    return server.address();
  }

  /**
   * What {@code GET /status} answers now. While waiting to load again after a transient failure:
   * {@code Pending} with the failure's reason and {@link DataPlaneStatus#retryMessage} (the
   * failure's message, the time left and the next attempt's number), never {@code Failed}.
   */
  public DataPlaneStatus status() {
    RetryWait w = waiting.get();
    io.tensorcast.dataplane.load.Loader l = loaderRef.get();
    DataPlaneStatus s;
    if (w != null) {
      s =
          pending(
              DataPlaneStatus.Phase.Pending,
              w.reason(),
              DataPlaneStatus.retryMessage(
                  w.message(), Duration.ofNanos(w.at() - System.nanoTime()), w.nextAttempt()));
    } else if (l != null) {
      s = l.status();
      if (s.phase() == DataPlaneStatus.Phase.Failed) {
        // Between a transient failure and the start of the wait: it is retried, so not Failed.
        DataPlaneStatus.Phase after = DataPlaneStatus.Phase.afterFailure(s.reason(), stopping);
        if (after != s.phase()) {
          s = pending(after, s.reason(), s.message());
        }
      }
    } else {
      s = early.get();
    }
    io.tensorcast.dataplane.source.WireCountingSource counted = wire;
    if (counted != null) {
      s = s.toBuilder().bytesFromSourceOnWire(counted.wireBytes()).build();
    }
    PeerSwarm p = swarm;
    Membership copies = lastMembership.get();
    if (p == null && copies != null && settings.shards() != null) {
      return s.toBuilder()
          .peerEpoch(copies.epoch())
          .peers(copies.members().size())
          .droppedPeers(null)
          .handedOverPeers(null)
          .build();
    }
    if (p == null) {
      return s;
    }
    return s.toBuilder()
        .peerEpoch(p.epoch())
        .peers(p.connectedPeers())
        .droppedPeers(p.dropped())
        .handedOverPeers(p.handedOver())
        .build();
  }

  /** The peer swarm, or null when this server loads from the source only. */
  public PeerSwarm swarm() {
    return swarm;
  }

  /**
   * Waits until {@link #close()} has finished (from any thread).
   *
   * @throws InterruptedException if interrupted while waiting
   */
  public void awaitClosed() throws InterruptedException {
    closed.await();
  }

  /**
   * Stops a load in flight or a wait before loading again (interrupting the loading thread every
   * 100 ms, for at most {@link #STOP_LOAD_TIMEOUT_MS}), unloads the artifact (unmaps and deletes
   * its files), then closes the store, the source and the endpoint. Idempotent; later callers wait
   * for the first.
   *
   * <p>When the load does not stop in time its files are left for the next start to remove, and the
   * store stays open: unmapping under a running load would crash the JVM.
   */
  @Override
  public void close() {
    synchronized (closeLock) {
      if (closing) {
        awaitUninterruptibly(closed);
        return;
      }
      closing = true;
    }
    stopping = true;
    try {
      boolean stopped = stopLoad();
      if (swarm != null) {
        swarm.close(); // stop serving pieces before the store's files go
      }
      if (!stopped) {
        log.warn(
            "the load of {} did not stop within {} ms; its files are left for the next start to"
                + " remove",
            settings.artifactId(),
            STOP_LOAD_TIMEOUT_MS);
      } else if (store != null) {
        try {
          store.unload(settings.artifactId());
          log.info("unloaded {} on shutdown", settings.artifactId());
        } catch (Exception e) {
          log.warn("unload of {} on shutdown failed: {}", settings.artifactId(), e.toString());
        }
        closeQuietly(store);
      }
      closeQuietly(source);
      closeQuietly(server);
      closeQuietly(gcMetrics);
      registry.close();
    } finally {
      closed.countDown();
    }
  }

  private boolean stopLoad() {
    long deadline = System.nanoTime() + STOP_LOAD_TIMEOUT_MS * 1_000_000L;
    boolean interrupted = false;
    try {
      while (loadEnded.getCount() > 0) {
        if (System.nanoTime() > deadline) {
          return false;
        }
        loading.interrupt();
        try {
          loadEnded.await(100, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
          interrupted = true; // keep going: the unload must still happen
        }
      }
      return true;
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private static void awaitUninterruptibly(CountDownLatch latch) {
    boolean interrupted = false;
    while (true) {
      try {
        latch.await();
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  private void closeQuietly(AutoCloseable c) {
    if (c == null) {
      return;
    }
    try {
      c.close();
    } catch (Exception e) {
      log.warn("closing {} of {} failed: {}", c, settings.artifactId(), e.toString());
    }
  }

  /**
   * A pod serves exactly one artifact. Complete copies of other artifacts the store adopted from
   * its root (say, an older generation whose pod was replaced before it could unload) would hold
   * memory this pod's budget does not count on: free them before loading.
   */
  private void releaseOtherArtifacts(PinnedStore pinned) {
    for (String other : List.copyOf(pinned.artifacts().keySet())) {
      if (!other.equals(settings.artifactId())) {
        try {
          pinned.unload(other);
          log.info("released {} left in the store by an earlier pod", other);
        } catch (Exception e) {
          log.warn("cannot release {} left in the store: {}", other, e.toString());
        }
      }
    }
  }

  private ArtifactSource openSource() {
    try {
      if (settings.uri() == null) {
        throw new IllegalArgumentException("an artifact URI is required (positional or --uri)");
      }
      SourceOptions.Builder b =
          SourceOptions.builder()
              .include(settings.include())
              .exclude(settings.exclude())
              .pathStyle(settings.pathStyle())
              .allowInsecureEndpoint(settings.allowInsecureEndpoint())
              .maxConnections(ArtifactLoader.metadataConcurrency(settings.read()))
              // The artifact loader paces throttling of all its requests with one gate; the shard
              // loader relies on the source's own retries.
              .throttledRetriesInPlace(settings.shards() != null);
      if (settings.revision() != null) {
        b.revision(settings.revision());
      }
      if (settings.endpoint() != null) {
        b.endpoint(settings.endpoint());
      }
      if (settings.region() != null) {
        b.region(settings.region());
      }
      settings.credentials().ifPresent(b::credentials);
      wire =
          new io.tensorcast.dataplane.source.WireCountingSource(
              Sources.open(settings.uri(), b.build()));
      io.micrometer.core.instrument.FunctionCounter.builder(
              "tensorcast.dataplane.source.wire.bytes",
              wire,
              io.tensorcast.dataplane.source.WireCountingSource::wireBytes)
          .tags(Tags.of("artifact", settings.artifactId()))
          .description(
              "Bytes received from the source's response bodies, whatever became of them"
                  + " (kept, discarded by a failed load, read again after a retry)")
          .baseUnit("bytes")
          .register(registry);
      return wire;
    } catch (Exception e) {
      Reason reason = e instanceof SourceException s ? s.reason() : Reason.InvalidSource;
      early.set(pending(DataPlaneStatus.Phase.Failed, reason, e.getMessage()));
      log.warn("cannot open source: {}: {}", reason, e.getMessage());
      return null;
    }
  }

  private PinnedStore openStore() {
    try {
      String b = settings.budget();
      if (b == null || b.isBlank()) {
        return PinnedStore.open(settings.storeRoot(), settings.lockPolicy());
      }
      return new PinnedStore(
          settings.storeRoot(), Quantities.bytes(b, "--budget"), settings.lockPolicy());
    } catch (Exception e) {
      Reason reason = e instanceof StoreException s ? s.reason() : Reason.StoreError;
      early.set(pending(DataPlaneStatus.Phase.Failed, reason, e.getMessage()));
      log.warn("cannot open store: {}: {}", reason, e.getMessage());
      return null;
    }
  }

  private DataPlaneStatus pending(DataPlaneStatus.Phase phase, String reason, String message) {
    return DataPlaneStatus.builder(settings.artifactId(), phase)
        .reason(reason)
        .message(message)
        .source(settings.uri())
        .fileStatuses(List.of())
        .build();
  }

  private DataPlaneStatus pending(DataPlaneStatus.Phase phase, Reason reason, String message) {
    return pending(phase, reason == null ? null : reason.name(), message);
  }
}
