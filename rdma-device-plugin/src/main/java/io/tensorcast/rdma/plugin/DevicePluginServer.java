package io.tensorcast.rdma.plugin;

import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.StatusRuntimeException;
import io.tensorcast.rdma.deviceplugin.v1beta1.RegisterRequest;
import io.tensorcast.rdma.deviceplugin.v1beta1.RegistrationGrpc;
import io.tensorcast.rdma.discovery.RdmaInventory;
import io.tensorcast.rdma.discovery.SysfsRdmaDiscovery;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs the device plugin on a node: serves {@link RdmaDevicePluginService} on its unix socket in
 * the kubelet's device plugin directory, registers it with the kubelet ({@code
 * v1beta1.Registration/Register} on {@code kubelet.sock}), and every poll interval:
 *
 * <ol>
 *   <li>rescans sysfs and feeds the result to the service (health changes reach the kubelet through
 *       {@code ListAndWatch}) and to the inventory listener (node labels);
 *   <li>if its own socket file is gone or replaced (the kubelet deletes every socket in the
 *       directory when it starts), restarts the gRPC server and registers again;
 *   <li>if {@code kubelet.sock} was recreated since the last successful registration (a new kubelet
 *       process), or registration has not yet succeeded, registers again.
 * </ol>
 *
 * A socket file's identity is its inode number plus change time ({@code unix:ino}, {@code
 * unix:ctime}), so a file deleted and created again at the same path counts as new. Registration
 * failures (kubelet not up yet, refused) are logged and retried on the next poll; they never stop
 * the plugin.
 */
public final class DevicePluginServer implements AutoCloseable {

  /** The device plugin API version sent in {@code RegisterRequest.version}. */
  public static final String API_VERSION = "v1beta1";

  private static final Logger LOG = LoggerFactory.getLogger(DevicePluginServer.class);

  private final PluginConfig config;
  private final SysfsRdmaDiscovery discovery;
  private final RdmaDevicePluginService service;
  private final Consumer<RdmaInventory> inventoryListener;
  private final UnixSockets sockets = new UnixSockets();
  private final ScheduledExecutorService loop =
      Executors.newSingleThreadScheduledExecutor(
          r -> {
            Thread t = new Thread(r, "rdma-plugin-poll");
            t.setDaemon(true);
            return t;
          });

  private Server server;
  private Object socketIdentity;
  private Object registeredKubelet;
  private boolean registered;
  private String lastRegisterError;
  private int registrations;

  /**
   * @param inventoryListener called with every scan on the poll thread (e.g. the node labeller);
   *     its exceptions are logged and do not stop polling
   */
  public DevicePluginServer(
      PluginConfig config,
      SysfsRdmaDiscovery discovery,
      Consumer<RdmaInventory> inventoryListener) {
    this.config = config;
    this.discovery = discovery;
    this.inventoryListener = inventoryListener;
    this.service = new RdmaDevicePluginService(config.slotsPerDevice(), config.hostDevRoot());
  }

  /**
   * Scans once, starts the gRPC server, registers if the kubelet is there, and starts polling.
   *
   * @throws IOException when the plugin socket cannot be bound (e.g. the plugin directory is not
   *     mounted or not writable)
   */
  public synchronized void start() throws IOException {
    if (!Files.isDirectory(config.pluginDir())) {
      throw new IOException(
          "device plugin directory "
              + config.pluginDir()
              + " does not exist: mount the kubelet's /var/lib/kubelet/device-plugins there");
    }
    scan();
    startServer();
    registerIfNeeded();
    long ms = config.pollInterval().toMillis();
    loop.scheduleWithFixedDelay(this::pollSafely, ms, ms, TimeUnit.MILLISECONDS);
  }

  /** Number of successful registrations with a kubelet so far. */
  public synchronized int registrations() {
    return registrations;
  }

  private void pollSafely() {
    try {
      poll();
    } catch (RuntimeException e) {
      LOG.error("poll failed; retrying in {}", config.pollInterval(), e);
    }
  }

  /** One poll step (see the class comment). */
  synchronized void poll() {
    scan();
    Object identity = identity(config.socketPath());
    if (!Objects.equals(identity, socketIdentity)) {
      LOG.warn(
          "plugin socket {} was {}; restarting the gRPC server and registering again",
          config.socketPath(),
          identity == null ? "removed" : "replaced");
      try {
        restartServer();
      } catch (IOException e) {
        LOG.error("cannot restart the gRPC server on {}: {}", config.socketPath(), e.toString());
        return;
      }
    }
    registerIfNeeded();
  }

  private void scan() {
    RdmaInventory inventory;
    try {
      inventory = discovery.discover();
    } catch (UncheckedIOException e) {
      LOG.error("sysfs scan under {} failed: {}", discovery.sysRoot(), e.getMessage());
      return;
    }
    service.update(inventory);
    try {
      inventoryListener.accept(inventory);
    } catch (RuntimeException e) {
      LOG.warn("inventory listener failed: {}", e.toString());
    }
  }

  private void startServer() throws IOException {
    server = sockets.startServer(config.socketPath(), service);
    socketIdentity = identity(config.socketPath());
    registered = false;
    LOG.info("serving {} on {}", config.resourceName(), config.socketPath());
  }

  private void restartServer() throws IOException {
    if (server != null) {
      service.completeWatchers();
      UnixSockets.stop(server);
      server = null;
    }
    startServer();
  }

  private void registerIfNeeded() {
    Object kubelet = identity(config.kubeletSocketPath());
    if (kubelet == null) {
      if (registered) {
        LOG.warn(
            "{} disappeared (kubelet stopped?); will register when it is back",
            config.kubeletSocketPath());
        registered = false;
      }
      return;
    }
    if (registered && kubelet.equals(registeredKubelet)) {
      return;
    }
    if (registered) {
      LOG.info(
          "{} was recreated (kubelet restarted); registering again", config.kubeletSocketPath());
    }
    RegisterRequest request =
        RegisterRequest.newBuilder()
            .setVersion(API_VERSION)
            .setEndpoint(config.socketName())
            .setResourceName(config.resourceName())
            .setOptions(RdmaDevicePluginService.options())
            .build();
    ManagedChannel channel = sockets.channel(config.kubeletSocketPath());
    try {
      RegistrationGrpc.newBlockingStub(channel)
          .withDeadlineAfter(5, TimeUnit.SECONDS)
          .register(request);
      registered = true;
      registeredKubelet = kubelet;
      registrations++;
      lastRegisterError = null;
      LOG.info(
          "registered {} (endpoint {}) with the kubelet at {}",
          config.resourceName(),
          config.socketName(),
          config.kubeletSocketPath());
    } catch (StatusRuntimeException e) {
      String error = e.getStatus().toString();
      if (!error.equals(lastRegisterError)) {
        LOG.warn(
            "registration with the kubelet at {} failed ({}); retrying every {}",
            config.kubeletSocketPath(),
            error,
            config.pollInterval());
      }
      lastRegisterError = error;
    } finally {
      UnixSockets.stop(channel);
    }
  }

  /** inode + ctime of a file, or null when it does not exist. */
  static Object identity(Path file) {
    try {
      Map<String, Object> attrs = Files.readAttributes(file, "unix:ino,ctime");
      return attrs.get("ino") + "@" + attrs.get("ctime");
    } catch (NoSuchFileException e) {
      return null;
    } catch (IOException | UnsupportedOperationException e) {
      return null;
    }
  }

  @Override
  public synchronized void close() {
    loop.shutdownNow();
    try {
      loop.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    service.completeWatchers();
    if (server != null) {
      UnixSockets.stop(server);
      server = null;
    }
    sockets.close();
  }
}
