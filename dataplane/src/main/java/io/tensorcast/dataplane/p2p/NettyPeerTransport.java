package io.tensorcast.dataplane.p2p;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.timeout.IdleState;
import io.netty.handler.timeout.IdleStateEvent;
import io.netty.handler.timeout.IdleStateHandler;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link PeerTransport} over TCP with Netty (NIO). Frames per {@link FrameCodec}; piece payloads
 * are sent with {@link DefaultFileRegion} from the store file (sendfile: the bytes go from the
 * page-locked tmpfs pages to the socket without passing through the JVM heap).
 *
 * <ul>
 *   <li>Handshake: each side sends HELLO first; a peer whose artifact id, piece size, piece count
 *       or piece-map digest differs gets a REJECT (piece -1) naming the difference and is closed.
 *   <li>Idle: no frame received for {@code idleTimeout} closes the connection; after a third of it
 *       without sending, a KEEPALIVE is sent.
 *   <li>Dialled peers are reconnected after a failure or close with exponential back-off (100 ms
 *       doubling to 5 s, reset after a successful handshake).
 *   <li>Receive memory: the decoder holds at most one frame ({@link FrameCodec#maxFrameLength}); a
 *       PIECE's payload stays a slice of it until the listener releases it.
 * </ul>
 */
public final class NettyPeerTransport implements PeerTransport {
  private static final Logger log = LoggerFactory.getLogger(NettyPeerTransport.class);
  private static final long BACKOFF_MIN_MS = 100;
  private static final long BACKOFF_MAX_MS = 5_000;

  private final Frame.Hello local;
  private final int maxFrameLength;
  private final Duration idleTimeout;
  private final Listener listener;
  private final EventLoopGroup group;
  private final Channel server;
  private final Map<String, Dial> dials = new ConcurrentHashMap<>();
  private volatile boolean closed;

  private final class Dial {
    final String peerId;
    final InetSocketAddress address;
    volatile Channel channel;
    volatile boolean wanted = true;
    long backoffMs = BACKOFF_MIN_MS;

    Dial(String peerId, InetSocketAddress address) {
      this.peerId = peerId;
      this.address = address;
    }
  }

  private NettyPeerTransport(
      Frame.Hello local,
      int maxFrameLength,
      Duration idleTimeout,
      Listener listener,
      EventLoopGroup group,
      InetSocketAddress listen)
      throws InterruptedException {
    this.local = local;
    this.maxFrameLength = maxFrameLength;
    this.idleTimeout = idleTimeout;
    this.listener = listener;
    this.group = group;
    this.server =
        new ServerBootstrap()
            .group(group)
            .channel(NioServerSocketChannel.class)
            .childOption(ChannelOption.TCP_NODELAY, true)
            .childHandler(initializer(null))
            .bind(listen)
            .sync()
            .channel();
  }

  /**
   * Binds {@code listen} and starts accepting peers.
   *
   * @param local this member's HELLO
   * @param idleTimeout close a connection after this long without a frame
   * @throws InterruptedException if interrupted while binding
   * @throws IllegalStateException (caused by a {@link java.net.BindException}) when the address is
   *     taken
   */
  public static NettyPeerTransport start(
      InetSocketAddress listen, Frame.Hello local, Duration idleTimeout, Listener listener)
      throws InterruptedException {
    EventLoopGroup group = new NioEventLoopGroup(2);
    try {
      NettyPeerTransport t =
          new NettyPeerTransport(
              local,
              FrameCodec.maxFrameLength(local.pieceSize(), local.pieceCount()),
              idleTimeout,
              listener,
              group,
              listen);
      log.info("peer transport of {} listening on {}", local.peerId(), t.listenAddress());
      return t;
    } catch (InterruptedException | RuntimeException e) {
      group.shutdownGracefully();
      throw e;
    } catch (Exception e) {
      // Netty's sync() rethrows the bind's checked exception (a BindException) undeclared: it
      // escaped every RuntimeException handler up to the loading thread, which died silently.
      group.shutdownGracefully();
      throw new IllegalStateException("cannot listen on " + listen + ": " + e, e);
    }
  }

  private ChannelInitializer<SocketChannel> initializer(Dial dial) {
    return new ChannelInitializer<>() {
      @Override
      protected void initChannel(SocketChannel ch) {
        long idle = idleTimeout.toMillis();
        ch.pipeline()
            .addLast(new IdleStateHandler(idle, Math.max(1, idle / 3), 0, TimeUnit.MILLISECONDS))
            .addLast(new FrameCodec.Decoder(maxFrameLength, local.pieceCount()))
            .addLast(new Handler(dial));
      }
    };
  }

  @Override
  public InetSocketAddress listenAddress() {
    return (InetSocketAddress) server.localAddress();
  }

  @Override
  public void dial(String peerId, InetSocketAddress address) {
    Dial d = new Dial(peerId, address);
    Dial old = dials.put(peerId, d);
    if (old != null) {
      old.wanted = false;
      Channel c = old.channel;
      if (c != null) {
        c.close();
      }
    }
    connect(d);
  }

  private void connect(Dial d) {
    if (closed || !d.wanted) {
      return;
    }
    new Bootstrap()
        .group(group)
        .channel(NioSocketChannel.class)
        .option(ChannelOption.TCP_NODELAY, true)
        .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 5_000)
        .handler(initializer(d))
        .connect(d.address)
        .addListener(
            (ChannelFutureListener)
                f -> {
                  if (f.isSuccess()) {
                    d.channel = f.channel();
                    f.channel().closeFuture().addListener(c -> retryLater(d));
                  } else {
                    log.debug("connecting to {} at {} failed: {}", d.peerId, d.address, f.cause());
                    retryLater(d);
                  }
                });
  }

  private void retryLater(Dial d) {
    d.channel = null;
    if (closed || !d.wanted || dials.get(d.peerId) != d) {
      return;
    }
    long delay = d.backoffMs;
    d.backoffMs = Math.min(BACKOFF_MAX_MS, d.backoffMs * 2);
    try {
      group.schedule(() -> connect(d), delay, TimeUnit.MILLISECONDS);
    } catch (RuntimeException e) {
      // the group is shutting down
    }
  }

  @Override
  public void forget(String peerId) {
    Dial d = dials.remove(peerId);
    if (d != null) {
      d.wanted = false;
      Channel c = d.channel;
      if (c != null) {
        c.close();
      }
    }
  }

  @Override
  public void close() {
    closed = true;
    for (Dial d : dials.values()) {
      d.wanted = false;
    }
    server.close().awaitUninterruptibly();
    group.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly();
  }

  /**
   * One connection's sending side. Control frames are written at once; pieces go to Netty one at a
   * time: the next is handed over only when the last one's bytes were all written to the socket,
   * and the rest wait here. A HAVE, READING or REQUEST frame therefore waits behind at most one
   * piece, not behind every piece a peer asked for: with 2-4 requested 4 MiB pieces queued on each
   * connection, announcements and requests arrived seconds late at 100 Mbit/s and the swarm's relay
   * lagged behind the source reads (bench/p2p-netns.sh). The socket still never runs dry: the next
   * piece is written while the kernel's send buffer drains the last one.
   */
  private static final class Connection implements PeerConnection {
    final String peerId;
    final Channel channel;

    /** Pieces waiting for the one on the wire; touched only on the channel's event loop. */
    private final ArrayDeque<PendingPiece> pieces = new ArrayDeque<>();

    private boolean pieceOnWire;

    private record PendingPiece(int piece, Path file, long offset, int length, Runnable sent) {}

    Connection(String peerId, Channel channel) {
      this.peerId = peerId;
      this.channel = channel;
    }

    @Override
    public long pieceProgressAt() {
      FrameCodec.Decoder d = channel.pipeline().get(FrameCodec.Decoder.class);
      return d == null ? 0 : d.pieceProgressAt();
    }

    @Override
    public String peerId() {
      return peerId;
    }

    @Override
    public void send(Frame frame) {
      channel.writeAndFlush(FrameCodec.encode(frame, channel.alloc()));
    }

    @Override
    public void sendPiece(int piece, Path file, long offset, int length, Runnable sent) {
      if (!channel.eventLoop().inEventLoop()) {
        channel.eventLoop().execute(() -> sendPiece(piece, file, offset, length, sent));
        return;
      }
      pieces.add(new PendingPiece(piece, file, offset, length, sent));
      if (!pieceOnWire) {
        writeNextPiece();
      }
    }

    /** On the event loop: hands the next waiting piece to Netty, header and body together. */
    private void writeNextPiece() {
      PendingPiece p = pieces.poll();
      if (p == null) {
        return;
      }
      if (!channel.isActive()) {
        pieces.clear(); // closed: nothing more is sent, and the swarm requeues what was asked
        return;
      }
      pieceOnWire = true;
      channel.write(FrameCodec.pieceHeader(channel.alloc(), p.piece(), p.length()));
      channel
          .writeAndFlush(new DefaultFileRegion(p.file().toFile(), p.offset(), p.length()))
          .addListener(
              f -> {
                pieceOnWire = false;
                if (f.isSuccess()) {
                  p.sent().run();
                  writeNextPiece();
                } else {
                  pieces.clear();
                }
              });
    }

    @Override
    public void close(String why) {
      log.info("closing the connection to peer {}: {}", peerId, why);
      channel.close();
    }

    @Override
    public String toString() {
      return peerId + "@" + channel.remoteAddress();
    }
  }

  private final class Handler extends ChannelInboundHandlerAdapter {
    private final Dial dial;
    private Connection connection;

    Handler(Dial dial) {
      this.dial = dial;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
      ctx.writeAndFlush(FrameCodec.encode(local, ctx.alloc()));
      ctx.fireChannelActive();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      Frame f = (Frame) msg;
      if (connection == null) {
        handshake(ctx, f);
        return;
      }
      if (f instanceof Frame.KeepAlive) {
        return;
      }
      listener.received(connection, f);
    }

    private void handshake(ChannelHandlerContext ctx, Frame f) {
      if (f instanceof Frame.Piece p) {
        p.payload().release();
      }
      String refusal = null;
      if (f instanceof Frame.Reject r) {
        log.warn("peer at {} refused us: {}", ctx.channel().remoteAddress(), r.reason());
        ctx.close();
        return;
      }
      if (!(f instanceof Frame.Hello h)) {
        refusal = "expected HELLO first, got " + FrameCodec.typeName(f.type());
      } else if (h.version() != FrameCodec.VERSION) {
        refusal = "protocol version " + h.version() + " is not " + FrameCodec.VERSION;
      } else if (!h.artifactId().equals(local.artifactId())) {
        refusal =
            "artifact '" + h.artifactId() + "' is not this member's '" + local.artifactId() + "'";
      } else if (h.pieceSize() != local.pieceSize()) {
        refusal =
            "piece size "
                + h.pieceSize()
                + " differs from this member's "
                + local.pieceSize()
                + " (--piece-size must be the same on every member)";
      } else if (h.pieceCount() != local.pieceCount()
          || !Arrays.equals(h.mapDigest(), local.mapDigest())) {
        refusal =
            "piece map differs (the files listed, their sizes or their versions differ): "
                + h.pieceCount()
                + " pieces vs "
                + local.pieceCount();
      } else if (h.peerId().equals(local.peerId())) {
        refusal = "peer id '" + h.peerId() + "' is this member's own id";
      } else if (dial != null && !h.peerId().equals(dial.peerId)) {
        refusal = "dialled peer '" + dial.peerId + "' but it says it is '" + h.peerId() + "'";
      }
      if (refusal != null) {
        log.warn("refusing peer at {}: {}", ctx.channel().remoteAddress(), refusal);
        ctx.writeAndFlush(FrameCodec.encode(new Frame.Reject(-1, refusal), ctx.alloc()))
            .addListener(ChannelFutureListener.CLOSE);
        return;
      }
      Frame.Hello h = (Frame.Hello) f;
      if (dial != null) {
        dial.backoffMs = BACKOFF_MIN_MS;
      }
      connection = new Connection(h.peerId(), ctx.channel());
      listener.connected(connection);
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
      if (evt instanceof IdleStateEvent e) {
        if (e.state() == IdleState.READER_IDLE) {
          log.info(
              "no frame from peer {} for {} ms; closing",
              connection != null ? connection.peerId : ctx.channel().remoteAddress(),
              idleTimeout.toMillis());
          ctx.close();
        } else if (e.state() == IdleState.WRITER_IDLE) {
          ctx.writeAndFlush(FrameCodec.encode(new Frame.KeepAlive(), ctx.alloc()));
        }
      }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      if (connection != null) {
        listener.disconnected(connection);
      }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      log.warn(
          "peer connection {} failed: {}",
          connection != null ? connection : ctx.channel().remoteAddress(),
          cause.getMessage());
      ctx.close();
    }
  }

  @Override
  public String toString() {
    return "NettyPeerTransport[" + local.peerId() + "@" + listenAddress() + "]";
  }
}
