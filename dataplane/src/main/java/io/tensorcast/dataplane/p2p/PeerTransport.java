package io.tensorcast.dataplane.p2p;

import java.net.InetSocketAddress;
import java.nio.file.Path;

/**
 * Moves {@link Frame}s and piece bytes between the members of a swarm. The swarm logic ({@link
 * PeerSwarm}) only sees this interface, so a transport over RDMA can replace the TCP one ({@link
 * NettyPeerTransport}) without touching it.
 *
 * <p>A transport performs the authenticated handshake itself ({@link PeerHandshake}: refusing peers
 * whose artifact id, piece size, piece map or membership epoch differ, that are not members, that
 * connect from another address than the membership publishes, or that do not prove the artifact's
 * peer secret) and reports a connection to its {@link Listener} only once the handshake passed;
 * before that, no frame but the handshake's reaches the listener.
 */
public interface PeerTransport extends AutoCloseable {

  /** The address peers connect to (useful with port 0). */
  InetSocketAddress listenAddress();

  /**
   * Keeps a connection to {@code peerId} at {@code address}: connects now and reconnects with
   * back-off after a failure or a close until {@link #forget} or {@link #close()}.
   */
  void dial(String peerId, InetSocketAddress address);

  /** Stops dialling {@code peerId} and closes a connection to it, if any. */
  void forget(String peerId);

  /**
   * Reports connections held since the start (a transport started before its swarm could take part,
   * see {@link NettyPeerTransport#start(InetSocketAddress, Frame.Hello, java.time.Duration,
   * Listener, NettyPeerTransport.Auth, boolean)}) to the listener, and every later one as it passes
   * the handshake. The default: nothing is held.
   */
  default void open() {}

  @Override
  void close();

  /** One handshaken connection to a peer. Methods may be called from any thread. */
  interface PeerConnection {
    /** The peer's member id (from its HELLO). */
    String peerId();

    /**
     * Sends a control frame (not PIECE), ahead of pieces still queued on this connection: it waits
     * behind at most the piece being sent, so HAVE, READING and REQUEST frames are not held up by
     * piece data.
     */
    void send(Frame frame);

    /**
     * Sends piece {@code piece}: the PIECE header then {@code length} bytes of {@code file} from
     * {@code offset}, zero-copy where the transport can (sendfile). Pieces are sent one after
     * another in the order asked. {@code sent} runs once the bytes were handed to the network; it
     * does not run for a piece the connection closed before.
     *
     * @param sha256 the SHA-256 of the piece as this member verified it (the PIECE's tag covers it)
     */
    void sendPiece(int piece, Path file, long offset, int length, byte[] sha256, Runnable sent);

    /**
     * Whether a received PIECE's tag matches its payload, whose SHA-256 the receiver computed: the
     * piece came from this authenticated peer, in sequence, not from something injected into the
     * stream. Unsealed transports answer true.
     */
    default boolean authentic(Frame.Piece piece, byte[] sha256) {
      return true;
    }

    /**
     * When ({@link System#nanoTime()}) bytes of pieces last arrived on this connection in a
     * meaningful amount, including pieces still arriving; 0 if never. The swarm's stuck rule uses
     * it: a peer whose pieces keep arriving is busy, not stuck.
     */
    default long pieceProgressAt() {
      return 0;
    }

    /** Closes the connection; the listener then sees {@link Listener#disconnected}. */
    void close(String why);
  }

  /** Receives the transport's events; called on transport threads, must not block long. */
  interface Listener {
    /** A connection passed the handshake. */
    void connected(PeerConnection connection);

    /**
     * A frame arrived on an authenticated connection (never HELLO or AUTH). A {@link Frame.Piece}'s
     * payload must be released.
     */
    void received(PeerConnection connection, Frame frame);

    /** A connection that was reported {@link #connected} closed. */
    void disconnected(PeerConnection connection);

    /**
     * A connection was refused or failed its handshake; {@code kind} names why ({@code
     * not-a-member-address}, {@code too-many-handshakes}, {@code no-membership}, {@code hello},
     * {@code auth}, {@code handshake}, {@code handshake-timeout}).
     */
    default void refused(String kind) {}

    /**
     * A member's HELLO was refused because it carries another piece map of the same artifact
     * ({@link PeerHandshake#otherListing}): it listed other files, sizes or object versions. Not
     * authenticated (the HELLO comes before AUTH): a hint to check the source, never a fact.
     *
     * @param peerId the id the HELLO names
     */
    default void otherListing(String peerId) {}
  }
}
