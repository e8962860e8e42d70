package io.tensorcast.rdma.plugin;

import io.grpc.BindableService;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * gRPC over unix domain sockets with grpc-netty and Netty's native epoll transport: the kubelet
 * talks to device plugins only this way. One event loop group serves every server and channel made
 * from an instance.
 */
public final class UnixSockets implements AutoCloseable {

  private final EventLoopGroup group;

  /**
   * @throws IllegalStateException when Netty's epoll native library cannot be loaded (not Linux
   *     x86_64, or a native/Java version mismatch), with Netty's reason
   */
  public UnixSockets() {
    if (!Epoll.isAvailable()) {
      throw new IllegalStateException(
          "Netty epoll transport unavailable, needed for the kubelet's unix sockets: "
              + Epoll.unavailabilityCause(),
          Epoll.unavailabilityCause());
    }
    this.group = new EpollEventLoopGroup(2, new DefaultThreadFactory("rdma-plugin-uds", true));
  }

  /**
   * Starts a gRPC server listening on {@code socket}; a stale file at that path (a socket left by
   * an earlier run) is deleted first.
   *
   * @throws IOException when the socket cannot be bound
   */
  public Server startServer(Path socket, BindableService... services) throws IOException {
    Files.deleteIfExists(socket);
    NettyServerBuilder builder =
        NettyServerBuilder.forAddress(new DomainSocketAddress(socket.toString()))
            .channelType(EpollServerDomainSocketChannel.class)
            .bossEventLoopGroup(group)
            .workerEventLoopGroup(group);
    for (BindableService service : services) {
      builder.addService(service);
    }
    return builder.build().start();
  }

  /** A plaintext channel to the gRPC server on {@code socket}. */
  public ManagedChannel channel(Path socket) {
    return NettyChannelBuilder.forAddress(new DomainSocketAddress(socket.toString()))
        .channelType(EpollDomainSocketChannel.class)
        .eventLoopGroup(group)
        .overrideAuthority("localhost")
        .usePlaintext()
        .build();
  }

  /** Stops {@code server} now and waits up to 5 s for it to release its socket. */
  public static void stop(Server server) {
    server.shutdownNow();
    try {
      server.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Shuts down {@code channel} now and waits up to 5 s. */
  public static void stop(ManagedChannel channel) {
    channel.shutdownNow();
    try {
      channel.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    group.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
  }
}
