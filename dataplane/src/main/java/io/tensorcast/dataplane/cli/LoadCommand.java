package io.tensorcast.dataplane.cli;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.api.Reason;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.dataplane.format.FormatLimits;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.LoadFailure;
import io.tensorcast.dataplane.load.LoadMetrics;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoreException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code dataplane load URI}: one-shot load into the store with progress on the terminal. */
@Command(
    name = "load",
    mixinStandardHelpOptions = true,
    description =
        "Load an artifact into the page-locked store, verify it and print what was loaded. The"
            + " files stay in the store directory unless --unload is given.")
final class LoadCommand implements Callable<Integer> {
  @Mixin SourceArgs source;
  @Mixin StoreArgs store;
  @Mixin FormatLimitArgs formatLimits;

  @Option(
      names = "--artifact-id",
      defaultValue = "cli",
      description = "Store directory name for the artifact (default ${DEFAULT-VALUE}).")
  String artifactId;

  @Option(names = "--unload", description = "Remove the artifact from the store when done.")
  boolean unload;

  @Option(
      names = "--replace",
      description = "Remove an artifact of the same id left in the store by an earlier run first.")
  boolean replace;

  @Option(
      names = "--progress",
      defaultValue = "auto",
      description =
          "How progress is shown on standard error: bar (one line redrawn in place, log lines"
              + " above it), plain (a line every 5 s, for logs and CI), none, or auto (bar when"
              + " the JVM has a console, else plain; default ${DEFAULT-VALUE}). Rate and ETA are"
              + " over the last 8 s.")
  ProgressRenderer.Mode progressMode;

  @Spec CommandSpec spec;

  @Override
  public Integer call() throws Exception {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    FormatLimits limits = formatLimits.limits();
    // The store (its native glue, memory budget and the logging set-up of its first line) opens on
    // its own thread while this one builds the source's client: neither needs the other. A usage
    // error in the source's options is reported first, with nothing created.
    source.validate();
    StoreOpening opening = new StoreOpening(store);
    try (ArtifactSource src = opening.openSource(source);
        PinnedStore pinned = opening.await()) {
      if (replace && pinned.get(artifactId).isPresent()) {
        pinned.unload(artifactId);
      }
      ArtifactLoader loader =
          new ArtifactLoader(
              src,
              pinned,
              new ArtifactLoader.Options(
                  artifactId, store.memoryLimitBytes(), source.readOptions(), limits),
              new LoadMetrics(new SimpleMeterRegistry()));
      Progress progress = new Progress(loader, renderer(progressMode, err));
      ScheduledExecutorService ticker =
          Executors.newSingleThreadScheduledExecutor(
              r -> {
                Thread t = new Thread(r, "progress");
                t.setDaemon(true);
                return t;
              });
      PrintStream stderr = System.err;
      if (progress.renderer instanceof ProgressRenderer.Bar bar) {
        // Log lines (logback's console appender writes to System.err) go above the bar.
        System.setErr(new PrintStream(bar.logSink(), true, StandardCharsets.UTF_8));
      }
      ticker.scheduleAtFixedRate(progress::tick, 500, 500, TimeUnit.MILLISECONDS);
      DataPlaneStatus done;
      try {
        done = loader.load();
      } finally {
        ticker.shutdownNow();
        ticker.awaitTermination(2, TimeUnit.SECONDS);
        progress.finish();
        System.setErr(stderr);
      }
      printSummary(out, done, progress.elapsedSeconds());
      if (unload) {
        pinned.unload(artifactId);
        out.println("unloaded " + artifactId);
      }
      out.flush();
      return 0;
    } catch (LoadFailure e) {
      err.printf("load failed: %s: %s%n", e.reason(), e.getMessage());
      return 1;
    } catch (SourceException | StoreException e) {
      Reason reason = e instanceof SourceException s ? s.reason() : ((StoreException) e).reason();
      err.printf("load failed: %s: %s%n", reason, e.getMessage());
      return 1;
    }
  }

  /** {@link StoreArgs#open} on a thread of its own, started at once. */
  private static final class StoreOpening {
    private final java.util.concurrent.FutureTask<PinnedStore> task;

    StoreOpening(StoreArgs store) {
      task = new java.util.concurrent.FutureTask<>(store::open);
      Thread t = new Thread(task, "store-open");
      t.setDaemon(true);
      t.start();
    }

    /** Opens the source; when that fails, the store is closed once open and the failure thrown. */
    ArtifactSource openSource(SourceArgs source) throws SourceException {
      try {
        return source.open();
      } catch (SourceException | RuntimeException | Error e) {
        try {
          await().close();
        } catch (StoreException | RuntimeException | Error suppressed) {
          e.addSuppressed(suppressed);
        }
        throw e;
      }
    }

    /** The open store, or its failure as {@link StoreArgs#open} threw it. */
    PinnedStore await() throws StoreException {
      boolean interrupted = false;
      try {
        while (true) {
          try {
            return task.get();
          } catch (InterruptedException e) {
            interrupted = true; // the open is bounded: wait for it, keep the interrupt
          } catch (java.util.concurrent.ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof StoreException s) {
              throw s;
            }
            if (c instanceof RuntimeException r) {
              throw r;
            }
            if (c instanceof Error r) {
              throw r;
            }
            throw new IllegalStateException(c);
          }
        }
      } finally {
        if (interrupted) {
          Thread.currentThread().interrupt();
        }
      }
    }
  }

  private static void printSummary(PrintWriter out, DataPlaneStatus s, double seconds) {
    out.printf("loaded %s%n", s.source());
    out.printf("  revision   %s%n", s.resolvedRevision());
    out.printf(
        "  files      %d (%d verified), %d tensors%n", s.files(), s.filesComplete(), s.tensors());
    out.printf(
        Locale.ROOT,
        "  bytes      %s (%d) in %.2f s, %s/s%n",
        Quantities.human(s.bytesTotal()),
        s.bytesTotal(),
        seconds,
        Quantities.human((long) (s.bytesTotal() / Math.max(seconds, 1e-3))));
    if (s.lock() != null) {
      out.printf(
          "  locked     %s (%s)%s%n",
          s.lock().locked() ? "yes, " + Quantities.human(s.lock().lockedBytes()) : "no",
          s.lock().reason(),
          s.lock().locked() || s.lock().message() == null ? "" : ": " + s.lock().message());
    }
    out.printf("  directory  %s%n", s.storeDirectory());
    for (DataPlaneStatus.FileStatus f : s.fileStatuses()) {
      // the digest the store recorded: the source's where it publishes one, else a SHA-256
      out.printf(
          "    %-48s %12s  %s%n",
          f.path(), Quantities.human(f.size()), f.contentDigest() == null ? "" : f.contentDigest());
    }
  }

  /** The renderer {@code --progress} asks for; null for none. */
  static ProgressRenderer renderer(ProgressRenderer.Mode mode, PrintWriter err) {
    ProgressRenderer.Mode m =
        mode != ProgressRenderer.Mode.auto
            ? mode
            : System.console() != null ? ProgressRenderer.Mode.bar : ProgressRenderer.Mode.plain;
    return switch (m) {
      case bar -> new ProgressRenderer.Bar(err);
      case plain -> new ProgressRenderer.Plain(err, System::nanoTime, Duration.ofSeconds(5));
      default -> null;
    };
  }

  /** The load's progress: bytes, windowed rate and ETA, through a renderer. */
  private static final class Progress {
    private final ArtifactLoader loader;
    private final ProgressRenderer renderer;
    private final TransferRate rate = new TransferRate(TransferRate.DEFAULT_WINDOW);
    private final long start = System.nanoTime();

    Progress(ArtifactLoader loader, ProgressRenderer renderer) {
      this.loader = loader;
      this.renderer = renderer;
    }

    double elapsedSeconds() {
      return (System.nanoTime() - start) / 1e9;
    }

    private ProgressSnapshot snapshot() {
      DataPlaneStatus s = loader.status();
      rate.record(System.nanoTime(), s.bytesLoaded());
      return ProgressSnapshot.of(String.valueOf(s.phase()), s.bytesLoaded(), s.bytesTotal(), rate);
    }

    void tick() {
      if (renderer != null) {
        renderer.update(snapshot());
      }
    }

    void finish() {
      if (renderer != null) {
        renderer.finish(snapshot());
      }
    }
  }
}
