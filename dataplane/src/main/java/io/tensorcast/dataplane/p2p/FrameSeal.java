package io.tensorcast.dataplane.p2p;

import io.netty.buffer.ByteBuf;
import java.nio.ByteBuffer;
import java.security.InvalidKeyException;
import java.security.NoSuchAlgorithmException;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The tags of one direction of an authenticated peer connection: HMAC-SHA256 keyed with that
 * direction's frame key ({@link PeerHandshake#frameKey}) over a per-direction sequence number and
 * the frame. The sequence number starts at 0 with the first frame after AUTH and counts every frame
 * in wire order (TCP keeps the order), so a frame injected, dropped, replayed or reordered on the
 * stream fails the next tag check and closes the connection.
 *
 * <ul>
 *   <li>Control frames: {@code HMAC(k, u64 seq | u8 type | body)}, sent after the body.
 *   <li>PIECE: {@code HMAC(k, u64 seq | u8 PIECE | u32 piece | u32 length | 32B SHA-256 of the
 *       payload)}, sent in the header before the payload ({@link #pieceTag}); the sender knows the
 *       piece's hash from its verified copy and sends the bytes with sendfile.
 * </ul>
 *
 * <p>Not thread-safe: each direction of a connection is used on its event loop; {@link #pieceTag}
 * is static so that verifier threads check PIECE tags on their own.
 */
public final class FrameSeal {
  private final byte[] key;
  private final Mac mac;
  private long seq;

  /**
   * @param key this direction's frame key (32 bytes)
   */
  public FrameSeal(byte[] key) {
    this.key = key.clone();
    this.mac = hmac(this.key);
  }

  /** The key (for {@link #pieceTag} on another thread). */
  byte[] key() {
    return key.clone();
  }

  /**
   * The tag of the next control frame and advances the sequence number.
   *
   * @param typeAndBody the frame's type byte and body (readable bytes; not consumed)
   */
  public byte[] next(ByteBuf typeAndBody) {
    mac.update(ByteBuffer.allocate(8).putLong(0, seq++));
    mac.update(typeAndBody.nioBuffer());
    return mac.doFinal();
  }

  /** Takes the next sequence number for a PIECE frame. */
  public long nextPieceSeq() {
    return seq++;
  }

  /** The tag of a PIECE with sequence number {@code seq}. */
  public static byte[] pieceTag(byte[] key, long seq, int piece, int length, byte[] sha256) {
    Mac m = hmac(key);
    ByteBuffer b = ByteBuffer.allocate(8 + 1 + 4 + 4);
    b.putLong(seq).put(FrameCodec.PIECE).putInt(piece).putInt(length).flip();
    m.update(b);
    m.update(sha256);
    return m.doFinal();
  }

  static Mac hmac(byte[] key) {
    try {
      Mac m = Mac.getInstance("HmacSHA256");
      m.init(new SecretKeySpec(key, "HmacSHA256"));
      return m;
    } catch (NoSuchAlgorithmException | InvalidKeyException e) {
      throw new IllegalStateException("HmacSHA256 is required of every Java platform", e);
    }
  }
}
