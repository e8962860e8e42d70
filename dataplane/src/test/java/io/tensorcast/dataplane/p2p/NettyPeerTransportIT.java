package io.tensorcast.dataplane.p2p;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.buffer.ByteBufUtil;
import io.netty.channel.epoll.Epoll;
import io.tensorcast.api.wire.Membership;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link NettyPeerTransport} on real loopback sockets, with a plain socket as the other side so the
 * test decides when bytes are read.
 */
class NettyPeerTransportIT {
  private static final int PIECE = 16 << 20;
  private static final int PIECES = 4;

  @Test
  void aControlFrameWaitsBehindThePieceOnTheWireNotBehindEveryQueuedPiece(@TempDir Path dir)
      throws Exception {
    byte[] content = new byte[PIECE * PIECES];
    new Random(6).nextBytes(content);
    Path file = Files.write(dir.resolve("blob"), content);
    byte[] digest = new byte[32];
    InetAddress loopback = InetAddress.getLoopbackAddress();
    BlockingQueue<PeerTransport.PeerConnection> connected = new LinkedBlockingQueue<>();
    AtomicInteger sent = new AtomicInteger();

    byte[] secret = new byte[32];
    new Random(7).nextBytes(secret);
    java.util.concurrent.atomic.AtomicReference<Membership> membership =
        new java.util.concurrent.atomic.AtomicReference<>();
    try (ServerSocket receiver = new ServerSocket(0, 1, loopback);
        NettyPeerTransport sender =
            NettyPeerTransport.start(
                new InetSocketAddress(loopback, 0),
                hello("sender", digest),
                Duration.ofSeconds(30),
                new PeerTransport.Listener() {
                  @Override
                  public void connected(PeerTransport.PeerConnection c) {
                    connected.add(c);
                  }

                  @Override
                  public void received(PeerTransport.PeerConnection c, Frame f) {
                    if (f instanceof Frame.Piece p) {
                      p.payload().release();
                    }
                  }

                  @Override
                  public void disconnected(PeerTransport.PeerConnection c) {}
                },
                new NettyPeerTransport.Auth(PeerSecret.of(secret), membership::get))) {
      membership.set(
          Membership.parseStatic(
              "sender=127.0.0.1:"
                  + sender.listenAddress().getPort()
                  + ",receiver=127.0.0.1:"
                  + receiver.getLocalPort()));
      sender.dial("receiver", (InetSocketAddress) receiver.getLocalSocketAddress());
      try (BlockingPeer s =
          BlockingPeer.accepted(
              receiver.accept(), FrameCodec.maxFrameLength(PIECE, PIECES), PIECES)) {
        s.hello(
            hello("receiver", digest).withEpoch(membership.get().epoch()),
            secret,
            false,
            membership.get());
        assertThat(s.finishHandshake()).as("handshake").isEqualTo("ok");
        PeerTransport.PeerConnection c = connected.poll(10, TimeUnit.SECONDS);
        assertThat(c).as("handshake").isNotNull();
        assertUnsentBytesCapped(c, "a dialled connection");

        // The receiver reads nothing yet, so the first piece cannot leave whole (its 16 MiB are
        // more than loopback buffers take from a socket nobody reads) while the rest are asked
        // for.
        for (int i = 0; i < PIECES; i++) {
          byte[] sha =
              java.security.MessageDigest.getInstance("SHA-256")
                  .digest(Arrays.copyOfRange(content, i * PIECE, (i + 1) * PIECE));
          c.sendPiece(i, file, (long) i * PIECE, PIECE, sha, sent::incrementAndGet);
        }
        c.send(new Frame.Have(3, new byte[32]));
        Thread.sleep(300);

        List<Frame> frames = new ArrayList<>();
        for (int i = 0; i < 1 + PIECES; i++) {
          frames.add(s.read());
        }
        try {
          List<String> order = new ArrayList<>();
          for (Frame f : frames) {
            order.add(
                f instanceof Frame.Piece p ? "PIECE " + p.piece() : FrameCodec.typeName(f.type()));
          }
          assertThat(order).containsExactly("PIECE 0", "HAVE", "PIECE 1", "PIECE 2", "PIECE 3");
          for (Frame f : frames) {
            if (f instanceof Frame.Piece p) {
              byte[] expected =
                  Arrays.copyOfRange(content, p.piece() * PIECE, (p.piece() + 1) * PIECE);
              assertThat(ByteBufUtil.getBytes(p.payload()))
                  .as("bytes of piece %d", p.piece())
                  .isEqualTo(expected);
              byte[] sha = java.security.MessageDigest.getInstance("SHA-256").digest(expected);
              assertThat(s.authentic(p, sha)).as("piece %d's tag", p.piece()).isTrue();
            }
          }
        } finally {
          for (Frame f : frames) {
            if (f instanceof Frame.Piece p) {
              p.payload().release();
            }
          }
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (sent.get() < PIECES && System.nanoTime() < deadline) {
          Thread.sleep(10);
        }
        assertThat(sent).as("pieces reported sent").hasValue(PIECES);
      }
    }
  }

  @Test
  void aHeldTransportHandshakesAtOnceButReportsTheConnectionAndItsFramesOnlyOnceOpened()
      throws Exception {
    byte[] digest = new byte[32];
    InetAddress loopback = InetAddress.getLoopbackAddress();
    BlockingQueue<String> events = new LinkedBlockingQueue<>();
    BlockingQueue<PeerTransport.PeerConnection> accepted = new LinkedBlockingQueue<>();
    byte[] secret = new byte[32];
    new Random(8).nextBytes(secret);
    java.util.concurrent.atomic.AtomicReference<Membership> membership =
        new java.util.concurrent.atomic.AtomicReference<>();
    try (ServerSocket unused = new ServerSocket(0, 1, loopback);
        NettyPeerTransport held =
            NettyPeerTransport.start(
                new InetSocketAddress(loopback, 0),
                hello("held", digest),
                Duration.ofSeconds(30),
                new PeerTransport.Listener() {
                  @Override
                  public void connected(PeerTransport.PeerConnection c) {
                    accepted.add(c);
                    events.add("connected " + c.peerId());
                  }

                  @Override
                  public void received(PeerTransport.PeerConnection c, Frame f) {
                    events.add(FrameCodec.typeName(f.type()));
                  }

                  @Override
                  public void disconnected(PeerTransport.PeerConnection c) {
                    events.add("disconnected");
                  }
                },
                new NettyPeerTransport.Auth(PeerSecret.of(secret), membership::get),
                true)) {
      membership.set(
          Membership.parseStatic(
              "held=127.0.0.1:"
                  + held.listenAddress().getPort()
                  + ",peer=127.0.0.1:"
                  + unused.getLocalPort()));
      try (BlockingPeer peer =
          BlockingPeer.dial(
              new InetSocketAddress(loopback, 0),
              held.listenAddress(),
              FrameCodec.maxFrameLength(PIECE, PIECES),
              PIECES)) {
        peer.hello(
            hello("peer", digest).withEpoch(membership.get().epoch()),
            secret,
            true,
            membership.get());
        // The handshake completes while the transport is held: a member's peers connect while it
        // still allocates its copy.
        assertThat(peer.finishHandshake()).as("handshake while held").isEqualTo("ok");
        peer.send(new Frame.Have(2, new byte[32]));
        assertThat(events.poll(500, TimeUnit.MILLISECONDS)).as("reported before open()").isNull();

        held.open();
        assertThat(events.poll(10, TimeUnit.SECONDS)).isEqualTo("connected peer");
        assertUnsentBytesCapped(accepted.poll(), "an accepted connection");
        assertThat(events.poll(10, TimeUnit.SECONDS))
            .as("the frame held meanwhile")
            .isEqualTo("HAVE");
        peer.send(new Frame.Have(3, new byte[32]));
        assertThat(events.poll(10, TimeUnit.SECONDS)).as("frames after open()").isEqualTo("HAVE");
      }
    }
  }

  /**
   * On Linux the peer sockets run on Netty's epoll transport with TCP_NOTSENT_LOWAT set, read back
   * from the kernel: a REQUEST or HAVE then waits behind at most that many unsent bytes, not behind
   * a send buffer of pieces (bench/README.md, "Unsent bytes capped on the peer sockets").
   */
  private static void assertUnsentBytesCapped(PeerTransport.PeerConnection c, String which) {
    if (!System.getProperty("os.name").startsWith("Linux")) {
      return; // the NIO transport, without the cap
    }
    assertThat(NettyPeerTransport.EPOLL)
        .as("Netty's native epoll transport loads here: %s", Epoll.unavailabilityCause())
        .isTrue();
    assertThat(((NettyPeerTransport.Connection) c).unsentLowWatermark())
        .as("TCP_NOTSENT_LOWAT of %s", which)
        .isEqualTo(NettyPeerTransport.NOTSENT_LOWAT);
  }

  private static Frame.Hello hello(String id, byte[] digest) {
    return new Frame.Hello(
        FrameCodec.VERSION, "artifact", id, "", PIECE, PIECES, digest, new byte[32]);
  }
}
