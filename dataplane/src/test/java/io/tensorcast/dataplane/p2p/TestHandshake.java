package io.tensorcast.dataplane.p2p;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.tensorcast.api.wire.Membership;
import java.security.SecureRandom;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A test peer's side of the authenticated handshake, as a Netty handler placed after a {@link
 * FrameCodec.Decoder#forHandshake} decoder and a {@link FrameCodec.Encoder}: sends HELLO on
 * activation, AUTH after the other side's HELLO, checks the other side's AUTH and then fires {@link
 * #AUTHENTICATED} as a user event; frames after that pass on. It checks nothing else about the
 * other side (a test peer may be a rogue), and it authenticates with whatever secret and addresses
 * it is given, so tests can make it wrong on purpose.
 */
final class TestHandshake extends ChannelInboundHandlerAdapter {
  /** User event fired once the other side's AUTH verified. */
  static final Object AUTHENTICATED = new Object();

  private static final SecureRandom RANDOM = new SecureRandom();

  private final Frame.Hello template;
  private final byte[] secret;
  private final boolean dialer;
  private final Membership membership;
  private final FrameCodec.Decoder decoder;
  private final FrameCodec.Encoder encoder;
  private Frame.Hello sent;
  private byte[] expected;
  private boolean done;

  /** What happened to the handshake: null while running, "ok", or why it failed. */
  final AtomicReference<String> outcome = new AtomicReference<>();

  /**
   * @param template this peer's HELLO (the nonce is replaced)
   * @param secret the peer secret it proves
   * @param dialer whether this side dialled
   * @param membership where the published addresses of both sides come from
   */
  TestHandshake(
      Frame.Hello template,
      byte[] secret,
      boolean dialer,
      Membership membership,
      FrameCodec.Decoder decoder,
      FrameCodec.Encoder encoder) {
    this.template = template;
    this.secret = secret;
    this.dialer = dialer;
    this.membership = membership;
    this.decoder = decoder;
    this.encoder = encoder;
  }

  @Override
  public void channelActive(ChannelHandlerContext ctx) {
    byte[] nonce = new byte[Frame.NONCE_BYTES];
    RANDOM.nextBytes(nonce);
    sent = template.withNonce(nonce);
    ctx.writeAndFlush(sent);
    ctx.fireChannelActive();
  }

  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    if (done) {
      ctx.fireChannelRead(msg);
      return;
    }
    if (msg instanceof Frame.Reject r) {
      outcome.compareAndSet(null, "rejected: " + r.reason());
      ctx.close();
    } else if (msg instanceof Frame.Hello h) {
      String dialerAddress = published(dialer ? template.peerId() : h.peerId());
      String acceptorAddress = published(dialer ? h.peerId() : template.peerId());
      byte[] transcript =
          dialer ? PeerHandshake.transcript(sent, h) : PeerHandshake.transcript(h, sent);
      expected = PeerHandshake.authTag(secret, transcript, !dialer, dialerAddress, acceptorAddress);
      decoder.openAfterAuth(
          new FrameSeal(
              PeerHandshake.frameKey(secret, transcript, !dialer, dialerAddress, acceptorAddress)));
      encoder.sealAfterAuth(
          new FrameSeal(
              PeerHandshake.frameKey(secret, transcript, dialer, dialerAddress, acceptorAddress)));
      ctx.writeAndFlush(
          new Frame.Auth(
              PeerHandshake.authTag(secret, transcript, dialer, dialerAddress, acceptorAddress)));
    } else if (msg instanceof Frame.Auth a) {
      if (expected != null && PeerHandshake.verify(expected, a.tag())) {
        done = true;
        outcome.compareAndSet(null, "ok");
        ctx.fireUserEventTriggered(AUTHENTICATED);
      } else {
        outcome.compareAndSet(null, "the other side's AUTH did not verify");
        ctx.close();
      }
    }
  }

  private String published(String id) {
    Membership.Member m = membership.member(id);
    return m == null ? "?" : m.hostPort();
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    outcome.compareAndSet(null, "closed during the handshake");
    ctx.fireChannelInactive();
  }

  @Override
  public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
    outcome.compareAndSet(null, "failed: " + cause.getMessage());
    ctx.close();
  }
}
