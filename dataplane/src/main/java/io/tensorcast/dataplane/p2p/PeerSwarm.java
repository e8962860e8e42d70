package io.tensorcast.dataplane.p2p;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.netty.buffer.ByteBuf;
import io.tensorcast.api.wire.DataPlaneStatus.DroppedPeer;
import io.tensorcast.dataplane.load.LoadFailure;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.load.ReadProgressListener;
import io.tensorcast.dataplane.load.StoreFiller;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One member of an artifact's swarm: fills the store with pieces read from the source (the pieces
 * the {@link SwarmPlan} assigns to this member) and pieces fetched from peers, and serves the
 * pieces it holds to peers for as long as it is open.
 *
 * <ul>
 *   <li>Membership comes from {@code --peers} or {@link #applyMembership} ({@code PUT /v1/peers});
 *       without one, the fill waits {@link PeerSettings#membershipWait()} and then loads alone.
 *       This member dials the members whose id sorts after its own; the others dial it.
 *   <li>Plan: recomputed on every scheduling round from (members, live members, holdings); a member
 *       is lost when disconnected longer than the peer timeout (never connected: the peer timeout
 *       after this member's fill started or the membership arrived), or when refused for faults. A
 *       lost member that connects again is live again (its block goes back to it).
 *   <li>Fetching: at most {@link #maxTotalInFlight} requests in all and {@link #perPeerInFlight}
 *       per usable peer, the rarest piece first, the least-loaded peer first. A request unanswered
 *       within the peer timeout is requested elsewhere and counts as a fault of that peer.
 *   <li>Integrity: a piece read from the source is hashed (SHA-256) and announced with its hash
 *       (HAVE). A piece's expected hash comes only from its <em>reader</em> ({@link
 *       SwarmPlan#reader}: the member the plan assigns to read it from the source) over that
 *       member's authenticated connection, or from this member's own source read; any other
 *       member's announced hash is held as a claim, and a claim that differs from the reader's hash
 *       gets its member dropped ({@link #dropped()}: not asked, served or trusted again while this
 *       swarm lives; {@code tensorcast_dataplane_peers_dropped_total}). A piece from a peer is
 *       hashed before it is written to the store and must equal the expected hash and carry a valid
 *       tag; otherwise it is dropped, counted ({@code tensorcast_dataplane_pieces_rejected_total}),
 *       that peer is not asked for it again, and after {@value #MAX_FAULTS} faults not at all. A
 *       piece that no usable peer holds and whose plan owner is gone is read from the source (last
 *       resort).
 *   <li>Membership: only members of the current membership are served; a member that leaves it, or
 *       whose published address changes, is disconnected.
 * </ul>
 *
 * <p>Metrics (tag {@code artifact}): {@code tensorcast_dataplane_peer_bytes_received_total}, {@code
 * tensorcast_dataplane_peer_bytes_sent_total}, {@code tensorcast_dataplane_pieces_rejected_total},
 * {@code tensorcast_dataplane_peers}, {@code tensorcast_dataplane_peers_dropped_total}, {@code
 * tensorcast_dataplane_peer_connections_refused_total} (tag {@code reason}).
 */
public final class PeerSwarm implements StoreFiller, PeerTransport.Listener, AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(PeerSwarm.class);

  /** Faults (bad piece, stuck request) after which a peer is not asked for anything any more. */
  public static final int MAX_FAULTS = 3;

  /**
   * Pieces a peer may have asked for that are still queued to it unsent; one more request closes
   * the connection. Far above any {@link PeerSettings#maxInFlight()} a member uses.
   */
  public static final int MAX_QUEUED_SENDS = 256;

  private static final long TICK_MS = 50;

  /** Dropped members {@link #dropped()} remembers, at most. */
  public static final int MAX_DROPPED_REPORTED = 16;

  private final String artifactId;
  private final PeerSettings settings;
  private final String self;
  private final Counter bytesReceived;
  private final Counter bytesSent;
  private final Counter piecesRejected;
  private final Counter peersDropped;
  private final MeterRegistry registry;
  private final Tags tags;
  private final int salt;

  // ---- guarded by this
  private Membership membership;
  private long membershipSince;
  private final Map<String, java.net.InetSocketAddress> dialled = new HashMap<>();
  private final Map<String, Peer> peers = new HashMap<>();
  private PieceMap map;
  private Map<String, SourceFile> sourceFiles;
  private StoredArtifact stored;
  private ArtifactSource source;
  private ReadOptions read;
  private FillProgress progress;
  private BitSet present;
  private BitSet inProgress;
  private byte[][] hashes;

  /** Who set {@link #hashes}[i]: the reader's id, or this member's own id (its source read). */
  private String[] hashFrom;

  private final List<DroppedPeer> dropped = new ArrayList<>();

  /** Last-resort source reads (pieces no usable peer offers); the plan's own are picked live. */
  private final ArrayDeque<Integer> lastResort = new ArrayDeque<>();

  /** Pieces this member is reading from the source → when READING was last sent for it. */
  private final Map<Integer, Long> sourceReading = new HashMap<>();

  /** Ranged source requests (runs of pieces) this member has in flight. */
  private int sourceRuns;

  /** The view of the last scheduling round, for the source workers. */
  private View lastView;

  /** Members and live members the readers were last computed for ({@link #promoteClaims}). */
  private List<List<String>> lastReaders = List.of();

  private final Map<Integer, Long> starvedSince = new HashMap<>();

  private boolean filling;
  private boolean serving;
  private LoadFailure failure;
  private long fillStarted;
  private boolean closed;
  private PeerTransport transport;
  private ExecutorService verifier;
  private ExecutorService adopting;

  private static final class Peer {
    final String id;

    /** Where this peer stands among equally loaded peers for this member ({@link #tieRank}). */
    final long rank;

    PeerTransport.PeerConnection conn;
    final BitSet has = new BitSet();
    final BitSet bad = new BitSet();
    final Map<Integer, Long> inFlight = new LinkedHashMap<>();

    /** Pieces the peer announced it is reading from the source → when (nanoTime). */
    final Map<Integer, Long> reading = new HashMap<>();

    /**
     * Hashes it announced for pieces whose reader's hash is not known yet: checked when it is, and
     * meanwhile not a holding (nothing is asked for or planned around them).
     */
    final Map<Integer, byte[]> claims = new HashMap<>();

    /** Why it was dropped, or null. */
    String dropped;

    int faults;
    boolean refused;
    boolean everConnected;
    long connectedAt;

    /** Its BITFIELD arrived on the current connection. */
    boolean synced;

    /** Its BITFIELD arrived on some connection during this fill. */
    boolean everSynced;

    long downSince;

    /** nanoTime of the last PIECE received from it on the current connection; 0 for none. */
    long lastPieceAt;

    /** The connection {@link #queuedSends} counts for. */
    PeerTransport.PeerConnection sendsOn;

    /** Pieces handed to {@link #sendsOn} to send and not yet written out. */
    int queuedSends;

    /** {@link #sendsOn} was closed for asking too much; its remaining frames are dropped. */
    boolean sendsCut;

    Peer(String id, long rank) {
      this.id = id;
      this.rank = rank;
    }

    boolean usable() {
      return conn != null && !refused;
    }
  }

  /**
   * @param artifactId the artifact's store id (sent in HELLO)
   * @param registry where the peer metrics are registered
   */
  public PeerSwarm(String artifactId, PeerSettings settings, MeterRegistry registry) {
    this.artifactId = artifactId;
    this.settings = settings;
    this.self = settings.peerId();
    this.salt = self.hashCode();
    this.registry = registry;
    Tags tags = Tags.of("artifact", artifactId);
    this.tags = tags;
    this.bytesReceived =
        Counter.builder("tensorcast.dataplane.peer.bytes.received")
            .tags(tags)
            .description("Piece bytes received from peers, verified and written to the store")
            .register(registry);
    this.bytesSent =
        Counter.builder("tensorcast.dataplane.peer.bytes.sent")
            .tags(tags)
            .description("Piece bytes sent to peers")
            .register(registry);
    this.piecesRejected =
        Counter.builder("tensorcast.dataplane.pieces.rejected")
            .tags(tags)
            .description(
                "Pieces from peers dropped because their SHA-256 was not the announced one")
            .register(registry);
    this.peersDropped =
        Counter.builder("tensorcast.dataplane.peers.dropped")
            .tags(tags)
            .description(
                "Members dropped for announcing a piece hash that differs from its reader's")
            .register(registry);
    Gauge.builder("tensorcast.dataplane.peers", this, PeerSwarm::connectedPeers)
        .tags(tags)
        .description("Peers connected over the peer transport")
        .register(registry);
    if (settings.staticPeers() != null) {
      this.membership = settings.staticPeers();
      this.membershipSince = System.nanoTime();
    }
  }

  // ------------------------------------------------------------------ membership and status

  /**
   * Applies a membership ({@code PUT /v1/peers}).
   *
   * @return false when its epoch equals the current one (nothing changed), true when applied
   */
  public boolean applyMembership(Membership m) {
    List<PeerTransport.PeerConnection> leaving = new ArrayList<>();
    synchronized (this) {
      if (membership != null && membership.epoch().equals(m.epoch())) {
        return false;
      }
      if (!m.ids().contains(self)) {
        log.warn(
            "membership {} does not list this member '{}'; taking part anyway", m.epoch(), self);
      }
      log.info("membership {}: {} members", m.epoch(), m.members().size());
      Membership old = membership;
      membership = m;
      membershipSince = System.nanoTime();
      lastView = null; // source workers re-plan now, not at the next round
      // A connection was authenticated for a member at its published address: one that left the
      // membership, or moved, is not served any more.
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

  /** The membership applied last, or null; what the transport admits peers by. */
  synchronized Membership membership() {
    return membership;
  }

  /** The members dropped so far (at most {@value #MAX_DROPPED_REPORTED}, oldest first). */
  public synchronized List<DroppedPeer> dropped() {
    return List.copyOf(dropped);
  }

  /** The epoch of the membership applied last, or null. */
  public synchronized String epoch() {
    return membership == null ? null : membership.epoch();
  }

  /** Peers connected now (handshake done). */
  public synchronized int connectedPeers() {
    int n = 0;
    for (Peer p : peers.values()) {
      if (p.conn != null) {
        n++;
      }
    }
    return n;
  }

  /** The transport's listen address once a fill started, else null. */
  public synchronized java.net.InetSocketAddress listenAddress() {
    return transport == null ? null : transport.listenAddress();
  }

  private void redial() {
    PeerTransport t;
    List<Membership.Member> toDial = new ArrayList<>();
    List<String> toForget = new ArrayList<>();
    synchronized (this) {
      t = transport;
      if (t == null || membership == null) {
        return;
      }
      Set<String> ids = membership.ids();
      for (Membership.Member m : membership.members()) {
        if (m.id().compareTo(self) > 0 && !m.address().equals(dialled.get(m.id()))) {
          dialled.put(m.id(), m.address());
          toDial.add(m);
        }
      }
      for (Iterator<String> it = dialled.keySet().iterator(); it.hasNext(); ) {
        String id = it.next();
        if (!ids.contains(id)) {
          it.remove();
          toForget.add(id);
        }
      }
    }
    toForget.forEach(t::forget);
    for (Membership.Member m : toDial) {
      t.dial(m.id(), m.address());
    }
  }

  // ------------------------------------------------------------------ fill

  @Override
  public void fill(
      ArtifactSource source,
      StoredArtifact stored,
      List<SourceFile> files,
      ReadOptions read,
      FillProgress progress)
      throws LoadFailure, InterruptedException {
    PieceMap pm =
        new PieceMap(
            files.stream().map(f -> new StoreFile(f.path(), f.size())).toList(),
            settings.pieceSize());
    Map<String, SourceFile> byPath = new HashMap<>();
    files.forEach(f -> byPath.put(f.path(), f));
    synchronized (this) {
      if (closed) {
        throw new LoadFailure("Interrupted", "the peer swarm was closed");
      }
      this.map = pm;
      this.sourceFiles = byPath;
      this.stored = stored;
      this.source = source;
      this.read = read;
      this.progress = progress;
      this.present = new BitSet(pm.size());
      this.inProgress = new BitSet(pm.size());
      this.hashes = new byte[pm.size()][];
      this.hashFrom = new String[pm.size()];
      this.filling = true;
      this.serving = true;
      this.fillStarted = System.nanoTime();
    }
    PeerTransport t = startTransport(pm, files, "loading from the source alone");
    int threads = Math.max(1, read.concurrency());
    ExecutorService sources = Executors.newFixedThreadPool(threads, daemon("p2p-source"));
    synchronized (this) {
      transport = t;
      verifier = Executors.newFixedThreadPool(2, daemon("p2p-verify"));
    }
    log.info(
        "artifact {}: {} pieces of {} bytes; peer {} on {}",
        artifactId,
        pm.size(),
        pm.pieceSize(),
        self,
        t == null ? "(no transport)" : t.listenAddress());
    boolean ok = false;
    try {
      if (t != null) {
        awaitMembership();
      }
      redial();
      for (int i = 0; i < threads; i++) {
        sources.execute(this::sourceWorker);
      }
      synchronized (this) {
        while (present.cardinality() < map.size()) {
          if (failure != null) {
            throw failure;
          }
          if (closed) {
            throw new LoadFailure("Interrupted", "the peer swarm was closed");
          }
          schedule();
          wait(TICK_MS);
        }
        filling = false;
        notifyAll();
      }
      ok = true;
      log.info("artifact {}: every piece is in the store", artifactId);
    } finally {
      synchronized (this) {
        filling = false;
        notifyAll();
      }
      sources.shutdownNow();
      awaitQuietly(sources);
      ExecutorService v;
      synchronized (this) {
        v = verifier;
        if (!ok) {
          // The loader unloads the store after a failure: stop serving and receiving first.
          serving = false;
          verifier = null;
        }
      }
      if (!ok) {
        v.shutdownNow();
        awaitQuietly(v);
      }
    }
  }

  /** Starts the peer transport for this map, or null (logged) when it cannot listen. */
  private PeerTransport startTransport(PieceMap pm, List<SourceFile> files, String otherwise)
      throws InterruptedException {
    if (settings.secret() == null) {
      log.warn(
          "no peer secret (--peer-secret-file): the peer port stays closed, since it could not"
              + " tell members from strangers; {}",
          otherwise);
      return null;
    }
    Frame.Hello hello =
        new Frame.Hello(
            FrameCodec.VERSION,
            artifactId,
            self,
            "",
            pm.pieceSize(),
            pm.size(),
            helloDigest(pm, files),
            new byte[Frame.NONCE_BYTES]);
    try {
      return NettyPeerTransport.start(
          settings.listen(),
          hello,
          settings.peerTimeout(),
          this,
          new NettyPeerTransport.Auth(settings.secret(), this::membership));
    } catch (RuntimeException e) {
      // A data plane that cannot take part still loads: alone, from the source.
      log.warn(
          "cannot listen for peers on {} (--peer-listen): {}; {}",
          settings.listen(),
          e.toString(),
          otherwise);
      return null;
    }
  }

  /**
   * The map digest sent in HELLO: SHA-256 over {@link PieceMap#digest()} and every file's listed
   * ETag ({@link SourceFile#etag()}), so members that listed other versions of the files refuse
   * each other even when the sizes are the same (an object replaced by a same-size one between two
   * members' listings, say while one waited to load again): pieces of one version must never fill a
   * copy of the other.
   */
  static byte[] helloDigest(PieceMap pm, List<SourceFile> files) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      md.update(pm.digest());
      for (SourceFile f : files) {
        md.update((f.path() + "\0" + f.etag() + "\n").getBytes(StandardCharsets.UTF_8));
      }
      return md.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  // ------------------------------------------------------------------ a complete copy

  /**
   * Offers a complete copy the store adopted after a restart to the peers: computes every piece's
   * SHA-256 from the store on a thread of its own (the copy is Ready meanwhile), then starts the
   * peer transport, so the first BITFIELD each peer gets announces every piece, and serves them
   * until {@link #close()}. Nothing is read from the source.
   */
  @Override
  public void serveComplete(StoredArtifact stored, List<SourceFile> files) {
    PieceMap pm =
        new PieceMap(
            files.stream().map(f -> new StoreFile(f.path(), f.size())).toList(),
            settings.pieceSize());
    ExecutorService hasher;
    synchronized (this) {
      if (closed || map != null) {
        return;
      }
      this.map = pm;
      this.stored = stored;
      this.present = new BitSet(pm.size());
      this.inProgress = new BitSet(pm.size());
      this.hashes = new byte[pm.size()][];
      this.hashFrom = new String[pm.size()];
      this.fillStarted = System.nanoTime();
      this.adopting = Executors.newSingleThreadExecutor(daemon("p2p-adopted"));
      hasher = adopting;
    }
    hasher.execute(() -> hashAndServe(pm, stored, files));
  }

  private void hashAndServe(PieceMap pm, StoredArtifact copy, List<SourceFile> files) {
    long started = System.nanoTime();
    byte[][] h = new byte[pm.size()][];
    try {
      for (PieceMap.Piece p : pm.pieces()) {
        if (Thread.currentThread().isInterrupted()) {
          return; // closed: the store may unload the copy next
        }
        h[p.index()] = sha256(copy.readOnly(p.path(), p.offset(), p.length()));
      }
    } catch (RuntimeException e) {
      log.warn("cannot hash the adopted copy of {} for peers: {}", artifactId, e.toString());
      return;
    }
    synchronized (this) {
      if (closed) {
        return;
      }
      System.arraycopy(h, 0, hashes, 0, h.length);
      java.util.Arrays.fill(hashFrom, self);
      present.set(0, pm.size());
      serving = true;
    }
    PeerTransport t;
    try {
      t = startTransport(pm, files, "the adopted copy is not offered to peers");
    } catch (InterruptedException e) {
      return; // closed
    }
    synchronized (this) {
      if (t == null) {
        return;
      }
      if (closed) {
        t.close();
        return;
      }
      transport = t;
    }
    redial();
    log.info(
        "artifact {}: adopted copy offered to peers on {} ({} pieces hashed in {} ms)",
        artifactId,
        t.listenAddress(),
        pm.size(),
        (System.nanoTime() - started) / 1_000_000);
  }

  private void awaitMembership() throws InterruptedException {
    long deadline = System.nanoTime() + settings.membershipWait().toNanos();
    synchronized (this) {
      while (membership == null && !closed) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          log.info(
              "no membership within {} (--membership-wait); loading from the source alone until"
                  + " one arrives",
              settings.membershipWait());
          return;
        }
        TimeUnit.NANOSECONDS.timedWait(this, left);
      }
    }
  }

  /** One scheduling round; called under the lock. */
  private void schedule() {
    long now = System.nanoTime();
    long timeout = settings.peerTimeout().toNanos();
    // Stuck requests: ask elsewhere. A request is stuck when its peer has sent no piece bytes at
    // all for the peer timeout (whole pieces or PIECE frames still arriving); a peer that keeps
    // delivering is only busy (its queue is deep because its link or CPU is shared), and banning
    // it would push the swarm back onto the source. At 50 Mbit/s a 4 MiB piece sharing a holder's
    // link with 13 others takes longer than 10 s to arrive whole (bench/p2p-netns.sh, N = 8).
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
        if (p.inFlight.remove(piece) != null) {
          inProgress.clear(piece);
          p.bad.set(piece);
          fault(p, "piece " + piece + " not received within " + settings.peerTimeout());
        }
      }
    }
    View view = view(now);
    lastView = view;
    List<List<String>> readersKey = List.of(view.plan().members(), view.plan().live());
    if (!readersKey.equals(lastReaders)) {
      lastReaders = readersKey;
      promoteClaims(view.plan());
    }
    Set<String> live = view.live();
    SwarmPlan plan = view.plan();
    // Holders among usable peers, and per-peer candidates.
    int n = map.size();
    int[] holders = new int[n];
    List<Peer> usable = new ArrayList<>();
    Map<Peer, BitSet> candidates = new HashMap<>();
    for (Peer p : peers.values()) {
      if (!p.usable()) {
        continue;
      }
      usable.add(p);
      BitSet c = (BitSet) p.has.clone();
      c.andNot(p.bad);
      for (int i = c.nextSetBit(0); i >= 0; i = c.nextSetBit(i + 1)) {
        holders[i]++;
      }
      c.andNot(present);
      c.andNot(inProgress);
      candidates.put(p, c);
    }
    // Source reads. The plan's own pieces are not queued here: a source worker picks its next
    // piece from the plan of the moment it is free (nextSourceRun), so a membership change
    // re-splits everything not yet started. Here only the last resort is decided.
    for (int i = 0; i < n; i++) {
      if (present.get(i) || inProgress.get(i) || holders[i] > 0) {
        continue;
      }
      if (plan.sourceOwner(i) != null) {
        starvedSince.remove(i);
        continue;
      }
      // A live member holds or is reading it, but no usable peer offers it to this member: when
      // every live holder is connected and failed this piece, no live member is reading it, and
      // no peer relayed it within the peer timeout, read it from the source (last resort; a
      // reconnecting holder is waited for).
      boolean starved = true;
      for (String m : live) {
        Peer p = peers.get(m);
        if (p != null
            && ((p.has.get(i) && !(p.conn != null && p.bad.get(i)))
                || fresh(p.reading.get(i), now))) {
          starved = false;
          break;
        }
      }
      if (!starved) {
        starvedSince.remove(i);
        continue;
      }
      long since = starvedSince.computeIfAbsent(i, k -> now);
      if (now - since > timeout) {
        starvedSince.remove(i);
        inProgress.set(i);
        lastResort.add(i);
      }
    }
    // Source reads in flight: renew their READING marks before they lapse at the others.
    for (Map.Entry<Integer, Long> e : sourceReading.entrySet()) {
      if (now - e.getValue() > timeout / 2) {
        e.setValue(now);
        broadcast(new Frame.Reading(e.getKey()));
      }
    }
    // Peer requests: least-loaded peer first, rarest piece first.
    boolean sent = true;
    int total = 0;
    for (Peer p : usable) {
      total += p.inFlight.size();
    }
    int maxTotal = maxTotalInFlight(settings.maxInFlight());
    int perPeer = perPeerInFlight(settings.maxInFlight(), maxTotal, usable.size());
    while (sent && total < maxTotal) {
      sent = false;
      usable.sort(
          (a, b) ->
              a.inFlight.size() != b.inFlight.size()
                  ? Integer.compare(a.inFlight.size(), b.inFlight.size())
                  : Long.compare(a.rank, b.rank));
      for (Peer p : usable) {
        if (p.inFlight.size() >= perPeer) {
          continue;
        }
        BitSet c = candidates.get(p);
        int piece = SwarmPlan.rarest(c, holders, salt + p.inFlight.size() * 7919);
        if (piece < 0) {
          continue;
        }
        for (BitSet other : candidates.values()) {
          other.clear(piece);
        }
        inProgress.set(piece);
        p.inFlight.put(piece, now + timeout);
        p.conn.send(new Frame.Request(piece));
        total++;
        sent = true;
        break;
      }
    }
    notifyAll(); // source workers re-check the plan
  }

  /**
   * The order in which member {@code self} asks equally loaded peers: a hash of (self, peer)
   * (rendezvous order), so each member has its own order. Ties used to fall to the peers map's
   * iteration order, which is the same on every member: with 8 members everybody asked n1 first,
   * its uplink was full for the whole load while the others' had room, and its own downloads, whose
   * acknowledgements leave over that full uplink, came in slowest; it finished 20 s after the rest
   * (100 Mbit/s, bench/p2p-netns.sh --trace).
   */
  static long tieRank(String self, String peer) {
    long h = 0x9E3779B97F4A7C15L;
    for (int i = 0; i < self.length(); i++) {
      h = (h ^ self.charAt(i)) * 0x100000001B3L;
    }
    h = (h ^ 0xFF) * 0x100000001B3L;
    for (int i = 0; i < peer.length(); i++) {
      h = (h ^ peer.charAt(i)) * 0x100000001B3L;
    }
    // SplitMix64's finaliser: every input bit moves every output bit.
    h = (h ^ (h >>> 30)) * 0xBF58476D1CE4E5B9L;
    h = (h ^ (h >>> 27)) * 0x94D049BB133111EBL;
    return h ^ (h >>> 31);
  }

  /**
   * Most piece requests outstanding across all peers: twice the per-peer limit. Everything in
   * flight shares this member's one ingress link; with 4 per peer and 7 peers, 28 pieces queued
   * behind one link starve single TCP flows for longer than the peer timeout (seen at N = 8 in
   * bench/p2p-netns.sh), and busy-but-healthy peers were dropped as stuck.
   */
  static int maxTotalInFlight(int perPeer) {
    return 2 * perPeer;
  }

  /**
   * Requests one member keeps outstanding at one peer: the per-peer limit while few peers share the
   * member's total, else an even share of the total, but at least 2 (one piece on the wire, one
   * queued behind it, so the peer's link never waits on a round trip). Every member asks every peer
   * at once; a holder with 7 requesters × 4 queued 4 MiB pieces needs 9 s at 100 Mbit/s to serve
   * the last of them, and a requester that waited the 10 s peer timeout counted the busy peer as
   * stuck (N = 8, bench/p2p-netns.sh). With 2 the queue is half as deep.
   */
  static int perPeerInFlight(int perPeerLimit, int maxTotal, int usablePeers) {
    return Math.max(
        Math.min(2, perPeerLimit), Math.min(perPeerLimit, maxTotal / Math.max(1, usablePeers)));
  }

  /** Who is live now and the plan from that; called under the lock. */
  private record View(Set<String> live, SwarmPlan plan, BitSet mine) {}

  private View view(long now) {
    long timeout = settings.peerTimeout().toNanos();
    Set<String> members = new TreeSet<>();
    members.add(self);
    if (membership != null && transport != null) {
      members.addAll(membership.ids());
    }
    Set<String> live = new HashSet<>();
    Map<String, BitSet> holdings = new HashMap<>();
    live.add(self);
    BitSet mine = (BitSet) present.clone();
    sourceReading.keySet().forEach(mine::set);
    holdings.put(self, mine);
    for (String m : members) {
      if (m.equals(self)) {
        continue;
      }
      Peer p = peers.get(m);
      if (p != null && p.refused) {
        continue;
      }
      if (p == null || p.conn == null) {
        long since =
            p != null && p.everConnected ? p.downSince : Math.max(fillStarted, membershipSince);
        // A member never seen gets the same grace from when this member could first meet it:
        // longer would let one member wait on a dead member's block that the others re-assigned.
        if (now - since > timeout) {
          continue;
        }
      }
      live.add(m);
      if (p != null) {
        // Pieces a live member holds or is reading from the source are nobody's source read.
        BitSet claimed = (BitSet) p.has.clone();
        p.reading.forEach(
            (piece, at) -> {
              if (fresh(at, now)) {
                claimed.set(piece);
              }
            });
        holdings.put(m, claimed);
      }
    }
    SwarmPlan plan = SwarmPlan.compute(map.size(), members, live, holdings);
    return new View(live, plan, plan.assignedTo(self));
  }

  /** A READING mark from {@code at} (nanoTime, or null) has not lapsed at {@code now}. */
  private boolean fresh(Long at, long now) {
    return at != null && now - at <= settings.peerTimeout().toNanos();
  }

  /**
   * The next run of pieces a free source worker reads, or null for none now; called under the lock.
   * First a last-resort piece (a run of one); then, while fewer than {@link #sourceReadsInFlight}
   * runs are in flight, the lowest piece the current plan assigns to this member and the pieces of
   * the plan right after it in the same file, up to {@code --range-size} bytes: one ranged request
   * per run keeps the source's request count that of a plain load (a piece can be much smaller than
   * a good source request), while each piece is announced as soon as it is in (blocks are read
   * front to back, so what a re-split hands to a newcomer is the untouched tail of a block).
   * Nothing from the plan while a live member has not yet sent its BITFIELD in this fill: its
   * holdings and reads are unknown, and a member joining mid-load would otherwise re-read what the
   * others already hold. Announces READING for each piece of the run to every connected peer.
   */
  private Run nextSourceRun(long now) {
    Integer last = lastResort.poll();
    if (last != null) {
      startReading(last, now);
      return new Run(last, 1);
    }
    // The plan of the last scheduling round (at most TICK_MS old); what changed since in the
    // holdings and reads is checked against the current state below.
    View v = lastView != null ? lastView : (lastView = view(now));
    if (sourceRuns >= sourceReadsInFlight(read.concurrency(), v.live().size())) {
      return null;
    }
    long timeout = settings.peerTimeout().toNanos();
    List<Peer> others = new ArrayList<>();
    for (String m : v.live()) {
      if (m.equals(self)) {
        continue;
      }
      Peer p = peers.get(m);
      boolean unknown =
          p == null
              || (p.conn != null ? !p.synced && now - p.connectedAt <= timeout : !p.everSynced);
      if (unknown) {
        return null;
      }
      if (!p.refused) {
        others.add(p);
      }
    }
    BitSet mine = (BitSet) v.mine().clone();
    mine.andNot(present);
    mine.andNot(inProgress);
    for (int i = mine.nextSetBit(0); i >= 0; i = mine.nextSetBit(i + 1)) {
      if (claimedByOther(others, i, now)) {
        continue;
      }
      PieceMap.Piece first = map.piece(i);
      long bytes = first.length();
      int count = 1;
      for (int j = i + 1; j < map.size() && mine.get(j); j++) {
        PieceMap.Piece next = map.piece(j);
        if (!next.path().equals(first.path())
            || bytes + next.length() > read.rangeSize()
            || claimedByOther(others, j, now)) {
          break;
        }
        bytes += next.length();
        count++;
      }
      for (int k = i; k < i + count; k++) {
        inProgress.set(k);
        startReading(k, now);
      }
      return new Run(i, count);
    }
    return null;
  }

  /** A live peer holds piece {@code i} or announced it is reading it; called under the lock. */
  private boolean claimedByOther(List<Peer> others, int i, long now) {
    for (Peer p : others) {
      if (p.has.get(i) || fresh(p.reading.get(i), now)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Source reads (runs) one member keeps in flight for its plan: the swarm as a whole reads with
   * the concurrency of one loader ({@code --concurrency}), so each of {@code liveMembers} takes
   * ⌈concurrency / liveMembers⌉, at least 1, and with peers at most two per peer. The last resort
   * is not capped.
   *
   * <p>Why the swarm-wide share: every read in flight shares the origin's uplink and a piece is
   * offered to peers only once it is whole; with 16 reads per member and 8 members, 128 pieces
   * arrived at 1/128 of the origin each, the peers idled first and crowded the links last (1.85 ×
   * the bound at 100 Mbit/s, bench/p2p-netns.sh).
   *
   * <p>Why two per peer: a member's ingress link carries its own source reads and one connection
   * from each peer, and TCP shares a full link about per flow. With 2 members and 8 source reads
   * each, the one relay connection got 4-5 of the 6 MB/s it needed at 100 Mbit/s and each member
   * still lacked ~100 MB of the other's block when the origin went quiet (1.24 × the bound in the
   * swarm window); with 4 reads each 1.14, with 2 each 1.09 (same run conditions, 1 MiB pieces). At
   * 4 members the cap (6) is above the share (4) and changes nothing.
   */
  static int sourceReadsInFlight(int concurrency, int liveMembers) {
    int members = Math.max(1, liveMembers);
    int share = Math.max(1, (concurrency + members - 1) / members);
    return members == 1 ? share : Math.min(share, 2 * (members - 1));
  }

  private void startReading(int piece, long now) {
    sourceReading.put(piece, now);
    broadcast(new Frame.Reading(piece));
  }

  private void broadcast(Frame f) {
    for (Peer p : peers.values()) {
      if (p.conn != null) {
        p.conn.send(f);
      }
    }
  }

  private void fault(Peer p, String why) {
    p.faults++;
    log.warn("peer {}: {} (fault {} of {})", p.id, why, p.faults, MAX_FAULTS);
    if (p.faults >= MAX_FAULTS && !p.refused) {
      p.refused = true;
      log.warn("peer {}: {} faults; not requesting anything from it any more", p.id, p.faults);
      requeue(p);
    }
  }

  private void requeue(Peer p) {
    for (Integer piece : p.inFlight.keySet()) {
      inProgress.clear(piece);
    }
    p.inFlight.clear();
  }

  // ------------------------------------------------------------------ source reads

  private void sourceWorker() {
    while (true) {
      Run run;
      synchronized (this) {
        while (true) {
          if (!filling || failure != null) {
            return;
          }
          run = nextSourceRun(System.nanoTime());
          if (run != null) {
            sourceRuns++;
            break;
          }
          try {
            wait(TICK_MS);
          } catch (InterruptedException e) {
            return;
          }
        }
      }
      try {
        if (!readFromSource(run)) {
          return; // interrupted
        }
      } catch (LoadFailure f) {
        synchronized (this) {
          if (failure == null) {
            failure = f;
          }
          notifyAll();
        }
        return;
      } catch (RuntimeException e) {
        synchronized (this) {
          if (failure == null && filling) {
            failure =
                new LoadFailure("InternalError", "source read of " + describe(run) + ": " + e, e);
          }
          notifyAll();
        }
        return;
      } finally {
        synchronized (this) {
          sourceRuns--;
          notifyAll();
        }
      }
    }
  }

  /**
   * Pieces {@code first .. first + count - 1}, contiguous in one file, read from the source with
   * one ranged request.
   */
  record Run(int first, int count) {}

  /**
   * Reads a run of pieces into the store with one ranged request, resumed at the first missing byte
   * after a failure (up to {@link ReadOptions#maxAttempts()} attempts); each piece is hashed and
   * announced (HAVE) as soon as its last byte is in, so peers start relaying it while the rest of
   * the run still streams. Returns false when interrupted.
   */
  private boolean readFromSource(Run run) throws LoadFailure {
    PieceMap.Piece head = map.piece(run.first());
    SourceFile file = sourceFiles.get(head.path());
    long runOffset = head.offset();
    long runLength = 0;
    for (int i = 0; i < run.count(); i++) {
      runLength += map.piece(run.first() + i).length();
    }
    byte[] staging = new byte[(int) Math.min(runLength, 256 * 1024)];
    long received = 0; // bytes of the run in the store
    int done = 0; // pieces of the run stored and announced
    PieceMap.Piece current = head;
    ByteBuffer target = stored.writable(current.path(), current.offset(), current.length());
    int attempt = 0;
    while (true) {
      if (Thread.currentThread().isInterrupted()) {
        return false;
      }
      attempt++;
      Throwable cause;
      try (InputStream in = source.openRange(file, runOffset + received, runLength - received)) {
        while (received < runLength) {
          int n = in.read(staging, 0, Math.min(staging.length, target.remaining()));
          if (n < 0) {
            break;
          }
          target.put(staging, 0, n);
          received += n;
          if (!target.hasRemaining()) {
            pieceStored(
                current.index(),
                sha256(stored.readOnly(current.path(), current.offset(), current.length())),
                null);
            if (++done < run.count()) {
              current = map.piece(run.first() + done);
              target = stored.writable(current.path(), current.offset(), current.length());
            }
          }
        }
        if (received == runLength) {
          return true;
        }
        cause = new EOFException("the response ended after " + received + " of " + runLength);
      } catch (SourceException e) {
        if (!e.retryable()) {
          throw new LoadFailure(e.reason(), describe(run) + ": " + e.getMessage(), e);
        }
        cause = e;
      } catch (IOException e) {
        if (Thread.currentThread().isInterrupted()) {
          return false;
        }
        cause = e;
      }
      if (attempt >= read.maxAttempts()) {
        String reason = cause instanceof SourceException se ? se.reason() : "SourceUnavailable";
        throw new LoadFailure(
            reason,
            "reading "
                + describe(run)
                + " from "
                + source.describe()
                + " failed after all "
                + attempt
                + " attempts; last cause: "
                + cause,
            cause);
      }
      Duration delay = backoff(attempt);
      progress.retrying(
          new ReadProgressListener.RetryEvent(
              file, runOffset, (int) runLength, attempt, runOffset + received, delay, cause));
      try {
        Thread.sleep(delay.toMillis());
      } catch (InterruptedException e) {
        return false;
      }
    }
  }

  private Duration backoff(int attempt) {
    long cap = read.backoffCap().toNanos();
    long d = read.backoffBase().toNanos();
    for (int i = 1; i < attempt && d < cap; i++) {
      d *= 2;
    }
    d = Math.min(d, cap);
    return Duration.ofNanos(d <= 1 ? d : d / 2 + ThreadLocalRandom.current().nextLong(d / 2 + 1));
  }

  private String describe(Run run) {
    PieceMap.Piece first = map.piece(run.first());
    PieceMap.Piece last = map.piece(run.first() + run.count() - 1);
    return (run.count() == 1
            ? "piece " + first.index()
            : "pieces " + first.index() + "-" + last.index())
        + " (bytes ["
        + first.offset()
        + ", "
        + (last.offset() + last.length())
        + ") of "
        + first.path()
        + ")";
  }

  /** A verified piece is in the store: account, announce. {@code from} null = the source. */
  private void pieceStored(int piece, byte[] sha, Peer from) {
    synchronized (this) {
      if (present == null || present.get(piece)) {
        if (from == null) {
          sourceReading.remove(piece);
        }
        inProgressClear(piece);
        return;
      }
      if (from == null) {
        // Bytes this member read from the source itself: their hash is the truth here.
        if (hashes[piece] != null && !Arrays.equals(hashes[piece], sha)) {
          Peer announcer = hashFrom[piece] == null ? null : peers.get(hashFrom[piece]);
          if (announcer != null) {
            drop(
                announcer,
                "announced piece "
                    + piece
                    + " with sha256 "
                    + HexFormat.of().formatHex(hashes[piece])
                    + " but the source gives "
                    + HexFormat.of().formatHex(sha)
                    + " (read by this member)");
          }
        }
        hashes[piece] = sha;
        hashFrom[piece] = self;
        settleClaims(piece);
      }
      int len = map.piece(piece).length();
      present.set(piece);
      inProgress.clear(piece);
      sourceReading.remove(piece);
      if (from == null) {
        progress.fromSource(len);
      } else {
        progress.fromPeers(len);
        bytesReceived.increment(len);
      }
      broadcast(new Frame.Have(piece, sha));
      notifyAll();
    }
  }

  private synchronized void inProgressClear(int piece) {
    if (inProgress != null && present != null && !present.get(piece)) {
      inProgress.clear(piece);
    }
  }

  // ------------------------------------------------------------------ transport events

  @Override
  public void connected(PeerTransport.PeerConnection conn) {
    synchronized (this) {
      Peer p = peers.computeIfAbsent(conn.peerId(), id -> new Peer(id, tieRank(self, id)));
      if (p.dropped != null) {
        conn.close("dropped earlier: " + p.dropped);
        return;
      }
      if (membership == null || membership.member(conn.peerId()) == null) {
        conn.close("not a member of the current membership");
        return;
      }
      PeerTransport.PeerConnection old = p.conn;
      if (old != null && old != conn) {
        requeue(p);
        old.close("replaced by a new connection from the same peer");
      }
      p.conn = conn;
      p.everConnected = true;
      p.synced = false;
      p.lastPieceAt = 0;
      p.connectedAt = System.nanoTime();
      log.info("peer {} connected", conn.peerId());
      if (present != null) {
        byte[][] h = new byte[map.size()][];
        for (int i = present.nextSetBit(0); i >= 0; i = present.nextSetBit(i + 1)) {
          h[i] = hashes[i];
        }
        // READING first: the BITFIELD completes what the peer must know before it reads any
        // piece from the source (nextSourceRun).
        for (Integer piece : sourceReading.keySet()) {
          conn.send(new Frame.Reading(piece));
        }
        conn.send(new Frame.Bitfield(map.size(), (BitSet) present.clone(), h));
      }
      notifyAll();
    }
  }

  @Override
  public void refused(String kind) {
    Counter.builder("tensorcast.dataplane.peer.connections.refused")
        .tags(tags)
        .tag("reason", kind)
        .description(
            "Connections to the peer port refused before or during the authenticated handshake")
        .register(registry)
        .increment();
  }

  @Override
  public void disconnected(PeerTransport.PeerConnection conn) {
    synchronized (this) {
      Peer p = peers.get(conn.peerId());
      if (p == null || p.conn != conn) {
        return;
      }
      p.conn = null;
      p.synced = false;
      p.downSince = System.nanoTime();
      requeue(p);
      log.info("peer {} disconnected", conn.peerId());
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
      if (p == null || p.conn != conn || map == null || p.dropped != null) {
        return;
      }
      if (frame instanceof Frame.Have h) {
        if (checkIndex(conn, h.piece(), "HAVE")) {
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
        p.synced = true;
        p.everSynced = true;
      } else if (frame instanceof Frame.Reading r) {
        // Only the piece's reader keeps others from reading it: marks from anyone else would let
        // a member hold every piece back by renewing marks for pieces it never reads.
        if (checkIndex(conn, r.piece(), "READING")
            && !p.has.get(r.piece())
            && p.id.equals(readerOf(r.piece()))) {
          p.reading.put(r.piece(), System.nanoTime());
        }
      } else if (frame instanceof Frame.Request r) {
        if (checkIndex(conn, r.piece(), "REQUEST")) {
          serve(p, conn, r.piece());
        }
      } else if (frame instanceof Frame.Reject r) {
        if (p.inFlight.remove(r.piece()) != null) {
          inProgress.clear(r.piece());
          p.has.clear(r.piece());
          log.info("peer {} rejected piece {}: {}", p.id, r.piece(), r.reason());
        }
      } else {
        conn.close("unexpected " + FrameCodec.typeName(frame.type()) + " after the handshake");
        return;
      }
      notifyAll();
    }
  }

  private boolean checkIndex(PeerTransport.PeerConnection conn, int piece, String what) {
    if (piece < 0 || piece >= map.size()) {
      conn.close(what + " for piece " + piece + " outside 0.." + (map.size() - 1));
      return false;
    }
    return true;
  }

  /**
   * Peer {@code p} announced it holds {@code piece} with hash {@code sha} (HAVE, BITFIELD); called
   * under the lock. From the piece's reader the hash becomes the expected one; from anyone else it
   * is a holding only when it equals the expected hash, a claim while that is unknown, and a reason
   * to drop {@code p} when it differs.
   */
  private void announced(Peer p, int piece, byte[] sha) {
    p.reading.remove(piece);
    byte[] known = hashes[piece];
    if (known != null) {
      if (Arrays.equals(known, sha)) {
        p.has.set(piece);
        p.claims.remove(piece);
      } else {
        drop(p, differs(piece, sha));
      }
      return;
    }
    if (p.id.equals(readerOf(piece))) {
      accept(p, piece, sha);
    } else {
      p.claims.put(piece, sha);
    }
  }

  /** The reader {@code p}'s hash of {@code piece} becomes its expected hash; under the lock. */
  private void accept(Peer p, int piece, byte[] sha) {
    hashes[piece] = sha;
    hashFrom[piece] = p.id;
    p.has.set(piece);
    p.claims.remove(piece);
    settleClaims(piece);
  }

  /** Checks the other members' claims on {@code piece} against its now known hash. */
  private void settleClaims(int piece) {
    for (Peer q : List.copyOf(peers.values())) {
      byte[] claim = q.claims.remove(piece);
      if (claim == null || q.dropped != null) {
        continue;
      }
      if (Arrays.equals(claim, hashes[piece])) {
        q.has.set(piece);
      } else {
        drop(q, differs(piece, claim));
      }
    }
  }

  private String differs(int piece, byte[] announced) {
    String from = hashFrom[piece];
    return "announced piece "
        + piece
        + " with sha256 "
        + HexFormat.of().formatHex(announced)
        + " but "
        + (self.equals(from)
            ? "this member read " + HexFormat.of().formatHex(hashes[piece]) + " from the source"
            : "its reader " + from + " announced " + HexFormat.of().formatHex(hashes[piece]));
  }

  /** The reader of {@code piece} in the plan of the moment; under the lock. */
  private String readerOf(int piece) {
    View v = lastView != null ? lastView : (lastView = view(System.nanoTime()));
    return v.plan().reader(piece);
  }

  /**
   * Claims of members who have become the reader of the piece since they announced it (the live set
   * changed, e.g. a block re-split after a member was lost): their hash is now the expected one.
   * Runs when the readers may have changed; under the lock.
   */
  private void promoteClaims(SwarmPlan plan) {
    for (Peer p : List.copyOf(peers.values())) {
      if (p.claims.isEmpty() || p.dropped != null || p.refused) {
        continue;
      }
      for (Map.Entry<Integer, byte[]> c : List.copyOf(p.claims.entrySet())) {
        int piece = c.getKey();
        if (p.dropped == null && hashes[piece] == null && p.id.equals(plan.reader(piece))) {
          accept(p, piece, c.getValue());
        }
      }
    }
  }

  /**
   * Drops member {@code p} for announcing a hash that is not its piece's expected hash: it is
   * disconnected, not dialled, asked, served or trusted again while this swarm lives, and reported
   * ({@link #dropped()}, {@code tensorcast_dataplane_peers_dropped_total}); under the lock.
   */
  private void drop(Peer p, String why) {
    if (p.dropped != null) {
      return;
    }
    p.dropped = why;
    p.refused = true;
    requeue(p);
    p.has.clear();
    p.claims.clear();
    p.reading.clear();
    peersDropped.increment();
    if (dropped.size() < MAX_DROPPED_REPORTED) {
      dropped.add(new DroppedPeer(p.id, why));
    }
    log.warn(
        "dropping peer {}: {}; it is not asked for, served or trusted again by this member",
        p.id,
        why);
    if (p.conn != null) {
      p.conn.close("dropped: " + why);
    }
    if (transport != null) {
      transport.forget(p.id);
    }
    notifyAll();
  }

  private void serve(Peer p, PeerTransport.PeerConnection conn, int piece) {
    if (p.dropped != null || membership == null || membership.member(p.id) == null) {
      conn.close("REQUEST from a peer that is not a member in good standing; not served");
      return;
    }
    if (p.sendsOn != conn) {
      p.sendsOn = conn;
      p.queuedSends = 0;
      p.sendsCut = false;
    }
    if (p.sendsCut) {
      return; // closing; frames already buffered still arrive
    }
    if (p.queuedSends >= MAX_QUEUED_SENDS) {
      p.sendsCut = true;
      // A member asks for at most its --max-in-flight pieces at a time and reads what it asked
      // for; a peer that keeps asking without reading would grow this side's send queue without
      // bound.
      conn.close(
          "REQUEST for piece "
              + piece
              + " while "
              + p.queuedSends
              + " requested pieces are still queued unread (limit "
              + MAX_QUEUED_SENDS
              + ")");
      return;
    }
    if (!serving || !present.get(piece)) {
      conn.send(new Frame.Reject(piece, "piece not held"));
      return;
    }
    PieceMap.Piece pc = map.piece(piece);
    Path file = stored.directory().resolve(pc.path());
    p.queuedSends++;
    conn.sendPiece(
        piece,
        file,
        pc.offset(),
        pc.length(),
        hashes[piece],
        () -> {
          bytesSent.increment(pc.length());
          synchronized (this) {
            if (p.sendsOn == conn) {
              p.queuedSends--;
            }
          }
        });
  }

  private void receivedPiece(PeerTransport.PeerConnection conn, Frame.Piece f) {
    Peer p;
    byte[] expected;
    ExecutorService v;
    synchronized (this) {
      p = peers.get(conn.peerId());
      if (p != null && p.conn == conn) {
        p.lastPieceAt = System.nanoTime();
      }
      if (p == null
          || p.conn != conn
          || map == null
          || f.piece() < 0
          || f.piece() >= map.size()
          || p.inFlight.remove(f.piece()) == null) {
        f.payload().release(); // late (after a stuck timeout) or unasked
        return;
      }
      expected = hashes[f.piece()];
      v = verifier;
    }
    try {
      v.execute(() -> verifyAndStore(p, conn, f, expected));
    } catch (RejectedExecutionException | NullPointerException e) {
      f.payload().release();
      inProgressClear(f.piece());
    }
  }

  /**
   * Hashes a received piece; writes it to the store only when its tag verifies (it came from this
   * peer's authenticated stream) and it matches the expected hash.
   */
  private void verifyAndStore(
      Peer p, PeerTransport.PeerConnection conn, Frame.Piece f, byte[] expected) {
    int piece = f.piece();
    ByteBuf buf = f.payload();
    try {
      PieceMap.Piece pc = map.piece(piece);
      String problem = null;
      byte[] actual = null;
      if (buf.readableBytes() != pc.length()) {
        problem =
            "sent " + buf.readableBytes() + " bytes for piece " + piece + " of " + pc.length();
      } else {
        actual = sha256(buf.nioBuffer());
        if (!conn.authentic(f, actual)) {
          problem =
              "piece "
                  + piece
                  + "'s tag does not verify: bytes injected into or altered on the stream;"
                  + " dropped";
          conn.close(problem);
        } else if (expected == null || !Arrays.equals(actual, expected)) {
          problem =
              "piece "
                  + piece
                  + " has sha256 "
                  + HexFormat.of().formatHex(actual)
                  + " but "
                  + (expected == null ? "none" : HexFormat.of().formatHex(expected))
                  + " is expected; dropped";
        }
      }
      if (problem != null) {
        piecesRejected.increment();
        synchronized (this) {
          inProgressClear(piece);
          p.bad.set(piece);
          fault(p, problem);
          notifyAll();
        }
        return;
      }
      synchronized (this) {
        if (!serving || present.get(piece)) {
          inProgressClear(piece);
          return;
        }
      }
      stored.write(pc.path(), pc.offset(), buf.nioBuffer());
      pieceStored(piece, actual, p);
    } catch (RuntimeException e) {
      log.warn("storing piece {} from {} failed: {}", piece, p.id, e.toString());
      inProgressClear(piece);
    } finally {
      buf.release();
    }
  }

  // ------------------------------------------------------------------ lifecycle

  /** Stops serving and receiving, closes the transport. Idempotent. */
  @Override
  public void close() {
    PeerTransport t;
    ExecutorService v;
    ExecutorService a;
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      serving = false;
      t = transport;
      v = verifier;
      a = adopting;
      notifyAll();
    }
    if (a != null) {
      a.shutdownNow(); // stops hashing the adopted copy before the store may unload it
      awaitQuietly(a);
    }
    if (t != null) {
      t.close();
    }
    if (v != null) {
      v.shutdownNow();
      awaitQuietly(v);
    }
  }

  private static byte[] sha256(ByteBuffer b) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      md.update(b);
      return md.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static void awaitQuietly(ExecutorService pool) {
    boolean interrupted = false;
    try {
      while (!pool.awaitTermination(10, TimeUnit.SECONDS)) {
        log.warn("still waiting for {} to stop", pool);
      }
    } catch (InterruptedException e) {
      interrupted = true;
      try {
        pool.awaitTermination(10, TimeUnit.SECONDS);
      } catch (InterruptedException again) {
        // give up waiting
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  private static java.util.concurrent.ThreadFactory daemon(String name) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, name + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }
}
