package io.tensorcast.dataplane.p2p;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.DecoderException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.BitSet;
import org.junit.jupiter.api.Test;

class FrameCodecTest {
  private static final ByteBufAllocator A = ByteBufAllocator.DEFAULT;

  private static byte[] sha(int seed) {
    byte[] b = new byte[32];
    Arrays.fill(b, (byte) seed);
    return b;
  }

  private static Frame roundTrip(Frame f) {
    EmbeddedChannel ch = new EmbeddedChannel(new FrameCodec.Decoder(1 << 20));
    ByteBuf encoded = FrameCodec.encode(f, A);
    // Deliver byte by byte halves to exercise reassembly.
    int half = encoded.readableBytes() / 2;
    ch.writeInbound(encoded.readRetainedSlice(half));
    ch.writeInbound(encoded.readRetainedSlice(encoded.readableBytes()));
    encoded.release();
    Frame out = ch.readInbound();
    assertThat((Object) ch.readInbound()).isNull();
    return out;
  }

  @Test
  void everyFrameTypeRoundTrips() {
    Frame.Hello hello = new Frame.Hello(3, "art", "pod-0", "epoch-1", 65536, 120, sha(7), sha(8));
    assertThat(roundTrip(hello)).isEqualTo(hello);
    assertThat(roundTrip(new Frame.Auth(sha(9)))).isEqualTo(new Frame.Auth(sha(9)));

    BitSet have = new BitSet();
    have.set(0);
    have.set(9);
    byte[][] hashes = new byte[11][];
    hashes[0] = sha(1);
    hashes[9] = sha(2);
    Frame.Bitfield bf = (Frame.Bitfield) roundTrip(new Frame.Bitfield(11, have, hashes));
    assertThat(bf.pieceCount()).isEqualTo(11);
    assertThat(bf.have()).isEqualTo(have);
    assertThat(bf.sha256()[9]).isEqualTo(sha(2));
    assertThat(bf.sha256()[1]).isNull();

    Frame.Have h = (Frame.Have) roundTrip(new Frame.Have(5, sha(3)));
    assertThat(h.piece()).isEqualTo(5);
    assertThat(h.sha256()).isEqualTo(sha(3));
    assertThat(roundTrip(new Frame.Request(42))).isEqualTo(new Frame.Request(42));
    assertThat(roundTrip(new Frame.Handover("pod-2", "announced none of the 4 pieces")))
        .isEqualTo(new Frame.Handover("pod-2", "announced none of the 4 pieces"));
    assertThat(roundTrip(new Frame.Reject(-1, "piece size differs")))
        .isEqualTo(new Frame.Reject(-1, "piece size differs"));
    assertThat(roundTrip(new Frame.KeepAlive())).isEqualTo(new Frame.KeepAlive());
    assertThat(roundTrip(new Frame.Reading(77))).isEqualTo(new Frame.Reading(77));
    ByteBuf reading = FrameCodec.encode(new Frame.Reading(77), A);
    assertThat(reading.readableBytes()).as("u32 length | u8 type | u32 piece").isEqualTo(9);
    assertThat(reading.getByte(4)).isEqualTo(FrameCodec.READING);
    reading.release();

    byte[] payload = "piece bytes".getBytes(StandardCharsets.UTF_8);
    Frame.Piece p = (Frame.Piece) roundTrip(new Frame.Piece(3, Unpooled.wrappedBuffer(payload)));
    assertThat(p.piece()).isEqualTo(3);
    byte[] got = new byte[p.payload().readableBytes()];
    p.payload().readBytes(got);
    p.payload().release();
    assertThat(got).isEqualTo(payload);
  }

  @Test
  void oversizedLengthIsRefusedBeforeItsBodyArrives() {
    EmbeddedChannel ch = new EmbeddedChannel(new FrameCodec.Decoder(1000));
    ByteBuf b = Unpooled.buffer().writeInt(1001).writeByte(FrameCodec.PIECE);
    assertThatThrownBy(() -> ch.writeInbound(b))
        .isInstanceOf(FrameException.class)
        .hasMessage(
            "frame length 1001 (PIECE) exceeds the limit of 1000 bytes (piece size or bitfield"
                + " plus headers); refusing it");
    ByteBuf huge = Unpooled.buffer().writeInt(0xFFFFFFFF);
    EmbeddedChannel ch2 = new EmbeddedChannel(new FrameCodec.Decoder(1000));
    assertThatThrownBy(() -> ch2.writeInbound(huge))
        .hasMessageContaining("frame length 4294967295 exceeds the limit of 1000 bytes");
  }

  @Test
  void aBitfieldForMorePiecesThanTheSwarmHasIsRefusedBeforeItsHashTableIsAllocated() {
    // 1 MiB of zero bitmap declares 8Mi pieces: decoding it unchecked allocates a byte[8Mi][]
    // (32-64 MiB) for a 1 MiB frame. The swarm has 3 pieces.
    int bitmapBytes = 1 << 20;
    int count = bitmapBytes * 8;
    int length = 1 + 4 + bitmapBytes;
    EmbeddedChannel ch =
        new EmbeddedChannel(new FrameCodec.Decoder(FrameCodec.maxFrameLength(length, 3), 3));
    ByteBuf b =
        Unpooled.buffer()
            .writeInt(length)
            .writeByte(FrameCodec.BITFIELD)
            .writeInt(count)
            .writeZero(bitmapBytes);
    assertThatThrownBy(() -> ch.writeInbound(b))
        .isInstanceOf(DecoderException.class)
        .hasMessage(
            "BITFIELD frame: piece count 8388608 exceeds this swarm's 3 pieces; refusing it");
    // the swarm's own count still decodes
    EmbeddedChannel ok = new EmbeddedChannel(new FrameCodec.Decoder(1000, 3));
    ok.writeInbound(
        Unpooled.buffer().writeInt(6).writeByte(FrameCodec.BITFIELD).writeInt(3).writeByte(0));
    Frame.Bitfield f = ok.readInbound();
    assertThat(f.pieceCount()).isEqualTo(3);
    assertThat(f.have().isEmpty()).isTrue();
  }

  @Test
  void malformedFramesGiveClearErrors() {
    assertThatThrownBy(() -> FrameCodec.decode(Unpooled.buffer().writeByte(11)))
        .isInstanceOf(FrameException.class)
        .hasMessageStartingWith("unknown frame type 11 (known: 1 HELLO")
        .hasMessageEndingWith("9 AUTH, 10 HANDOVER)");
    assertThatThrownBy(
            () ->
                FrameCodec.decode(
                    Unpooled.buffer().writeByte(FrameCodec.HANDOVER).writeShort(0).writeShort(0)))
        .isInstanceOf(FrameException.class)
        .hasMessage(
            "HANDOVER frame: member must be 1..256 bytes and why at most 256 bytes of UTF-8");
    assertThatThrownBy(
            () -> FrameCodec.decode(Unpooled.buffer().writeByte(FrameCodec.HAVE).writeInt(1)))
        .hasMessage("HAVE frame: body is 4 bytes, expected 36 (u32 piece and a 32-byte SHA-256)");
    assertThatThrownBy(
            () ->
                FrameCodec.decode(
                    Unpooled.buffer().writeByte(FrameCodec.REQUEST).writeInt(1).writeByte(0)))
        .hasMessage("REQUEST frame: body is 5 bytes, expected 4 (u32 piece)");
    assertThatThrownBy(
            () -> FrameCodec.decode(Unpooled.buffer().writeByte(FrameCodec.READING).writeShort(1)))
        .hasMessage("READING frame: body is 2 bytes, expected 4 (u32 piece)");
    // BITFIELD: 3 pieces, bit 4 set
    assertThatThrownBy(
            () ->
                FrameCodec.decode(
                    Unpooled.buffer()
                        .writeByte(FrameCodec.BITFIELD)
                        .writeInt(3)
                        .writeByte(0b0000_1000)))
        .hasMessage("BITFIELD frame: bit 4 is set but there are only 3 pieces");
    // BITFIELD: one set bit, no hash
    assertThatThrownBy(
            () ->
                FrameCodec.decode(
                    Unpooled.buffer()
                        .writeByte(FrameCodec.BITFIELD)
                        .writeInt(3)
                        .writeByte(0b1000_0000)))
        .hasMessage(
            "BITFIELD frame: 1 pieces are set, so 32 bytes of SHA-256 must follow, but 0 do");
    // HELLO with a string longer than the frame
    assertThatThrownBy(
            () ->
                FrameCodec.decode(
                    Unpooled.buffer().writeByte(FrameCodec.HELLO).writeShort(1).writeShort(50)))
        .hasMessage(
            "HELLO frame is truncated: expected artifactId of 50 bytes (50 bytes) but only 0"
                + " bytes remain");
    EmbeddedChannel ch = new EmbeddedChannel(new FrameCodec.Decoder(1000));
    assertThatThrownBy(() -> ch.writeInbound(Unpooled.buffer().writeInt(0)))
        .isInstanceOf(DecoderException.class)
        .hasMessage("frame length 0: a frame has at least its type byte");
  }

  @Test
  void bytesOfAPieceStillArrivingCountAsProgressOtherFramesDoNot() {
    FrameCodec.Decoder decoder = new FrameCodec.Decoder(1 << 20);
    EmbeddedChannel ch = new EmbeddedChannel(decoder);
    ch.writeInbound(FrameCodec.encode(new Frame.KeepAlive(), A));
    ch.writeInbound(FrameCodec.encode(new Frame.Have(3, sha(1)), A));
    assertThat(decoder.pieceProgressAt()).as("after control frames only").isZero();
    assertThat((Object) ch.readInbound()).isInstanceOf(Frame.KeepAlive.class);
    assertThat((Object) ch.readInbound()).isInstanceOf(Frame.Have.class);

    ByteBuf piece =
        FrameCodec.encode(new Frame.Piece(9, Unpooled.wrappedBuffer(new byte[64 * 1024])), A);
    ch.writeInbound(piece.readRetainedSlice(FrameCodec.Decoder.PROGRESS_BYTES - 100));
    assertThat(decoder.pieceProgressAt()).as("below the progress threshold").isZero();
    ch.writeInbound(piece.readRetainedSlice(200));
    long first = decoder.pieceProgressAt();
    assertThat(first).as("a partial PIECE past the threshold").isPositive();
    assertThat((Object) ch.readInbound()).as("no frame yet").isNull();

    ch.writeInbound(piece.readRetainedSlice(piece.readableBytes()));
    piece.release();
    Frame.Piece whole = ch.readInbound();
    assertThat(whole.piece()).isEqualTo(9);
    assertThat(whole.payload().readableBytes()).isEqualTo(64 * 1024);
    whole.payload().release();
    assertThat(decoder.pieceProgressAt()).isGreaterThanOrEqualTo(first);
  }

  @Test
  void beforeAuthenticationOnlySmallHandshakeFramesAreAccepted() {
    // A PIECE header claiming 1 MiB before any HELLO: refused on its first 5 bytes, nothing of
    // its body is buffered.
    EmbeddedChannel piece =
        new EmbeddedChannel(
            FrameCodec.Decoder.forHandshake(FrameCodec.maxFrameLength(1 << 20, 8), 8));
    assertThatThrownBy(
            () ->
                piece.writeInbound(Unpooled.buffer().writeInt(1 << 20).writeByte(FrameCodec.PIECE)))
        .isInstanceOf(DecoderException.class)
        .hasMessage(
            "frame length 1048576 (PIECE) before authentication exceeds the limit of 2048 bytes;"
                + " refusing it");
    EmbeddedChannel request = new EmbeddedChannel(FrameCodec.Decoder.forHandshake(1 << 20, 8));
    assertThatThrownBy(() -> request.writeInbound(FrameCodec.encode(new Frame.Request(0), A)))
        .hasMessage("REQUEST frame before authentication: only HELLO and AUTH may come first");
    EmbeddedChannel early = new EmbeddedChannel(FrameCodec.Decoder.forHandshake(1 << 20, 8));
    assertThatThrownBy(() -> early.writeInbound(FrameCodec.encode(new Frame.Auth(sha(1)), A)))
        .hasMessage("AUTH frame before this side could check the peer's HELLO");
    // HELLO strings are bounded
    ByteBuf longId = Unpooled.buffer().writeByte(FrameCodec.HELLO).writeShort(3).writeShort(300);
    assertThatThrownBy(() -> FrameCodec.decode(longId))
        .hasMessage("HELLO frame: artifactId of 300 bytes exceeds 256");
  }

  @Test
  void sealedFramesPassAndAnyAlteredInjectedOrReplayedFrameFailsItsTag() {
    byte[] key = sha(42);
    FrameCodec.Decoder decoder = FrameCodec.Decoder.forHandshake(1 << 20, 8);
    EmbeddedChannel in = new EmbeddedChannel(decoder);
    in.writeInbound(FrameCodec.encode(new Frame.Hello(3, "a", "p", "e", 16, 8, sha(1), sha(2)), A));
    assertThat((Object) in.readInbound()).isInstanceOf(Frame.Hello.class);
    decoder.openAfterAuth(new FrameSeal(key));
    in.writeInbound(FrameCodec.encode(new Frame.Auth(sha(3)), A));
    assertThat((Object) in.readInbound()).isInstanceOf(Frame.Auth.class);
    assertThat(decoder.sealed()).isTrue();

    FrameSeal send = new FrameSeal(key);
    ByteBuf have = FrameCodec.encodeSealed(new Frame.Have(2, sha(5)), send, A);
    byte[] haveBytes = io.netty.buffer.ByteBufUtil.getBytes(have);
    in.writeInbound(have);
    Frame.Have h = in.readInbound();
    assertThat(h.piece()).isEqualTo(2);
    // A PIECE: tagged over the SHA-256 of its payload, checked by whoever hashes the payload.
    byte[] payload = "sixteen bytes!!!".getBytes(StandardCharsets.UTF_8);
    in.writeInbound(
        FrameCodec.encodeSealed(new Frame.Piece(4, Unpooled.wrappedBuffer(payload)), send, A));
    Frame.Piece p = in.readInbound();
    byte[] sha;
    try {
      sha = java.security.MessageDigest.getInstance("SHA-256").digest(payload);
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
    assertThat(p.tag())
        .isEqualTo(FrameSeal.pieceTag(key, p.seq(), 4, payload.length, sha))
        .isNotEqualTo(FrameSeal.pieceTag(key, p.seq(), 4, payload.length, sha(6)));
    p.payload().release();

    // The same HAVE again (a replay): its tag was for an earlier sequence number.
    assertThatThrownBy(() -> in.writeInbound(Unpooled.wrappedBuffer(haveBytes)))
        .isInstanceOf(DecoderException.class)
        .hasMessageStartingWith("HAVE frame's tag does not verify: the stream was altered");

    // One flipped bit in a fresh frame's body.
    FrameCodec.Decoder d2 = FrameCodec.Decoder.forHandshake(1 << 20, 8);
    EmbeddedChannel in2 = new EmbeddedChannel(d2);
    in2.writeInbound(
        FrameCodec.encode(new Frame.Hello(3, "a", "p", "e", 16, 8, sha(1), sha(2)), A));
    in2.readInbound();
    d2.openAfterAuth(new FrameSeal(key));
    in2.writeInbound(FrameCodec.encode(new Frame.Auth(sha(3)), A));
    in2.readInbound();
    ByteBuf req = FrameCodec.encodeSealed(new Frame.Request(7), new FrameSeal(key), A);
    req.setByte(8, req.getByte(8) ^ 1); // piece 7 -> 6
    assertThatThrownBy(() -> in2.writeInbound(req))
        .hasMessageStartingWith("REQUEST frame's tag does not verify");
  }
}
