package io.tensorcast.dataplane.p2p;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.ByteToMessageDecoder;
import java.nio.charset.StandardCharsets;
import java.util.BitSet;
import java.util.List;

/**
 * Encoding and decoding of {@link Frame}s. Wire format, big-endian: {@code u32 length | u8 type |
 * body}, {@code length} = 1 + body bytes. Bodies:
 *
 * <ul>
 *   <li>HELLO (1): {@code u16 version | str artifactId | str peerId | u32 pieceSize | u32
 *       pieceCount | 32B mapDigest}; {@code str} = {@code u16 n | n bytes UTF-8}
 *   <li>BITFIELD (2): {@code u32 pieceCount | ⌈pieceCount/8⌉ bytes bitmap (bit i = byte i/8, mask
 *       0x80 >> i%8) | 32B SHA-256 per set bit, in piece order}
 *   <li>HAVE (3): {@code u32 piece | 32B SHA-256}
 *   <li>REQUEST (4): {@code u32 piece}
 *   <li>PIECE (5): {@code u32 piece | payload} (the payload is the rest of the frame)
 *   <li>REJECT (6): {@code i32 piece | str reason}
 *   <li>KEEPALIVE (7): empty
 *   <li>READING (8): {@code u32 piece} (since version 2)
 * </ul>
 *
 * <p>Malformed frames raise {@link FrameException} naming the frame type and the rule broken; a
 * length above the decoder's limit is refused before any of its body is buffered.
 */
public final class FrameCodec {
  /** Protocol version; 2 added READING. Members of different versions refuse each other. */
  public static final int VERSION = 2;

  public static final byte HELLO = 1;
  public static final byte BITFIELD = 2;
  public static final byte HAVE = 3;
  public static final byte REQUEST = 4;
  public static final byte PIECE = 5;
  public static final byte REJECT = 6;
  public static final byte KEEPALIVE = 7;
  public static final byte READING = 8;

  /** Bytes of {@code u32 length | u8 type | u32 piece} before a PIECE payload. */
  public static final int PIECE_HEADER_BYTES = 9;

  private FrameCodec() {}

  /** Name of a type byte, for messages. */
  public static String typeName(int type) {
    return switch (type) {
      case HELLO -> "HELLO";
      case BITFIELD -> "BITFIELD";
      case HAVE -> "HAVE";
      case REQUEST -> "REQUEST";
      case PIECE -> "PIECE";
      case REJECT -> "REJECT";
      case KEEPALIVE -> "KEEPALIVE";
      case READING -> "READING";
      default -> "type " + type;
    };
  }

  /**
   * The largest frame a member of a swarm with this map may need: a PIECE of {@code pieceSize} or a
   * full BITFIELD, plus headers.
   */
  public static int maxFrameLength(int pieceSize, int pieceCount) {
    long bitfield = 5L + (pieceCount + 7L) / 8 + 32L * pieceCount;
    return (int) Math.min(Integer.MAX_VALUE - 8, Math.max(pieceSize + 5L, bitfield) + 1024);
  }

  /**
   * Encodes a frame, length prefix included. For {@link Frame.Piece} the payload is appended
   * without copying and its reference passes to the returned buffer.
   */
  public static ByteBuf encode(Frame f, ByteBufAllocator alloc) {
    if (f instanceof Frame.Piece p) {
      ByteBuf head = pieceHeader(alloc, p.piece(), p.payload().readableBytes());
      return alloc.compositeBuffer(2).addComponents(true, head, p.payload());
    }
    ByteBuf b = alloc.buffer();
    b.writeInt(0);
    b.writeByte(f.type());
    if (f instanceof Frame.Hello h) {
      b.writeShort(h.version());
      writeString(b, h.artifactId());
      writeString(b, h.peerId());
      b.writeInt(h.pieceSize());
      b.writeInt(h.pieceCount());
      b.writeBytes(h.mapDigest());
    } else if (f instanceof Frame.Bitfield bf) {
      b.writeInt(bf.pieceCount());
      byte[] bits = new byte[(bf.pieceCount() + 7) / 8];
      BitSet have = bf.have();
      for (int i = have.nextSetBit(0); i >= 0 && i < bf.pieceCount(); i = have.nextSetBit(i + 1)) {
        bits[i / 8] |= (byte) (0x80 >>> (i % 8));
      }
      b.writeBytes(bits);
      for (int i = have.nextSetBit(0); i >= 0 && i < bf.pieceCount(); i = have.nextSetBit(i + 1)) {
        b.writeBytes(bf.sha256()[i]);
      }
    } else if (f instanceof Frame.Have h) {
      b.writeInt(h.piece());
      b.writeBytes(h.sha256());
    } else if (f instanceof Frame.Request r) {
      b.writeInt(r.piece());
    } else if (f instanceof Frame.Reading r) {
      b.writeInt(r.piece());
    } else if (f instanceof Frame.Reject r) {
      b.writeInt(r.piece());
      writeString(b, r.reason());
    }
    b.setInt(0, b.readableBytes() - 4);
    return b;
  }

  /**
   * {@code u32 length | u8 PIECE | u32 piece} for a payload of {@code length} bytes sent after it.
   */
  public static ByteBuf pieceHeader(ByteBufAllocator alloc, int piece, int length) {
    ByteBuf b = alloc.buffer(PIECE_HEADER_BYTES);
    b.writeInt(5 + length);
    b.writeByte(PIECE);
    b.writeInt(piece);
    return b;
  }

  /**
   * Decodes one frame from {@code type byte | body} (the length prefix already removed). Takes
   * ownership of {@code frame}: it is released, except that a PIECE's payload is a retained slice
   * of it.
   *
   * @throws FrameException naming the frame and the rule broken
   */
  public static Frame decode(ByteBuf frame) {
    return decode(frame, Integer.MAX_VALUE);
  }

  /**
   * Decodes one frame as {@link #decode(ByteBuf)} does, refusing a BITFIELD for more than {@code
   * maxPieceCount} pieces before allocating anything for it: a BITFIELD's per-piece hash table is
   * 4–8 bytes per piece against the bitmap's one bit, so an unchecked count would let a peer (even
   * before its HELLO) make this side allocate ~64 times the frame's length.
   *
   * @param maxPieceCount the most pieces a BITFIELD may declare (this swarm's piece count)
   * @throws FrameException naming the frame and the rule broken
   */
  public static Frame decode(ByteBuf frame, int maxPieceCount) {
    boolean keep = false;
    try {
      if (!frame.isReadable()) {
        throw new FrameException("empty frame: a frame has at least its type byte");
      }
      int type = frame.readUnsignedByte();
      String name = typeName(type);
      Frame out =
          switch (type) {
            case HELLO -> {
              need(frame, 2, name, "u16 version");
              int version = frame.readUnsignedShort();
              String artifact = readString(frame, name, "artifactId");
              String peer = readString(frame, name, "peerId");
              need(
                  frame,
                  8 + Frame.SHA256_BYTES,
                  name,
                  "u32 pieceSize, u32 pieceCount, 32-byte map digest");
              int pieceSize = frame.readInt();
              int pieceCount = frame.readInt();
              byte[] digest = new byte[Frame.SHA256_BYTES];
              frame.readBytes(digest);
              yield new Frame.Hello(version, artifact, peer, pieceSize, pieceCount, digest);
            }
            case BITFIELD -> {
              need(frame, 4, name, "u32 pieceCount");
              int count = frame.readInt();
              if (count < 0) {
                throw new FrameException(name + " frame: negative piece count " + count);
              }
              if (count > maxPieceCount) {
                throw new FrameException(
                    name
                        + " frame: piece count "
                        + count
                        + " exceeds this swarm's "
                        + maxPieceCount
                        + " pieces; refusing it");
              }
              int bitmapBytes = (int) ((count + 7L) / 8);
              need(
                  frame,
                  bitmapBytes,
                  name,
                  "a bitmap of " + bitmapBytes + " bytes for " + count + " pieces");
              BitSet have = new BitSet(count);
              for (int i = 0; i < bitmapBytes; i++) {
                int v = frame.readUnsignedByte();
                for (int bit = 0; bit < 8; bit++) {
                  if ((v & (0x80 >>> bit)) != 0) {
                    int idx = i * 8 + bit;
                    if (idx >= count) {
                      throw new FrameException(
                          name
                              + " frame: bit "
                              + idx
                              + " is set but there are only "
                              + count
                              + " pieces");
                    }
                    have.set(idx);
                  }
                }
              }
              int set = have.cardinality();
              long want = (long) set * Frame.SHA256_BYTES;
              if (frame.readableBytes() != want) {
                throw new FrameException(
                    name
                        + " frame: "
                        + set
                        + " pieces are set, so "
                        + want
                        + " bytes of SHA-256 must follow, but "
                        + frame.readableBytes()
                        + " do");
              }
              byte[][] hashes = new byte[count][];
              for (int i = have.nextSetBit(0); i >= 0; i = have.nextSetBit(i + 1)) {
                hashes[i] = new byte[Frame.SHA256_BYTES];
                frame.readBytes(hashes[i]);
              }
              yield new Frame.Bitfield(count, have, hashes);
            }
            case HAVE -> {
              exact(frame, 4 + Frame.SHA256_BYTES, name, "u32 piece and a 32-byte SHA-256");
              int piece = frame.readInt();
              byte[] sha = new byte[Frame.SHA256_BYTES];
              frame.readBytes(sha);
              yield new Frame.Have(piece, sha);
            }
            case REQUEST -> {
              exact(frame, 4, name, "u32 piece");
              yield new Frame.Request(frame.readInt());
            }
            case PIECE -> {
              need(frame, 4, name, "u32 piece");
              int piece = frame.readInt();
              keep = true;
              yield new Frame.Piece(piece, frame.readRetainedSlice(frame.readableBytes()));
            }
            case REJECT -> {
              need(frame, 4, name, "i32 piece");
              int piece = frame.readInt();
              yield new Frame.Reject(piece, readString(frame, name, "reason"));
            }
            case KEEPALIVE -> {
              exact(frame, 0, name, "an empty body");
              yield new Frame.KeepAlive();
            }
            case READING -> {
              exact(frame, 4, name, "u32 piece");
              yield new Frame.Reading(frame.readInt());
            }
            default ->
                throw new FrameException(
                    "unknown frame type "
                        + type
                        + " (known: 1 HELLO, 2 BITFIELD, 3 HAVE, 4 REQUEST,"
                        + " 5 PIECE, 6 REJECT, 7 KEEPALIVE, 8 READING)");
          };
      if (!keep && frame.isReadable()) {
        throw new FrameException(
            name + " frame: " + frame.readableBytes() + " bytes left over after the body");
      }
      return out;
    } finally {
      frame.release();
    }
  }

  private static void need(ByteBuf b, int n, String frame, String what) {
    if (b.readableBytes() < n) {
      throw new FrameException(
          frame
              + " frame is truncated: expected "
              + what
              + " ("
              + n
              + " bytes) but only "
              + b.readableBytes()
              + " bytes remain");
    }
  }

  private static void exact(ByteBuf b, int n, String frame, String what) {
    if (b.readableBytes() != n) {
      throw new FrameException(
          frame
              + " frame: body is "
              + b.readableBytes()
              + " bytes, expected "
              + n
              + " ("
              + what
              + ")");
    }
  }

  private static void writeString(ByteBuf b, String s) {
    byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
    if (bytes.length > 0xFFFF) {
      throw new IllegalArgumentException("string longer than 65535 bytes");
    }
    b.writeShort(bytes.length);
    b.writeBytes(bytes);
  }

  private static String readString(ByteBuf b, String frame, String field) {
    need(b, 2, frame, "the u16 length of " + field);
    int n = b.readUnsignedShort();
    need(b, n, frame, field + " of " + n + " bytes");
    return b.readCharSequence(n, StandardCharsets.UTF_8).toString();
  }

  /**
   * Netty decoder: splits the byte stream into frames and decodes them. A length of 0 or above
   * {@code maxFrameLength} fails the channel with a {@link FrameException} before the body is
   * buffered, so a peer cannot make this side buffer more than one legal frame; a BITFIELD for more
   * than {@code maxPieceCount} pieces fails it before its hash table is allocated.
   */
  public static final class Decoder extends ByteToMessageDecoder {
    /**
     * Bytes of PIECE frames that must arrive to count as progress ({@link #pieceProgressAt()}): a
     * peer trickling less than this per peer timeout is as stuck as a silent one.
     */
    public static final int PROGRESS_BYTES = 16 * 1024;

    private final int maxFrameLength;
    private final int maxPieceCount;
    private int partialSeen; // bytes of the PIECE frame being received, at the last decode
    private long unreported; // PIECE bytes arrived since progress was last marked
    private volatile long pieceProgressAt;

    /** A decoder that bounds the frame length only (any BITFIELD piece count that fits). */
    public Decoder(int maxFrameLength) {
      this(maxFrameLength, Integer.MAX_VALUE);
    }

    /**
     * @param maxFrameLength largest accepted frame length, {@link #maxFrameLength(int, int)}
     * @param maxPieceCount most pieces a BITFIELD may declare: the swarm's piece count
     */
    public Decoder(int maxFrameLength, int maxPieceCount) {
      this.maxFrameLength = maxFrameLength;
      this.maxPieceCount = maxPieceCount;
    }

    @Override
    protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
      while (in.readableBytes() >= 4) {
        long length = in.getUnsignedInt(in.readerIndex());
        if (length == 0) {
          throw new FrameException("frame length 0: a frame has at least its type byte");
        }
        if (length > maxFrameLength) {
          int type = in.readableBytes() > 4 ? in.getUnsignedByte(in.readerIndex() + 4) : -1;
          throw new FrameException(
              "frame length "
                  + length
                  + (type >= 0 ? " (" + typeName(type) + ")" : "")
                  + " exceeds the limit of "
                  + maxFrameLength
                  + " bytes (piece size or bitfield plus headers); refusing it");
        }
        boolean piece = in.readableBytes() > 4 && in.getUnsignedByte(in.readerIndex() + 4) == PIECE;
        if (in.readableBytes() < 4 + length) {
          if (piece) {
            progress(in.readableBytes() - partialSeen);
            partialSeen = in.readableBytes();
          }
          return;
        }
        if (piece) {
          progress((int) (4 + length) - partialSeen);
        }
        partialSeen = 0;
        in.skipBytes(4);
        out.add(FrameCodec.decode(in.readRetainedSlice((int) length), maxPieceCount));
      }
    }

    private void progress(int bytes) {
      unreported += Math.max(0, bytes);
      if (unreported >= PROGRESS_BYTES) {
        unreported = 0;
        pieceProgressAt = System.nanoTime();
      }
    }

    /**
     * When ({@link System#nanoTime()}) at least {@link #PROGRESS_BYTES} more bytes of PIECE frames
     * had arrived, counting frames still being received; 0 before. A 4 MiB piece behind a busy
     * holder's other sends can take longer than the peer timeout to arrive whole, while its bytes
     * keep coming.
     */
    public long pieceProgressAt() {
      return pieceProgressAt;
    }
  }
}
