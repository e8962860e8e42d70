package io.tensorcast.dataplane.p2p;

import io.tensorcast.api.wire.Membership;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Objects;

/**
 * How a data-plane member takes part in peer-to-peer distribution ({@code dataplane serve} flags).
 *
 * @param peerId this member's id in the swarm ({@code --peer-id}; default POD_NAME, else hostname)
 * @param listen peer transport address ({@code --peer-listen}, default {@code $POD_IP:8472})
 * @param pieceSize bytes per piece ({@code --piece-size}); the same on every member
 * @param staticPeers membership from {@code --peers}, or null to wait for {@code PUT /v1/peers}
 * @param membershipWait how long to wait for a membership before loading everything from the source
 *     alone ({@code --membership-wait})
 * @param peerTimeout a requested piece not received within this is requested elsewhere; a
 *     connection silent this long is closed; a member disconnected this long is lost; a source
 *     response of the swarm whose body brings no byte for half of it (at least 5 s) is cut and
 *     resumed ({@code --peer-timeout})
 * @param maxInFlight most piece requests outstanding per peer
 * @param secret the artifact's peer secret ({@code --peer-secret-file}); null: the peer transport
 *     is not started and the member loads from the source alone (a peer port without a secret would
 *     have to trust whoever connects)
 */
public record PeerSettings(
    String peerId,
    InetSocketAddress listen,
    int pieceSize,
    Membership staticPeers,
    Duration membershipWait,
    Duration peerTimeout,
    int maxInFlight,
    PeerSecret secret) {

  public static final int DEFAULT_PORT = 8472;
  public static final int DEFAULT_PIECE_SIZE = 1024 * 1024;
  public static final Duration DEFAULT_MEMBERSHIP_WAIT = Duration.ofSeconds(10);
  public static final Duration DEFAULT_PEER_TIMEOUT = Duration.ofSeconds(10);
  public static final int DEFAULT_MAX_IN_FLIGHT = 4;

  public PeerSettings {
    Objects.requireNonNull(peerId, "peerId");
    Objects.requireNonNull(listen, "listen");
    Objects.requireNonNull(membershipWait, "membershipWait");
    Objects.requireNonNull(peerTimeout, "peerTimeout");
    if (peerId.isBlank()) {
      throw new IllegalArgumentException("--peer-id must not be empty");
    }
    if (pieceSize < 1 || pieceSize > PieceMap.MAX_PIECE_SIZE) {
      throw new IllegalArgumentException(
          "--piece-size must be between 1 byte and 64Mi, got " + pieceSize);
    }
    if (peerTimeout.isNegative() || peerTimeout.isZero()) {
      throw new IllegalArgumentException("--peer-timeout must be positive, got " + peerTimeout);
    }
    if (membershipWait.isNegative()) {
      throw new IllegalArgumentException("--membership-wait must not be negative");
    }
    if (maxInFlight < 1) {
      throw new IllegalArgumentException("maxInFlight must be >= 1");
    }
  }
}
