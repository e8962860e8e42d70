package io.tensorcast.dataplane.p2p;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.tensorcast.api.wire.Membership;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import javax.crypto.Mac;

/**
 * The rules and the cryptography of the peer handshake (protocol version {@value
 * FrameCodec#VERSION}), apart from any socket so that both sides, and test peers, use the same
 * code.
 *
 * <ol>
 *   <li>Each side sends {@link Frame.Hello} with a fresh 32-byte nonce. The other side checks it
 *       ({@link #refusal}): same version, artifact, piece size and piece map, same membership
 *       epoch, the sender's id is a member, and on the accepting side the connection comes from the
 *       IP address the membership publishes for that id (dialers bind their own published address
 *       before connecting).
 *   <li>Each side sends {@link Frame.Auth}: {@link #authTag}, an HMAC-SHA256 keyed with the
 *       artifact's peer secret over the transcript of both HELLOs (so both nonces: nothing can be
 *       replayed), the sender's role and both sides' published addresses. The other side recomputes
 *       it and compares in constant time.
 *   <li>Every frame after a side's AUTH is sealed with that direction's {@link #frameKey} ({@link
 *       FrameSeal}).
 * </ol>
 *
 * <p>Until a connection has passed both checks it carries only HELLO and AUTH (a few hundred bytes,
 * {@link FrameCodec#PRE_AUTH_MAX_FRAME} at most): no piece is asked for, served or buffered.
 */
public final class PeerHandshake {
  private static final byte[] TRANSCRIPT_LABEL =
      "tensorcast peer handshake v3".getBytes(StandardCharsets.US_ASCII);

  private PeerHandshake() {}

  /**
   * Whether {@code remote}'s HELLO differs from {@code local} only in what the members listed: the
   * same protocol version, artifact and piece size, another piece map (files, sizes or versions).
   * Such a member loads another listing of the same artifact — one of the two listed before or
   * after an object changed.
   */
  public static boolean otherListing(Frame.Hello local, Frame.Hello remote) {
    return remote.version() == local.version()
        && remote.artifactId().equals(local.artifactId())
        && remote.pieceSize() == local.pieceSize()
        && !remote.peerId().equals(local.peerId())
        && (remote.pieceCount() != local.pieceCount()
            || !Arrays.equals(remote.mapDigest(), local.mapDigest()));
  }

  /**
   * Why {@code remote}'s HELLO is refused by the member that sent {@code local}, or null when it
   * passes.
   *
   * @param membership this member's current membership, or null when it has none yet
   * @param remoteIp the connection's remote address on the accepting side; null on the dialling
   *     side (which connected to the published address itself)
   * @param dialled the id this side dialled, or null on the accepting side
   */
  public static String refusal(
      Frame.Hello local,
      Frame.Hello remote,
      Membership membership,
      InetAddress remoteIp,
      String dialled) {
    if (remote.version() != FrameCodec.VERSION) {
      return "protocol version " + remote.version() + " is not " + FrameCodec.VERSION;
    }
    if (!remote.artifactId().equals(local.artifactId())) {
      return "artifact '"
          + remote.artifactId()
          + "' is not this member's '"
          + local.artifactId()
          + "'";
    }
    if (remote.pieceSize() != local.pieceSize()) {
      return "piece size "
          + remote.pieceSize()
          + " differs from this member's "
          + local.pieceSize()
          + " (--piece-size must be the same on every member)";
    }
    if (remote.pieceCount() != local.pieceCount()
        || !Arrays.equals(remote.mapDigest(), local.mapDigest())) {
      return "piece map differs (the files listed, their sizes or their versions differ): "
          + remote.pieceCount()
          + " pieces vs "
          + local.pieceCount();
    }
    if (remote.peerId().equals(local.peerId())) {
      return "peer id '" + remote.peerId() + "' is this member's own id";
    }
    if (dialled != null && !remote.peerId().equals(dialled)) {
      return "dialled peer '" + dialled + "' but it says it is '" + remote.peerId() + "'";
    }
    if (membership == null) {
      return "this member has no membership yet";
    }
    if (!remote.epoch().equals(local.epoch())) {
      return "membership epoch '"
          + remote.epoch()
          + "' differs from this member's '"
          + local.epoch()
          + "' (both must have applied the same PUT /v1/peers)";
    }
    Membership.Member m = membership.member(remote.peerId());
    if (m == null) {
      return "'" + remote.peerId() + "' is not a member of membership " + local.epoch();
    }
    if (remoteIp != null && !sameAddress(remoteIp, m.address().getAddress())) {
      return "peer '"
          + remote.peerId()
          + "' connects from "
          + remoteIp.getHostAddress()
          + " but the membership publishes "
          + m.hostPort()
          + " for it";
    }
    return null;
  }

  /**
   * Whether some member of {@code m} has {@code ip} as its published address (IPv4-mapped IPv6
   * equals its IPv4).
   */
  static boolean publishes(Membership m, InetAddress ip) {
    for (Membership.Member member : m.members()) {
      if (sameAddress(ip, member.address().getAddress())) {
        return true;
      }
    }
    return false;
  }

  /** Whether two addresses are the same host address (IPv4-mapped IPv6 equals its IPv4). */
  public static boolean sameAddress(InetAddress a, InetAddress b) {
    if (a == null || b == null) {
      return false;
    }
    return Arrays.equals(canonical(a), canonical(b));
  }

  private static byte[] canonical(InetAddress a) {
    byte[] raw = a.getAddress();
    if (raw.length == 16) {
      boolean mapped = raw[10] == (byte) 0xff && raw[11] == (byte) 0xff;
      for (int i = 0; i < 10 && mapped; i++) {
        mapped = raw[i] == 0;
      }
      if (mapped) {
        return Arrays.copyOfRange(raw, 12, 16);
      }
    }
    return raw;
  }

  /**
   * SHA-256 over a label and both HELLOs as encoded on the wire, the dialler's first: the same
   * bytes on both sides, different for every connection (each HELLO has a fresh nonce).
   */
  public static byte[] transcript(Frame.Hello dialer, Frame.Hello acceptor) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      md.update(TRANSCRIPT_LABEL);
      for (Frame.Hello h : new Frame.Hello[] {dialer, acceptor}) {
        ByteBuf b = FrameCodec.encode(h, UnpooledByteBufAllocator.DEFAULT);
        try {
          md.update(b.nioBuffer());
        } finally {
          b.release();
        }
      }
      return md.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * The AUTH tag one side sends: HMAC-SHA256 keyed with the peer secret over {@code "auth dialer"}
   * or {@code "auth acceptor"}, the transcript and both published addresses ({@code ip:port}, as
   * the membership gives them). The role keeps a side's own tag from being reflected back to it.
   */
  public static byte[] authTag(
      byte[] secret,
      byte[] transcript,
      boolean fromDialer,
      String dialerAddress,
      String acceptorAddress) {
    return hmac(
        secret,
        fromDialer ? "auth dialer" : "auth acceptor",
        transcript,
        dialerAddress,
        acceptorAddress);
  }

  /**
   * The tag a writer sends with the body of one of its seal records ({@code GET /v1/writes/{v}},
   * header {@code X-Tensorcast-Record-Tag}): HMAC-SHA256 keyed with the peer secret over {@code
   * "seal record"}, the body's bytes and the writer's member id. A member uses a record only when
   * its tag verifies, so piece hashes come from a holder of the secret that is the writer it asked.
   */
  public static byte[] recordTag(byte[] secret, String writerId, byte[] body) {
    return hmac(secret, "seal record", body, writerId);
  }

  /** Whether {@code tag} is the expected AUTH tag (constant-time). */
  public static boolean verify(byte[] expected, byte[] tag) {
    return MessageDigest.isEqual(expected, tag);
  }

  /**
   * The key that seals the frames one side sends after its AUTH: HMAC-SHA256 keyed with the peer
   * secret over {@code "frames dialer"} or {@code "frames acceptor"}, the transcript and both
   * published addresses.
   */
  public static byte[] frameKey(
      byte[] secret,
      byte[] transcript,
      boolean fromDialer,
      String dialerAddress,
      String acceptorAddress) {
    return hmac(
        secret,
        fromDialer ? "frames dialer" : "frames acceptor",
        transcript,
        dialerAddress,
        acceptorAddress);
  }

  private static byte[] hmac(byte[] secret, String label, byte[] transcript, String... strings) {
    Mac mac = FrameSeal.hmac(secret);
    field(mac, label.getBytes(StandardCharsets.US_ASCII));
    field(mac, transcript);
    for (String s : strings) {
      field(mac, s.getBytes(StandardCharsets.UTF_8));
    }
    return mac.doFinal();
  }

  /** Length-prefixed, so that no two field lists give the same input. */
  private static void field(Mac mac, byte[] bytes) {
    mac.update(ByteBuffer.allocate(4).putInt(0, bytes.length));
    mac.update(bytes);
  }
}
