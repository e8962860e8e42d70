package io.tensorcast.dataplane.p2p;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.tensorcast.api.wire.Membership;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.BitSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntFunction;

/**
 * A test-side member built on the public {@link FrameCodec} and {@link PeerHandshake}: it passes
 * the authenticated handshake with the secret it is given ({@link TestHandshake}), announces every
 * piece with the hashes it is given (the true SHA-256s for an honest announcer, others for a
 * poisoner) and then misbehaves when asked for a piece: {@link Mode#CORRUPT} sends bytes that are
 * not the piece, {@link Mode#SILENT} never answers (a stuck peer). {@link Mode#SLOW} is not a rogue
 * but a busy peer: it sends the true bytes, one piece per {@code delay}, in request order, so its
 * queue waits longer than a peer timeout while it keeps delivering. {@link Mode#TRICKLE} streams
 * each piece's frame in 16 KiB chunks, one per {@code delay}: no piece arrives whole within a short
 * peer timeout, but its bytes keep coming (a holder whose link is shared by many requesters).
 */
final class RogueServingPeer implements AutoCloseable {
  enum Mode {
    CORRUPT,
    SILENT,
    SLOW,
    /** Sends {@code pieceBytes} of each piece asked for, in request order, after {@code delay}. */
    SERVE,
    /** True bytes, streamed: 16 KiB of the piece frame every {@code delay}, requests in order. */
    TRICKLE,
    /**
     * A member that stays connected (keep-alives) but never reads its share: announces no piece and
     * answers nothing.
     */
    IDLE
  }

  private final EventLoopGroup group = new NioEventLoopGroup(1);
  private final Channel server;
  final AtomicInteger requests = new AtomicInteger();
  final AtomicInteger served = new AtomicInteger();

  /** Requests received and not yet answered, summed over every rogue sharing these counters. */
  final AtomicInteger outstanding;

  /** The most {@link #outstanding} ever was. */
  final AtomicInteger maxOutstanding;

  final AtomicInteger connections = new AtomicInteger();

  /**
   * @param helloDigest the map digest the members send in HELLO ({@link PeerSwarm#helloDigest})
   * @param hashes the true SHA-256 of every piece of {@code map}
   */
  RogueServingPeer(
      InetSocketAddress listen,
      String id,
      String artifactId,
      PieceMap map,
      byte[] helloDigest,
      byte[][] hashes,
      Mode mode,
      byte[] secret,
      Membership membership)
      throws InterruptedException {
    this(
        listen,
        id,
        artifactId,
        map,
        helloDigest,
        hashes,
        mode,
        null,
        Duration.ZERO,
        new AtomicInteger(),
        new AtomicInteger(),
        secret,
        membership);
  }

  /**
   * @param pieceBytes the true bytes of piece i ({@link Mode#SLOW})
   * @param delay time per piece sent ({@link Mode#SLOW})
   * @param outstanding counter of requests not yet answered, shareable between rogues
   * @param maxOutstanding the highest value {@code outstanding} reached
   * @param secret the peer secret it proves in the handshake
   * @param membership the membership it claims (epoch) and whose addresses the handshake binds
   */
  RogueServingPeer(
      InetSocketAddress listen,
      String id,
      String artifactId,
      PieceMap map,
      byte[] helloDigest,
      byte[][] hashes,
      Mode mode,
      IntFunction<byte[]> pieceBytes,
      Duration delay,
      AtomicInteger outstanding,
      AtomicInteger maxOutstanding,
      byte[] secret,
      Membership membership)
      throws InterruptedException {
    this.outstanding = outstanding;
    this.maxOutstanding = maxOutstanding;
    Frame.Hello hello =
        new Frame.Hello(
            FrameCodec.VERSION,
            artifactId,
            id,
            membership.epoch(),
            map.pieceSize(),
            map.size(),
            helloDigest,
            new byte[Frame.NONCE_BYTES]);
    BitSet all = new BitSet();
    if (mode != Mode.IDLE) {
      all.set(0, map.size());
    }
    server =
        new ServerBootstrap()
            .group(group)
            .channel(NioServerSocketChannel.class)
            .childHandler(
                new ChannelInitializer<SocketChannel>() {
                  @Override
                  protected void initChannel(SocketChannel ch) {
                    FrameCodec.Decoder decoder =
                        FrameCodec.Decoder.forHandshake(
                            FrameCodec.maxFrameLength(map.pieceSize(), map.size()), map.size());
                    FrameCodec.Encoder encoder = new FrameCodec.Encoder();
                    ch.pipeline()
                        .addLast(decoder)
                        .addLast(encoder)
                        .addLast(
                            new TestHandshake(hello, secret, false, membership, decoder, encoder))
                        .addLast(
                            new ChannelInboundHandlerAdapter() {
                              @Override
                              public void userEventTriggered(ChannelHandlerContext ctx, Object e) {
                                if (e != TestHandshake.AUTHENTICATED) {
                                  ctx.fireUserEventTriggered(e);
                                  return;
                                }
                                connections.incrementAndGet();
                                ctx.writeAndFlush(new Frame.Bitfield(map.size(), all, hashes));
                                // keep the connection alive while silent (never inside a
                                // PIECE frame that is being trickled)
                                ctx.executor()
                                    .scheduleAtFixedRate(
                                        () -> {
                                          if (trickle.isEmpty()) {
                                            ctx.writeAndFlush(new Frame.KeepAlive());
                                          }
                                        },
                                        200,
                                        200,
                                        TimeUnit.MILLISECONDS);
                              }

                              @Override
                              public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                if (msg instanceof Frame.Piece p) {
                                  p.payload().release();
                                }
                                if (!(msg instanceof Frame.Request r)) {
                                  return;
                                }
                                requests.incrementAndGet();
                                if (mode == Mode.SILENT || mode == Mode.IDLE) {
                                  return;
                                }
                                if (mode == Mode.TRICKLE) {
                                  ByteBuf encoded =
                                      FrameCodec.encodeSealed(
                                          new Frame.Piece(
                                              r.piece(),
                                              Unpooled.wrappedBuffer(pieceBytes.apply(r.piece()))),
                                          encoder.seal(),
                                          ctx.alloc());
                                  byte[] frame = new byte[encoded.readableBytes()];
                                  encoded.readBytes(frame);
                                  encoded.release();
                                  trickle.add(Unpooled.wrappedBuffer(frame));
                                  if (trickle.size() == 1) {
                                    trickleNext(ctx);
                                  }
                                  return;
                                }
                                if (mode == Mode.SLOW || mode == Mode.SERVE) {
                                  int now = outstanding.incrementAndGet();
                                  maxOutstanding.accumulateAndGet(now, Math::max);
                                  queue.add(r.piece());
                                  if (queue.size() == 1) {
                                    sendNext(ctx);
                                  }
                                  return;
                                }
                                int len = map.piece(r.piece()).length();
                                ByteBuf junk = ctx.alloc().buffer(len);
                                for (int i = 0; i < len; i++) {
                                  junk.writeByte((i * 31 + r.piece()) & 0xff);
                                }
                                ctx.writeAndFlush(new Frame.Piece(r.piece(), junk));
                              }

                              private final ArrayDeque<Integer> queue = new ArrayDeque<>();
                              private final ArrayDeque<ByteBuf> trickle = new ArrayDeque<>();

                              /** Sends 16 KiB of the head frame after {@code delay}, then more. */
                              private void trickleNext(ChannelHandlerContext ctx) {
                                ctx.executor()
                                    .schedule(
                                        () -> {
                                          ByteBuf head = trickle.peek();
                                          if (head == null || !ctx.channel().isActive()) {
                                            return;
                                          }
                                          int n = Math.min(16384, head.readableBytes());
                                          ctx.writeAndFlush(
                                              Unpooled.copiedBuffer(head.readSlice(n)));
                                          if (!head.isReadable()) {
                                            trickle.poll().release();
                                            served.incrementAndGet();
                                          }
                                          if (!trickle.isEmpty()) {
                                            trickleNext(ctx);
                                          }
                                        },
                                        delay.toMillis(),
                                        TimeUnit.MILLISECONDS);
                              }

                              /** Sends the head of the queue after {@code delay}, then the next. */
                              private void sendNext(ChannelHandlerContext ctx) {
                                ctx.executor()
                                    .schedule(
                                        () -> {
                                          int piece = queue.poll();
                                          // Counted as answered before the piece leaves: the
                                          // member may send its next request (to any peer) as
                                          // soon as the piece arrives, so decrementing after the
                                          // write would count one request too many.
                                          outstanding.decrementAndGet();
                                          ctx.writeAndFlush(
                                              new Frame.Piece(
                                                  piece,
                                                  Unpooled.wrappedBuffer(pieceBytes.apply(piece))));
                                          served.incrementAndGet();
                                          if (!queue.isEmpty() && ctx.channel().isActive()) {
                                            sendNext(ctx);
                                          }
                                        },
                                        delay.toMillis(),
                                        TimeUnit.MILLISECONDS);
                              }

                              @Override
                              public void exceptionCaught(ChannelHandlerContext ctx, Throwable t) {
                                ctx.close();
                              }
                            });
                  }
                })
            .bind(listen)
            .sync()
            .channel();
  }

  @Override
  public void close() {
    server.close().awaitUninterruptibly();
    group.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly();
  }
}
