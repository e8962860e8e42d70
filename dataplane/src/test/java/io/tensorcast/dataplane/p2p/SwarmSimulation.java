package io.tensorcast.dataplane.p2p;

import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.p2p.SwarmPolicy.Decision;
import io.tensorcast.dataplane.store.StoreFile;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.TreeMap;

/**
 * A discrete-event simulation of a swarm: every member is a {@link SwarmPolicy} on one virtual
 * clock, connected by virtual links, with no sockets and no threads. Control frames arrive after
 * {@link #latency}; pieces go out one after another per connection, {@link #pieceTime} each; a
 * source run delivers one piece per {@link #sourcePieceTime}. Every member dials the members its
 * policy tells it to (again after {@link #redialAfter} while the target is down or the connection
 * closes), and every member's policy ticks after each event it handled and every {@link
 * #tickEvery}. Deterministic: events at the same time run in the order they were scheduled.
 */
final class SwarmSimulation {
  final PieceMap map;
  long now = 1_000_000_000L;
  long latency = Duration.ofMillis(1).toNanos();
  long pieceTime = Duration.ofMillis(2).toNanos();
  long sourcePieceTime = Duration.ofMillis(4).toNanos();
  long redialAfter = Duration.ofMillis(100).toNanos();
  long tickEvery = Duration.ofMillis(50).toNanos();
  final Map<String, Node> nodes = new TreeMap<>();
  final List<String> log = new ArrayList<>();
  private final PriorityQueue<Event> queue = new PriorityQueue<>();
  private long seq;

  private record Event(long at, long seq, Runnable action) implements Comparable<Event> {
    @Override
    public int compareTo(Event o) {
      return at != o.at ? Long.compare(at, o.at) : Long.compare(seq, o.seq);
    }
  }

  /** One direction of a connection: its owner's handle. */
  static final class Conn {
    final Node owner;
    final Node remote;
    Conn other;
    boolean open = true;
    long freeAt;

    Conn(Node owner, Node remote) {
      this.owner = owner;
      this.remote = remote;
    }

    @Override
    public String toString() {
      return owner.id + "->" + remote.id;
    }
  }

  /** One member. */
  final class Node {
    final String id;
    SwarmPolicy<Conn> policy;
    boolean up;
    final Set<String> dialling = new HashSet<>();
    final Map<String, Conn> conns = new TreeMap<>();

    /** Pieces this member read from the source (each piece of each run). */
    final List<Integer> sourceReads = new ArrayList<>();

    /** Pieces stored from peers, by the peer's id. */
    final Map<String, Integer> fromPeers = new TreeMap<>();

    /** Most runs in flight at once. */
    int runs;

    int maxRuns;

    /** Pieces whose hash this member announces wrongly (a liar), and serves wrongly. */
    final Set<Integer> forged = new HashSet<>();

    /** This member serves wrong bytes for every piece (a corrupting holder). */
    boolean corrupt;

    /** This member never answers requests (a silent holder). */
    boolean silent;

    Node(String id) {
      this.id = id;
    }

    BitSet sourceBlock() {
      BitSet b = new BitSet();
      sourceReads.forEach(b::set);
      return b;
    }

    int peerPieces() {
      return fromPeers.values().stream().mapToInt(Integer::intValue).sum();
    }
  }

  SwarmSimulation(long... fileSizes) {
    this(64 * 1024, fileSizes);
  }

  SwarmSimulation(int pieceSize, long... fileSizes) {
    List<StoreFile> files = new ArrayList<>();
    for (int i = 0; i < fileSizes.length; i++) {
      files.add(new StoreFile("f" + i, fileSizes[i]));
    }
    this.map = new PieceMap(files, pieceSize);
  }

  /** The true SHA-256 of a piece: every honest source read gives it. */
  static byte[] trueHash(int piece) {
    return sha256("piece " + piece);
  }

  static byte[] forgedHash(int piece) {
    return sha256("forged " + piece);
  }

  private static byte[] sha256(String s) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  static Membership membership(String epoch, String... ids) {
    List<Membership.Member> members = new ArrayList<>();
    for (int i = 0; i < ids.length; i++) {
      members.add(
          new Membership.Member(ids[i], InetSocketAddress.createUnresolved("10.0.0." + i, 8472)));
    }
    return new Membership(epoch, members);
  }

  Node node(String id) {
    return nodes.computeIfAbsent(id, Node::new);
  }

  /** Starts {@code id} filling, with {@code membership} (or none yet). */
  Node startFill(
      String id, Membership membership, Duration peerTimeout, int concurrency, long rangeSize) {
    Node n = node(id);
    n.policy = newPolicy(id, peerTimeout);
    n.up = true;
    if (membership != null) {
      n.policy.applyMembership(membership);
    }
    n.policy.startFill(map, concurrency, rangeSize);
    n.policy.transportStarted();
    process(n);
    return n;
  }

  /** Starts {@code id} holding a complete copy (an adopted store), serving it. */
  Node startComplete(String id, Membership membership, Duration peerTimeout) {
    Node n = node(id);
    n.policy = newPolicy(id, peerTimeout);
    n.up = true;
    n.policy.applyMembership(membership);
    byte[][] h = new byte[map.size()][];
    for (int i = 0; i < h.length; i++) {
      h[i] = trueHash(i);
    }
    n.policy.holdComplete(map, h);
    n.policy.transportStarted();
    process(n);
    return n;
  }

  private SwarmPolicy<Conn> newPolicy(String id, Duration peerTimeout) {
    return new SwarmPolicy<>(
        new SwarmPolicy.Config(id, peerTimeout, 4, Duration.ofSeconds(10)), () -> now);
  }

  /** Applies a membership at {@code id} now. */
  void applyMembership(String id, Membership m) {
    Node n = nodes.get(id);
    n.policy.applyMembership(m);
    process(n);
  }

  /** Stops {@code id} at once (SIGKILL): its connections close, its events are dropped. */
  void kill(String id) {
    Node n = nodes.get(id);
    n.up = false;
    for (Conn c : List.copyOf(n.conns.values())) {
      closePair(c);
    }
  }

  /** Runs until every live filling member is complete, or {@code limit} of virtual time passed. */
  boolean runUntilComplete(Duration limit) {
    long end = now + limit.toNanos();
    scheduleTicks();
    while (!allComplete()) {
      Event e = queue.poll();
      if (e == null || e.at > end) {
        return false;
      }
      now = Math.max(now, e.at);
      e.action.run();
    }
    return true;
  }

  /** Runs for {@code d} of virtual time. */
  void runFor(Duration d) {
    long end = now + d.toNanos();
    scheduleTicks();
    while (!queue.isEmpty() && queue.peek().at <= end) {
      Event e = queue.poll();
      now = Math.max(now, e.at);
      e.action.run();
    }
    now = end;
  }

  private boolean ticking;

  private void scheduleTicks() {
    if (ticking) {
      return;
    }
    ticking = true;
    at(
        now + tickEvery,
        new Runnable() {
          @Override
          public void run() {
            for (Node n : nodes.values()) {
              if (n.up) {
                n.policy.tick();
                process(n);
              }
            }
            at(now + tickEvery, this);
          }
        });
  }

  boolean allComplete() {
    for (Node n : nodes.values()) {
      if (n.up && !n.policy.complete()) {
        return false;
      }
    }
    return true;
  }

  private void at(long when, Runnable r) {
    queue.add(new Event(when, seq++, r));
  }

  /** Carries out {@code n}'s decisions, then ticks it (as the data plane's mechanism does). */
  private void process(Node n) {
    for (int round = 0; round < 2; round++) {
      for (List<Decision<Conn>> ds = n.policy.drain(); !ds.isEmpty(); ds = n.policy.drain()) {
        for (Decision<Conn> d : ds) {
          carryOut(n, d);
        }
      }
      if (round == 0) {
        n.policy.tick();
      }
    }
  }

  private void carryOut(Node n, Decision<Conn> d) {
    if (d instanceof Decision.Send<Conn> s) {
      Conn c = s.to();
      Frame f = n.forged.isEmpty() ? s.frame() : forge(n, s.frame());
      at(
          now + latency,
          () -> {
            if (c.open && c.other.owner.up) {
              c.other.owner.policy.onFrame(c.other, n.id, f);
              process(c.other.owner);
            }
          });
    } else if (d instanceof Decision.SendPiece<Conn> s) {
      if (n.silent) {
        return;
      }
      Conn c = s.to();
      long start = Math.max(now, c.freeAt);
      c.freeAt = start + pieceTime;
      int piece = s.piece();
      byte[] bytesHash =
          n.corrupt || n.forged.contains(piece) ? forgedHash(piece) : trueHash(piece);
      at(
          c.freeAt,
          () -> {
            if (!c.open || !n.up) {
              return;
            }
            n.policy.onPieceSent(c, c.remote.id);
            process(n);
            Node r = c.other.owner;
            if (!r.up) {
              return;
            }
            if (r.policy.onPieceArrived(c.other, n.id, piece)) {
              byte[] expected = r.policy.expectedHash(piece);
              if (expected != null && Arrays.equals(expected, bytesHash)) {
                if (r.policy.onPieceVerified(piece)
                    && r.policy.onPieceStored(n.id, piece, bytesHash)) {
                  r.fromPeers.merge(n.id, 1, Integer::sum);
                }
              } else {
                r.policy.onPieceRejected(n.id, piece, "piece " + piece + " has the wrong sha256");
              }
            }
            process(r);
          });
    } else if (d instanceof Decision.ReadSource<Conn> r) {
      SwarmPolicy.Run run = r.run();
      n.runs++;
      n.maxRuns = Math.max(n.maxRuns, n.runs);
      for (int k = 0; k < run.count(); k++) {
        int piece = run.first() + k;
        boolean last = k == run.count() - 1;
        at(
            now + (k + 1) * sourcePieceTime,
            () -> {
              if (!n.up) {
                return;
              }
              n.sourceReads.add(piece);
              n.policy.onPieceStored(null, piece, trueHash(piece));
              if (last) {
                n.runs--;
                n.policy.onSourceRunEnded(run, true);
              }
              process(n);
            });
      }
    } else if (d instanceof Decision.Close<Conn> c) {
      closePair(c.conn());
    } else if (d instanceof Decision.Drop<Conn> dr) {
      n.dialling.remove(dr.peer());
      if (dr.conn() != null) {
        closePair(dr.conn());
      }
      log.add(n.id + " dropped " + dr.peer() + ": " + dr.why());
    } else if (d instanceof Decision.Dial<Conn> dial) {
      n.dialling.add(dial.peer());
      at(now + latency, () -> connect(n, dial.peer()));
    } else if (d instanceof Decision.Forget<Conn> f) {
      n.dialling.remove(f.peer());
      Conn c = n.conns.get(f.peer());
      if (c != null) {
        closePair(c);
      }
    } else if (d instanceof Decision.Note<Conn> note) {
      log.add(n.id + ": " + note.message());
    }
  }

  private Frame forge(Node n, Frame f) {
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

  private void connect(Node from, String to) {
    if (!from.up || !from.dialling.contains(to) || from.conns.containsKey(to)) {
      return;
    }
    Node target = nodes.get(to);
    if (target == null || !target.up || target.conns.containsKey(from.id)) {
      at(now + redialAfter, () -> connect(from, to));
      return;
    }
    Conn a = new Conn(from, target);
    Conn b = new Conn(target, from);
    a.other = b;
    b.other = a;
    from.conns.put(to, a);
    target.conns.put(from.id, b);
    from.policy.onConnected(a, to);
    target.policy.onConnected(b, from.id);
    process(from);
    process(target);
  }

  private void closePair(Conn c) {
    if (!c.open) {
      return;
    }
    c.open = false;
    c.other.open = false;
    c.owner.conns.remove(c.remote.id, c);
    c.other.owner.conns.remove(c.other.remote.id, c.other);
    for (Conn side : List.of(c, c.other)) {
      at(
          now + latency,
          () -> {
            if (side.owner.up) {
              side.owner.policy.onDisconnected(side, side.remote.id);
              process(side.owner);
            }
          });
    }
    // The dialler keeps dialling until told to forget.
    Conn dialler = c.owner.dialling.contains(c.remote.id) ? c : c.other;
    if (dialler.owner.dialling.contains(dialler.remote.id)) {
      at(now + redialAfter, () -> connect(dialler.owner, dialler.remote.id));
    }
  }

  /** Pieces the plan of {@code members} (all live, nothing held) assigns to {@code id}. */
  BitSet block(String id, String... members) {
    Set<String> all = new java.util.TreeSet<>(List.of(members));
    return SwarmPlan.compute(map.size(), all, all, Map.of()).assignedTo(id);
  }

  /** Every piece read from the source, counted per piece across all members. */
  int[] readsPerPiece() {
    int[] reads = new int[map.size()];
    for (Node n : nodes.values()) {
      n.sourceReads.forEach(i -> reads[i]++);
    }
    return reads;
  }

  Map<String, Integer> totalSourceReads() {
    Map<String, Integer> out = new HashMap<>();
    nodes.forEach((id, n) -> out.put(id, n.sourceReads.size()));
    return out;
  }
}
