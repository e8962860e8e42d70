package io.tensorcast.dataplane.p2p;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.tensorcast.api.wire.Membership;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.security.SecureRandom;

/**
 * A peer on a plain blocking socket that speaks the frame format and the handshake itself, for
 * tests that decide exactly what a peer sends and when it reads: an impostor, a stranger, the far
 * side of a transport under test.
 */
final class BlockingPeer implements AutoCloseable {
  private static final SecureRandom RANDOM = new SecureRandom();

  final Socket socket;
  private final InputStream in;
  private final OutputStream out;
  private final EmbeddedChannel decoder;
  private final FrameCodec.Decoder frames;
  private FrameSeal sendSeal;
  private Frame.Hello sent;
  private Frame.Hello received;
  private byte[] secret;
  private boolean dialer;
  private Membership membership;
  private byte[] expectedAuth;

  private BlockingPeer(Socket socket, int maxFrameLength, int pieceCount) throws IOException {
    this.socket = socket;
    this.in = socket.getInputStream();
    this.out = socket.getOutputStream();
    this.frames = FrameCodec.Decoder.forHandshake(maxFrameLength, pieceCount);
    this.decoder =
        new EmbeddedChannel(
            frames,
            new ChannelInboundHandlerAdapter() {
              @Override
              public void channelRead(ChannelHandlerContext ctx, Object msg) {
                if (msg instanceof Frame.Hello h && received == null) {
                  onHello(h);
                }
                ctx.fireChannelRead(msg);
              }
            });
  }

  /** Connects from {@code from} (null: any local address) to {@code to}. */
  static BlockingPeer dial(
      InetSocketAddress from, InetSocketAddress to, int maxFrameLength, int pieceCount)
      throws IOException {
    return dial(from, to, maxFrameLength, pieceCount, 0);
  }

  /** As {@link #dial}, with a receive buffer of {@code receiveBuffer} bytes (0: the default). */
  static BlockingPeer dial(
      InetSocketAddress from,
      InetSocketAddress to,
      int maxFrameLength,
      int pieceCount,
      int receiveBuffer)
      throws IOException {
    Socket s = new Socket();
    if (receiveBuffer > 0) {
      s.setReceiveBufferSize(receiveBuffer);
    }
    if (from != null) {
      s.bind(from);
    }
    s.connect(to, 5_000);
    s.setSoTimeout(10_000);
    return new BlockingPeer(s, maxFrameLength, pieceCount);
  }

  /** Wraps an accepted socket. */
  static BlockingPeer accepted(Socket s, int maxFrameLength, int pieceCount) throws IOException {
    s.setSoTimeout(10_000);
    return new BlockingPeer(s, maxFrameLength, pieceCount);
  }

  /**
   * Sends HELLO (a fresh nonce in {@code template}) and prepares the keys for when the other side's
   * HELLO arrives: AUTH is sent then, proving {@code secret} for the addresses {@code membership}
   * publishes.
   */
  void hello(Frame.Hello template, byte[] secret, boolean dialer, Membership membership)
      throws IOException {
    byte[] nonce = new byte[Frame.NONCE_BYTES];
    RANDOM.nextBytes(nonce);
    this.sent = template.withNonce(nonce);
    this.secret = secret;
    this.dialer = dialer;
    this.membership = membership;
    writeRaw(encode(sent));
  }

  private void onHello(Frame.Hello h) {
    received = h;
    if (sent == null) {
      return;
    }
    String dialerAddress = published(dialer ? sent.peerId() : h.peerId());
    String acceptorAddress = published(dialer ? h.peerId() : sent.peerId());
    byte[] transcript =
        dialer ? PeerHandshake.transcript(sent, h) : PeerHandshake.transcript(h, sent);
    expectedAuth =
        PeerHandshake.authTag(secret, transcript, !dialer, dialerAddress, acceptorAddress);
    frames.openAfterAuth(
        new FrameSeal(
            PeerHandshake.frameKey(secret, transcript, !dialer, dialerAddress, acceptorAddress)));
    byte[] auth =
        encode(
            new Frame.Auth(
                PeerHandshake.authTag(secret, transcript, dialer, dialerAddress, acceptorAddress)));
    sendSeal =
        new FrameSeal(
            PeerHandshake.frameKey(secret, transcript, dialer, dialerAddress, acceptorAddress));
    try {
      writeRaw(auth);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  private String published(String id) {
    Membership.Member m = membership.member(id);
    return m == null ? "?" : m.hostPort();
  }

  /**
   * Reads frames until the other side's AUTH: "ok" when it verified, else what ended the handshake
   * (a REJECT's reason, the connection closing, a failed tag).
   */
  String finishHandshake() throws IOException {
    while (true) {
      Frame f;
      try {
        f = read();
      } catch (IOException e) {
        return "closed: " + e.getMessage();
      }
      if (f == null) {
        return "closed by the other side";
      }
      if (f instanceof Frame.Reject r) {
        return "rejected: " + r.reason();
      }
      if (f instanceof Frame.Auth a) {
        return expectedAuth != null && PeerHandshake.verify(expectedAuth, a.tag())
            ? "ok"
            : "the other side's AUTH did not verify";
      }
    }
  }

  /** The next frame, or null at end of stream. Sealed frames are checked by the decoder. */
  Frame read() throws IOException {
    byte[] buf = new byte[64 * 1024];
    while (true) {
      Object o = decoder.readInbound();
      if (o != null) {
        return (Frame) o;
      }
      int n = in.read(buf);
      if (n < 0) {
        return null;
      }
      decoder.writeInbound(Unpooled.copiedBuffer(buf, 0, n));
    }
  }

  /** Whether a received sealed PIECE's tag matches {@code sha256} of its payload. */
  boolean authentic(Frame.Piece p, byte[] sha256) {
    FrameSeal seal = frames.receiveSeal();
    return seal != null
        && p.tag() != null
        && PeerHandshake.verify(
            FrameSeal.pieceTag(seal.key(), p.seq(), p.piece(), p.payload().readableBytes(), sha256),
            p.tag());
  }

  /** Sends a frame: sealed after this side's AUTH, else plain. */
  void send(Frame f) throws IOException {
    ByteBuf b =
        sendSeal == null
            ? FrameCodec.encode(f, UnpooledByteBufAllocator.DEFAULT)
            : FrameCodec.encodeSealed(f, sendSeal, UnpooledByteBufAllocator.DEFAULT);
    try {
      writeRaw(ByteBufUtil.getBytes(b));
    } finally {
      b.release();
    }
  }

  /** Sends frames in one write, sealed as {@link #send} seals them. */
  void sendAll(java.util.List<Frame> frames) throws IOException {
    java.io.ByteArrayOutputStream all = new java.io.ByteArrayOutputStream();
    for (Frame f : frames) {
      ByteBuf b =
          sendSeal == null
              ? FrameCodec.encode(f, UnpooledByteBufAllocator.DEFAULT)
              : FrameCodec.encodeSealed(f, sendSeal, UnpooledByteBufAllocator.DEFAULT);
      try {
        all.write(ByteBufUtil.getBytes(b));
      } finally {
        b.release();
      }
    }
    writeRaw(all.toByteArray());
  }

  void writeRaw(byte[] bytes) throws IOException {
    out.write(bytes);
    out.flush();
  }

  /** Whether the other side closed the connection within {@code millis} (reading and dropping). */
  boolean closedWithin(long millis) throws IOException {
    socket.setSoTimeout((int) millis);
    byte[] buf = new byte[64 * 1024];
    long deadline = System.nanoTime() + millis * 1_000_000L;
    try {
      while (System.nanoTime() < deadline) {
        if (in.read(buf) < 0) {
          return true;
        }
      }
      return false;
    } catch (SocketTimeoutException e) {
      return false;
    } catch (IOException reset) {
      return true;
    }
  }

  static byte[] encode(Frame f) {
    ByteBuf b = FrameCodec.encode(f, UnpooledByteBufAllocator.DEFAULT);
    try {
      return ByteBufUtil.getBytes(b);
    } finally {
      b.release();
    }
  }

  @Override
  public void close() throws IOException {
    decoder.finishAndReleaseAll();
    socket.close();
  }
}
