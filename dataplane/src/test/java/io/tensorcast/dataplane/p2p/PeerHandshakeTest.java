package io.tensorcast.dataplane.p2p;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.api.wire.Membership;
import java.net.InetAddress;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The rules of the peer handshake, apart from sockets. */
class PeerHandshakeTest {
  private static final Membership M =
      Membership.parseStatic("a=10.0.0.1:8472,b=10.0.0.2:8472,c=10.0.0.3:8472");

  private static byte[] bytes(int v) {
    byte[] b = new byte[32];
    Arrays.fill(b, (byte) v);
    return b;
  }

  private static Frame.Hello hello(String id) {
    return new Frame.Hello(
        FrameCodec.VERSION, "art", id, M.epoch(), 65536, 100, bytes(1), bytes(id.charAt(0)));
  }

  @Test
  void aHelloIsRefusedNamingWhatDiffers() throws Exception {
    Frame.Hello a = hello("a");
    InetAddress fromB = InetAddress.getByName("10.0.0.2");
    assertThat(PeerHandshake.refusal(a, hello("b"), M, fromB, null)).isNull();
    assertThat(PeerHandshake.refusal(a, hello("b"), null, fromB, null))
        .isEqualTo("this member has no membership yet");
    assertThat(PeerHandshake.refusal(a, hello("b").withEpoch("other"), M, fromB, null))
        .isEqualTo(
            "membership epoch 'other' differs from this member's '"
                + M.epoch()
                + "' (both must have applied the same PUT /v1/peers)");
    assertThat(PeerHandshake.refusal(a, hello("z"), M, fromB, null))
        .isEqualTo("'z' is not a member of membership " + M.epoch());
    assertThat(PeerHandshake.refusal(a, hello("b"), M, InetAddress.getByName("10.0.0.3"), null))
        .isEqualTo(
            "peer 'b' connects from 10.0.0.3 but the membership publishes 10.0.0.2:8472 for it");
    assertThat(
            PeerHandshake.refusal(a, hello("b"), M, InetAddress.getByName("::ffff:10.0.0.2"), null))
        .as("an IPv4-mapped IPv6 address is the same host")
        .isNull();
    assertThat(PeerHandshake.refusal(a, hello("b"), M, null, "c"))
        .isEqualTo("dialled peer 'c' but it says it is 'b'");
    assertThat(PeerHandshake.refusal(a, hello("a"), M, fromB, null))
        .isEqualTo("peer id 'a' is this member's own id");
  }

  @Test
  void onlyAnotherPieceMapOfTheSameArtifactIsAnotherListing() {
    Frame.Hello a = hello("a");
    Frame.Hello b = hello("b");
    assertThat(PeerHandshake.otherListing(a, b)).as("the same map").isFalse();
    Frame.Hello otherVersions =
        new Frame.Hello(
            FrameCodec.VERSION, "art", "b", M.epoch(), 65536, 100, bytes(2), bytes('b'));
    assertThat(PeerHandshake.otherListing(a, otherVersions))
        .as("same size, other ETags: the map digest differs")
        .isTrue();
    assertThat(PeerHandshake.refusal(a, otherVersions, M, null, "b"))
        .startsWith("piece map differs");
    Frame.Hello otherSize =
        new Frame.Hello(
            FrameCodec.VERSION, "art", "b", M.epoch(), 65536, 101, bytes(1), bytes('b'));
    assertThat(PeerHandshake.otherListing(a, otherSize)).as("another piece count").isTrue();
    Frame.Hello otherArtifact =
        new Frame.Hello(
            FrameCodec.VERSION, "other", "b", M.epoch(), 65536, 100, bytes(2), bytes('b'));
    assertThat(PeerHandshake.otherListing(a, otherArtifact)).as("another artifact").isFalse();
    Frame.Hello otherPieceSize =
        new Frame.Hello(
            FrameCodec.VERSION, "art", "b", M.epoch(), 131072, 50, bytes(2), bytes('b'));
    assertThat(PeerHandshake.otherListing(a, otherPieceSize))
        .as("another --piece-size is a configuration error, not a listing")
        .isFalse();
    Frame.Hello self =
        new Frame.Hello(
            FrameCodec.VERSION, "art", "a", M.epoch(), 65536, 100, bytes(2), bytes('a'));
    assertThat(PeerHandshake.otherListing(a, self)).as("its own id").isFalse();
  }

  @Test
  void authTagsBindSecretNoncesRoleAndAddresses() {
    byte[] secret = bytes(9);
    Frame.Hello d = hello("a");
    Frame.Hello acc = hello("b");
    byte[] t = PeerHandshake.transcript(d, acc);
    byte[] tag = PeerHandshake.authTag(secret, t, true, "10.0.0.1:8472", "10.0.0.2:8472");
    assertThat(PeerHandshake.authTag(secret, t, true, "10.0.0.1:8472", "10.0.0.2:8472"))
        .isEqualTo(tag);
    // each input changes the tag
    assertThat(PeerHandshake.authTag(bytes(8), t, true, "10.0.0.1:8472", "10.0.0.2:8472"))
        .as("another secret")
        .isNotEqualTo(tag);
    assertThat(PeerHandshake.authTag(secret, t, false, "10.0.0.1:8472", "10.0.0.2:8472"))
        .as("the other role (a tag reflected back)")
        .isNotEqualTo(tag);
    assertThat(PeerHandshake.authTag(secret, t, true, "10.0.0.9:8472", "10.0.0.2:8472"))
        .as("another published address")
        .isNotEqualTo(tag);
    byte[] replayed =
        PeerHandshake.transcript(d, acc.withNonce(bytes(77))); // a fresh nonce of the acceptor
    assertThat(PeerHandshake.authTag(secret, replayed, true, "10.0.0.1:8472", "10.0.0.2:8472"))
        .as("a new connection's nonce")
        .isNotEqualTo(tag);
    assertThat(PeerHandshake.frameKey(secret, t, true, "10.0.0.1:8472", "10.0.0.2:8472"))
        .isNotEqualTo(PeerHandshake.frameKey(secret, t, false, "10.0.0.1:8472", "10.0.0.2:8472"))
        .isNotEqualTo(tag);
  }
}
