package io.tensorcast.dataplane.p2p.sim;

import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.p2p.Frame;
import io.tensorcast.dataplane.p2p.PieceMap;
import io.tensorcast.dataplane.p2p.SwarmPlan;
import io.tensorcast.dataplane.p2p.SwarmPolicy;
import io.tensorcast.dataplane.p2p.SwarmPolicy.Decision;
import io.tensorcast.dataplane.store.StoreFile;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * A discrete-event simulation of one artifact's swarm: one real {@link SwarmPolicy} per node, on
 * one virtual clock, over a {@link FlowNetwork} of per-node up and down links and an origin with
 * its own uplink and request-rate limit. No sockets, no threads; a run is a pure function of its
 * {@link Scenario}.
 *
 * <p>What it models, as the data plane's mechanism ({@code PeerSwarm} over Netty) carries out the
 * policy's decisions:
 *
 * <ul>
 *   <li>Control frames (REQUEST, HAVE, READING, BITFIELD, REJECT) arrive one {@link
 *       Scenario#latency} after they were decided and take no bandwidth.
 *   <li>Pieces go out one after another per connection (a TCP stream), each a flow from the
 *       sender's uplink to the receiver's downlink; the piece arrives one latency after its last
 *       byte left, is checked against the policy's expected hash and stored.
 *   <li>A source run is one ranged GET: it reaches the origin after one latency, waits for the
 *       origin's request-rate limit, then streams its pieces one after another as flows from the
 *       origin's uplink to the node's downlink; each piece is stored one latency after its last
 *       byte left.
 *   <li>A connection is dialled when the policy says so and is up after two latencies (handshake);
 *       a dial to a node not yet started is retried every {@link Scenario#redialAfter}.
 *   <li>A node runs its policy's scheduling round after every batch of events, at most once per
 *       {@link Scenario#tickGap} (the round's own CPU time), and at least every 50 ms. Bytes of a
 *       piece arriving are reported as progress at each round.
 *   <li>A node is Ready once its digests have taken in what was left of the hashing backlog when
 *       its last piece was stored (below), at {@link Scenario#verifyBytesPerSecond}: as the
 *       loader's, whose files are checked as their prefixes complete, with no pass over the whole
 *       copy after the last byte.
 *   <li>Each node's file digests follow the files' contiguous prefixes, as the loader's: every
 *       stored piece that extends a prefix adds the newly contiguous bytes to one hashing backlog
 *       drained at {@link Scenario#verifyBytesPerSecond} (at once when 0). What is left of it when
 *       the last piece is stored is {@link NodeResult#hashedAfterLast}.
 *   <li>A node that leaves is killed (its connections close, its flows stop); the others get a
 *       membership without it {@link Scenario#membershipDelay} later. Nodes that join start with a
 *       membership that lists them, which the others get at the same moment.
 *   <li>With {@link #sourceDigests} the origin publishes a digest of every file (an S3 checksum, a
 *       single-part ETag, the Hub's sha256), as the loader reads with the headers: every piece is
 *       {@link SwarmPolicy#verifiable}, and a {@link Decision.CheckFile} hashes the file's bytes at
 *       {@link Scenario#verifyBytesPerSecond} and matches when none of them were forged.
 * </ul>
 *
 * <p>Per node, before {@link #run()} ({@link #node}): a node may start holding the whole artifact
 * ({@link Node#holdsAll}, an adopted copy) or announce and serve forged hashes for some pieces
 * ({@link Node#forged}, a liar: its HAVE and BITFIELD frames claim those pieces with a wrong
 * SHA-256, and every piece of them it sends hashes to that wrong value). After the run each node
 * tells which pieces it read from the source ({@link Node#sourceReads}), from which peers it stored
 * how many ({@link Node#fromPeers}) and the most source runs it had in flight ({@link
 * Node#maxRuns}); {@link #log()} lists every drop and policy note in order.
 */
final class SwarmSim {

  /**
   * One node: its links (bytes per second) and when it joins and leaves (nanoseconds, -1: never).
   */
  record NodeSpec(String id, double downBps, double upBps, long joinAt, long leaveAt) {}

  /**
   * Everything a run depends on.
   *
   * @param fileSizes the artifact's files, bytes
   * @param pieceSize bytes per piece
   * @param nodes the nodes, in any order
   * @param originUpBps the origin's uplink, bytes per second
   * @param originRequestsPerSecond ranged GETs the origin starts per second at most
   * @param latency one-way delay between any two parties, nanoseconds
   * @param concurrency a node's {@code --concurrency} (source reads in flight)
   * @param rangeSize a node's {@code --range-size}, bytes
   * @param maxInFlight requests outstanding per peer ({@link SwarmPolicy.Config#maxInFlight})
   * @param peerTimeout {@code --peer-timeout}
   * @param tickGap shortest interval between two scheduling rounds of one node, nanoseconds
   * @param quantum shortest interval between two rate recomputations, nanoseconds
   * @param verifyBytesPerSecond hashing rate of the digests that follow the files' prefixes, during
   *     the transfer and after the last piece (0: none, instant)
   * @param membershipDelay from a node's death to the membership without it, nanoseconds
   * @param redialAfter the retry interval of a dial that found no listener, nanoseconds
   * @param limit virtual time after which the run gives up, nanoseconds
   */
  record Scenario(
      long[] fileSizes,
      int pieceSize,
      List<NodeSpec> nodes,
      double originUpBps,
      double originRequestsPerSecond,
      long latency,
      int concurrency,
      long rangeSize,
      int maxInFlight,
      Duration peerTimeout,
      long tickGap,
      long quantum,
      double verifyBytesPerSecond,
      long membershipDelay,
      long redialAfter,
      long limit) {

    long totalBytes() {
      return Arrays.stream(fileSizes).sum();
    }
  }

  /** What one node did. */
  record NodeResult(
      String id,
      long startAt,
      long completeAt,
      long readyAt,
      boolean left,
      double downBps,
      long sourceBytes,
      long peerBytes,
      long hashedAfterLast) {

    /** Start to Ready, nanoseconds; -1 when it never got Ready. */
    long time() {
      return readyAt < 0 ? -1 : readyAt - startAt;
    }
  }

  /** What the run did. */
  record Result(
      boolean finished,
      long end,
      List<NodeResult> nodes,
      double originBytes,
      long originRequests,
      long events,
      long rounds,
      long roundNanos) {}

  /** {@code -Dsim.trace=true}: the policies' warnings (hand-overs, drops) go to stderr. */
  private static final boolean TRACE = Boolean.getBoolean("sim.trace");

  /** {@code -Dsim.tracePieces=true}: every piece a node stores from the source, to stderr. */
  private static final boolean TRACE_PIECES = Boolean.getBoolean("sim.tracePieces");

  private static final long TICK_EVERY = Duration.ofMillis(50).toNanos();

  private final Scenario sc;
  private final EventLoop loop = new EventLoop();
  private final FlowNetwork net;
  private final PieceMap map;
  private final byte[][] hashes;

  /** Per piece its file's index; per file its first piece and the piece after its last. */
  private final int[] fileOf;

  private final int[] fileFirst;
  private final int[] fileEnd;
  private final FlowNetwork.Link originUp;
  private final Map<String, Node> nodes = new TreeMap<>();
  private long originNextStart;
  private long originRequests;

  /** The origin publishes a digest per file ({@link #sourceDigests(boolean)}); off by default. */
  private boolean sourceDigests;

  /** Source runs in flight now over every node, and the most at once. */
  private int runsNow;

  private int mostRuns;

  /** Scheduling rounds run, and the wall time they took (a measure of the policy's CPU cost). */
  private long rounds;

  private long roundNanos;
  private int epoch;

  /** Frame deliveries so far: one per batch of frames a node decided. */
  private long deliveries;

  /** Drops and notes as they happened; formatted by {@link #log()} (most runs never read it). */
  private record Entry(long at, String node, String text) {}

  private final List<Entry> log = new ArrayList<>();

  final class Node {
    final NodeSpec spec;
    final String id;
    final FlowNetwork.Link up;
    final FlowNetwork.Link down;
    final InetSocketAddress address;
    SwarmPolicy<Conn> policy;
    boolean alive;
    boolean left;
    long startAt = -1;

    /**
     * From when memberships list it though it has not started ({@link #announce}), -1: from its
     * start.
     */
    long announceAt = -1;

    long completeAt = -1;
    long readyAt = -1;
    final Map<String, Conn> conns = new TreeMap<>();
    final Set<String> dialling = new HashSet<>();
    long sourceBytes;
    long peerBytes;

    /** Pieces stored, and per file the first piece not in its contiguous prefix. */
    final BitSet stored = new BitSet();

    final int[] prefixEnd = fileFirst.clone();

    /** Contiguous bytes not yet hashed, as of {@link #hashedAt}. */
    double backlog;

    long hashedAt;
    long hashedAfterLast = -1;
    boolean tickPending;

    /** The last frame delivery that reached it ({@link #deliveries}). */
    long delivery;

    long lastTick = Long.MIN_VALUE / 2;

    /** Starts holding the whole artifact (its policy's {@code holdComplete}). */
    boolean holdsAll;

    /** Pieces whose hash it announces wrongly ({@link #forgedHash}) and whose bytes it forges. */
    final Set<Integer> forged = new HashSet<>();

    /** Pieces it stored from its own source reads, in order. */
    final List<Integer> sourceReads = new ArrayList<>();

    /** When each of {@link #sourceReads} arrived, virtual nanoseconds. */
    final List<Long> sourceReadAt = new ArrayList<>();

    /** Pieces stored from peers, by the peer's id. */
    final Map<String, Integer> fromPeers = new TreeMap<>();

    /** Pieces fetched on a peer's claim and held back for their file's check → from which peer. */
    final Map<Integer, String> unchecked = new TreeMap<>();

    /** Of {@link #unchecked}, the pieces whose bytes were forged (the file's check fails). */
    final BitSet forgedBytes = new BitSet();

    /** Source runs in flight now, and the most at once. */
    int runs;

    int maxRuns;

    Node(NodeSpec spec, int index) {
      this.spec = spec;
      this.id = spec.id();
      this.up = new FlowNetwork.Link(id + "/up", spec.upBps());
      this.down = new FlowNetwork.Link(id + "/down", spec.downBps());
      this.address =
          InetSocketAddress.createUnresolved(
              "10." + (index >> 16 & 255) + "." + (index >> 8 & 255) + "." + (index & 255), 8472);
    }
  }

  /** One side of a connection: its owner's handle, as the policy sees it. */
  final class Conn {
    final Node owner;
    final Node remote;
    Conn other;
    boolean open = true;
    final ArrayDeque<Integer> sendQueue = new ArrayDeque<>();
    FlowNetwork.Flow sending;

    Conn(Node owner, Node remote) {
      this.owner = owner;
      this.remote = remote;
    }

    @Override
    public String toString() {
      return owner.id + "->" + remote.id;
    }
  }

  SwarmSim(Scenario sc) {
    this.sc = sc;
    this.net = new FlowNetwork(loop, sc.quantum());
    List<StoreFile> files = new ArrayList<>();
    for (int i = 0; i < sc.fileSizes().length; i++) {
      files.add(new StoreFile(String.format("model-%05d.safetensors", i + 1), sc.fileSizes()[i]));
    }
    this.map = new PieceMap(files, sc.pieceSize());
    this.hashes = new byte[map.size()][];
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      for (int i = 0; i < hashes.length; i++) {
        hashes[i] = md.digest(ByteBuffer.allocate(4).putInt(0, i).array());
      }
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
    this.fileOf = new int[map.size()];
    List<Integer> firsts = new ArrayList<>();
    for (PieceMap.Piece p : map.pieces()) {
      if (p.offset() == 0) {
        firsts.add(p.index());
      }
      fileOf[p.index()] = firsts.size() - 1;
    }
    this.fileFirst = firsts.stream().mapToInt(Integer::intValue).toArray();
    this.fileEnd = new int[fileFirst.length];
    for (int f = 0; f < fileFirst.length; f++) {
      fileEnd[f] = f + 1 < fileFirst.length ? fileFirst[f + 1] : map.size();
    }
    this.originUp = new FlowNetwork.Link("origin/up", sc.originUpBps());
    int index = 1;
    for (NodeSpec s : sc.nodes()) {
      if (nodes.put(s.id(), new Node(s, index++)) != null) {
        throw new IllegalArgumentException("node id '" + s.id() + "' appears twice");
      }
    }
  }

  PieceMap map() {
    return map;
  }

  /** The node {@code id} (set {@link Node#holdsAll} or {@link Node#forged} before the run). */
  Node node(String id) {
    Node n = nodes.get(id);
    if (n == null) {
      throw new IllegalArgumentException("no node '" + id + "'; nodes: " + nodes.keySet());
    }
    return n;
  }

  /** Every drop and policy note so far, as "{virtual ms} {node}: {text}", in order. */
  List<String> log() {
    List<String> out = new ArrayList<>(log.size());
    for (Entry e : log) {
      out.add(
          String.format(java.util.Locale.ROOT, "%.3f %s: %s", e.at() / 1e6, e.node(), e.text()));
    }
    return out;
  }

  /**
   * Whether the origin publishes a digest of every file, so a member may fetch pieces on its peers'
   * claims and check the whole file against it ({@link SwarmPolicy#verifiable}); set before {@link
   * #run()}.
   */
  SwarmSim sourceDigests(boolean publish) {
    this.sourceDigests = publish;
    return this;
  }

  /** The SHA-256 every honest read of {@code piece} gives. */
  byte[] trueHash(int piece) {
    return hashes[piece];
  }

  /** The SHA-256 a liar announces for a {@link Node#forged} piece (and its bytes hash to). */
  static byte[] forgedHash(int piece) {
    try {
      return MessageDigest.getInstance("SHA-256")
          .digest(("forged " + piece).getBytes(java.nio.charset.StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The pieces the plan of {@code members} (all live, nothing held) has {@code id} read. */
  BitSet block(String id, String... members) {
    Set<String> all = new java.util.TreeSet<>(List.of(members));
    return SwarmPlan.compute(map.size(), all, all, Map.of()).assignedTo(id);
  }

  /** Every node's id, sorted. */
  Set<String> nodeIds() {
    return nodes.keySet();
  }

  /** The most source runs in flight at once over every node (GETs sent, not yet ended). */
  int mostConcurrentRuns() {
    return mostRuns;
  }

  /** Pieces read from the source, counted per piece over every node. */
  int[] readsPerPiece() {
    int[] reads = new int[map.size()];
    for (Node n : nodes.values()) {
      n.sourceReads.forEach(i -> reads[i]++);
    }
    return reads;
  }

  /**
   * Lists {@code id} in the memberships from {@code at} on, before it starts: the operator makes a
   * pod a member once it is created, while the pod's process may start much later.
   */
  SwarmSim announce(String id, long at) {
    node(id).announceAt = at;
    return this;
  }

  /** Runs the scenario to the end (every node that stayed is Ready) or to its limit. */
  Result run() {
    Map<Long, List<Node>> joins = new TreeMap<>();
    for (Node n : nodes.values()) {
      if (n.announceAt >= 0) {
        loop.at(n.announceAt, this::publishMembership);
      }
      joins.computeIfAbsent(Math.max(0, n.spec.joinAt()), k -> new ArrayList<>()).add(n);
      if (n.spec.leaveAt() >= 0) {
        loop.at(n.spec.leaveAt(), () -> kill(n));
        loop.at(n.spec.leaveAt() + sc.membershipDelay(), this::publishMembership);
      }
    }
    joins.forEach((at, list) -> loop.at(at, () -> start(list)));
    boolean finished = false;
    while (loop.runNext(sc.limit())) {
      if (allReady()) {
        finished = true;
        break;
      }
    }
    net.sync();
    List<NodeResult> out = new ArrayList<>();
    for (Node n : nodes.values()) {
      out.add(
          new NodeResult(
              n.id,
              n.startAt,
              n.completeAt,
              n.readyAt,
              n.left,
              n.spec.downBps(),
              n.sourceBytes,
              n.peerBytes,
              n.hashedAfterLast));
    }
    return new Result(
        finished,
        loop.now(),
        out,
        originUp.bytes,
        originRequests,
        loop.events(),
        rounds,
        roundNanos);
  }

  private boolean allReady() {
    long now = loop.now();
    for (Node n : nodes.values()) {
      if (n.left) {
        continue;
      }
      if (n.startAt < 0 || n.readyAt < 0 || n.readyAt > now) {
        return false;
      }
    }
    return true;
  }

  // ------------------------------------------------------------------ membership

  private Membership membership() {
    List<Membership.Member> members = new ArrayList<>();
    for (Node n : nodes.values()) {
      boolean announced = n.announceAt >= 0 && loop.now() >= n.announceAt;
      if ((n.startAt >= 0 || announced) && !n.left) {
        members.add(new Membership.Member(n.id, n.address));
      }
    }
    return new Membership("e" + epoch++, members);
  }

  /** Starts {@code joining} together: one membership that lists them goes to every node. */
  private void start(List<Node> joining) {
    for (Node n : joining) {
      n.startAt = loop.now();
      n.alive = true;
    }
    Membership m = membership();
    for (Node o : nodes.values()) {
      if (o.alive && o.policy != null && !joining.contains(o)) {
        o.policy.applyMembership(m);
        process(o);
      }
    }
    for (Node n : joining) {
      n.policy =
          new SwarmPolicy<>(
              new SwarmPolicy.Config(
                  n.id, sc.peerTimeout(), sc.maxInFlight(), Duration.ofSeconds(10)),
              loop::now);
      n.policy.applyMembership(m);
      if (n.holdsAll) {
        n.policy.holdComplete(map, hashes.clone());
      } else {
        n.policy.startFill(map, sc.concurrency(), sc.rangeSize());
        if (sourceDigests) {
          BitSet all = new BitSet(map.size());
          all.set(0, map.size());
          n.policy.verifiable(all);
        }
      }
      n.policy.transportStarted();
    }
    for (Node n : joining) {
      process(n);
      scheduleTimer(n);
    }
  }

  private void publishMembership() {
    Membership m = membership();
    for (Node o : nodes.values()) {
      if (o.alive) {
        o.policy.applyMembership(m);
        process(o);
      }
    }
  }

  private void kill(Node n) {
    if (!n.alive) {
      n.left = true;
      return;
    }
    n.alive = false;
    n.left = true;
    runsNow -= n.runs;
    for (FlowNetwork.Flow f : List.copyOf(n.up.flows)) {
      net.cancel(f);
    }
    for (FlowNetwork.Flow f : List.copyOf(n.down.flows)) {
      net.cancel(f);
    }
    for (Conn c : List.copyOf(n.conns.values())) {
      closePair(c);
    }
  }

  // ------------------------------------------------------------------ scheduling rounds

  private void scheduleTimer(Node n) {
    loop.at(
        Math.max(loop.now(), n.lastTick) + TICK_EVERY,
        () -> {
          if (!n.alive || n.completeAt >= 0) {
            return;
          }
          if (loop.now() - n.lastTick >= TICK_EVERY && !n.tickPending) {
            tick(n);
          }
          scheduleTimer(n);
        });
  }

  private void requestTick(Node n) {
    if (n.tickPending || n.completeAt >= 0) {
      return;
    }
    n.tickPending = true;
    loop.at(Math.max(loop.now(), n.lastTick + sc.tickGap()), () -> tick(n));
  }

  private void tick(Node n) {
    n.tickPending = false;
    if (!n.alive) {
      return;
    }
    long now = loop.now();
    n.lastTick = now;
    for (FlowNetwork.Flow f : n.down.flows) {
      if (f.tag instanceof Conn c && f.rate > 0) {
        n.policy.onPieceProgress(c.other, c.owner.id, now);
      }
    }
    long t0 = System.nanoTime();
    n.policy.tick();
    roundNanos += System.nanoTime() - t0;
    rounds++;
    carryOut(n);
  }

  /** Carries out {@code n}'s decisions and asks for a scheduling round. */
  private void process(Node n) {
    if (!n.alive) {
      return;
    }
    carryOut(n);
    requestTick(n);
  }

  private void carryOut(Node n) {
    List<Conn> to = new ArrayList<>();
    List<Frame> frames = new ArrayList<>();
    for (List<Decision<Conn>> ds = n.policy.drain(); !ds.isEmpty(); ds = n.policy.drain()) {
      for (Decision<Conn> d : ds) {
        if (d instanceof Decision.Send<Conn> s) {
          to.add(s.to());
          frames.add(n.forged.isEmpty() ? s.frame() : forge(n, s.frame()));
        } else if (d instanceof Decision.SendPiece<Conn> s) {
          Conn c = s.to();
          if (c.open) {
            c.sendQueue.add(s.piece());
            if (c.sending == null) {
              sendNext(c);
            }
          }
        } else if (d instanceof Decision.ReadSource<Conn> r) {
          readSource(n, r.run());
        } else if (d instanceof Decision.Close<Conn> c) {
          closePair(c.conn());
        } else if (d instanceof Decision.Drop<Conn> dr) {
          log(n, "dropped " + dr.peer() + ": " + dr.why());
          n.dialling.remove(dr.peer());
          if (dr.conn() != null) {
            closePair(dr.conn());
          }
        } else if (d instanceof Decision.Dial<Conn> dial) {
          n.dialling.add(dial.peer());
          loop.after(2 * sc.latency(), () -> connect(n, dial.peer()));
        } else if (d instanceof Decision.Note<Conn> note) {
          log(n, note.message());
          if (TRACE && note.warn()) {
            System.err.printf(
                java.util.Locale.ROOT, "%10.3f s %s: %s%n", loop.now() / 1e9, n.id, note.message());
          }
        } else if (d instanceof Decision.CheckFile<Conn> cf) {
          checkFile(n, cf.first(), cf.count());
        } else if (d instanceof Decision.Confirmed<Conn> cd) {
          int piece = cd.piece();
          String from = n.unchecked.remove(piece);
          n.peerBytes += map.piece(piece).length();
          if (from != null) {
            n.fromPeers.merge(from, 1, Integer::sum);
          }
          digest(n, piece);
        } else if (d instanceof Decision.Forget<Conn> f) {
          n.dialling.remove(f.peer());
          Conn c = n.conns.get(f.peer());
          if (c != null) {
            closePair(c);
          }
        }
      }
    }
    if (n.completeAt < 0 && n.policy.complete()) {
      n.completeAt = loop.now();
      n.hashedAfterLast = Math.round(drain(n));
      long verify =
          sc.verifyBytesPerSecond() > 0
              ? (long) (n.hashedAfterLast / sc.verifyBytesPerSecond() * 1e9)
              : 0;
      n.readyAt = n.completeAt + verify;
      if (TRACE) {
        System.err.printf(
            java.util.Locale.ROOT,
            "%10.3f s %s: complete (down %.1f MB/s)%n",
            loop.now() / 1e9,
            n.id,
            n.spec.downBps() / 1e6);
      }
      loop.at(n.readyAt, () -> {});
    }
    if (!to.isEmpty()) {
      loop.after(
          sc.latency(),
          () -> {
            // Each receiver once, in the order it was first sent to (a broadcast lists each once).
            List<Node> touched = new ArrayList<>();
            long mark = ++deliveries;
            for (int i = 0; i < to.size(); i++) {
              Conn c = to.get(i);
              Node r = c.remote;
              if (c.open && r.alive) {
                r.policy.onFrame(c.other, n.id, frames.get(i));
                if (r.delivery != mark) {
                  r.delivery = mark;
                  touched.add(r);
                }
              }
            }
            for (Node r : touched) {
              process(r);
            }
          });
    }
  }

  private void log(Node n, String text) {
    log.add(new Entry(loop.now(), n.id, text));
  }

  /** {@code f} as the liar {@code n} sends it: its forged pieces claimed with forged hashes. */
  private static Frame forge(Node n, Frame f) {
    if (f instanceof Frame.Have h && n.forged.contains(h.piece())) {
      return new Frame.Have(h.piece(), forgedHash(h.piece()));
    }
    if (f instanceof Frame.Bitfield b) {
      BitSet have = (BitSet) b.have().clone();
      byte[][] h = b.sha256().clone();
      for (int i : n.forged) {
        have.set(i);
        h[i] = forgedHash(i);
      }
      return new Frame.Bitfield(b.pieceCount(), have, h);
    }
    return f;
  }

  // ------------------------------------------------------------------ pieces between peers

  private void sendNext(Conn c) {
    Integer piece = c.sendQueue.poll();
    if (piece == null || !c.open) {
      c.sending = null;
      return;
    }
    Node from = c.owner;
    Node to = c.remote;
    int length = map.piece(piece).length();
    FlowNetwork.Flow f =
        net.start(
            from.up,
            to.down,
            length,
            () -> {
              c.sending = null;
              if (!from.alive || !c.open) {
                return;
              }
              from.policy.onPieceSent(c, to.id);
              loop.after(sc.latency(), () -> arrive(c, piece, length));
              sendNext(c);
              process(from);
            });
    f.tag = c;
    c.sending = f;
  }

  private void arrive(Conn c, int piece, int length) {
    Node r = c.remote;
    if (!c.open || !r.alive) {
      return;
    }
    SwarmPolicy<Conn> p = r.policy;
    byte[] bytes = c.owner.forged.contains(piece) ? forgedHash(piece) : hashes[piece];
    if (p.onPieceArrived(c.other, c.owner.id, piece)) {
      if (Arrays.equals(p.expectedHash(piece), bytes)) {
        boolean verified = p.onPieceVerified(piece);
        boolean stored = verified && p.onPieceStored(c.owner.id, piece, bytes);
        if (verified && !stored && sourceDigests && !p.present().get(piece)) {
          // Held back by the policy (fetched on a claim): in the store, waiting for its file's
          // check.
          r.unchecked.put(piece, c.owner.id);
          r.forgedBytes.set(piece, !Arrays.equals(bytes, hashes[piece]));
        }
        if (stored) {
          r.forgedBytes.clear(piece);
          r.peerBytes += length;
          r.fromPeers.merge(c.owner.id, 1, Integer::sum);
          if (TRACE_PIECES) {
            System.err.printf(
                java.util.Locale.ROOT,
                "%10.3f s %s: piece %d from %s%n",
                loop.now() / 1e9,
                r.id,
                piece,
                c.owner.id);
          }
          digest(r, piece);
        }
      } else {
        p.onPieceHashMismatch(c.owner.id, piece, bytes);
      }
    }
    process(r);
  }

  /**
   * {@code n} hashes the file of pieces {@code first .. first + count - 1} (in its store) at the
   * verification rate; it matches the source's digest when none of its bytes were forged.
   */
  private void checkFile(Node n, int first, int count) {
    long bytes = 0;
    boolean match = true;
    for (int i = first; i < first + count; i++) {
      bytes += map.piece(i).length();
      match &= !n.forgedBytes.get(i);
    }
    boolean ok = match;
    long took =
        sc.verifyBytesPerSecond() > 0 ? (long) (bytes / sc.verifyBytesPerSecond() * 1e9) : 0;
    loop.after(
        took,
        () -> {
          if (!n.alive) {
            return;
          }
          if (!ok) {
            for (int i = first; i < first + count; i++) {
              n.unchecked.remove(i);
              n.forgedBytes.clear(i);
            }
          }
          n.policy.onFileChecked(first, ok);
          process(n);
        });
  }

  /**
   * The bytes piece {@code piece} makes contiguous in its file join {@code n}'s hashing backlog.
   */
  private void digest(Node n, int piece) {
    n.stored.set(piece);
    int f = fileOf[piece];
    int from = n.prefixEnd[f];
    int to = from;
    while (to < fileEnd[f] && n.stored.get(to)) {
      to++;
    }
    n.prefixEnd[f] = to;
    long joined = 0;
    for (int i = from; i < to; i++) {
      joined += map.piece(i).length();
    }
    n.backlog = drain(n) + joined;
  }

  /** {@code n}'s hashing backlog now, after hashing since the last update. */
  private double drain(Node n) {
    long now = loop.now();
    double rate = sc.verifyBytesPerSecond();
    n.backlog =
        rate > 0
            ? Math.max(0, n.backlog - rate * (now - n.hashedAt) / 1e9)
            : now == n.hashedAt ? n.backlog : 0;
    n.hashedAt = now;
    return n.backlog;
  }

  // ------------------------------------------------------------------ the origin

  private void readSource(Node n, SwarmPolicy.Run run) {
    n.runs++;
    n.maxRuns = Math.max(n.maxRuns, n.runs);
    runsNow++;
    mostRuns = Math.max(mostRuns, runsNow);
    loop.after(
        sc.latency(),
        () -> {
          if (!n.alive) {
            return;
          }
          originRequests++;
          long startAt = Math.max(loop.now(), originNextStart);
          originNextStart =
              startAt + (long) Math.ceil(1e9 / Math.max(1e-9, sc.originRequestsPerSecond()));
          loop.at(startAt, () -> readPiece(n, run, 0));
        });
  }

  private void readPiece(Node n, SwarmPolicy.Run run, int k) {
    if (!n.alive) {
      return;
    }
    int piece = run.first() + k;
    int length = map.piece(piece).length();
    net.start(
        originUp,
        n.down,
        length,
        () -> {
          if (!n.alive) {
            return;
          }
          boolean last = k == run.count() - 1;
          loop.after(
              sc.latency(),
              () -> {
                if (!n.alive) {
                  return;
                }
                n.sourceReads.add(piece);
                n.sourceReadAt.add(loop.now());
                if (TRACE_PIECES) {
                  System.err.printf(
                      java.util.Locale.ROOT,
                      "%10.3f s %s: source piece %d stored%n",
                      loop.now() / 1e9,
                      n.id,
                      piece);
                }
                n.forgedBytes.clear(piece);
                if (n.policy.onPieceStored(null, piece, hashes[piece])) {
                  n.sourceBytes += length;
                  digest(n, piece);
                }
                if (last) {
                  n.runs--;
                  runsNow--;
                  n.policy.onSourceRunEnded(run, true);
                }
                process(n);
              });
          if (!last) {
            readPiece(n, run, k + 1);
          }
        });
  }

  // ------------------------------------------------------------------ connections

  private void connect(Node from, String toId) {
    if (!from.alive || !from.dialling.contains(toId) || from.conns.containsKey(toId)) {
      return;
    }
    Node target = nodes.get(toId);
    if (target == null || !target.alive || target.conns.containsKey(from.id)) {
      loop.after(sc.redialAfter(), () -> connect(from, toId));
      return;
    }
    Conn a = new Conn(from, target);
    Conn b = new Conn(target, from);
    a.other = b;
    b.other = a;
    from.conns.put(toId, a);
    target.conns.put(from.id, b);
    from.policy.onConnected(a, toId);
    target.policy.onConnected(b, from.id);
    process(from);
    process(target);
  }

  private void closePair(Conn c) {
    if (!c.open) {
      return;
    }
    for (Conn side : List.of(c, c.other)) {
      side.open = false;
      side.sendQueue.clear();
      if (side.sending != null) {
        net.cancel(side.sending);
        side.sending = null;
      }
      side.owner.conns.remove(side.remote.id, side);
      loop.after(
          sc.latency(),
          () -> {
            if (side.owner.alive) {
              side.owner.policy.onDisconnected(side, side.remote.id);
              process(side.owner);
            }
          });
    }
    Conn dialler = c.owner.dialling.contains(c.remote.id) ? c : c.other;
    if (dialler.owner.dialling.contains(dialler.remote.id)) {
      loop.after(sc.redialAfter(), () -> connect(dialler.owner, dialler.remote.id));
    }
  }
}
