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
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollChannelOption;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.timeout.IdleState;
import io.netty.handler.timeout.IdleStateEvent;
import io.netty.handler.timeout.IdleStateHandler;
import io.tensorcast.api.wire.Membership;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link PeerTransport} over TCP with Netty (NIO). Frames per {@link FrameCodec}; piece payloads
 * are sent with {@link DefaultFileRegion} from the store file (sendfile: the bytes go from the
 * page-locked tmpfs pages to the socket without passing through the JVM heap).
 *
 * <ul>
 *   <li>Admission: a connection is accepted only from an IP address the current membership
 *       publishes for some member, and only while fewer than {@value #MAX_PENDING_HANDSHAKES}
 *       connections (and {@value #MAX_PENDING_PER_ADDRESS} from that address) are still in their
 *       handshake; anything else is closed at once without reading from it.
 *   <li>Handshake ({@link PeerHandshake}): HELLO then AUTH each way, frames of at most {@value
 *       FrameCodec#PRE_AUTH_MAX_FRAME} bytes, within the handshake timeout (the idle timeout, at
 *       least 1 s and at most 10 s). A refused HELLO gets a REJECT (piece -1) naming the
 *       difference; a failed AUTH closes the connection and makes the next handshake read the peer
 *       secret file again (a rotated secret). Dialled connections leave from this member's
 *       published address, as the accepting side checks it.
 *   <li>After the handshake every frame is sealed ({@link FrameSeal}); a frame whose tag does not
 *       verify closes the connection.
 *   <li>Idle: no frame received for {@code idleTimeout} closes the connection; after a third of it
 *       without sending, a KEEPALIVE is sent.
 *   <li>Dialled peers are reconnected after a failure or close with exponential back-off (100 ms
 *       doubling to 5 s or a quarter of the idle timeout, whichever is less; reset after a
 *       successful handshake).
 *   <li>Receive memory: the decoder holds at most one frame ({@link FrameCodec#maxFrameLength}
 *       after the handshake, {@value FrameCodec#PRE_AUTH_MAX_FRAME} bytes before); a PIECE's
 *       payload stays a slice of it until the listener releases it.
 * </ul>
 */
public final class NettyPeerTransport implements PeerTransport {

  /**
   * Netty's native epoll transport is used where it loads (Linux): only it sets {@link
   * #NOTSENT_LOWAT}. Elsewhere the NIO transport carries the same protocol without that cap.
   */
  static final boolean EPOLL = Epoll.isAvailable();

  /**
   * Bytes a peer socket takes from this member beyond what is already on the wire
   * (TCP_NOTSENT_LOWAT). One connection carries both directions: this member's REQUESTs and HAVEs
   * to a peer queue behind the pieces it is sending that peer. Without the cap the kernel takes
   * megabytes of piece data (the send buffer grows with the congestion window), so a REQUEST waited
   * half a second at 100 Mbit/s and four pieces in flight could not keep the peer's uplink busy;
   * the member receiving less of the origin then also received less from its peer (bench/README.md,
   * "Unsent bytes capped on the peer sockets"). With the cap a frame waits behind at most the rest
   * of the piece being written and this many bytes; the wire stays full, since the kernel asks for
   * more once the unsent bytes fall below it (about 2 ms of a 1 Gbit/s link).
   */
  static final long NOTSENT_LOWAT = 256 * 1024;

  private static final Logger log = LoggerFactory.getLogger(NettyPeerTransport.class);
  private static final long BACKOFF_MIN_MS = 100;
  private static final long BACKOFF_MAX_MS = 5_000;
  private static final long REFUSAL_LOG_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(10);

  /** Accepted connections still in their handshake, at most; more are closed at once. */
  public static final int MAX_PENDING_HANDSHAKES = 64;

  /** Accepted connections from one IP address still in their handshake, at most. */
  public static final int MAX_PENDING_PER_ADDRESS = 4;

  private static final SecureRandom RANDOM = new SecureRandom();

  /**
   * Who may connect and how they prove it.
   *
   * @param secret the artifact's peer secret
   * @param membership the current membership (null while there is none): who may connect, from
   *     which address, and the epoch both sides must share
   */
  public record Auth(PeerSecret secret, Supplier<Membership> membership) {
    public Auth {
      Objects.requireNonNull(secret, "secret");
      Objects.requireNonNull(membership, "membership");
    }
  }

  private final Frame.Hello local;
  private final Auth auth;
  private final int maxFrameLength;
  private final Duration idleTimeout;
  private final Duration handshakeTimeout;
  private final Listener listener;
  private final EventLoopGroup group;
  private final Channel server;
  private final Map<String, Dial> dials = new ConcurrentHashMap<>();
  private final AtomicInteger pending = new AtomicInteger();
  private final Map<InetAddress, AtomicInteger> pendingByAddress = new ConcurrentHashMap<>();
  private final Map<String, AtomicLong> refusalLogged = new ConcurrentHashMap<>();
  private final Map<String, AtomicLong> refusalsSince = new ConcurrentHashMap<>();
  private volatile boolean closed;

  /**
   * Connections that passed the handshake are held, not reported to the listener, until {@link
   * #open()}; guarded by this.
   */
  private boolean holding;

  /** The held connections' handlers, reported by {@link #open()}; guarded by this. */
  private final List<Handler> held = new ArrayList<>();

  private static final class Dial {
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
      Auth auth,
      int maxFrameLength,
      Duration idleTimeout,
      Listener listener,
      EventLoopGroup group,
      InetSocketAddress listen,
      boolean holding)
      throws InterruptedException {
    this.local = local;
    this.holding = holding;
    this.auth = auth;
    this.maxFrameLength = maxFrameLength;
    this.idleTimeout = idleTimeout;
    this.handshakeTimeout =
        Duration.ofMillis(Math.max(1_000, Math.min(10_000, idleTimeout.toMillis())));
    this.listener = listener;
    this.group = group;
    ServerBootstrap sb =
        new ServerBootstrap()
            .group(group)
            .channel(EPOLL ? EpollServerSocketChannel.class : NioServerSocketChannel.class)
            .childOption(ChannelOption.TCP_NODELAY, true)
            .childHandler(initializer(null));
    if (EPOLL) {
      sb.childOption(EpollChannelOption.TCP_NOTSENT_LOWAT, NOTSENT_LOWAT);
    }
    this.server = sb.bind(listen).sync().channel();
  }

  /**
   * Binds {@code listen} and starts accepting peers.
   *
   * @param local this member's HELLO (its epoch and nonce are replaced per connection)
   * @param idleTimeout close a connection after this long without a frame
   * @param auth the peer secret and the membership that admit peers
   * @throws InterruptedException if interrupted while binding
   * @throws IllegalStateException (caused by a {@link java.net.BindException}) when the address is
   *     taken
   */
  public static NettyPeerTransport start(
      InetSocketAddress listen,
      Frame.Hello local,
      Duration idleTimeout,
      Listener listener,
      Auth auth)
      throws InterruptedException {
    return start(listen, local, idleTimeout, listener, auth, false);
  }

  /**
   * As {@link #start(InetSocketAddress, Frame.Hello, Duration, Listener, Auth)}; when {@code held},
   * connections are accepted, dialled and handshaken at once but reported to {@code listener} only
   * from {@link #open()} on: a member starts its transport while it still allocates its copy, and
   * its swarm sees its peers once it can take part. A held connection reads nothing after its
   * handshake (the frames its peer sends wait in the socket).
   */
  public static NettyPeerTransport start(
      InetSocketAddress listen,
      Frame.Hello local,
      Duration idleTimeout,
      Listener listener,
      Auth auth,
      boolean held)
      throws InterruptedException {
    EventLoopGroup group = EPOLL ? new EpollEventLoopGroup(2) : new NioEventLoopGroup(2);
    try {
      NettyPeerTransport t =
          new NettyPeerTransport(
              local,
              auth,
              FrameCodec.maxFrameLength(local.pieceSize(), local.pieceCount()),
              idleTimeout,
              listener,
              group,
              listen,
              held);
      log.info(
          "peer transport of {} listening on {} ({}; peer secret fingerprint {})",
          local.peerId(),
          t.listenAddress(),
          EPOLL
              ? "epoll, unsent bytes per socket capped at " + NOTSENT_LOWAT / 1024 + " KiB"
              : "NIO",
          auth.secret().fingerprint());
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
        FrameCodec.Decoder decoder =
            FrameCodec.Decoder.forHandshake(maxFrameLength, local.pieceCount());
        FrameCodec.Encoder encoder = new FrameCodec.Encoder();
        ch.pipeline()
            .addLast(new IdleStateHandler(idle, Math.max(1, idle / 3), 0, TimeUnit.MILLISECONDS))
            .addLast(decoder)
            .addLast(encoder)
            .addLast(new Handler(dial, decoder, encoder));
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
    Bootstrap b =
        new Bootstrap()
            .group(group)
            .channel(EPOLL ? EpollSocketChannel.class : NioSocketChannel.class)
            .option(ChannelOption.TCP_NODELAY, true)
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 5_000)
            .handler(initializer(d));
    if (EPOLL) {
      b.option(EpollChannelOption.TCP_NOTSENT_LOWAT, NOTSENT_LOWAT);
    }
    InetSocketAddress from = publishedSelf();
    if (from != null) {
      b.localAddress(from);
    }
    b.connect(d.address)
        .addListener(
            (ChannelFutureListener)
                f -> {
                  if (f.isSuccess()) {
                    d.channel = f.channel();
                    f.channel().closeFuture().addListener(c -> retryLater(d));
                  } else {
                    if (f.cause() instanceof java.net.BindException && from != null) {
                      log.warn(
                          "cannot dial {} from this member's published address {}: {}; peers"
                              + " refuse connections from any other address",
                          d.peerId,
                          from.getAddress().getHostAddress(),
                          f.cause().getMessage());
                    } else {
                      log.debug(
                          "connecting to {} at {} failed: {}", d.peerId, d.address, f.cause());
                    }
                    retryLater(d);
                  }
                });
  }

  /**
   * This member's published IP address (port 0), to dial from: the accepting side checks that a
   * connection comes from the address the membership publishes for its id, and on a host with
   * several addresses the kernel would otherwise pick one. Null when the membership does not list
   * this member or publishes a wildcard.
   */
  private InetSocketAddress publishedSelf() {
    Membership m = auth.membership().get();
    Membership.Member me = m == null ? null : m.member(local.peerId());
    if (me == null
        || me.address().getAddress() == null
        || me.address().getAddress().isAnyLocalAddress()) {
      return null;
    }
    return new InetSocketAddress(me.address().getAddress(), 0);
  }

  /**
   * The longest wait between dials: 5 s, but at most a quarter of the idle (peer) timeout, so a
   * member that starts listening later than this one is connected well before the peer timeout
   * would count it lost and re-split its block (a block re-read by its reader once it is back).
   */
  private long maxBackoffMs() {
    return Math.max(BACKOFF_MIN_MS, Math.min(BACKOFF_MAX_MS, idleTimeout.toMillis() / 4));
  }

  private void retryLater(Dial d) {
    d.channel = null;
    if (closed || !d.wanted || dials.get(d.peerId) != d) {
      return;
    }
    long delay = d.backoffMs;
    d.backoffMs = Math.min(maxBackoffMs(), d.backoffMs * 2);
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
  public void open() {
    List<Handler> hs;
    synchronized (this) {
      if (!holding) {
        return;
      }
      holding = false;
      hs = new ArrayList<>(held);
      held.clear();
    }
    for (Handler h : hs) {
      h.ctx.executor().execute(h::release);
    }
  }

  /** Holds {@code h}'s handshaken connection until {@link #open()}; false once it is open. */
  private synchronized boolean hold(Handler h) {
    if (holding) {
      held.add(h);
    }
    return holding;
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
   * Reports a refused connection to the listener and logs it: the first of each kind at once, then
   * at most one line per kind every 10 s with the number refused meanwhile, so a flood of
   * connections cannot flood the log.
   */
  private void refused(String kind, String message) {
    listener.refused(kind);
    long now = System.nanoTime();
    AtomicLong last =
        refusalLogged.computeIfAbsent(
            kind, k -> new AtomicLong(now - 2 * REFUSAL_LOG_INTERVAL_NANOS));
    AtomicLong since = refusalsSince.computeIfAbsent(kind, k -> new AtomicLong());
    long prev = last.get();
    if (now - prev >= REFUSAL_LOG_INTERVAL_NANOS && last.compareAndSet(prev, now)) {
      long more = since.getAndSet(0);
      log.warn(
          "peer port of {}: {}{}",
          local.peerId(),
          message,
          more > 0 ? " (" + more + " more refused like this in the last 10 s)" : "");
    } else {
      since.incrementAndGet();
    }
  }

  /**
   * One connection's sending side. Control frames are written at once; pieces go to Netty one at a
   * time: the next is handed over only when the last one's bytes were all written to the socket,
   * and the rest wait here. A HAVE, READING or REQUEST frame therefore waits behind at most one
   * piece, not behind every piece a peer asked for: with 2-4 requested 4 MiB pieces queued on each
   * connection, announcements and requests arrived seconds late at 100 Mbit/s and the swarm's relay
   * lagged behind the source reads (bench/p2p-netns.sh). Besides that piece, it waits only behind
   * the bytes the kernel holds unsent, which {@link #NOTSENT_LOWAT} caps on the epoll transport.
   * The socket still never runs dry: the next piece is written while the kernel's send buffer
   * drains the last one.
   */
  static final class Connection implements PeerConnection {
    final String peerId;
    final Channel channel;
    final FrameCodec.Decoder decoder;

    /** Pieces waiting for the one on the wire; touched only on the channel's event loop. */
    private final ArrayDeque<PendingPiece> pieces = new ArrayDeque<>();

    private boolean pieceOnWire;

    private record PendingPiece(
        int piece, Path file, long offset, int length, byte[] sha256, Runnable sent) {}

    Connection(String peerId, Channel channel, FrameCodec.Decoder decoder) {
      this.peerId = peerId;
      this.channel = channel;
      this.decoder = decoder;
    }

    @Override
    public long pieceProgressAt() {
      return decoder.pieceProgressAt();
    }

    /** The socket's TCP_NOTSENT_LOWAT as the kernel reports it; -1 on the NIO transport. */
    long unsentLowWatermark() {
      return channel instanceof EpollSocketChannel e
          ? e.config().getOption(EpollChannelOption.TCP_NOTSENT_LOWAT)
          : -1;
    }

    @Override
    public String peerId() {
      return peerId;
    }

    @Override
    public void send(Frame frame) {
      channel.writeAndFlush(frame);
    }

    @Override
    public boolean authentic(Frame.Piece piece, byte[] sha256) {
      FrameSeal seal = decoder.receiveSeal();
      if (seal == null || piece.tag() == null) {
        return false;
      }
      byte[] expected =
          FrameSeal.pieceTag(
              seal.key(), piece.seq(), piece.piece(), piece.payload().readableBytes(), sha256);
      return PeerHandshake.verify(expected, piece.tag());
    }

    @Override
    public void sendPiece(
        int piece, Path file, long offset, int length, byte[] sha256, Runnable sent) {
      if (!channel.eventLoop().inEventLoop()) {
        channel.eventLoop().execute(() -> sendPiece(piece, file, offset, length, sha256, sent));
        return;
      }
      pieces.add(new PendingPiece(piece, file, offset, length, sha256, sent));
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
      channel.write(new FrameCodec.PieceHeader(p.piece(), p.length(), p.sha256()));
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
    private final FrameCodec.Decoder decoder;
    private final FrameCodec.Encoder encoder;
    private InetAddress pendingFrom;
    private ScheduledFuture<?> timeout;
    private Frame.Hello sent;
    private Frame.Hello received;
    private byte[] expectedAuth;
    private Connection connection;
    private ChannelHandlerContext ctx;

    /**
     * The connection was reported to the listener ({@link #open()}, or not held). Written and read
     * on the channel's event loop; volatile for the checkers' sake.
     */
    private volatile boolean reported;

    /** Frames that arrived on a held connection before it was reported. */
    private final ArrayDeque<Frame> early = new ArrayDeque<>();

    Handler(Dial dial, FrameCodec.Decoder decoder, FrameCodec.Encoder encoder) {
      this.dial = dial;
      this.decoder = decoder;
      this.encoder = encoder;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
      Membership m = auth.membership().get();
      if (dial == null && !admit(ctx, m)) {
        ctx.close();
        return;
      }
      timeout =
          ctx.executor()
              .schedule(
                  () -> {
                    if (connection == null && ctx.channel().isActive()) {
                      refused(
                          "handshake-timeout",
                          "closing the connection from "
                              + ctx.channel().remoteAddress()
                              + ": no authenticated handshake within "
                              + handshakeTimeout.toMillis()
                              + " ms");
                      ctx.close();
                    }
                  },
                  handshakeTimeout.toMillis(),
                  TimeUnit.MILLISECONDS);
      byte[] nonce = new byte[Frame.NONCE_BYTES];
      RANDOM.nextBytes(nonce);
      sent =
          new Frame.Hello(
              local.version(),
              local.artifactId(),
              local.peerId(),
              m == null ? "" : m.epoch(),
              local.pieceSize(),
              local.pieceCount(),
              local.mapDigest(),
              nonce);
      ctx.writeAndFlush(sent);
      ctx.fireChannelActive();
    }

    /**
     * Whether an accepted connection may start a handshake: from an address the membership
     * publishes, within the caps on handshakes in progress. Counts it as pending when it may.
     */
    private boolean admit(ChannelHandlerContext ctx, Membership m) {
      InetSocketAddress remote = (InetSocketAddress) ctx.channel().remoteAddress();
      InetAddress ip = remote.getAddress();
      if (m == null) {
        refused(
            "no-membership",
            "refusing a peer connection from " + ip.getHostAddress() + ": no membership yet");
        return false;
      }
      if (!PeerHandshake.publishes(m, ip)) {
        refused(
            "not-a-member-address",
            "refusing a peer connection from "
                + ip.getHostAddress()
                + ": no member of membership "
                + m.epoch()
                + " is published at that address");
        return false;
      }
      AtomicInteger fromIp = pendingByAddress.computeIfAbsent(ip, k -> new AtomicInteger());
      if (pending.incrementAndGet() > MAX_PENDING_HANDSHAKES
          || fromIp.incrementAndGet() > MAX_PENDING_PER_ADDRESS) {
        pending.decrementAndGet();
        fromIp.decrementAndGet();
        refused(
            "too-many-handshakes",
            "refusing a peer connection from "
                + ip.getHostAddress()
                + ": "
                + MAX_PENDING_HANDSHAKES
                + " handshakes in progress in all, or "
                + MAX_PENDING_PER_ADDRESS
                + " from that address, is the limit");
        return false;
      }
      pendingFrom = ip;
      return true;
    }

    /** Releases this connection's place among the handshakes in progress, once. */
    private void handshakeOver() {
      if (timeout != null) {
        timeout.cancel(false);
      }
      InetAddress ip = pendingFrom;
      if (ip != null) {
        pendingFrom = null;
        pending.decrementAndGet();
        AtomicInteger n = pendingByAddress.get(ip);
        if (n != null && n.decrementAndGet() <= 0) {
          pendingByAddress.remove(ip, n);
        }
      }
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      Frame f = (Frame) msg;
      if (connection != null) {
        if (f instanceof Frame.KeepAlive) {
          return;
        }
        if (f instanceof Frame.Hello || f instanceof Frame.Auth) {
          connection.close("a second " + FrameCodec.typeName(f.type()) + " on an open connection");
          return;
        }
        if (!reported) {
          early.add(f);
          return;
        }
        listener.received(connection, f);
        return;
      }
      if (f instanceof Frame.Reject r) {
        log.warn("peer at {} refused us: {}", ctx.channel().remoteAddress(), r.reason());
        ctx.close();
        return;
      }
      if (received == null) {
        hello(ctx, f);
      } else {
        authenticate(ctx, f);
      }
    }

    private void hello(ChannelHandlerContext ctx, Frame f) {
      if (!(f instanceof Frame.Hello h)) {
        refuse(ctx, "handshake", "expected HELLO first, got " + FrameCodec.typeName(f.type()));
        return;
      }
      Membership m = auth.membership().get();
      InetAddress from =
          dial == null ? ((InetSocketAddress) ctx.channel().remoteAddress()).getAddress() : null;
      String refusal = PeerHandshake.refusal(sent, h, m, from, dial == null ? null : dial.peerId);
      Membership.Member me = m == null ? null : m.member(local.peerId());
      if (refusal == null && me == null) {
        refusal = "this member '" + local.peerId() + "' is not in its own membership " + m.epoch();
      }
      if (refusal != null) {
        refuse(ctx, "hello", refusal);
        if (PeerHandshake.otherListing(sent, h)) {
          listener.otherListing(h.peerId());
        }
        return;
      }
      received = h;
      boolean dialer = dial != null;
      Membership.Member them = m.member(h.peerId());
      String dialerAddress = dialer ? me.hostPort() : them.hostPort();
      String acceptorAddress = dialer ? them.hostPort() : me.hostPort();
      byte[] secret = auth.secret().key();
      byte[] transcript =
          dialer ? PeerHandshake.transcript(sent, h) : PeerHandshake.transcript(h, sent);
      expectedAuth =
          PeerHandshake.authTag(secret, transcript, !dialer, dialerAddress, acceptorAddress);
      decoder.openAfterAuth(
          new FrameSeal(
              PeerHandshake.frameKey(secret, transcript, !dialer, dialerAddress, acceptorAddress)));
      encoder.sealAfterAuth(
          new FrameSeal(
              PeerHandshake.frameKey(secret, transcript, dialer, dialerAddress, acceptorAddress)));
      ctx.writeAndFlush(
          new Frame.Auth(
              PeerHandshake.authTag(secret, transcript, dialer, dialerAddress, acceptorAddress)));
    }

    private void authenticate(ChannelHandlerContext ctx, Frame f) {
      if (!(f instanceof Frame.Auth a) || !PeerHandshake.verify(expectedAuth, a.tag())) {
        auth.secret().recheckNow();
        refused(
            "auth",
            "peer '"
                + received.peerId()
                + "' at "
                + ctx.channel().remoteAddress()
                + " failed authentication: its AUTH does not match this member's peer secret"
                + " (fingerprint "
                + auth.secret().fingerprint()
                + "); it does not hold the artifact's secret, or one side has not seen a rotated"
                + " secret yet (the file is read again before the next handshake); closing");
        ctx.close();
        return;
      }
      handshakeOver();
      if (dial != null) {
        dial.backoffMs = BACKOFF_MIN_MS;
      }
      connection = new Connection(received.peerId(), ctx.channel(), decoder);
      this.ctx = ctx;
      if (hold(this)) {
        ctx.channel().config().setAutoRead(false);
        return;
      }
      reported = true;
      listener.connected(connection);
    }

    /** On the channel's event loop: reports a held connection and the frames it already got. */
    private void release() {
      if (reported || !ctx.channel().isActive()) {
        return;
      }
      reported = true;
      listener.connected(connection);
      for (Frame f = early.poll(); f != null; f = early.poll()) {
        listener.received(connection, f);
      }
      ctx.channel().config().setAutoRead(true);
      ctx.read();
    }

    private void refuse(ChannelHandlerContext ctx, String kind, String why) {
      refused(kind, "refusing the peer at " + ctx.channel().remoteAddress() + ": " + why);
      ctx.writeAndFlush(new Frame.Reject(-1, why)).addListener(ChannelFutureListener.CLOSE);
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
      if (evt instanceof IdleStateEvent e) {
        if (e.state() == IdleState.READER_IDLE && connection != null && !reported) {
          // Held: it reads nothing until open(), so no frame is no sign of a lost peer. The
          // transport's close ends it if the fill never opens it.
          return;
        }
        if (e.state() == IdleState.READER_IDLE) {
          log.info(
              "no frame from peer {} for {} ms; closing",
              connection != null ? connection.peerId : ctx.channel().remoteAddress(),
              idleTimeout.toMillis());
          ctx.close();
        } else if (e.state() == IdleState.WRITER_IDLE && connection != null) {
          ctx.writeAndFlush(new Frame.KeepAlive());
        }
      }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      handshakeOver();
      if (connection != null && reported) {
        listener.disconnected(connection);
      }
      for (Frame f = early.poll(); f != null; f = early.poll()) {
        if (f instanceof Frame.Piece p) {
          p.payload().release();
        }
      }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      Throwable frameError = cause instanceof FrameException ? cause : cause.getCause();
      if (connection == null && frameError instanceof FrameException fe) {
        refused(
            "handshake",
            "refusing the peer at " + ctx.channel().remoteAddress() + ": " + fe.getMessage());
      } else {
        log.warn(
            "peer connection {} failed: {}",
            connection != null ? connection : ctx.channel().remoteAddress(),
            cause.getMessage());
      }
      ctx.close();
    }
  }

  @Override
  public String toString() {
    return "NettyPeerTransport[" + local.peerId() + "@" + listenAddress() + "]";
  }
}
