package io.tensorcast.e2e.cluster;

import io.tensorcast.dataplane.cli.ServeArguments;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.pod.ServeSettings;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs data-plane containers as {@link DataPlaneServer}s inside this JVM instead of one JVM process
 * each, so a benchmark can host a hundred simulated pods on a small machine.
 *
 * <p>For an image matching {@link #DATA_PLANE_IMAGE} (same prefix rule as {@link
 * ProcessContainerRuntime}: {@code tensorcast/dataplane}, {@code tensorcast/dataplane:0.1.0}, ...)
 * the container's {@code command ++ args} are parsed by {@code dataplane serve}'s own picocli model
 * ({@link ServeArguments#parse}) against the environment the kubelet resolved for the container
 * ({@code POD_IP} = the node's loopback address, {@code TENSORCAST_MEMORY_BUDGET}, {@code AWS_*}
 * from the Secret), and a server is started with those settings on a thread of its own. SIGTERM
 * becomes {@link DataPlaneServer#close()} (stop the load, unload, free), exit status 143; SIGKILL
 * cannot be simulated in a shared JVM and also closes the server, exit status 137. Invalid
 * arguments or an address already in use end the container at once with status 2 or 1 and the error
 * in the pod log, like the real process. Other images fail with {@code ErrImagePull}.
 *
 * <p>A container of that image whose {@code command} is {@code chown} (the operator's store-owner
 * init container) runs the host's {@code chown} as a process, with its {@code securityContext}
 * ({@link ProcessContainerRuntime#mapProgram}).
 *
 * <p>What differs from a process: the data plane logs to this JVM's logger rather than to the pod
 * log (the pod log gets start and exit lines); pids are synthetic ({@code >= 10_000_000}); heap,
 * threads and {@code RLIMIT_MEMLOCK} are shared with the host JVM.
 */
public final class InProcessContainerRuntime implements ContainerRuntime, AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(InProcessContainerRuntime.class);

  /** The image prefix run in process. */
  public static final String DATA_PLANE_IMAGE = "tensorcast/dataplane";

  private final AtomicLong nextPid = new AtomicLong(10_000_000);
  private final ProcessContainerRuntime programs =
      new ProcessContainerRuntime().mapProgram(DATA_PLANE_IMAGE, "chown", "chown");
  private final Set<Container> running = ConcurrentHashMap.newKeySet();

  @Override
  public ContainerProcess start(ContainerLaunch launch) throws ContainerStartException {
    if (!ProcessContainerRuntime.matches(DATA_PLANE_IMAGE, launch.image())) {
      throw new ContainerStartException(
          "ErrImagePull",
          "InProcessContainerRuntime runs only "
              + DATA_PLANE_IMAGE
              + " images, not "
              + launch.image());
    }
    if (!launch.command().isEmpty() && launch.command().get(0).equals("chown")) {
      return programs.start(launch);
    }
    List<String> argv = new ArrayList<>(launch.command());
    argv.addAll(launch.args());
    Container c = new Container(launch, nextPid.getAndIncrement());
    running.add(c);
    c.onExit.whenComplete((code, e) -> running.remove(c));
    Thread t = new Thread(() -> c.run(argv), "inprocess-" + launch.podName());
    t.setDaemon(true);
    t.start();
    return c;
  }

  /** Number of containers not yet exited. */
  public int runningContainers() {
    return running.size();
  }

  /** Closes every server still running (as SIGTERM would) and waits for them. */
  @Override
  public void close() {
    List<Container> left = List.copyOf(running);
    left.forEach(Container::terminate);
    left.forEach(c -> c.onExit.join());
  }

  private static final class Container implements ContainerProcess {
    private final ContainerLaunch launch;
    private final long pid;
    private final CompletableFuture<Integer> onExit = new CompletableFuture<>();
    private final Object lock = new Object();
    private DataPlaneServer server;
    private Integer stopStatus; // set by terminate/kill, possibly before the server is up

    Container(ContainerLaunch launch, long pid) {
      this.launch = launch;
      this.pid = pid;
    }

    void run(List<String> argv) {
      ServeSettings settings;
      try {
        settings = ServeArguments.parse(argv, launch.env());
      } catch (RuntimeException e) {
        log("invalid arguments " + argv + ": " + e.getMessage());
        onExit.complete(2);
        return;
      }
      DataPlaneServer s;
      try {
        s = DataPlaneServer.start(settings);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        onExit.complete(1);
        return;
      } catch (RuntimeException e) {
        log("cannot start the data plane: " + e);
        onExit.complete(1);
        return;
      }
      log("data plane " + settings.artifactId() + " serving on " + s.address());
      Integer early;
      synchronized (lock) {
        server = s;
        early = stopStatus;
      }
      if (early != null) {
        stop(early);
      }
    }

    @Override
    public long pid() {
      return pid;
    }

    @Override
    public boolean isAlive() {
      return !onExit.isDone();
    }

    @Override
    public CompletableFuture<Integer> onExit() {
      return onExit;
    }

    @Override
    public void terminate() {
      signal(143);
    }

    @Override
    public void kill() {
      signal(137);
    }

    private void signal(int status) {
      boolean up;
      synchronized (lock) {
        if (stopStatus != null) {
          return;
        }
        stopStatus = status;
        up = server != null;
      }
      if (up) {
        Thread t = new Thread(() -> stop(status), "inprocess-stop-" + launch.podName());
        t.setDaemon(true);
        t.start();
      }
    }

    private void stop(int status) {
      try {
        server.close();
        log("data plane stopped (exit " + status + ")");
      } catch (RuntimeException e) {
        LOG.warn("closing the data plane of {} failed", launch.podName(), e);
      } finally {
        onExit.complete(status);
      }
    }

    private void log(String line) {
      try {
        Files.writeString(
            launch.logFile(),
            Instant.now() + " [in-process] " + line + "\n",
            StandardCharsets.UTF_8,
            StandardOpenOption.CREATE,
            StandardOpenOption.APPEND);
      } catch (IOException e) {
        LOG.warn("cannot write pod log {}: {}", launch.logFile(), e.toString());
      }
    }
  }
}
