package io.tensorcast.dataplane.p2p;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.netty.buffer.ByteBuf;
import io.tensorcast.api.Reason;
import io.tensorcast.api.wire.DataPlaneStatus.DroppedPeer;
import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.load.LoadFailure;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.load.ReadProgressListener;
import io.tensorcast.dataplane.load.Sha256;
import io.tensorcast.dataplane.load.StoreFiller;
import io.tensorcast.dataplane.load.ThrottleGate;
import io.tensorcast.dataplane.p2p.SwarmPolicy.Decision;
import io.tensorcast.dataplane.p2p.SwarmPolicy.Run;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.Backoff;
import io.tensorcast.dataplane.source.ConcurrencyLimiter;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.Arrays;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One member of an artifact's swarm — the mechanism around its {@link SwarmPolicy}: the peer
 * transport ({@link NettyPeerTransport}), source reads into the store, verification of pieces from
 * peers, store writes, serving with sendfile, metrics. Every rule (what to request from whom, which
 * runs to read from the source, whose hash counts, whom to drop or serve) is the policy's; this
 * class feeds it events and carries out its decisions.
 *
 * <p>Threading: one lock (this object's monitor) around the policy. Transport event loops, the
 * source workers and the verifier threads take it only to report an event and carry out the
 * decisions that come back, each a non-blocking hand-off (a frame queued on a channel, a run handed
 * to a source worker); reading the source, hashing and writing the store happen outside it. The
 * thread of {@link #fill} runs the policy's scheduling round ({@link SwarmPolicy#tick()}) after
 * every batch of events and at least every {@value #TICK_MS} ms.
 *
 * <ul>
 *   <li>Membership comes from {@code --peers} or {@link #applyMembership} ({@code PUT /v1/peers});
 *       without one, the fill waits {@link PeerSettings#membershipWait()} and then loads alone.
 *   <li>Integrity: a piece read from the source is hashed (SHA-256) in the store and reported with
 *       its hash; a piece from a peer is hashed before it is written and must carry a valid tag and
 *       equal the policy's expected hash ({@link SwarmPolicy#expectedHash}); otherwise it is
 *       dropped and counted ({@code tensorcast_dataplane_pieces_rejected_total}).
 *   <li>Resume: every piece stored (and verified) is recorded in the store's stored ranges ({@link
 *       StoredArtifact#recordStored}); a fill handed a copy that already holds recorded pieces (a
 *       retried load, a restarted process) hashes them from the store and gives them to the policy
 *       ({@link SwarmPolicy#resume}), which confirms them before they are announced.
 *   <li>Changed objects: a member whose HELLO carries another piece map of this artifact listed
 *       other versions; while filling, this member then checks the source ({@link #otherListing})
 *       and fails its fill with {@code ObjectChanged} when an object it listed changed, so that it
 *       lists again and meets the others on the new version.
 * </ul>
 *
 * <p>Stalled source reads: a source run whose response body has brought no byte for half the peer
 * timeout ({@link PeerSettings#peerTimeout()}, at least {@link #MIN_STALL_TIMEOUT}) is cut by the
 * fill's thread and resumed at its first missing byte, like a response cut by the source. Its
 * pieces are the ones the other members wait for, so a stream the origin stopped feeding with the
 * connection left open must not hold the swarm until the source's read timeout; a whole origin that
 * has gone quiet costs one new request per run and back-off.
 *
 * <p>Metrics (tag {@code artifact}): {@code tensorcast_dataplane_peer_bytes_received_total}, {@code
 * tensorcast_dataplane_peer_bytes_sent_total}, {@code tensorcast_dataplane_pieces_rejected_total},
 * {@code tensorcast_dataplane_peers}, {@code tensorcast_dataplane_peers_dropped_total}, {@code
 * tensorcast_dataplane_source_stalls_total}, {@code
 * tensorcast_dataplane_peer_connections_refused_total} (tag {@code reason}).
 */
public final class PeerSwarm implements StoreFiller, PeerTransport.Listener, AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(PeerSwarm.class);

  private static final long TICK_MS = 50;

  /**
   * The least time a source run's response body may bring no byte before it is cut: half the peer
   * timeout, but never less (a short peer timeout spots dead peers, not slow origins).
   */
  static final Duration MIN_STALL_TIMEOUT = Duration.ofSeconds(5);

  /**
   * Least time between two checks of the source prompted by members that listed otherwise ({@link
   * #otherListing}): a member whose listing is stale keeps dialling for a few seconds at most.
   */
  private static final long LISTING_CHECK_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(1);

  private final String artifactId;
  private final PeerSettings settings;
  private final String self;
  private final Counter bytesReceived;
  private final Counter bytesSent;
  private final Counter piecesRejected;
  private final Counter peersDropped;
  private final Counter sourceStalls;
  private final MeterRegistry registry;
  private final Tags tags;

  // ---- guarded by this
  private final SwarmPolicy<PeerTransport.PeerConnection> policy;
  private volatile PieceMap map;
  private volatile Map<String, SourceFile> sourceFiles;
  private volatile StoredArtifact stored;
  private volatile ArtifactSource source;
  private ReadOptions read;
  private volatile ThrottleGate gate;
  private volatile FillProgress progress;

  /** The transport's piece-progress stamp last reported to the policy, per connection. */
  private final Map<PeerTransport.PeerConnection, Long> progressSeen = new IdentityHashMap<>();

  /** An event arrived since the last scheduling round. */
  private boolean dirty;

  private boolean filling;
  private LoadFailure failure;
  private boolean checkingListing;
  private long listingCheckedAt;
  private boolean closed;
  private PeerTransport transport;

  /** The transport {@link #prepare} is starting (null inside when it could not); or null. */
  private CompletableFuture<PeerTransport> prepared;

  /** The HELLO map digest of the files {@link #prepare} was given. */
  private byte[] preparedDigest;

  private ExecutorService sources;

  /**
   * The response bodies of the source runs being read, watched for stalls ({@link #cutStalled}).
   */
  private final Set<BodyWatch> bodies = ConcurrentHashMap.newKeySet();

  private volatile ConcurrencyLimiter sourceLimiter = ConcurrencyLimiter.fixed(1);
  private ExecutorService verifier;
  private ExecutorService adopting;

  /**
   * @param artifactId the artifact's store id (sent in HELLO)
   * @param registry where the peer metrics are registered
   */
  public PeerSwarm(String artifactId, PeerSettings settings, MeterRegistry registry) {
    this.artifactId = artifactId;
    this.settings = settings;
    this.self = settings.peerId();
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
    this.sourceStalls =
        Counter.builder("tensorcast.dataplane.source.stalls")
            .tags(tags)
            .description(
                "Source responses of the swarm's runs cut because their body brought no byte for"
                    + " half the peer timeout, and resumed")
            .register(registry);
    Gauge.builder("tensorcast.dataplane.peers", this, PeerSwarm::connectedPeers)
        .tags(tags)
        .description("Peers connected over the peer transport")
        .register(registry);
    this.policy = new SwarmPolicy<>(SwarmPolicy.Config.of(settings), System::nanoTime);
    if (settings.staticPeers() != null) {
      synchronized (this) {
        policy.applyMembership(settings.staticPeers());
        act();
      }
    }
  }

  // ------------------------------------------------------------------ membership and status

  /**
   * Applies a membership ({@code PUT /v1/peers}).
   *
   * @return false when its epoch equals the current one (nothing changed), true when applied
   */
  public synchronized boolean applyMembership(Membership m) {
    boolean applied = policy.applyMembership(m);
    act();
    wake();
    return applied;
  }

  /** The membership applied last, or null; what the transport admits peers by. */
  synchronized Membership membership() {
    return policy.membership();
  }

  /**
   * The members dropped so far (at most {@value SwarmPolicy#MAX_DROPPED_REPORTED}, oldest first).
   */
  public synchronized List<DroppedPeer> dropped() {
    return policy.dropped();
  }

  /** The epoch of the membership applied last, or null. */
  public synchronized String epoch() {
    return policy.epoch();
  }

  /** Peers connected now (handshake done). */
  public synchronized int connectedPeers() {
    return policy.connectedPeers();
  }

  /** The transport's listen address once a fill started, else null. */
  public synchronized InetSocketAddress listenAddress() {
    return transport == null ? null : transport.listenAddress();
  }

  // ------------------------------------------------------------------ carrying out decisions

  /** Carries out the policy's decisions, in order; under the lock. */
  private void act() {
    for (List<Decision<PeerTransport.PeerConnection>> ds = policy.drain();
        !ds.isEmpty();
        ds = policy.drain()) {
      for (Decision<PeerTransport.PeerConnection> d : ds) {
        carryOut(d);
      }
    }
  }

  private void carryOut(Decision<PeerTransport.PeerConnection> d) {
    if (d instanceof Decision.Send<PeerTransport.PeerConnection> s) {
      s.to().send(s.frame());
    } else if (d instanceof Decision.SendPiece<PeerTransport.PeerConnection> s) {
      sendPiece(s.to(), s.piece(), s.sha256());
    } else if (d instanceof Decision.ReadSource<PeerTransport.PeerConnection> r) {
      sources.execute(() -> sourceRun(r.run()));
    } else if (d instanceof Decision.Close<PeerTransport.PeerConnection> c) {
      c.conn().close(c.why());
    } else if (d instanceof Decision.Drop<PeerTransport.PeerConnection> dr) {
      peersDropped.increment();
      log.warn(
          "dropping peer {}: {}; it is not asked for, served or trusted again by this member",
          dr.peer(),
          dr.why());
      if (dr.conn() != null) {
        dr.conn().close("dropped: " + dr.why());
      }
      if (transport != null) {
        transport.forget(dr.peer());
      }
    } else if (d instanceof Decision.Dial<PeerTransport.PeerConnection> dial) {
      transport.dial(dial.peer(), dial.address());
    } else if (d instanceof Decision.Forget<PeerTransport.PeerConnection> f) {
      transport.forget(f.peer());
    } else if (d instanceof Decision.Kept<PeerTransport.PeerConnection> k) {
      PieceMap.Piece pc = map.piece(k.piece());
      progress.kept(pc.length());
      progress.stored(sourceFiles.get(pc.path()), pc.offset(), pc.length());
    } else if (d instanceof Decision.CheckFile<PeerTransport.PeerConnection> c) {
      checkFile(c.first());
    } else if (d instanceof Decision.Confirmed<PeerTransport.PeerConnection> c) {
      PieceMap.Piece pc = map.piece(c.piece());
      progress.fromPeers(pc.length());
      bytesReceived.increment(pc.length());
      recordStored(pc);
    } else if (d instanceof Decision.Note<PeerTransport.PeerConnection> n) {
      if (n.warn()) {
        log.warn("{}", n.message());
      } else {
        log.info("{}", n.message());
      }
    }
  }

  /**
   * Computes the digest the source publishes for the file whose first piece is {@code first} over
   * the store's bytes, on a verifier thread, and reports whether it matches; under the lock.
   */
  private void checkFile(int first) {
    SourceFile file = sourceFiles.get(map.piece(first).path());
    FillProgress p = progress;
    Runnable check =
        () -> {
          boolean match;
          try {
            match = p.matchesPublishedDigest(file);
          } catch (RuntimeException e) {
            log.warn(
                "checking {} against the source's digest failed: {}", file.path(), e.toString());
            match = false;
          }
          synchronized (this) {
            policy.onFileChecked(first, match);
            act();
            wake();
          }
        };
    try {
      if (verifier == null) {
        throw new RejectedExecutionException("the swarm is closed");
      }
      verifier.execute(check);
    } catch (RejectedExecutionException e) {
      policy.onFileChecked(first, false);
    }
  }

  /** An event arrived: the fill runs a scheduling round now rather than at the next tick. */
  private void wake() {
    dirty = true;
    notifyAll();
  }

  private void sendPiece(PeerTransport.PeerConnection conn, int piece, byte[] sha256) {
    PieceMap.Piece pc = map.piece(piece);
    Path file = stored.directory().resolve(pc.path());
    conn.sendPiece(
        piece,
        file,
        pc.offset(),
        pc.length(),
        sha256,
        () -> {
          bytesSent.increment(pc.length());
          synchronized (this) {
            policy.onPieceSent(conn, conn.peerId());
            act();
          }
        });
  }

  // ------------------------------------------------------------------ fill

  @Override
  public void fill(
      ArtifactSource source,
      StoredArtifact stored,
      List<SourceFile> files,
      ReadOptions read,
      ThrottleGate gate,
      FillProgress progress)
      throws LoadFailure, InterruptedException {
    Objects.requireNonNull(gate, "gate");
    PieceMap pm =
        new PieceMap(
            files.stream().map(f -> new StoreFile(f.path(), f.size())).toList(),
            settings.pieceSize());
    Map<String, SourceFile> byPath = new HashMap<>();
    files.forEach(f -> byPath.put(f.path(), f));
    int threads = Math.max(1, read.concurrency());
    byte[][] heldHashes = new byte[pm.size()][];
    BitSet held = heldPieces(pm, stored, byPath, heldHashes);
    synchronized (this) {
      if (closed) {
        throw new LoadFailure(Reason.Interrupted, "the peer swarm was closed");
      }
      this.map = pm;
      this.sourceFiles = byPath;
      this.stored = stored;
      this.source = source;
      this.read = read;
      this.gate = gate;
      this.sourceLimiter = ConcurrencyLimiter.of(read.adaptiveConcurrency(), threads);
      this.progress = progress;
      this.filling = true;
      policy.startFill(pm, threads, read.rangeSize());
      policy.verifiableLater(); // whenDigestsKnown below
      if (!held.isEmpty()) {
        policy.resume(held, heldHashes);
      }
      act();
    }
    // Claims on pieces of files with a published digest may be fetched once the digests are in
    // (the loader reads them while the fill starts); until then none is fetched.
    progress.whenDigestsKnown(
        () -> {
          BitSet v = verifiable(pm, byPath, progress);
          synchronized (this) {
            if (filling && !closed && map == pm) {
              policy.verifiable(v);
              act();
              wake();
            }
          }
        });
    PeerTransport t = preparedTransport(pm, files);
    boolean early = t != null;
    if (!early && preparedFuture() == null) {
      t = startTransport(pm, files, "loading from the source alone", false);
    }
    ExecutorService pool = Executors.newFixedThreadPool(threads, daemon("p2p-source"));
    synchronized (this) {
      sources = pool;
      transport = t;
      verifier = Executors.newFixedThreadPool(2, daemon("p2p-verify"));
      if (t != null) {
        if (!early) {
          policy.transportStarted();
        }
        act();
      }
    }
    if (t != null) {
      t.open(); // the peers handshaken while this member allocated are reported now
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
      synchronized (this) {
        while (!policy.complete()) {
          if (failure != null) {
            throw failure;
          }
          if (closed) {
            throw new LoadFailure(Reason.Interrupted, "the peer swarm was closed");
          }
          reportPieceProgress();
          cutStalled();
          policy.tick();
          act();
          if (!dirty) {
            wait(TICK_MS);
          }
          dirty = false;
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
      pool.shutdownNow();
      awaitQuietly(pool);
      ExecutorService v;
      synchronized (this) {
        v = verifier;
        if (!ok) {
          // The loader unloads the store after a failure: stop serving and receiving first.
          policy.stop();
          verifier = null;
        }
      }
      if (!ok) {
        v.shutdownNow();
        awaitQuietly(v);
      }
    }
  }

  /**
   * The pieces an earlier fill of this copy left in the store (a failed load retried, or a copy the
   * store adopted after a restart): those inside the ranges the store recorded under each file's
   * listed version ({@link StoredArtifact#recordStored}, written only once a piece's bytes are in),
   * or in a file complete under that version. Each is hashed from the store into {@code sha256}.
   */
  private static BitSet heldPieces(
      PieceMap pm, StoredArtifact copy, Map<String, SourceFile> byPath, byte[][] sha256) {
    BitSet held = new BitSet(pm.size());
    Map<String, List<long[]>> ranges = new HashMap<>();
    for (SourceFile f : byPath.values()) {
      Optional<String> version = copy.storedVersion(f.path());
      if (copy.isComplete(f.path()) && version.isPresent() && version.get().equals(f.etag())) {
        ranges.put(f.path(), List.of(new long[] {0, f.size()}));
      } else {
        ranges.put(f.path(), copy.storedRanges(f.path(), f.etag()));
      }
    }
    long bytes = 0;
    for (PieceMap.Piece p : pm.pieces()) {
      for (long[] r : ranges.getOrDefault(p.path(), List.of())) {
        if (r[0] <= p.offset() && p.offset() + p.length() <= r[1]) {
          sha256[p.index()] = sha256(copy.readOnly(p.path(), p.offset(), p.length()));
          held.set(p.index());
          bytes += p.length();
          break;
        }
      }
    }
    if (!held.isEmpty()) {
      log.info(
          "artifact {}: {} pieces ({} bytes) of an earlier fill are in the store; kept once"
              + " confirmed",
          copy.artifactId(),
          held.cardinality(),
          bytes);
    }
    return held;
  }

  /**
   * The pieces of the files the source publishes a digest for: a peer's claim on them may be
   * fetched and checked with the file ({@link SwarmPolicy#verifiable}).
   */
  private static BitSet verifiable(
      PieceMap pm, Map<String, SourceFile> byPath, FillProgress progress) {
    BitSet out = new BitSet(pm.size());
    Map<String, Boolean> digest = new HashMap<>();
    for (PieceMap.Piece p : pm.pieces()) {
      if (digest.computeIfAbsent(p.path(), path -> progress.publishesDigest(byPath.get(path)))) {
        out.set(p.index());
      }
    }
    return out;
  }

  /** Records a piece whose bytes are in the store, so a later fill of this copy keeps it. */
  private void recordStored(PieceMap.Piece pc) {
    SourceFile f = sourceFiles.get(pc.path());
    stored.recordStored(pc.path(), f.etag(), pc.offset(), pc.length());
    progress.stored(f, pc.offset(), pc.length());
  }

  /**
   * Tells the policy about piece bytes still arriving (a peer whose PIECE frames keep coming is
   * busy, not stuck); under the lock.
   */
  private void reportPieceProgress() {
    for (Map.Entry<String, PeerTransport.PeerConnection> e : policy.connections().entrySet()) {
      PeerTransport.PeerConnection c = e.getValue();
      long at = c.pieceProgressAt();
      Long seen = progressSeen.get(c);
      if (at != 0 && (seen == null || seen != at)) {
        progressSeen.put(c, at);
        policy.onPieceProgress(c, e.getKey(), at);
      }
    }
  }

  // ------------------------------------------------------------------ the transport, early

  /**
   * Starts the peer transport for {@code files} on a thread of its own while the loader reads the
   * digests and allocates the copy: Netty's start, the bind and the handshakes with the members
   * (dialled and accepted) overlap them. Handshaken connections are held ({@link
   * PeerTransport#open()}) until {@link #fill} has the policy ready for them.
   */
  @Override
  public void prepare(List<SourceFile> files) {
    if (settings.secret() == null) {
      return; // fill warns: no transport without a secret
    }
    PieceMap pm = pieceMap(files);
    CompletableFuture<PeerTransport> f = new CompletableFuture<>();
    synchronized (this) {
      if (closed || map != null || prepared != null) {
        return;
      }
      prepared = f;
      preparedDigest = helloDigest(pm, files);
    }
    log.info(
        "artifact {}: {} files listed; starting the peer transport while the digests are read and"
            + " the copy allocated",
        artifactId,
        files.size());
    Thread starter =
        new Thread(
            () -> {
              PeerTransport t = null;
              try {
                t = startTransport(pm, files, "loading from the source alone", true);
              } catch (InterruptedException | RuntimeException e) {
                log.warn("cannot start the peer transport: {}; loading alone", e.toString());
              }
              synchronized (this) {
                if (t != null && closed) {
                  t.close();
                  t = null;
                } else if (t != null) {
                  transport = t;
                  policy.transportStarted(); // dials the members now
                  act();
                }
              }
              f.complete(t);
            },
            "p2p-transport-start");
    starter.setDaemon(true);
    starter.start();
  }

  private synchronized CompletableFuture<PeerTransport> preparedFuture() {
    return prepared;
  }

  /**
   * The transport {@link #prepare} started, once it is up; null when none was prepared or it could
   * not start (warned).
   */
  private PeerTransport preparedTransport(PieceMap pm, List<SourceFile> files)
      throws InterruptedException {
    CompletableFuture<PeerTransport> f;
    byte[] digest;
    synchronized (this) {
      f = prepared;
      digest = preparedDigest;
    }
    if (f == null) {
      return null;
    }
    if (!Arrays.equals(digest, helloDigest(pm, files))) {
      throw new IllegalStateException("the swarm was prepared for other files than it fills");
    }
    try {
      return f.get();
    } catch (ExecutionException e) {
      throw new IllegalStateException(e.getCause());
    }
  }

  private PieceMap pieceMap(List<SourceFile> files) {
    return new PieceMap(
        files.stream().map(f -> new StoreFile(f.path(), f.size())).toList(), settings.pieceSize());
  }

  /**
   * Starts the peer transport for this map, or null (logged) when it cannot listen.
   *
   * @param held whether handshaken connections wait for {@link PeerTransport#open()}
   */
  private PeerTransport startTransport(
      PieceMap pm, List<SourceFile> files, String otherwise, boolean held)
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
          new NettyPeerTransport.Auth(settings.secret(), this::membership),
          held);
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
      policy.holdComplete(pm, h);
      act();
    }
    PeerTransport t;
    try {
      t = startTransport(pm, files, "the adopted copy is not offered to peers", false);
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
      policy.transportStarted();
      act();
    }
    log.info(
        "artifact {}: adopted copy offered to peers on {} ({} pieces hashed in {} ms)",
        artifactId,
        t.listenAddress(),
        pm.size(),
        (System.nanoTime() - started) / 1_000_000);
  }

  // ------------------------------------------------------------------ source reads

  /** Reads one run the policy decided on a source worker, and reports how it ended. */
  private void sourceRun(Run run) {
    boolean complete = false;
    try {
      complete = readFromSource(run);
    } catch (LoadFailure f) {
      synchronized (this) {
        if (failure == null) {
          failure = f;
        }
      }
    } catch (RuntimeException e) {
      synchronized (this) {
        if (failure == null && filling) {
          failure =
              new LoadFailure(
                  Reason.InternalError, "source read of " + describe(run) + ": " + e, e);
        }
      }
    } finally {
      synchronized (this) {
        policy.onSourceRunEnded(run, complete);
        act();
        wake();
      }
    }
  }

  /**
   * Reads a run of pieces into the store with one ranged request, resumed at the first missing byte
   * after a failure (up to {@link ReadOptions#maxAttempts()} attempts); each piece is hashed and
   * announced (HAVE) as soon as its last byte is in, so peers start relaying it while the rest of
   * the run still streams. Returns false when interrupted.
   *
   * <p>Throttling is paced by the load's {@link ThrottleGate}, shared with its metadata requests
   * and every other source worker: no request goes out while the gate is closed, and a refusal as
   * throttled (429, {@code 503 SlowDown}) whose {@code Retry-After} the back-off honours closes it
   * until that instant and uses up no attempt; the fill fails as {@code Throttled} once the gate's
   * budget is spent.
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
    ThrottleGate throttle = gate;
    Backoff backoff = new Backoff(read.backoffBase(), read.backoffCap());
    int attempt = 0; // every request of this run, throttled ones included
    int failures = 0; // the requests that failed other than by throttling
    while (true) {
      if (Thread.currentThread().isInterrupted()) {
        return false;
      }
      attempt++;
      Throwable cause;
      ConcurrencyLimiter limiter = sourceLimiter;
      if (!limiter.acquireUnlessInterrupted()) {
        return false;
      }
      boolean throttled = false;
      try {
        // Holding the permit: no source read of the load goes out while throttling pauses it.
        throttle.await(limiter);
      } catch (InterruptedException e) {
        limiter.release(false);
        Thread.currentThread().interrupt();
        return false;
      }
      BodyWatch watch = null;
      try (InputStream in = source.openRange(file, runOffset + received, runLength - received)) {
        throttle.admitted();
        watch = new BodyWatch(in, System.nanoTime(), run);
        bodies.add(watch);
        while (received < runLength) {
          // Only the time blocked in read counts towards a stall, not hashing or storing a piece.
          watch.lastByteNanos = System.nanoTime();
          int n = in.read(staging, 0, Math.min(staging.length, target.remaining()));
          if (n < 0) {
            break;
          }
          watch.lastByteNanos = System.nanoTime();
          target.put(staging, 0, n);
          received += n;
          limiter.delivered(n);
          if (!target.hasRemaining()) {
            sourcePieceStored(
                current,
                sha256(stored.readOnly(current.path(), current.offset(), current.length())));
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
        throttled = e.reason() == Reason.Throttled;
        cause = e;
      } catch (IOException e) {
        if (Thread.currentThread().isInterrupted()) {
          return false;
        }
        cause =
            watch != null && watch.cut
                ? new IOException(
                    "the response body brought no byte for "
                        + stallTimeout().toMillis()
                        + " ms (stalled); cut to resume at byte "
                        + (runOffset + received),
                    e)
                : e;
      } finally {
        if (watch != null) {
          bodies.remove(watch);
        }
        limiter.release(throttled);
      }
      Duration retryAfter =
          cause instanceof SourceException se ? se.retryAfter().orElse(null) : null;
      Duration delay;
      if (throttled && backoff.honours(retryAfter)) {
        // Paced for the whole load by the gate; this run's attempts and back-off stay.
        delay = throttle.refused(retryAfter);
        if (delay == null) {
          throw new LoadFailure(
              Reason.Throttled,
              "reading "
                  + describe(run)
                  + " from "
                  + source.describe()
                  + " failed: "
                  + throttle.exhausted()
                  + "; last cause: "
                  + cause,
              cause);
        }
      } else {
        failures++;
        if (failures >= read.maxAttempts() || !backoff.honours(retryAfter)) {
          Reason reason =
              cause instanceof SourceException se ? se.reason() : Reason.SourceUnavailable;
          throw new LoadFailure(
              reason,
              "reading "
                  + describe(run)
                  + " from "
                  + source.describe()
                  + " failed "
                  + (failures >= read.maxAttempts()
                      ? "after all " + failures + " attempts"
                      : "at attempt "
                          + attempt
                          + ": the source asked to wait "
                          + retryAfter
                          + " (Retry-After), longer than the back-off cap of "
                          + read.backoffCap())
                  + "; last cause: "
                  + cause,
              cause);
        }
        delay = backoff.delay(failures, retryAfter);
      }
      progress.retrying(
          new ReadProgressListener.RetryEvent(
              file, runOffset, (int) runLength, attempt, runOffset + received, delay, cause));
      if (throttled) {
        continue; // the gate holds the next request back
      }
      try {
        Thread.sleep(delay.toMillis());
      } catch (InterruptedException e) {
        return false;
      }
    }
  }

  /** How long a source run's response body may bring no byte before it is cut and resumed. */
  private Duration stallTimeout() {
    Duration half = settings.peerTimeout().dividedBy(2);
    return half.compareTo(MIN_STALL_TIMEOUT) < 0 ? MIN_STALL_TIMEOUT : half;
  }

  /**
   * Cuts the response bodies of source runs whose read has been blocked without a byte for {@link
   * #stallTimeout()}: the blocked read fails and its run resumes at its first missing byte (a cut
   * uses up one of the run's attempts, as a read timeout does). Closing a response from another
   * thread is how every source's stream is aborted (S3: the connection is dropped).
   */
  private void cutStalled() {
    if (bodies.isEmpty()) {
      return;
    }
    long now = System.nanoTime();
    long stall = stallTimeout().toNanos();
    for (BodyWatch w : bodies) {
      if (!w.cut && now - w.lastByteNanos > stall) {
        w.cut = true;
        sourceStalls.increment();
        log.warn(
            "source read of {}: no byte for {} ms; cut, to resume at its first missing byte",
            describe(w.run),
            TimeUnit.NANOSECONDS.toMillis(now - w.lastByteNanos));
        // Closed off this thread: the fill thread holds the swarm's lock, and closing a stream
        // can wait for its blocked read (a file on a hung mount); a rare event, one thread each.
        Thread closer =
            new Thread(
                () -> {
                  try {
                    w.in.close();
                  } catch (IOException | RuntimeException e) {
                    log.debug("closing a stalled source response: {}", e.toString());
                  }
                },
                "p2p-stall-cut");
        closer.setDaemon(true);
        closer.start();
      }
    }
  }

  /** A source run's response body and when it last brought a byte. */
  private static final class BodyWatch {
    final InputStream in;
    final Run run;
    volatile long lastByteNanos;
    volatile boolean cut;

    BodyWatch(InputStream in, long openedNanos, Run run) {
      this.in = in;
      this.lastByteNanos = openedNanos;
      this.run = run;
    }
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

  /** A piece of a source run is in the store: the policy announces it; its bytes count. */
  private void sourcePieceStored(PieceMap.Piece piece, byte[] sha) {
    recordStored(piece);
    synchronized (this) {
      if (policy.onPieceStored(null, piece.index(), sha)) {
        progress.fromSource(piece.length());
      }
      act();
      wake();
    }
  }

  // ------------------------------------------------------------------ transport events

  @Override
  public synchronized void connected(PeerTransport.PeerConnection conn) {
    policy.onConnected(conn, conn.peerId());
    act();
    wake();
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

  /**
   * A member's HELLO carried another piece map of this artifact: it listed other files, sizes or
   * object versions — typically after an object changed under the load, which it saw first. While
   * this member fills, the source is asked (on a thread of its own, at most one check at a time and
   * one a second) whether every object this member listed is still the listed version ({@link
   * ArtifactSource#checkUnchanged}, {@link ArtifactSource#publishedDigest}: on S3 a {@code HEAD}
   * with {@code If-Match}). When one is not, the fill fails with {@code ObjectChanged}, which the
   * loader turns into {@code SourceChanged}: this member lists again and meets the others on the
   * new listing. The HELLO is a hint and never trusted by itself: when the source confirms nothing,
   * the other member's listing is stale and this fill goes on.
   */
  @Override
  public void otherListing(String peerId) {
    List<SourceFile> files;
    ArtifactSource s;
    synchronized (this) {
      long now = System.nanoTime();
      if (!filling
          || closed
          || failure != null
          || checkingListing
          || (listingCheckedAt != 0 && now - listingCheckedAt < LISTING_CHECK_INTERVAL_NANOS)) {
        return;
      }
      checkingListing = true;
      listingCheckedAt = now;
      files =
          sourceFiles.values().stream()
              .sorted(java.util.Comparator.comparing(SourceFile::path))
              .toList();
      s = source;
    }
    Thread t = new Thread(() -> checkListing(peerId, s, files), "p2p-listing-check-" + artifactId);
    t.setDaemon(true);
    t.start();
  }

  /** The check {@link #otherListing} starts: fails the fill when an object changed. */
  private void checkListing(String peerId, ArtifactSource s, List<SourceFile> files) {
    SourceFile changed = null;
    SourceException cause = null;
    try {
      for (SourceFile f : files) {
        synchronized (this) {
          if (!filling || closed || failure != null) {
            return;
          }
        }
        try {
          s.checkUnchanged(f);
          s.publishedDigest(f);
        } catch (SourceException e) {
          if (e.reason() == Reason.ObjectChanged || e.reason() == Reason.ObjectNotFound) {
            changed = f;
            cause = e;
            break;
          }
          log.info(
              "artifact {}: member {} listed other versions; cannot check {} at the source: {}",
              artifactId,
              peerId,
              f.path(),
              e.getMessage());
          return;
        }
      }
    } catch (RuntimeException e) {
      log.warn(
          "artifact {}: checking the source after member {} listed otherwise: {}",
          artifactId,
          peerId,
          e.toString());
      return;
    } finally {
      synchronized (this) {
        checkingListing = false;
      }
    }
    if (changed == null) {
      log.info(
          "artifact {}: member {} listed other versions, but every object this member listed is"
              + " unchanged at the source ({} files checked); its listing is the stale one",
          artifactId,
          peerId,
          files.size());
      return;
    }
    synchronized (this) {
      if (failure == null && filling && !closed) {
        failure =
            new LoadFailure(
                Reason.ObjectChanged,
                "member "
                    + peerId
                    + " listed other versions of the artifact's files and the source confirms"
                    + " that "
                    + changed.path()
                    + " (ETag "
                    + changed.etag()
                    + " when listed) changed: "
                    + cause.getMessage(),
                cause);
        log.warn("artifact {}: {}", artifactId, failure.getMessage());
        wake();
      }
    }
  }

  @Override
  public synchronized void disconnected(PeerTransport.PeerConnection conn) {
    progressSeen.remove(conn);
    policy.onDisconnected(conn, conn.peerId());
    act();
    wake();
  }

  @Override
  public void received(PeerTransport.PeerConnection conn, Frame frame) {
    if (frame instanceof Frame.Piece piece) {
      receivedPiece(conn, piece);
      return;
    }
    synchronized (this) {
      policy.onFrame(conn, conn.peerId(), frame);
      act();
      wake();
    }
  }

  private void receivedPiece(PeerTransport.PeerConnection conn, Frame.Piece f) {
    byte[] expected;
    ExecutorService v;
    PieceMap pm;
    synchronized (this) {
      if (!policy.onPieceArrived(conn, conn.peerId(), f.piece())) {
        f.payload().release(); // late (after a stuck timeout) or unasked
        return;
      }
      expected = policy.expectedHash(f.piece());
      v = verifier;
      pm = map;
    }
    try {
      if (v == null) {
        throw new RejectedExecutionException("the swarm is closed");
      }
      v.execute(() -> verifyAndStore(pm, conn, f, expected));
    } catch (RejectedExecutionException e) {
      f.payload().release();
      synchronized (this) {
        policy.abandon(f.piece());
      }
    }
  }

  /**
   * Hashes a received piece; writes it to the store only when its tag verifies (it came from this
   * peer's authenticated stream) and it matches the expected hash.
   */
  private void verifyAndStore(
      PieceMap pm, PeerTransport.PeerConnection conn, Frame.Piece f, byte[] expected) {
    int piece = f.piece();
    String peer = conn.peerId();
    ByteBuf buf = f.payload();
    try {
      PieceMap.Piece pc = pm.piece(piece);
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
          if (actual != null && expected != null && conn.authentic(f, actual)) {
            policy.onPieceHashMismatch(peer, piece, actual);
          } else {
            policy.onPieceRejected(peer, piece, problem);
          }
          act();
          wake();
        }
        return;
      }
      StoredArtifact copy;
      synchronized (this) {
        if (!policy.onPieceVerified(piece)) {
          return;
        }
        copy = stored;
      }
      copy.write(pc.path(), pc.offset(), buf.nioBuffer());
      boolean isNew;
      synchronized (this) {
        isNew = policy.onPieceStored(peer, piece, actual);
        if (isNew) {
          progress.fromPeers(pc.length());
          bytesReceived.increment(pc.length());
        }
        act();
        wake();
      }
      if (isNew) {
        // Only bytes that hash to the piece's expected hash of the moment are kept for later.
        recordStored(pc);
      }
    } catch (RuntimeException e) {
      log.warn("storing piece {} from {} failed: {}", piece, peer, e.toString());
      synchronized (this) {
        policy.abandon(piece);
      }
    } finally {
      buf.release();
    }
  }

  // ------------------------------------------------------------------ lifecycle

  /**
   * This member's load failed for good: tells every peer that its share is handed over (a HANDOVER
   * naming itself), then closes the peer port, so the others re-plan at once instead of waiting on
   * a member that will never read its share or serve a piece.
   *
   * @param why the failure, as the peers log it
   */
  public void leave(String why) {
    synchronized (this) {
      if (closed) {
        return;
      }
      policy.leave(why);
      act();
    }
    log.warn("artifact {}: leaving the swarm and closing the peer port: {}", artifactId, why);
    close();
  }

  /** Members whose share was handed over during this fill → why. */
  public synchronized Map<String, String> handedOver() {
    return policy.handedOver();
  }

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
      policy.close();
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

  /** The piece checks' SHA-256: libcrypto's where usable ({@link Sha256}). */
  private static byte[] sha256(ByteBuffer b) {
    return Sha256.of(b);
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
