package io.tensorcast.csi;

import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.tensorcast.csi.artifacts.ArtifactSource;
import io.tensorcast.csi.identity.IdentityService;
import io.tensorcast.csi.mount.Mounter;
import io.tensorcast.csi.node.NodeService;
import io.tensorcast.csi.node.PodEvents;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One running node driver: the CSI Identity and Node services on a unix domain socket (gRPC over
 * grpc-netty with Netty's epoll transport), the way the kubelet and node-driver-registrar reach a
 * CSI plugin ({@code unix:///var/lib/kubelet/plugins/csi.tensorcast.io/csi.sock} in the chart).
 * Holds no process-global state: a test may run one per simulated node in one JVM.
 */
public final class CsiDriver implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(CsiDriver.class);

  private final EventLoopGroup group;
  private final Server server;
  private final Path socket;

  private CsiDriver(EventLoopGroup group, Server server, Path socket) {
    this.group = group;
    this.server = server;
    this.socket = socket;
  }

  /**
   * Starts serving on {@code socket} (a stale socket file left by an earlier run is replaced; the
   * parent directory is created).
   *
   * @throws IOException when the socket cannot be bound (the path is longer than the 107 bytes a
   *     unix socket path may have, the directory is not writable, ...)
   * @throws IllegalStateException when Netty's epoll transport cannot load (not Linux x86_64)
   */
  public static CsiDriver start(
      Path socket, DriverConfig config, ArtifactSource artifacts, Mounter mounter, PodEvents events)
      throws IOException {
    if (!Epoll.isAvailable()) {
      throw new IllegalStateException(
          "Netty epoll transport unavailable, needed for the CSI unix socket: "
              + Epoll.unavailabilityCause(),
          Epoll.unavailabilityCause());
    }
    Path abs = socket.toAbsolutePath();
    if (abs.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8).length > 107) {
      throw new IOException(
          "unix socket path " + abs + " is longer than 107 bytes; choose a shorter --endpoint");
    }
    Path dir = abs.getParent();
    if (dir == null) {
      throw new IOException("unix socket path " + abs + " names no file; give --endpoint a file");
    }
    Files.createDirectories(dir);
    Files.deleteIfExists(abs);
    EventLoopGroup group = new EpollEventLoopGroup(2, new DefaultThreadFactory("csi-uds", true));
    try {
      Server server =
          NettyServerBuilder.forAddress(new DomainSocketAddress(abs.toString()))
              .channelType(EpollServerDomainSocketChannel.class)
              .bossEventLoopGroup(group)
              .workerEventLoopGroup(group)
              .addService(new IdentityService(version(), artifacts::synced))
              .addService(new NodeService(config, artifacts, mounter, events, Clock.systemUTC()))
              .build()
              .start();
      LOG.info(
          "CSI driver for node {} serving on {} (store root {}, kubelet root {})",
          config.nodeName(),
          abs,
          config.storeRoot(),
          config.kubeletRoot());
      return new CsiDriver(group, server, abs);
    } catch (IOException | RuntimeException e) {
      group.shutdownGracefully(0, 1, TimeUnit.SECONDS);
      throw e;
    }
  }

  /** The socket this driver serves on. */
  public Path socket() {
    return socket;
  }

  /** The driver's version: the jar's Implementation-Version, or {@code dev}. */
  public static String version() {
    String v = CsiDriver.class.getPackage().getImplementationVersion();
    return v == null ? "dev" : v;
  }

  @Override
  public void close() {
    server.shutdownNow();
    try {
      server.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    group.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
    try {
      Files.deleteIfExists(socket);
    } catch (IOException e) {
      LOG.debug("cannot remove {}: {}", socket, e.toString());
    }
  }
}
