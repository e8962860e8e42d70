package io.tensorcast.dataplane.write;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.timeout.IdleStateHandler;
import io.tensorcast.dataplane.http.ControlToken;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The put API of a node's data plane ({@link WriteHandler} documents the routes), for processes on
 * the same node: HTTP/1.1 over a unix domain socket (a file in the writes directory that writer
 * pods mount; the kernel makes sure only processes of this node reach it), and optionally over TCP
 * (tests, or a writer that cannot speak to a socket file). Every request needs the write token
 * ({@code Authorization: Bearer}); the control endpoint's read and admin tokens are not accepted
 * here, and the write token is not accepted there.
 *
 * <p>Bodies stream into the page-locked store as they arrive (no request is held in memory but the
 * JSON parts, at most {@value WriteHandler#MAX_JSON_BYTES} bytes); store and seal work runs on a
 * small pool of its own, off the event loop.
 */
public final class WriteServer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(WriteServer.class);

  /** Seconds a connection may stay idle in both directions before it is closed. */
  public static final int IDLE_SECONDS = 120;

  private final EventLoopGroup group;
  private final ExecutorService workers;
  private final List<Channel> channels;
  private final Path socket;

  private WriteServer(
      EventLoopGroup group, ExecutorService workers, List<Channel> channels, Path socket) {
    this.group = group;
    this.workers = workers;
    this.channels = channels;
    this.socket = socket;
  }

  /**
   * Starts listening.
   *
   * @param service the versions
   * @param token the write token every request must carry
   * @param socket unix domain socket file to create (its directory must exist; an old socket file
   *     there is replaced), or null for none
   * @param tcp TCP address to bind as well, or null for none
   * @param actions what {@code POST .../save} runs, or null to answer it 501
   * @throws IllegalStateException if a unix socket is asked for where Netty's epoll transport is
   *     not available
   * @throws InterruptedException if interrupted while binding
   */
  public static WriteServer start(
      WriteService service,
      ControlToken token,
      Path socket,
      InetSocketAddress tcp,
      WriteHandler.Saver actions)
      throws InterruptedException, IOException {
    Objects.requireNonNull(service, "service");
    Objects.requireNonNull(token, "token");
    if (socket == null && tcp == null) {
      throw new IllegalArgumentException(
          "the write API needs a unix socket, a TCP address or both");
    }
    boolean epoll = Epoll.isAvailable();
    if (socket != null && !epoll) {
      throw new IllegalStateException(
          "the write API's unix socket needs Netty's native epoll transport, which is not"
              + " available here: "
              + Epoll.unavailabilityCause());
    }
    EventLoopGroup group = epoll ? new EpollEventLoopGroup(1) : new NioEventLoopGroup(1);
    AtomicInteger n = new AtomicInteger();
    ExecutorService workers =
        Executors.newFixedThreadPool(
            4,
            r -> {
              Thread t = new Thread(r, "write-api-" + n.incrementAndGet());
              t.setDaemon(true);
              return t;
            });
    List<Channel> channels = new ArrayList<>();
    boolean ok = false;
    try {
      ChannelInitializer<Channel> init =
          new ChannelInitializer<>() {
            @Override
            protected void initChannel(Channel c) {
              c.pipeline()
                  .addLast(new IdleStateHandler(true, 0, 0, IDLE_SECONDS, TimeUnit.SECONDS))
                  .addLast(new HttpServerCodec(4096, 8192, 1024 * 1024))
                  .addLast(new WriteHandler(service, token, workers, actions));
            }
          };
      if (socket != null) {
        Files.deleteIfExists(socket);
        Channel ch =
            UnixSocketPaths.through(
                socket,
                path ->
                    bind(
                        group,
                        EpollServerDomainSocketChannel.class,
                        init,
                        new DomainSocketAddress(path.toFile())));
        // Owner and group: writer pods run as the data plane's group (fsGroup), nobody else.
        Files.setPosixFilePermissions(socket, PosixFilePermissions.fromString("rw-rw----"));
        channels.add(ch);
        log.info("write API listening on unix socket {}", socket);
      }
      if (tcp != null) {
        Class<? extends ServerChannel> type =
            epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
        Channel ch = bind(group, type, init, tcp);
        channels.add(ch);
        log.info("write API listening on {}", ch.localAddress());
      }
      ok = true;
      return new WriteServer(group, workers, channels, socket);
    } finally {
      if (!ok) {
        channels.forEach(Channel::close);
        group.shutdownGracefully();
        workers.shutdownNow();
      }
    }
  }

  private static Channel bind(
      EventLoopGroup group,
      Class<? extends ServerChannel> type,
      ChannelInitializer<Channel> init,
      java.net.SocketAddress address)
      throws InterruptedException {
    return new ServerBootstrap()
        .group(group)
        .channel(type)
        .childHandler(init)
        .bind(address)
        .sync()
        .channel();
  }

  /** The unix socket file, or null. */
  public Path socket() {
    return socket;
  }

  @Override
  public void close() {
    for (Channel c : channels) {
      c.close().awaitUninterruptibly();
    }
    group.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly();
    workers.shutdownNow();
    if (socket != null) {
      try {
        Files.deleteIfExists(socket);
      } catch (IOException ignored) {
        // a stale socket file is replaced at the next start
      }
    }
  }
}
