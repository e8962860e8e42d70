package io.tensorcast.dataplane.p2p;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.netty.buffer.ByteBuf;
import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.load.Sha256;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The swarm of one sealed written version: its pieces originate at its writers (members that hold
 * the files they sealed), not at a source, and every piece's SHA-256 is known before any byte moves
 * — from the writers' seal records, bound into the handshake ({@link #helloDigest}). The writer of
 * a file is the authority for its pieces' hashes: a piece from any member is written only when it
 * hashes to the writer's value, and a member that announces another hash for a piece is dropped
 * (not asked, served or trusted again).
 *
 * <p>Members want different pieces: a reader that keeps a full copy wants all, a reader that keeps
 * only its tensor-parallel ranks' shards wants the pieces that overlap them (computed by the caller
 * from the read planner), a writer wants none. Pieces that are stored as the writer's bytes are
 * announced (HAVE) and relayed; pieces a member only cuts ranges from ({@link PieceSink} returns
 * false) are not.
 *
 * <p>Fetch policy (every {@value #TICK_MS} ms, under the lock): at most {@link
 * PeerSwarm#maxTotalInFlight} requests in all and {@link PeerSwarm#perPeerInFlight} per peer;
 * relaying members are asked before writers, the least-loaded first, the rarest piece first (ties
 * rotated per member). A piece only writers hold is fetched from a writer by one member, which
 * announces it with READING ("fetching it from its writer now"); the others wait for that member's
 * HAVE and fetch it from there, unless the mark lapses (a fifth of the peer timeout). Marks travel
 * behind piece data and can arrive late on a busy link, so the writer arbitrates too: it sends a
 * piece to one member, answers another member that asks for it within the grace with REJECT {@code
 * "sent to <id>"} (that member then waits for the first one's HAVE), and serves a member that asks
 * again after the grace (the first may not keep the piece). So each byte leaves its writer about
 * once, whatever the number of readers. A request unanswered for the peer timeout by a peer that
 * sends nothing is asked elsewhere.
 *
 * <p>Trust is that of {@link PeerSwarm}: the transport admits only members of the current
 * membership at their published addresses that prove the artifact's peer secret ({@link
 * PeerHandshake}), every frame after the handshake is sealed, and a piece whose tag does not match
 * its payload is dropped with its sender. Without a peer secret the swarm does not start. A member
 * that leaves the membership, or moves, is disconnected.
 *
 * <p>Thread-safe. Metrics (tag {@code artifact}): {@code
 * tensorcast_dataplane_peer_bytes_sent_total}, {@code
 * tensorcast_dataplane_peer_bytes_received_total} and {@code
 * tensorcast_dataplane_peer_connections_refused_total} (tag {@code reason}), shared with {@link
 * PeerSwarm}.
 */
public final class OriginSwarm implements PeerTransport.Listener, AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(OriginSwarm.class);

  private static final long TICK_MS = 50;

  /**
   * The start of a writer's REJECT reason for a piece it sent to another member moments ago: the
   * requester fetches it from that member ({@code "sent to <id>"}).
   */
  public static final String SENT_TO = "sent to ";

  /** Where a verified piece goes. */
  @FunctionalInterface
  public interface PieceSink {
    /**
     * Stores a piece that hashed to its writer's value.
     *
     * @param bytes the piece's bytes (position to limit)
     * @return true when the piece is now in the store as the writer's bytes at its offset in its
     *     file (so it can be served to others), false when only ranges of it were kept
     */
    boolean accept(PieceMap.Piece piece, ByteBuffer bytes);
  }

  /**
   * What this member holds and wants.
   *
   * @param files directory holding the files of the pieces in {@code present} (served from there)
   * @param present pieces held now, verified (a writer's sealed files)
   * @param wanted pieces this member needs
   * @param relays whether the pieces it fetches are kept whole (a full copy) and so relayed to
   *     others; a member that only cuts ranges from them does not announce its writer fetches
   */
  public record Holdings(Path files, BitSet present, BitSet wanted, boolean relays) {}

  private final String swarmId;
  private final String self;
  private final PieceMap map;
  private final byte[][] expected;
  private final Set<String> writers;
  private final Path files;
  private final PieceSink sink;
  private final boolean relays;
  private final PeerSettings settings;
  private final Counter bytesSent;
  private final Counter bytesReceived;
  private final MeterRegistry registry;
  private final Tags tags;
  private final byte[] helloDigest;
  private final int salt;

  /** Per piece, the requests that passed it over at the front of the tie window (SwarmPlan). */
  private final byte[] passedOver;

  // ---- guarded by this
  private final BitSet present;
  private final BitSet wanted;
  private final BitSet received = new BitSet();
  private final BitSet inProgress = new BitSet();
  private final Map<String, Peer> peers = new HashMap<>();
  private final Map<String, java.net.InetSocketAddress> dialled = new HashMap<>();
  private Membership membership;
  private PeerTransport transport;
  private boolean closed;
  private String failure;
  private ScheduledExecutorService ticker;
  private ExecutorService verifier;
  private long startedAt;

  /** (Writers) piece → the member it was first sent to and when (nanoTime). */
  private final Map<Integer, Map.Entry<String, Long>> sentTo = new HashMap<>();

  /** (Writers) "piece member" → when that member was first told to fetch the piece elsewhere. */
  private final Map<String, Long> deferred = new HashMap<>();

  private static final class Peer {
    final String id;
    final long rank;
    final boolean writer;
    PeerTransport.PeerConnection conn;
    final BitSet has = new BitSet();
    final BitSet bad = new BitSet();
    final Map<Integer, Long> inFlight = new LinkedHashMap<>();
    final Map<Integer, Long> fetching = new HashMap<>();
    long lastPieceAt;
    int faults;
    String dropped;
    int queuedSends;

    Peer(String id, long rank, boolean writer) {
      this.id = id;
      this.rank = rank;
      this.writer = writer;
    }

    boolean usable() {
      return conn != null && dropped == null && faults < SwarmPolicy.MAX_FAULTS;
    }
  }

  /**
   * @param swarmId the version's name (sent in HELLO; every member the same)
   * @param map the version's pieces (the union of its writers' files)
   * @param expected every piece's SHA-256 from its writer's seal record
   * @param recordDigest digest of the version's (union) seal record, bound into HELLO
   * @param writers the member ids of the version's writers
   * @param holdings what this member holds and wants
   * @param sink where verified pieces go
   * @param settings transport settings (id, listen address, timeouts, in-flight limit)
   * @param registry metrics
   * @param metricsTag the {@code artifact} tag of the metrics
   */
  public OriginSwarm(
      String swarmId,
      PieceMap map,
      byte[][] expected,
      byte[] recordDigest,
      Set<String> writers,
      Holdings holdings,
      PieceSink sink,
      PeerSettings settings,
      MeterRegistry registry,
      String metricsTag) {
    this.swarmId = Objects.requireNonNull(swarmId, "swarmId");
    this.map = Objects.requireNonNull(map, "map");
    if (expected.length != map.size()) {
      throw new IllegalArgumentException(
          expected.length + " piece hashes for " + map.size() + " pieces");
    }
    this.expected = expected.clone();
    this.writers = Set.copyOf(writers);
    this.files = holdings.files();
    this.present = (BitSet) holdings.present().clone();
    this.wanted = (BitSet) holdings.wanted().clone();
    this.sink = Objects.requireNonNull(sink, "sink");
    this.relays = holdings.relays();
    this.settings = Objects.requireNonNull(settings, "settings");
    this.self = settings.peerId();
    this.salt = self.hashCode();
    this.passedOver = new byte[map.size()];
    this.registry = Objects.requireNonNull(registry, "registry");
    this.tags = Tags.of("artifact", metricsTag);
    this.bytesSent =
        Counter.builder("tensorcast.dataplane.peer.bytes.sent")
            .tags(tags)
            .description("Piece bytes sent to peers")
            .register(registry);
    this.bytesReceived =
        Counter.builder("tensorcast.dataplane.peer.bytes.received")
            .tags(tags)
            .description("Piece bytes received from peers, verified and written to the store")
            .register(registry);
    this.helloDigest = helloDigest(map, recordDigest);
  }

  /** SHA-256 over the piece map's digest and the seal record's: what HELLO carries. */
  public static byte[] helloDigest(PieceMap map, byte[] recordDigest) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      md.update("tensorcast-origin-swarm-v1\n".getBytes(StandardCharsets.UTF_8));
      md.update(map.digest());
      md.update(recordDigest);
      return md.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * Starts the transport and the scheduler.
   *
   * @throws IllegalStateException without a peer secret ({@link PeerSettings#secret()}): the peer
   *     port could not tell members from strangers
   * @throws RuntimeException when the listen address cannot be bound
   */
  public void start() throws InterruptedException {
    if (settings.secret() == null) {
      throw new IllegalStateException(
          "version "
              + swarmId
              + ": no peer secret (--peer-secret-file); a written version is shared only between"
              + " members that prove the artifact's secret");
    }
    Frame.Hello hello =
        new Frame.Hello(
            FrameCodec.VERSION,
            swarmId,
            self,
            "",
            map.pieceSize(),
            map.size(),
            helloDigest,
            new byte[Frame.NONCE_BYTES]);
    PeerTransport t =
        NettyPeerTransport.start(
            settings.listen(),
            hello,
            settings.peerTimeout(),
            this,
            new NettyPeerTransport.Auth(settings.secret(), this::membership));
    AtomicInteger n = new AtomicInteger();
    synchronized (this) {
      transport = t;
      verifier =
          Executors.newFixedThreadPool(
              2,
              r -> {
                Thread th = new Thread(r, "origin-verify-" + swarmId + "-" + n.incrementAndGet());
                th.setDaemon(true);
                return th;
              });
      ticker =
          Executors.newSingleThreadScheduledExecutor(
              r -> {
                Thread th = new Thread(r, "origin-swarm-" + swarmId);
                th.setDaemon(true);
                return th;
              });
      startedAt = System.nanoTime();
      ticker.scheduleWithFixedDelay(this::tick, TICK_MS, TICK_MS, TimeUnit.MILLISECONDS);
      if (settings.staticPeers() != null && membership == null) {
        membership = settings.staticPeers();
      }
    }
    log.info(
        "version {}: {} pieces of {} bytes; {} held, {} wanted; peer {} on {}",
        swarmId,
        map.size(),
        map.pieceSize(),
        present.cardinality(),
        wanted.cardinality(),
        self,
        t.listenAddress());
    redial();
  }

  /** The transport's address (useful with port 0), or null before {@link #start()}. */
  public synchronized java.net.InetSocketAddress listenAddress() {
    return transport == null ? null : transport.listenAddress();
  }

  /**
   * Applies a membership; returns false when its epoch is the current one. Connections of members
   * that left it, or whose published address changed, are closed.
   */
  public boolean applyMembership(Membership m) {
    List<PeerTransport.PeerConnection> leaving = new ArrayList<>();
    synchronized (this) {
      if (membership != null && membership.epoch().equals(m.epoch())) {
        return false;
      }
      Membership old = membership;
      membership = m;
      for (Peer p : peers.values()) {
        if (p.conn == null) {
          continue;
        }
        Membership.Member now = m.member(p.id);
        Membership.Member before = old == null ? null : old.member(p.id);
        if (now == null || (before != null && !before.address().equals(now.address()))) {
          leaving.add(p.conn);
        }
      }
      notifyAll();
    }
    for (PeerTransport.PeerConnection c : leaving) {
      c.close("not a member at the address it authenticated with in membership " + m.epoch());
    }
    redial();
    return true;
  }

  /** The membership applied last, or null: what the transport admits peers by. */
  synchronized Membership membership() {
    return membership;
  }

  @Override
  public void refused(String kind) {
    Counter.builder("tensorcast.dataplane.peer.connections.refused")
        .tags(tags.and("reason", kind))
        .description(
            "Connections to the peer port refused before or during the authenticated handshake")
        .register(registry)
        .increment();
  }

  private void redial() {
    PeerTransport t;
    List<Membership.Member> toDial = new ArrayList<>();
    synchronized (this) {
      t = transport;
      if (t == null || membership == null) {
        return;
      }
      for (Membership.Member m : membership.members()) {
        if (m.id().compareTo(self) > 0 && !m.address().equals(dialled.get(m.id()))) {
          dialled.put(m.id(), m.address());
          toDial.add(m);
        }
      }
    }
    for (Membership.Member m : toDial) {
      t.dial(m.id(), m.address());
    }
  }

  /** Whether every wanted piece is in (stored or cut). */
  public synchronized boolean complete() {
    BitSet missing = (BitSet) wanted.clone();
    missing.andNot(present);
    missing.andNot(received);
    return missing.isEmpty();
  }

  /** Bytes of wanted pieces in so far, and in all. */
  public synchronized long[] progress() {
    long have = 0;
    long all = 0;
    for (int i = wanted.nextSetBit(0); i >= 0; i = wanted.nextSetBit(i + 1)) {
      int len = map.piece(i).length();
      all += len;
      if (present.get(i) || received.get(i)) {
        have += len;
      }
    }
    return new long[] {have, all};
  }

  /** Peers connected now. */
  public synchronized int connectedPeers() {
    int n = 0;
    for (Peer p : peers.values()) {
      if (p.conn != null) {
        n++;
      }
    }
    return n;
  }

  /** Why the swarm cannot finish, or null. */
  public synchronized String failure() {
    return failure;
  }

  /**
   * Waits until every wanted piece is in.
   *
   * @return true when complete, false on timeout
   */
  public boolean awaitComplete(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    synchronized (this) {
      while (!complete()) {
        if (closed) {
          throw new InterruptedException("the swarm of " + swarmId + " was closed");
        }
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        TimeUnit.NANOSECONDS.timedWait(this, Math.min(left, TimeUnit.MILLISECONDS.toNanos(100)));
      }
      return true;
    }
  }

  // ------------------------------------------------------------------ scheduling

  private void tick() {
    try {
      synchronized (this) {
        if (closed) {
          return;
        }
        schedule(System.nanoTime());
        notifyAll();
      }
    } catch (RuntimeException e) {
      log.warn("version {}: scheduling failed", swarmId, e);
    }
  }

  private void schedule(long now) {
    long timeout = settings.peerTimeout().toNanos();
    for (Peer p : List.copyOf(peers.values())) {
      long progress = Math.max(p.lastPieceAt, p.conn == null ? 0 : p.conn.pieceProgressAt());
      if (progress != 0 && now - progress <= timeout) {
        continue;
      }
      List<Integer> stuck = new ArrayList<>();
      p.inFlight.forEach(
          (piece, deadline) -> {
            if (deadline < now) {
              stuck.add(piece);
            }
          });
      for (Integer piece : stuck) {
        p.inFlight.remove(piece);
        inProgress.clear(piece);
        p.bad.set(piece);
        p.faults++;
        log.warn(
            "version {}: piece {} not received from {} within {}",
            swarmId,
            piece,
            p.id,
            settings.peerTimeout());
      }
    }
    BitSet need = (BitSet) wanted.clone();
    need.andNot(present);
    need.andNot(received);
    need.andNot(inProgress);
    if (need.isEmpty()) {
      return;
    }
    int n = map.size();
    int[] holders = new int[n];
    List<Peer> usable = new ArrayList<>();
    for (Peer p : peers.values()) {
      if (!p.usable()) {
        continue;
      }
      usable.add(p);
      BitSet h = (BitSet) p.has.clone();
      h.andNot(p.bad);
      for (int i = h.nextSetBit(0); i >= 0; i = h.nextSetBit(i + 1)) {
        holders[i]++;
      }
    }
    // Pieces another relaying member is fetching from a writer now: wait for its HAVE.
    BitSet claimed = new BitSet();
    long grace = grace();
    for (Peer p : usable) {
      p.fetching.forEach(
          (piece, at) -> {
            if (now - at <= grace) {
              claimed.set(piece);
            }
          });
    }
    // Until every member has connected (or a grace of a fifth of the peer timeout is over), ask
    // writers for nothing: a member that has not met the others yet cannot see their READING marks.
    boolean metEveryone = true;
    if (membership != null) {
      for (Membership.Member m : membership.members()) {
        Peer q = peers.get(m.id());
        if (!m.id().equals(self)
            && (q == null || q.conn == null)
            && (q == null || q.dropped == null)) {
          metEveryone = false;
        }
      }
    }
    boolean askWriters = !relays || metEveryone || now - startedAt > timeout / 5;
    Map<Peer, BitSet> candidates = new HashMap<>();
    for (Peer p : usable) {
      BitSet c = (BitSet) p.has.clone();
      c.andNot(p.bad);
      c.and(need);
      if (p.writer) {
        c.andNot(claimed);
        if (!askWriters) {
          c.clear();
        }
      }
      candidates.put(p, c);
    }
    int total = 0;
    for (Peer p : usable) {
      total += p.inFlight.size();
    }
    int maxTotal = SwarmPolicy.maxTotalInFlight(settings.maxInFlight());
    int perPeer = SwarmPolicy.perPeerInFlight(settings.maxInFlight(), maxTotal, usable.size());
    boolean sent = true;
    while (sent && total < maxTotal) {
      sent = false;
      usable.sort(
          (a, b) ->
              a.writer != b.writer
                  ? Boolean.compare(a.writer, b.writer)
                  : a.inFlight.size() != b.inFlight.size()
                      ? Integer.compare(a.inFlight.size(), b.inFlight.size())
                      : Long.compare(a.rank, b.rank));
      for (Peer p : usable) {
        if (p.inFlight.size() >= perPeer) {
          continue;
        }
        int piece =
            SwarmPlan.rarest(
                candidates.get(p), holders, salt + p.inFlight.size() * 7919, passedOver);
        if (piece < 0) {
          continue;
        }
        for (BitSet other : candidates.values()) {
          other.clear(piece);
        }
        inProgress.set(piece);
        p.inFlight.put(piece, now + timeout);
        p.conn.send(new Frame.Request(piece));
        if (p.writer && relays) {
          broadcast(new Frame.Reading(piece), p.id);
        }
        total++;
        sent = true;
        break;
      }
    }
  }

  /**
   * How long a member waits for a piece another member fetches from a writer before it asks the
   * writer itself (a fifth of the peer timeout).
   */
  private long grace() {
    return settings.peerTimeout().toNanos() / 5;
  }

  private void broadcast(Frame f, String except) {
    for (Peer q : peers.values()) {
      if (q.conn != null && !q.id.equals(except) && !q.writer) {
        q.conn.send(f);
      }
    }
  }

  // ------------------------------------------------------------------ transport events

  @Override
  public void connected(PeerTransport.PeerConnection conn) {
    synchronized (this) {
      Peer p =
          peers.computeIfAbsent(
              conn.peerId(),
              id -> new Peer(id, SwarmPolicy.tieRank(self, id), writers.contains(id)));
      if (p.dropped != null) {
        conn.close("dropped earlier: " + p.dropped);
        return;
      }
      PeerTransport.PeerConnection old = p.conn;
      if (old != null && old != conn) {
        requeue(p);
        old.close("replaced by a new connection from the same peer");
      }
      p.conn = conn;
      p.lastPieceAt = 0;
      p.queuedSends = 0;
      byte[][] h = new byte[map.size()][];
      for (int i = present.nextSetBit(0); i >= 0; i = present.nextSetBit(i + 1)) {
        h[i] = expected[i];
      }
      // Pieces this member is fetching from writers now: the newcomer should not fetch them too.
      if (relays && !p.writer) {
        for (Peer q : peers.values()) {
          if (q.writer) {
            for (Integer piece : q.inFlight.keySet()) {
              conn.send(new Frame.Reading(piece));
            }
          }
        }
      }
      conn.send(new Frame.Bitfield(map.size(), (BitSet) present.clone(), h));
      log.info("version {}: peer {} connected{}", swarmId, p.id, p.writer ? " (a writer)" : "");
      notifyAll();
    }
  }

  @Override
  public void disconnected(PeerTransport.PeerConnection conn) {
    synchronized (this) {
      Peer p = peers.get(conn.peerId());
      if (p == null || p.conn != conn) {
        return;
      }
      p.conn = null;
      requeue(p);
      p.fetching.clear();
      notifyAll();
    }
  }

  @Override
  public void received(PeerTransport.PeerConnection conn, Frame frame) {
    if (frame instanceof Frame.Piece piece) {
      receivedPiece(conn, piece);
      return;
    }
    synchronized (this) {
      Peer p = peers.get(conn.peerId());
      if (p == null || p.conn != conn || p.dropped != null) {
        return;
      }
      if (frame instanceof Frame.Have h) {
        if (index(conn, h.piece(), "HAVE")) {
          announced(p, h.piece(), h.sha256());
        }
      } else if (frame instanceof Frame.Bitfield b) {
        if (b.pieceCount() != map.size()) {
          conn.close("BITFIELD for " + b.pieceCount() + " pieces, the map has " + map.size());
          return;
        }
        for (int i = b.have().nextSetBit(0);
            i >= 0 && p.dropped == null;
            i = b.have().nextSetBit(i + 1)) {
          announced(p, i, b.sha256()[i]);
        }
      } else if (frame instanceof Frame.Reading r) {
        if (index(conn, r.piece(), "READING")) {
          p.fetching.put(r.piece(), System.nanoTime());
        }
      } else if (frame instanceof Frame.Request r) {
        if (index(conn, r.piece(), "REQUEST")) {
          serve(p, conn, r.piece());
        }
      } else if (frame instanceof Frame.Reject r) {
        if (p.inFlight.remove(r.piece()) != null) {
          inProgress.clear(r.piece());
          Peer other =
              p.writer && r.reason().startsWith(SENT_TO)
                  ? peers.get(r.reason().substring(SENT_TO.length()))
                  : null;
          if (other != null && other != p) {
            // The writer sent it to that member moments ago: fetch it from there once it has it.
            other.fetching.put(r.piece(), System.nanoTime());
          } else {
            p.has.clear(r.piece());
          }
        }
      } else if (!(frame instanceof Frame.KeepAlive)) {
        conn.close("unexpected " + FrameCodec.typeName(frame.type()) + " after the handshake");
        return;
      }
      notifyAll();
    }
  }

  private boolean index(PeerTransport.PeerConnection conn, int piece, String what) {
    if (piece < 0 || piece >= map.size()) {
      conn.close(what + " for piece " + piece + " outside 0.." + (map.size() - 1));
      return false;
    }
    return true;
  }

  /** A peer says it holds {@code piece} with hash {@code sha}: it must be the writer's hash. */
  private void announced(Peer p, int piece, byte[] sha) {
    if (sha == null || !Arrays.equals(sha, expected[piece])) {
      drop(
          p,
          "announced piece "
              + piece
              + " with sha256 "
              + (sha == null ? "none" : HexFormat.of().formatHex(sha))
              + " but its writer sealed "
              + HexFormat.of().formatHex(expected[piece]));
      return;
    }
    p.has.set(piece);
    p.fetching.remove(piece);
  }

  private void drop(Peer p, String why) {
    if (p.dropped != null) {
      return;
    }
    p.dropped = why;
    requeue(p);
    p.has.clear();
    log.warn(
        "version {}: dropping peer {}: {}; not asked, served or trusted again", swarmId, p.id, why);
    if (p.conn != null) {
      p.conn.close("dropped: " + why);
    }
    if (transport != null) {
      transport.forget(p.id);
    }
  }

  private void requeue(Peer p) {
    for (Integer piece : p.inFlight.keySet()) {
      inProgress.clear(piece);
    }
    p.inFlight.clear();
  }

  private void serve(Peer p, PeerTransport.PeerConnection conn, int piece) {
    if (p.queuedSends >= SwarmPolicy.MAX_QUEUED_SENDS) {
      conn.close("too many requested pieces queued unread");
      return;
    }
    if (!present.get(piece)) {
      conn.send(new Frame.Reject(piece, "piece not held"));
      return;
    }
    if (writers.contains(self) && !p.writer) {
      // A writer sends each piece once: a second member asking within the grace is pointed at
      // the first, and served only if it asks again after the grace (the first may not relay).
      long now = System.nanoTime();
      Map.Entry<String, Long> first = sentTo.get(piece);
      if (first == null) {
        sentTo.put(piece, Map.entry(p.id, now));
      } else if (!first.getKey().equals(p.id)) {
        Long asked = deferred.putIfAbsent(piece + " " + p.id, now);
        if (asked == null || now - asked < grace()) {
          conn.send(new Frame.Reject(piece, SENT_TO + first.getKey()));
          return;
        }
      }
    }
    PieceMap.Piece pc = map.piece(piece);
    p.queuedSends++;
    conn.sendPiece(
        piece,
        files.resolve(pc.path()),
        pc.offset(),
        pc.length(),
        expected[piece],
        () -> {
          bytesSent.increment(pc.length());
          synchronized (this) {
            if (p.conn == conn) {
              p.queuedSends--;
            }
          }
        });
  }

  private void receivedPiece(PeerTransport.PeerConnection conn, Frame.Piece f) {
    Peer p;
    ExecutorService v;
    synchronized (this) {
      p = peers.get(conn.peerId());
      if (p != null && p.conn == conn) {
        p.lastPieceAt = System.nanoTime();
      }
      if (p == null
          || p.conn != conn
          || f.piece() < 0
          || f.piece() >= map.size()
          || p.inFlight.remove(f.piece()) == null) {
        f.payload().release();
        return;
      }
      v = verifier;
    }
    try {
      if (v == null) {
        throw new RejectedExecutionException("the swarm is closed");
      }
      v.execute(() -> verifyAndStore(p, conn, f));
    } catch (RejectedExecutionException e) {
      f.payload().release();
      synchronized (this) {
        inProgress.clear(f.piece());
      }
    }
  }

  private void verifyAndStore(Peer p, PeerTransport.PeerConnection conn, Frame.Piece f) {
    int piece = f.piece();
    ByteBuf buf = f.payload();
    try {
      PieceMap.Piece pc = map.piece(piece);
      String problem = null;
      if (buf.readableBytes() != pc.length()) {
        problem =
            "sent " + buf.readableBytes() + " bytes for piece " + piece + " of " + pc.length();
      } else {
        byte[] actual = sha256(buf.nioBuffer());
        if (!conn.authentic(f, actual)) {
          problem = "piece " + piece + " carries a tag that does not match its bytes";
        } else if (!Arrays.equals(actual, expected[piece])) {
          problem =
              "piece "
                  + piece
                  + " has sha256 "
                  + HexFormat.of().formatHex(actual)
                  + " but its writer sealed "
                  + HexFormat.of().formatHex(expected[piece]);
        }
      }
      if (problem != null) {
        synchronized (this) {
          inProgress.clear(piece);
          drop(p, problem);
          notifyAll();
        }
        return;
      }
      boolean kept;
      synchronized (this) {
        if (closed || present.get(piece) || received.get(piece)) {
          inProgress.clear(piece);
          return;
        }
      }
      kept = sink.accept(pc, buf.nioBuffer());
      bytesReceived.increment(pc.length());
      synchronized (this) {
        inProgress.clear(piece);
        if (kept) {
          present.set(piece);
          for (Peer q : peers.values()) {
            if (q.conn != null && !q.writer) {
              q.conn.send(new Frame.Have(piece, expected[piece]));
            }
          }
        } else {
          received.set(piece);
        }
        notifyAll();
      }
    } catch (RuntimeException e) {
      log.warn(
          "version {}: storing piece {} from {} failed: {}", swarmId, piece, p.id, e.toString());
      synchronized (this) {
        inProgress.clear(piece);
        if (failure == null) {
          failure = "storing piece " + piece + " failed: " + e;
        }
        notifyAll();
      }
    } finally {
      buf.release();
    }
  }

  /** Stops serving and fetching; closes the transport. Idempotent. */
  @Override
  public void close() {
    PeerTransport t;
    ExecutorService v;
    ScheduledExecutorService s;
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      t = transport;
      v = verifier;
      s = ticker;
      notifyAll();
    }
    if (s != null) {
      s.shutdownNow();
    }
    if (t != null) {
      t.close();
    }
    if (v != null) {
      v.shutdownNow();
      try {
        v.awaitTermination(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** The piece checks' SHA-256: libcrypto's where usable ({@link Sha256}). */
  private static byte[] sha256(ByteBuffer b) {
    return Sha256.of(b);
  }
}
