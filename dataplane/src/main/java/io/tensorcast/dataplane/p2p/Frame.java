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

  /** Wire type byte. */
  byte type();

  /**
   * First frame each side sends. A peer whose artifact id, piece size or piece-map digest differs
   * is refused with {@link Reject} (piece -1) and the connection closed.
   *
   * @param version protocol version ({@value FrameCodec#VERSION})
   * @param artifactId the artifact's store id
   * @param peerId the sender's member id
   * @param pieceSize bytes per piece
   * @param pieceCount pieces in the map
   * @param mapDigest {@link PieceMap#digest()} (32 bytes)
   */
  record Hello(
      int version,
      String artifactId,
      String peerId,
      int pieceSize,
      int pieceCount,
      byte[] mapDigest)
      implements Frame {
    public Hello {
      Objects.requireNonNull(artifactId, "artifactId");
      Objects.requireNonNull(peerId, "peerId");
      if (mapDigest == null || mapDigest.length != SHA256_BYTES) {
        throw new IllegalArgumentException("mapDigest must be 32 bytes");
      }
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
          && pieceSize == h.pieceSize
          && pieceCount == h.pieceCount
          && Arrays.equals(mapDigest, h.mapDigest);
    }

    @Override
    public int hashCode() {
      return Objects.hash(artifactId, peerId, pieceSize, pieceCount) * 31
          + Arrays.hashCode(mapDigest);
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
   */
  record Piece(int piece, ByteBuf payload) implements Frame {
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

  /** Nothing; keeps an idle connection from timing out. */
  record KeepAlive() implements Frame {
    @Override
    public byte type() {
      return FrameCodec.KEEPALIVE;
    }
  }
}
