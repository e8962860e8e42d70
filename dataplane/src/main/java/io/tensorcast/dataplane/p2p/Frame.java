package io.tensorcast.dataplane.p2p;

import io.netty.buffer.ByteBuf;
import java.util.Arrays;
import java.util.BitSet;
import java.util.Objects;

/**
 * The typed frames of the peer protocol (version {@value FrameCodec#VERSION}). On the wire every
 * frame is {@code u32 length | u8 type | body}, where {@code length} counts the type byte and the
 * body (big-endian); see {@link FrameCodec} for each body's layout.
 */
public sealed interface Frame {

  /** Length of a SHA-256 in bytes. */
  int SHA256_BYTES = 32;

  /** Length of a HELLO's nonce in bytes. */
  int NONCE_BYTES = 32;

  /** Length of an HMAC-SHA256 tag (AUTH, and every sealed frame) in bytes. */
  int TAG_BYTES = 32;

  /** Wire type byte. */
  byte type();

  /**
   * First frame each side sends, before anything else: who the sender is and what it holds, with a
   * fresh random nonce for the authentication that follows ({@link Auth}). A peer whose version,
   * artifact id, membership epoch, piece size or piece-map digest differs, that is not a member of
   * the current membership, or that connects from another address than the one the membership
   * publishes for its id is refused with {@link Reject} (piece -1) and the connection closed.
   *
   * @param version protocol version ({@value FrameCodec#VERSION})
   * @param artifactId the artifact's store id
   * @param peerId the sender's member id
   * @param epoch the epoch of the membership the sender applied last
   * @param pieceSize bytes per piece
   * @param pieceCount pieces in the map
   * @param mapDigest {@link PieceMap#digest()} with the listed ETags (32 bytes)
   * @param nonce 32 random bytes, fresh for this connection
   */
  record Hello(
      int version,
      String artifactId,
      String peerId,
      String epoch,
      int pieceSize,
      int pieceCount,
      byte[] mapDigest,
      byte[] nonce)
      implements Frame {
    public Hello {
      Objects.requireNonNull(artifactId, "artifactId");
      Objects.requireNonNull(peerId, "peerId");
      Objects.requireNonNull(epoch, "epoch");
      if (mapDigest == null || mapDigest.length != SHA256_BYTES) {
        throw new IllegalArgumentException("mapDigest must be 32 bytes");
      }
      if (nonce == null || nonce.length != NONCE_BYTES) {
        throw new IllegalArgumentException("nonce must be " + NONCE_BYTES + " bytes");
      }
    }

    /** This HELLO with another epoch. */
    public Hello withEpoch(String other) {
      return new Hello(version, artifactId, peerId, other, pieceSize, pieceCount, mapDigest, nonce);
    }

    /** This HELLO with another nonce (each connection sends its own). */
    public Hello withNonce(byte[] fresh) {
      return new Hello(version, artifactId, peerId, epoch, pieceSize, pieceCount, mapDigest, fresh);
    }

    @Override
    public byte type() {
      return FrameCodec.HELLO;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Hello h
          && version == h.version
          && artifactId.equals(h.artifactId)
          && peerId.equals(h.peerId)
          && epoch.equals(h.epoch)
          && pieceSize == h.pieceSize
          && pieceCount == h.pieceCount
          && Arrays.equals(mapDigest, h.mapDigest)
          && Arrays.equals(nonce, h.nonce);
    }

    @Override
    public int hashCode() {
      return Objects.hash(artifactId, peerId, epoch, pieceSize, pieceCount) * 31
          + Arrays.hashCode(mapDigest);
    }

    @Override
    public String toString() {
      return "Hello[v"
          + version
          + ", artifact="
          + artifactId
          + ", peer="
          + peerId
          + ", epoch="
          + epoch
          + ", pieceSize="
          + pieceSize
          + ", pieces="
          + pieceCount
          + "]";
    }
  }

  /**
   * Second frame each side sends: proof that the sender holds the artifact's peer secret, an
   * HMAC-SHA256 over both HELLOs (so both nonces), the sender's role and the addresses the
   * membership publishes for both ids ({@link PeerHandshake#authTag}). Every frame after it is
   * sealed with a key derived from the same inputs ({@link FrameSeal}).
   *
   * @param tag 32 bytes
   */
  record Auth(byte[] tag) implements Frame {
    public Auth {
      if (tag == null || tag.length != TAG_BYTES) {
        throw new IllegalArgumentException("tag must be " + TAG_BYTES + " bytes");
      }
    }

    @Override
    public byte type() {
      return FrameCodec.AUTH;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Auth a && Arrays.equals(tag, a.tag);
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(tag);
    }
  }

  /**
   * The pieces the sender holds (verified), with each one's SHA-256 as its origin computed it.
   *
   * @param pieceCount pieces in the map
   * @param have set bits = pieces held
   * @param sha256 per piece index: the 32-byte hash for held pieces, null for others
   */
  record Bitfield(int pieceCount, BitSet have, byte[][] sha256) implements Frame {
    @Override
    public byte type() {
      return FrameCodec.BITFIELD;
    }
  }

  /** The sender now holds {@code piece}, whose origin's SHA-256 is {@code sha256} (32 bytes). */
  record Have(int piece, byte[] sha256) implements Frame {
    public Have {
      if (sha256 == null || sha256.length != SHA256_BYTES) {
        throw new IllegalArgumentException("sha256 must be 32 bytes");
      }
    }

    @Override
    public byte type() {
      return FrameCodec.HAVE;
    }
  }

  /** Asks for {@code piece}'s bytes. */
  record Request(int piece) implements Frame {
    @Override
    public byte type() {
      return FrameCodec.REQUEST;
    }
  }

  /**
   * The bytes of {@code piece}. {@code payload} is reference-counted: whoever receives the frame
   * releases it.
   *
   * <p>On an authenticated connection a PIECE carries a tag over its sequence number, index, length
   * and the SHA-256 of its payload ({@link FrameSeal#pieceTag}): the sender takes that SHA-256 from
   * its verified copy instead of reading the bytes again (they go out with sendfile), and the
   * receiver, which hashes the payload anyway, checks the tag with the hash ({@link
   * PeerTransport.PeerConnection#authentic}).
   *
   * @param seq this frame's sequence number on its connection (received sealed frames), else -1
   * @param tag the frame's tag (received sealed frames), else null
   */
  record Piece(int piece, ByteBuf payload, long seq, byte[] tag) implements Frame {
    /** An unsealed PIECE. */
    public Piece(int piece, ByteBuf payload) {
      this(piece, payload, -1, null);
    }

    @Override
    public byte type() {
      return FrameCodec.PIECE;
    }
  }

  /** The sender will not send {@code piece} (-1: refuses the connection), and why. */
  record Reject(int piece, String reason) implements Frame {
    @Override
    public byte type() {
      return FrameCodec.REJECT;
    }
  }

  /**
   * The sender is reading {@code piece} from the source now (sent when the read starts and again
   * every half peer timeout while it lasts; a HAVE ends it). Receivers treat the piece as taken for
   * the source-read plan, so a member that joins mid-load is not assigned a piece in flight
   * elsewhere; a mark not renewed within the peer timeout lapses.
   */
  record Reading(int piece) implements Frame {
    @Override
    public byte type() {
      return FrameCodec.READING;
    }
  }

  /**
   * Member {@code member}'s share of the source reads is handed over to the other members: it made
   * no progress on it for the share-stall timeout, or its own load failed for good (then it names
   * itself). Every member that receives it leaves {@code member} out of the source-read plan for
   * the rest of its fill (it may still hold, serve and fetch pieces), and sends it on every
   * connection it opens afterwards, so the members converge on the same set (since version 4).
   */
  record Handover(String member, String why) implements Frame {
    @Override
    public byte type() {
      return FrameCodec.HANDOVER;
    }
  }

  /** Nothing; keeps an idle connection from timing out. */
  record KeepAlive() implements Frame {
    @Override
    public byte type() {
      return FrameCodec.KEEPALIVE;
    }
  }
}
