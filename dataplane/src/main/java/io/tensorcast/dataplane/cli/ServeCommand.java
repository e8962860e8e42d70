package io.tensorcast.dataplane.cli;

import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.LoadFailure;
import io.tensorcast.dataplane.load.LoadMetrics;
import io.tensorcast.dataplane.server.ControlServer;
import io.tensorcast.dataplane.server.ControlToken;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.store.PinnedStore;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code dataplane serve}: the long-running data-plane pod. Loads one artifact (fixed by the
 * command line, so the pod spec is the whole desired state), serves the control endpoint, and on
 * SIGTERM stops a load in flight, releases the artifact's memory and exits.
 */
@Command(
    name = "serve",
    mixinStandardHelpOptions = true,
    description =
        "Load an artifact and keep it in the page-locked store; serve health, status and metrics"
            + " over HTTP until terminated, then free the store.")
final class ServeCommand implements Callable<Integer> {
  private static final Logger log = LoggerFactory.getLogger(ServeCommand.class);
  static final int DEFAULT_PORT = 8471;

  /** How long the shutdown hook waits for a load in flight to stop before unloading anyway. */
  static final long STOP_LOAD_TIMEOUT_MS = 20_000;

  @Mixin SourceArgs source;
  @Mixin StoreArgs store;

  @Option(
      names = "--artifact-id",
      required = true,
      description = "Store directory name for the artifact (unique per ModelArtifact generation).")
  String artifactId;

  @Option(
      names = "--listen",
      description = "HOST:PORT of the control endpoint (default $POD_IP:8471, else 0.0.0.0:8471).")
  String listen;

  @Option(
      names = "--control-token-file",
      description =
          "File holding the bearer token that GET /status requires (a mounted Secret key;"
              + " re-read when it changes).")
  Path tokenFile;

  @Override
  public Integer call() throws Exception {
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    AtomicReference<ArtifactLoader> loaderRef = new AtomicReference<>();
    AtomicReference<DataPlaneStatus> early =
        new AtomicReference<>(pending(DataPlaneStatus.Phase.Pending, null, null));
    CountDownLatch stopped = new CountDownLatch(1);

    ControlToken token = tokenFile == null ? null : new ControlToken(tokenFile);
    try (ControlServer server =
            ControlServer.start(
                listenAddress(),
                () -> {
                  ArtifactLoader l = loaderRef.get();
                  return l != null ? l.status() : early.get();
                },
                registry,
                token);
        ArtifactSource src = openSource(early);
        PinnedStore pinned = src == null ? null : openStore(early)) {
      if (pinned != null) {
        releaseOtherArtifacts(pinned);
      }
      Thread loading = Thread.currentThread();
      CountDownLatch loadEnded = new CountDownLatch(1);
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(
                  () -> {
                    // A load in flight writes straight into the store's mappings: stop it and
                    // wait until it has, then unmap and delete, and only then let call() close
                    // the store (closing first would keep the files for a next start).
                    if (!stopLoad(loading, loadEnded)) {
                      // Unmapping under a running load would crash the JVM; the next start
                      // removes the incomplete copy instead.
                      log.warn(
                          "the load of {} did not stop within {} ms of SIGTERM; its files are"
                              + " left for the next start to remove",
                          artifactId,
                          STOP_LOAD_TIMEOUT_MS);
                    } else if (pinned != null) {
                      try {
                        pinned.unload(artifactId);
                        log.info("unloaded {} on shutdown", artifactId);
                      } catch (Exception e) {
                        log.warn("unload of {} on shutdown failed: {}", artifactId, e.toString());
                      }
                    }
                    stopped.countDown();
                  },
                  "unload-on-exit"));
      try {
        if (src != null && pinned != null) {
          ArtifactLoader loader =
              new ArtifactLoader(
                  src,
                  pinned,
                  new ArtifactLoader.Options(
                      artifactId, store.memoryLimitBytes(), source.readOptions()),
                  new LoadMetrics(registry));
          loaderRef.set(loader);
          try {
            loader.load();
          } catch (LoadFailure e) {
            // Reported on /status; the pod stays up so the operator can read why.
          }
        }
      } finally {
        loadEnded.countDown();
      }
      awaitUninterruptibly(stopped);
      return 0;
    }
  }

  /**
   * Interrupts the loading thread until the load has ended (the range reader cancels its requests
   * and waits for its workers when interrupted), for at most {@link #STOP_LOAD_TIMEOUT_MS}. A
   * single interrupt could be swallowed by a blocking call that does not end on interrupts, so it
   * is repeated every 100 ms.
   *
   * @return whether no load is running any more
   */
  private static boolean stopLoad(Thread loading, CountDownLatch loadEnded) {
    long deadline = System.nanoTime() + STOP_LOAD_TIMEOUT_MS * 1_000_000L;
    try {
      while (loadEnded.getCount() > 0) {
        if (System.nanoTime() > deadline) {
          return false;
        }
        loading.interrupt();
        loadEnded.await(100, TimeUnit.MILLISECONDS);
      }
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  private static void awaitUninterruptibly(CountDownLatch latch) {
    boolean interrupted = false;
    while (true) {
      try {
        latch.await();
        break;
      } catch (InterruptedException e) {
        interrupted = true; // the shutdown hook stopping the load; keep waiting for the unload
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * A pod serves exactly one artifact. Complete copies of other artifacts the store adopted from
   * its root (say, an older generation whose pod was replaced before it could unload) would hold
   * memory this pod's budget does not count on: free them before loading.
   */
  private void releaseOtherArtifacts(PinnedStore pinned) {
    for (String other : java.util.List.copyOf(pinned.artifacts().keySet())) {
      if (!other.equals(artifactId)) {
        try {
          pinned.unload(other);
          log.info("released {} left in the store by an earlier pod", other);
        } catch (Exception e) {
          log.warn("cannot release {} left in the store: {}", other, e.toString());
        }
      }
    }
  }

  private ArtifactSource openSource(AtomicReference<DataPlaneStatus> early) {
    try {
      return source.open();
    } catch (Exception e) {
      String reason =
          e instanceof io.tensorcast.dataplane.source.SourceException s
              ? s.reason()
              : "InvalidSource";
      early.set(pending(DataPlaneStatus.Phase.Failed, reason, e.getMessage()));
      log.warn("cannot open source: {}: {}", reason, e.getMessage());
      return null;
    }
  }

  private PinnedStore openStore(AtomicReference<DataPlaneStatus> early) {
    try {
      return store.open();
    } catch (Exception e) {
      String reason =
          e instanceof io.tensorcast.dataplane.store.StoreException s ? s.reason() : "StoreError";
      early.set(pending(DataPlaneStatus.Phase.Failed, reason, e.getMessage()));
      log.warn("cannot open store: {}: {}", reason, e.getMessage());
      return null;
    }
  }

  private DataPlaneStatus pending(DataPlaneStatus.Phase phase, String reason, String message) {
    return new DataPlaneStatus(
        artifactId,
        phase,
        reason,
        message,
        source.uriOption != null ? source.uriOption : source.positionalUri,
        null,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        null,
        null,
        null,
        java.util.List.of());
  }

  private InetSocketAddress listenAddress() {
    String spec = listen;
    if (spec == null) {
      String podIp = System.getenv("POD_IP");
      spec = (podIp == null || podIp.isBlank() ? "0.0.0.0" : podIp) + ":" + DEFAULT_PORT;
    }
    int colon = spec.lastIndexOf(':');
    if (colon < 0) {
      throw new IllegalArgumentException("--listen must be HOST:PORT, got " + spec);
    }
    String host = spec.substring(0, colon);
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    return new InetSocketAddress(host, Integer.parseInt(spec.substring(colon + 1)));
  }
}
