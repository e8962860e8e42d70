package io.tensorcast.dataplane.p2p;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.ByteToMessageDecoder;
import java.nio.charset.StandardCharsets;
import java.util.BitSet;
import java.util.List;

/**
 * Encoding and decoding of {@link Frame}s. Wire format, big-endian: {@code u32 length | u8 type |
 * body}, {@code length} = 1 + body bytes. Bodies:
 *
 * <ul>
 *   <li>HELLO (1): {@code u16 version | str artifactId | str peerId | str epoch | u32 pieceSize |
 *       u32 pieceCount | 32B mapDigest | 32B nonce}; {@code str} = {@code u16 n | n bytes UTF-8},
 *       at most {@value #MAX_HELLO_STRING} bytes each in a HELLO
 *   <li>BITFIELD (2): {@code u32 pieceCount | ⌈pieceCount/8⌉ bytes bitmap (bit i = byte i/8, mask
 *       0x80 >> i%8) | 32B SHA-256 per set bit, in piece order}
 *   <li>HAVE (3): {@code u32 piece | 32B SHA-256}
 *   <li>REQUEST (4): {@code u32 piece}
 *   <li>PIECE (5): {@code u32 piece | payload} (the payload is the rest of the frame)
 *   <li>REJECT (6): {@code i32 piece | str reason}
 *   <li>KEEPALIVE (7): empty
 *   <li>READING (8): {@code u32 piece} (since version 2)
 *   <li>AUTH (9): {@code 32B tag} (since version 3; {@link Frame.Auth})
 *   <li>HANDOVER (10): {@code str member | str why} (since version 4; {@link Frame.Handover}), each
 *       string at most {@value #MAX_HELLO_STRING} bytes
 * </ul>
 *
 * <p>Authentication (version 3): each side sends HELLO, then AUTH; before its AUTH nothing else is
 * accepted and no frame may be longer than {@value #PRE_AUTH_MAX_FRAME} bytes. Every frame after a
 * side's AUTH is sealed ({@link FrameSeal}): a control frame is {@code u32 length | u8 type | body
 * | 32B tag}, a PIECE {@code u32 length | u8 PIECE | u32 piece | 32B tag | payload}; {@code length}
 * counts the tag.
 *
 * <p>Malformed frames raise {@link FrameException} naming the frame type and the rule broken; a
 * length above the decoder's limit is refused before any of its body is buffered.
 */
public final class FrameCodec {
  /**
   * Protocol version; 2 added READING, 3 the authenticated handshake (epoch and nonce in HELLO,
   * AUTH, sealed frames), 4 HANDOVER. Members of different versions refuse each other.
   */
  public static final int VERSION = 4;

  /**
   * Longest frame accepted before the peer has authenticated (HELLO, AUTH, REJECT): a few hundred
   * bytes are enough, so a connection that has not proven membership never makes this side buffer
   * more.
   */
  public static final int PRE_AUTH_MAX_FRAME = 2048;

  /** Longest artifact id, peer id or epoch in a HELLO, in bytes of UTF-8. */
  public static final int MAX_HELLO_STRING = 256;

  public static final byte HELLO = 1;
  public static final byte BITFIELD = 2;
  public static final byte HAVE = 3;
  public static final byte REQUEST = 4;
  public static final byte PIECE = 5;
  public static final byte REJECT = 6;
  public static final byte KEEPALIVE = 7;
  public static final byte READING = 8;
  public static final byte AUTH = 9;
  public static final byte HANDOVER = 10;

  /** Bytes of {@code u32 length | u8 type | u32 piece} before an unsealed PIECE payload. */
  public static final int PIECE_HEADER_BYTES = 9;

  /**
   * What the sending side hands its channel before a piece's bytes: the header of a PIECE of {@code
   * length} bytes whose verified SHA-256 is {@code sha256}; the {@link Encoder} writes it unsealed
   * or sealed.
   */
  public record PieceHeader(int piece, int length, byte[] sha256) {}

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
      case AUTH -> "AUTH";
      case HANDOVER -> "HANDOVER";
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
      writeString(b, h.epoch());
      b.writeInt(h.pieceSize());
      b.writeInt(h.pieceCount());
      b.writeBytes(h.mapDigest());
      b.writeBytes(h.nonce());
    } else if (f instanceof Frame.Auth a) {
      b.writeBytes(a.tag());
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
    } else if (f instanceof Frame.Handover h) {
      writeString(b, h.member());
      writeString(b, h.why());
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
   * Encodes a sealed control frame: {@code u32 length | u8 type | body | 32B tag}, the tag from
   * {@code seal} (which advances its sequence number). A {@link Frame.Piece} is sealed with the
   * SHA-256 of its payload, computed here; the data path sends pieces as {@link PieceHeader} and
   * file bytes instead ({@link #sealedPieceHeader}).
   */
  public static ByteBuf encodeSealed(Frame f, FrameSeal seal, ByteBufAllocator alloc) {
    if (f instanceof Frame.Piece p) {
      byte[] sha = sha256(p.payload());
      ByteBuf head = sealedPieceHeader(alloc, p.piece(), p.payload().readableBytes(), sha, seal);
      return alloc.compositeBuffer(2).addComponents(true, head, p.payload());
    }
    ByteBuf b = encode(f, alloc);
    byte[] tag = seal.next(b.slice(4, b.readableBytes() - 4));
    b.writeBytes(tag);
    b.setInt(0, b.readableBytes() - 4);
    return b;
  }

  /**
   * {@code u32 length | u8 PIECE | u32 piece | 32B tag} for a sealed PIECE whose payload of {@code
   * length} bytes, with SHA-256 {@code sha256}, is sent after it.
   */
  public static ByteBuf sealedPieceHeader(
      ByteBufAllocator alloc, int piece, int length, byte[] sha256, FrameSeal seal) {
    long seq = seal.nextPieceSeq();
    ByteBuf b = alloc.buffer(PIECE_HEADER_BYTES + Frame.TAG_BYTES);
    b.writeInt(5 + Frame.TAG_BYTES + length);
    b.writeByte(PIECE);
    b.writeInt(piece);
    b.writeBytes(FrameSeal.pieceTag(seal.key(), seq, piece, length, sha256));
    return b;
  }

  private static byte[] sha256(ByteBuf b) {
    try {
      java.security.MessageDigest md = java.security.MessageDigest.getInstance("SHA-256");
      md.update(b.nioBuffer());
      return md.digest();
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
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
              String artifact = readHelloString(frame, name, "artifactId");
              String peer = readHelloString(frame, name, "peerId");
              String epoch = readHelloString(frame, name, "epoch");
              need(
                  frame,
                  8 + Frame.SHA256_BYTES + Frame.NONCE_BYTES,
                  name,
                  "u32 pieceSize, u32 pieceCount, 32-byte map digest, 32-byte nonce");
              int pieceSize = frame.readInt();
              int pieceCount = frame.readInt();
              byte[] digest = new byte[Frame.SHA256_BYTES];
              frame.readBytes(digest);
              byte[] nonce = new byte[Frame.NONCE_BYTES];
              frame.readBytes(nonce);
              yield new Frame.Hello(
                  version, artifact, peer, epoch, pieceSize, pieceCount, digest, nonce);
            }
            case AUTH -> {
              exact(frame, Frame.TAG_BYTES, name, "a 32-byte HMAC-SHA256 tag");
              byte[] tag = new byte[Frame.TAG_BYTES];
              frame.readBytes(tag);
              yield new Frame.Auth(tag);
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
            case HANDOVER -> {
              String member = readString(frame, name, "member");
              String why = readString(frame, name, "why");
              if (member.isEmpty()
                  || member.getBytes(StandardCharsets.UTF_8).length > MAX_HELLO_STRING
                  || why.getBytes(StandardCharsets.UTF_8).length > MAX_HELLO_STRING) {
                throw new FrameException(
                    name
                        + " frame: member must be 1.."
                        + MAX_HELLO_STRING
                        + " bytes and why at most "
                        + MAX_HELLO_STRING
                        + " bytes of UTF-8");
              }
              yield new Frame.Handover(member, why);
            }
            default ->
                throw new FrameException(
                    "unknown frame type "
                        + type
                        + " (known: 1 HELLO, 2 BITFIELD, 3 HAVE, 4 REQUEST,"
                        + " 5 PIECE, 6 REJECT, 7 KEEPALIVE, 8 READING, 9 AUTH, 10 HANDOVER)");
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

  private static String readHelloString(ByteBuf b, String frame, String field) {
    need(b, 2, frame, "the u16 length of " + field);
    int n = b.getUnsignedShort(b.readerIndex());
    if (n > MAX_HELLO_STRING) {
      throw new FrameException(
          frame + " frame: " + field + " of " + n + " bytes exceeds " + MAX_HELLO_STRING);
    }
    return readString(b, frame, field);
  }

  private static String readString(ByteBuf b, String frame, String field) {
    need(b, 2, frame, "the u16 length of " + field);
    int n = b.readUnsignedShort();
    need(b, n, frame, field + " of " + n + " bytes");
    return b.readCharSequence(n, StandardCharsets.UTF_8).toString();
  }

  /**
   * Netty decoder: splits the byte stream into frames and decodes them. A length of 0 or above the
   * current limit fails the channel with a {@link FrameException} before the body is buffered, so a
   * peer cannot make this side buffer more than one legal frame; a BITFIELD for more than {@code
   * maxPieceCount} pieces fails it before its hash table is allocated.
   *
   * <p>A decoder made {@link #forHandshake} starts unauthenticated: it accepts only HELLO, AUTH and
   * REJECT, at most {@value #PRE_AUTH_MAX_FRAME} bytes each, one frame per read so the handler acts
   * on each before the next is decoded. The frame after the peer's AUTH is sealed: from then on
   * every control frame's tag is checked with the key given to {@link #openAfterAuth} (a mismatch
   * fails the channel), and each PIECE keeps its sequence number and tag for the receiver to check
   * once it has hashed the payload.
   */
  public static final class Decoder extends ByteToMessageDecoder {
    /**
     * Bytes of PIECE frames that must arrive to count as progress ({@link #pieceProgressAt()}): a
     * peer trickling less than this per peer timeout is as stuck as a silent one.
     */
    public static final int PROGRESS_BYTES = 16 * 1024;

    private final int maxFrameLength;
    private final int maxPieceCount;
    private boolean authenticating;
    private FrameSeal pending;
    private FrameSeal open;
    private int partialSeen; // bytes of the PIECE frame being received, at the last decode
    private long unreported; // PIECE bytes arrived since progress was last marked
    private volatile long pieceProgressAt;

    /** A decoder of unsealed frames that bounds the frame length only. */
    public Decoder(int maxFrameLength) {
      this(maxFrameLength, Integer.MAX_VALUE);
    }

    /**
     * A decoder of unsealed frames (tools and tests that speak the frame format without a
     * handshake).
     *
     * @param maxFrameLength largest accepted frame length, {@link #maxFrameLength(int, int)}
     * @param maxPieceCount most pieces a BITFIELD may declare: the swarm's piece count
     */
    public Decoder(int maxFrameLength, int maxPieceCount) {
      this.maxFrameLength = maxFrameLength;
      this.maxPieceCount = maxPieceCount;
    }

    /**
     * A decoder for one side of a peer connection: unauthenticated until the peer's AUTH, sealed
     * after it.
     *
     * @param maxFrameLength largest frame after authentication, tag excluded ({@link
     *     #maxFrameLength(int, int)})
     * @param maxPieceCount the swarm's piece count
     */
    public static Decoder forHandshake(int maxFrameLength, int maxPieceCount) {
      Decoder d = new Decoder(maxFrameLength, maxPieceCount);
      d.authenticating = true;
      return d;
    }

    /**
     * The key of the peer's direction, derived once its HELLO arrived: frames after its AUTH are
     * checked with it. Call on the channel's event loop before the AUTH is decoded (the handler of
     * the HELLO does, since frames are decoded one at a time until then).
     */
    public void openAfterAuth(FrameSeal receive) {
      this.pending = receive;
    }

    /** Whether the peer's AUTH was decoded and frames are sealed now. */
    public boolean sealed() {
      return open != null;
    }

    /** The seal of the peer's direction once sealed, for checking PIECE tags; else null. */
    public FrameSeal receiveSeal() {
      return open;
    }

    @Override
    protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
      while (in.readableBytes() >= 4) {
        long length = in.getUnsignedInt(in.readerIndex());
        int type = in.readableBytes() > 4 ? in.getUnsignedByte(in.readerIndex() + 4) : -1;
        if (length == 0) {
          throw new FrameException("frame length 0: a frame has at least its type byte");
        }
        if (authenticating) {
          if (length > PRE_AUTH_MAX_FRAME) {
            throw new FrameException(
                "frame length "
                    + length
                    + (type >= 0 ? " (" + typeName(type) + ")" : "")
                    + " before authentication exceeds the limit of "
                    + PRE_AUTH_MAX_FRAME
                    + " bytes; refusing it");
          }
          if (type >= 0 && type != HELLO && type != AUTH && type != REJECT) {
            throw new FrameException(
                typeName(type)
                    + " frame before authentication: only HELLO and AUTH may come first");
          }
          if (in.readableBytes() < 4 + length) {
            return;
          }
          in.skipBytes(4);
          Frame f = FrameCodec.decode(in.readRetainedSlice((int) length), 0);
          if (f instanceof Frame.Auth) {
            if (pending == null) {
              throw new FrameException("AUTH frame before this side could check the peer's HELLO");
            }
            open = pending;
            pending = null;
            authenticating = false;
          }
          out.add(f);
          return; // one frame per call: the handler acts on it before the next is decoded
        }
        long limit = maxFrameLength + (open != null ? Frame.TAG_BYTES : 0L);
        if (length > limit) {
          throw new FrameException(
              "frame length "
                  + length
                  + (type >= 0 ? " (" + typeName(type) + ")" : "")
                  + " exceeds the limit of "
                  + limit
                  + " bytes (piece size or bitfield plus headers); refusing it");
        }
        boolean piece = type == PIECE;
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
        ByteBuf frame = in.readRetainedSlice((int) length);
        out.add(open == null ? FrameCodec.decode(frame, maxPieceCount) : unseal(frame));
      }
    }

    /** Checks and strips a sealed frame's tag (PIECE: keeps it for the receiver), decodes it. */
    private Frame unseal(ByteBuf frame) {
      int type = frame.getUnsignedByte(frame.readerIndex());
      if (type == PIECE) {
        try {
          if (frame.readableBytes() < 1 + 4 + Frame.TAG_BYTES) {
            throw new FrameException(
                "sealed PIECE frame is truncated: "
                    + frame.readableBytes()
                    + " bytes, expected at least the piece index and a 32-byte tag");
          }
          frame.skipBytes(1);
          int index = frame.readInt();
          byte[] tag = new byte[Frame.TAG_BYTES];
          frame.readBytes(tag);
          long seq = open.nextPieceSeq();
          return new Frame.Piece(index, frame.readRetainedSlice(frame.readableBytes()), seq, tag);
        } finally {
          frame.release();
        }
      }
      if (frame.readableBytes() < 1 + Frame.TAG_BYTES) {
        frame.release();
        throw new FrameException(
            typeName(type) + " frame is too short to carry its 32-byte tag; refusing it");
      }
      int bodyEnd = frame.writerIndex() - Frame.TAG_BYTES;
      byte[] expected = open.next(frame.slice(frame.readerIndex(), bodyEnd - frame.readerIndex()));
      byte[] tag = new byte[Frame.TAG_BYTES];
      frame.getBytes(bodyEnd, tag);
      if (!java.security.MessageDigest.isEqual(expected, tag)) {
        frame.release();
        throw new FrameException(
            typeName(type)
                + " frame's tag does not verify: the stream was altered (bytes injected, dropped"
                + " or corrupted on the way); closing the connection");
      }
      frame.writerIndex(bodyEnd);
      return FrameCodec.decode(frame, maxPieceCount);
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

  /**
   * Netty encoder of one side of a peer connection: writes {@link Frame}s and {@link PieceHeader}s
   * unsealed until this side's AUTH went out, sealed after it (with the key given to {@link
   * #sealAfterAuth}); anything else (the file regions of piece payloads, raw buffers) passes
   * through. Sequence numbers are taken here, on the event loop, in the order the frames enter the
   * socket.
   */
  public static final class Encoder extends ChannelOutboundHandlerAdapter {
    private FrameSeal pending;
    private FrameSeal seal;

    /** The key of this side's direction: frames after this side's AUTH are sealed with it. */
    public void sealAfterAuth(FrameSeal send) {
      this.pending = send;
    }

    /**
     * The seal in use once this side's AUTH went out, else null: for a writer that encodes frames
     * itself ({@link #encodeSealed}) and hands the bytes over in pieces, on the event loop.
     */
    public FrameSeal seal() {
      return seal;
    }

    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
      if (msg instanceof Frame f) {
        ByteBuf b = seal == null ? encode(f, ctx.alloc()) : encodeSealed(f, seal, ctx.alloc());
        if (f instanceof Frame.Auth) {
          seal = pending;
        }
        ctx.write(b, promise);
      } else if (msg instanceof PieceHeader h) {
        ctx.write(
            seal == null
                ? pieceHeader(ctx.alloc(), h.piece(), h.length())
                : sealedPieceHeader(ctx.alloc(), h.piece(), h.length(), h.sha256(), seal),
            promise);
      } else {
        ctx.write(msg, promise);
      }
    }
  }
}
