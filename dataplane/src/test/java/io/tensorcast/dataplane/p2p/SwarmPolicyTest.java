package io.tensorcast.dataplane.p2p;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.p2p.SwarmPolicy.Decision;
import io.tensorcast.dataplane.p2p.SwarmPolicy.Run;
import io.tensorcast.dataplane.store.StoreFile;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * One member's rules, fed events by hand on a fake clock. Connections are strings {@code c-<peer>};
 * the artifact is 12 pieces of 1 KiB in two files ({@code a}: pieces 0-7, {@code b}: 8-11), so with
 * members {a, b, c} the blocks are a 0-3, b 4-7, c 8-11.
 */
class SwarmPolicyTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(1);
  private static final long T = TIMEOUT.toNanos();
  private static final PieceMap MAP =
      new PieceMap(List.of(new StoreFile("a", 8 * 1024), new StoreFile("b", 4 * 1024)), 1024);
  private static final Membership ABC = membership("abc", "a", "b", "c");

  private long now = 5_000_000_000L;

  /** The true SHA-256 of a piece: every honest source read gives it. */
  static byte[] trueHash(int piece) {
    return sha256("piece " + piece);
  }

  static byte[] forgedHash(int piece) {
    return sha256("forged " + piece);
  }

  private static byte[] sha256(String s) {
    try {
      return java.security.MessageDigest.getInstance("SHA-256")
          .digest(s.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    } catch (java.security.NoSuchAlgorithmException e) {
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

  private SwarmPolicy<String> member(String self, Membership m, int concurrency, long rangeSize) {
    SwarmPolicy<String> p =
        new SwarmPolicy<>(
            new SwarmPolicy.Config(self, TIMEOUT, 4, Duration.ofSeconds(3)), () -> now);
    if (m != null) {
      p.applyMembership(m);
    }
    p.startFill(MAP, concurrency, rangeSize);
    p.transportStarted();
    p.drain();
    return p;
  }

  /** A member without a peer transport: it loads alone at once. */
  private SwarmPolicy<String> alone(String self, int concurrency, long rangeSize) {
    SwarmPolicy<String> p =
        new SwarmPolicy<>(
            new SwarmPolicy.Config(self, TIMEOUT, 4, Duration.ofSeconds(3)), () -> now);
    p.startFill(MAP, concurrency, rangeSize);
    p.drain();
    return p;
  }

  /** {@code a} of {a, b, c}, with b and c connected and their BITFIELDs in. */
  private SwarmPolicy<String> aWithPeersHolding(int[] bHolds, int[] cHolds) {
    SwarmPolicy<String> a = member("a", ABC, 6, 1024);
    a.onConnected("c-b", "b");
    a.onConnected("c-c", "c");
    a.onFrame("c-b", "b", bitfield(bHolds));
    a.onFrame("c-c", "c", bitfield(cHolds));
    a.drain();
    return a;
  }

  private static Frame.Bitfield bitfield(int... pieces) {
    BitSet have = new BitSet();
    byte[][] h = new byte[MAP.size()][];
    for (int i : pieces) {
      have.set(i);
      h[i] = trueHash(i);
    }
    return new Frame.Bitfield(MAP.size(), have, h);
  }

  private static int[] range(int from, int to) {
    return java.util.stream.IntStream.range(from, to).toArray();
  }

  /** REQUESTs among {@code ds}, as {@code peer:piece}. */
  private static List<String> requests(List<Decision<String>> ds) {
    List<String> out = new ArrayList<>();
    for (Decision<String> d : ds) {
      if (d instanceof Decision.Send<String> s && s.frame() instanceof Frame.Request r) {
        out.add(s.to().substring(2) + ":" + r.piece());
      }
    }
    return out;
  }

  private static List<Run> runs(List<Decision<String>> ds) {
    List<Run> out = new ArrayList<>();
    for (Decision<String> d : ds) {
      if (d instanceof Decision.ReadSource<String> r) {
        out.add(r.run());
      }
    }
    return out;
  }

  private static List<Frame> framesTo(List<Decision<String>> ds, String conn) {
    List<Frame> out = new ArrayList<>();
    for (Decision<String> d : ds) {
      if (d instanceof Decision.Send<String> s && s.to().equals(conn)) {
        out.add(s.frame());
      }
    }
    return out;
  }

  private static List<String> notes(List<Decision<String>> ds) {
    List<String> out = new ArrayList<>();
    for (Decision<String> d : ds) {
      if (d instanceof Decision.Note<String> n) {
        out.add(n.message());
      }
    }
    return out;
  }

  private static <D> List<D> only(List<Decision<String>> ds, Class<D> type) {
    return ds.stream().filter(type::isInstance).map(type::cast).toList();
  }

  private List<Decision<String>> tick(SwarmPolicy<String> p) {
    p.tick();
    return p.drain();
  }

  private void advance(long nanos) {
    now += nanos;
  }

  // ------------------------------------------------------------------ stuck, busy, trickle

  @Test
  void aRequestItsPeerSendsNoBytesForWithinThePeerTimeoutCountsAsAFault() {
    // Only b holds b's block (4-7): there is nobody else to ask.
    SwarmPolicy<String> a = aWithPeersHolding(range(4, 8), new int[0]);
    List<String> first = requests(tick(a));
    assertThat(first).contains("b:4");

    advance(T - 1);
    assertThat(notes(tick(a)))
        .as("nothing is stuck before the timeout")
        .noneMatch(n -> n.contains("not received"));
    advance(2);
    List<Decision<String>> later = tick(a);

    assertThat(notes(later))
        .anySatisfy(
            n ->
                assertThat(n)
                    .startsWith("peer b: piece ")
                    .endsWith(" not received within PT1S (fault 1 of 3)"));
  }

  @Test
  void aRequestItsPeerSitsOnIsAskedOfAnotherHolderAfterAQuarterOfThePeerTimeoutWithoutAFault() {
    // b and c both hold b's block (4-7); c's hashes equal b's, the reader's.
    SwarmPolicy<String> a = aWithPeersHolding(range(4, 8), range(4, 8));
    List<String> first = requests(tick(a));
    String atB = first.stream().filter(r -> r.startsWith("b:")).findFirst().orElseThrow();
    int piece = Integer.parseInt(atB.substring(2));

    advance(T / 4);
    assertThat(requests(tick(a))).as("nothing is asked again before a quarter timeout").isEmpty();
    advance(1);
    List<Decision<String>> later = tick(a);

    assertThat(requests(later)).contains("c:" + piece).doesNotContain("b:" + piece);
    assertThat(notes(later)).noneMatch(n -> n.contains("fault"));
    assertThat(a.onPieceArrived("c-b", "b", piece))
        .as("the piece b sends after all is not wanted from b any more")
        .isFalse();
  }

  @Test
  void aPeerThatDeliversOtherPiecesKeepsItsRequestsPastAQuarterOfThePeerTimeout() {
    SwarmPolicy<String> a = aWithPeersHolding(range(4, 8), range(4, 8));
    List<String> first = requests(tick(a));
    assertThat(first).isNotEmpty();

    advance(T / 4 + 1);
    a.onPieceProgress("c-b", "b", now);
    a.onPieceProgress("c-c", "c", now);

    assertThat(requests(tick(a))).isEmpty();
  }

  /** {@code a} holding the whole artifact, members a..g, every other member connected. */
  private SwarmPolicy<String> seedOfSeven() {
    SwarmPolicy<String> a =
        new SwarmPolicy<>(new SwarmPolicy.Config("a", TIMEOUT, 4, Duration.ZERO), () -> now);
    a.applyMembership(membership("ag", "a", "b", "c", "d", "e", "f", "g"));
    byte[][] h = new byte[12][];
    for (int i = 0; i < 12; i++) {
      h[i] = trueHash(i);
    }
    a.holdComplete(MAP, h);
    a.transportStarted();
    for (String x : List.of("b", "c", "d", "e", "f", "g")) {
      a.onConnected(("c-" + x).intern(), x); // connections compare by identity
    }
    a.drain();
    return a;
  }

  private static List<String> pieceSends(List<Decision<String>> ds) {
    List<String> out = new ArrayList<>();
    for (Decision<String> d : ds) {
      if (d instanceof Decision.SendPiece<String> s) {
        out.add(s.to().substring(2) + ":" + s.piece());
      }
    }
    return out;
  }

  @Test
  void aPieceGoesToAtMostUploadSlotsPeersAtOnceAndTheOthersWaitUntilOneIsSentOrTheyHaveIt() {
    SwarmPolicy<String> a = seedOfSeven();
    assertThat(SwarmPolicy.UPLOAD_SLOTS).isEqualTo(4);
    for (String x : List.of("b", "c", "d", "e", "f", "g")) {
      a.onFrame(("c-" + x).intern(), x, new Frame.Request(3));
    }
    assertThat(pieceSends(a.drain())).containsExactly("b:3", "c:3", "d:3", "e:3");

    a.onFrame("c-f", "f", new Frame.Request(5));
    assertThat(pieceSends(a.drain()))
        .as("another piece has slots of its own")
        .containsExactly("f:5");

    // g got piece 3 elsewhere: its HAVE withdraws its request.
    a.onFrame("c-g", "g", new Frame.Have(3, trueHash(3)));
    a.onPieceSent("c-b", "b");
    assertThat(pieceSends(a.drain())).containsExactly("f:3");
    a.onPieceSent("c-c", "c");
    assertThat(pieceSends(a.drain())).as("g's request was withdrawn").isEmpty();
  }

  /**
   * {@code a} of members a..h filling with {@code concurrency}, every other member connected with
   * an empty BITFIELD, after one scheduling round; it then stores pieces 0-6 from its source reads.
   */
  private SwarmPolicy<String> aOfEightHolding0To6(int concurrency) {
    SwarmPolicy<String> a =
        member("a", membership("ah", "a", "b", "c", "d", "e", "f", "g", "h"), concurrency, 1024);
    for (String x : List.of("b", "c", "d", "e", "f", "g", "h")) {
      String conn = ("c-" + x).intern(); // connections compare by identity
      a.onConnected(conn, x);
      a.onFrame(conn, x, bitfield());
    }
    a.drain();
    tick(a);
    for (int i = 0; i <= 6; i++) {
      a.onPieceStored(null, i, trueHash(i));
    }
    a.drain();
    return a;
  }

  @Test
  void whileTheSwarmReadsInTurnsAtMostSendSlotsCopiesGoOutAtOnce() {
    // 8 live members > concurrency 2: the swarm reads in turns, seven requests for seven pieces.
    SwarmPolicy<String> a = aOfEightHolding0To6(2);
    assertThat(SwarmPolicy.SEND_SLOTS).isEqualTo(6);
    List<String> peers = List.of("b", "c", "d", "e", "f", "g", "h");
    for (int k = 0; k < peers.size(); k++) {
      a.onFrame(("c-" + peers.get(k)).intern(), peers.get(k), new Frame.Request(k));
    }
    assertThat(pieceSends(a.drain())).containsExactly("b:0", "c:1", "d:2", "e:3", "f:4", "g:5");
    a.onPieceSent("c-c", "c");
    assertThat(pieceSends(a.drain())).containsExactly("h:6");

    // 8 live members <= concurrency 8: every member reads its share at once, no cap in all.
    SwarmPolicy<String> b = aOfEightHolding0To6(8);
    for (int k = 0; k < peers.size(); k++) {
      b.onFrame(("c-" + peers.get(k)).intern(), peers.get(k), new Frame.Request(k));
    }
    assertThat(pieceSends(b.drain())).hasSize(7);
  }

  @Test
  void aPieceSentLeastOftenGoesFirstWhenASlotFrees() {
    SwarmPolicy<String> a = seedOfSeven();
    for (String x : List.of("b", "c", "d", "e")) {
      a.onFrame(("c-" + x).intern(), x, new Frame.Request(3));
    }
    a.onFrame("c-f", "f", new Frame.Request(3));
    a.onFrame("c-f", "f", new Frame.Request(9));
    assertThat(pieceSends(a.drain())).containsExactly("b:3", "c:3", "d:3", "e:3", "f:9");
    a.onFrame("c-g", "g", new Frame.Request(9));
    assertThat(pieceSends(a.drain()))
        .as("piece 9, sent once, goes before f's older request for piece 3, sent four times")
        .containsExactly("g:9");
  }

  @Test
  void aRequestThatWaitedHalfAPeerTimeoutGoesOutWhateverTheSlots() {
    SwarmPolicy<String> a = seedOfSeven();
    for (String x : List.of("b", "c", "d", "e", "f")) {
      a.onFrame(("c-" + x).intern(), x, new Frame.Request(3));
    }
    assertThat(pieceSends(a.drain())).hasSize(4);

    advance(T / 2 - 1);
    a.tick();
    assertThat(pieceSends(a.drain())).isEmpty();
    advance(1);
    a.tick();
    assertThat(pieceSends(a.drain())).containsExactly("f:3");
  }

  @Test
  void requestsThatWaitedHalfAPeerTimeoutGoOutOnlyUpToTwiceTheUploadSlots() {
    SwarmPolicy<String> a = seedOfSeven();
    // Every peer asks for piece 3 twice (12 requests); 4 go out, 8 wait.
    for (int k = 0; k < 2; k++) {
      for (String x : List.of("b", "c", "d", "e", "f", "g")) {
        a.onFrame(("c-" + x).intern(), x, new Frame.Request(3));
      }
    }
    assertThat(pieceSends(a.drain())).hasSize(SwarmPolicy.UPLOAD_SLOTS);

    // Half a peer timeout later the waiting requests are old: another UPLOAD_SLOTS go, not all 8
    // (every old request at once shares a slow uplink among all of them).
    advance(T / 2);
    a.tick();
    assertThat(pieceSends(a.drain())).hasSize(SwarmPolicy.UPLOAD_SLOTS);
    a.tick();
    assertThat(pieceSends(a.drain())).isEmpty();
    a.onPieceSent("c-b", "b");
    assertThat(pieceSends(a.drain())).as("a sent copy frees a slot").hasSize(1);
  }

  @Test
  void aClosedConnectionGivesBackItsUploadSlots() {
    SwarmPolicy<String> a = seedOfSeven();
    for (String x : List.of("b", "c", "d", "e", "f")) {
      a.onFrame(("c-" + x).intern(), x, new Frame.Request(3));
    }
    assertThat(pieceSends(a.drain())).hasSize(4);

    a.onDisconnected("c-b", "b");

    assertThat(pieceSends(a.drain())).containsExactly("f:3");
  }

  @Test
  void aPeerThatKeepsDeliveringOtherPiecesIsBusyNotStuck() {
    SwarmPolicy<String> a = aWithPeersHolding(range(4, 8), new int[0]);
    List<String> asked = requests(tick(a));
    assertThat(asked).containsExactlyInAnyOrder("b:4", "b:5", "b:6", "b:7");

    // b delivers one piece every 0.9 timeouts, in order; the last request waits 3 timeouts.
    for (int k = 0; k < 3; k++) {
      advance(T * 9 / 10);
      int piece = 4 + k;
      assertThat(a.onPieceArrived("c-b", "b", piece)).isTrue();
      assertThat(a.onPieceVerified(piece)).isTrue();
      assertThat(a.onPieceStored("b", piece, trueHash(piece))).isTrue();
      List<Decision<String>> ds = tick(a);
      assertThat(notes(ds)).noneMatch(n -> n.contains("not received"));
      assertThat(requests(ds)).isEmpty();
    }
  }

  @Test
  void aPeerWhosePieceBytesKeepArrivingIsNotStuckBeforeAPieceIsWhole() {
    SwarmPolicy<String> a = aWithPeersHolding(range(4, 8), new int[0]);
    tick(a);
    for (int k = 0; k < 5; k++) {
      advance(T * 8 / 10);
      a.onPieceProgress("c-b", "b", now);
      assertThat(notes(tick(a))).noneMatch(n -> n.contains("not received"));
    }
    // The bytes stop: a timeout later the requests are stuck.
    advance(T + 1);
    assertThat(notes(tick(a))).anyMatch(n -> n.contains("not received within"));
  }

  @Test
  void aPeerWithThreeFaultsIsNotAskedForAnythingAgain() {
    SwarmPolicy<String> a = aWithPeersHolding(range(4, 8), range(4, 8));
    tick(a);
    for (int piece = 4; piece < 7; piece++) {
      a.onPieceRejected("b", piece, "piece " + piece + " has sha256 00 but 11 is expected");
    }
    List<Decision<String>> ds = a.drain();
    assertThat(notes(ds)).contains("peer b: 3 faults; not requesting anything from it any more");
    for (int k = 0; k < 5; k++) {
      advance(T / 4);
      assertThat(requests(tick(a))).noneMatch(r -> r.startsWith("b:"));
    }
  }

  // ------------------------------------------------------------------ limits and order

  @Test
  void atMostEightRequestsAreInFlightAcrossFivePeersAndTwoAtEach() {
    String[] ids = {"a", "p1", "p2", "p3", "p4", "p5"};
    SwarmPolicy<String> a = member("a", membership("six", ids), 2, 1024);
    for (String id : List.of(ids).subList(1, 6)) {
      a.onConnected(("c-" + id).intern(), id);
      a.onFrame(("c-" + id).intern(), id, bitfield(range(0, 12)));
    }
    a.drain();

    List<String> asked = requests(tick(a));

    assertThat(asked).hasSize(SwarmPolicy.maxTotalInFlight(4)).hasSize(8);
    Map<String, Integer> perPeer = new HashMap<>();
    asked.forEach(r -> perPeer.merge(r.substring(0, r.indexOf(':')), 1, Integer::sum));
    assertThat(perPeer.values()).allMatch(n -> n <= SwarmPolicy.perPeerInFlight(4, 8, 5));
    assertThat(SwarmPolicy.perPeerInFlight(4, 8, 5)).isEqualTo(2);
    assertThat(requests(tick(a))).as("nothing more while 8 are in flight").isEmpty();
  }

  @Test
  void equallyLoadedPeersAreAskedInThisMembersRendezvousOrderAndTheRarestPieceFirst() {
    // b holds 4-7 (its block), c holds 4 and 8-11: piece 4 has two holders, the rest one.
    SwarmPolicy<String> a = aWithPeersHolding(range(4, 8), new int[] {4, 8, 9, 10, 11});
    List<String> asked = requests(tick(a));

    String first = SwarmPolicy.tieRank("a", "b") < SwarmPolicy.tieRank("a", "c") ? "b" : "c";
    assertThat(asked).hasSize(8);
    assertThat(asked.get(0)).startsWith(first + ":");
    int twoHolders = asked.indexOf("b:4") >= 0 ? asked.indexOf("b:4") : asked.indexOf("c:4");
    assertThat(twoHolders)
        .as("piece 4 (two holders) after the six pieces with one")
        .isGreaterThanOrEqualTo(6);
  }

  @Test
  void withEveryPieceAtOneHolderAMembersRequestsStayAtTheFrontOfTheLowestIncompleteRun() {
    // 64 pieces of 1 KiB in one file; of the pair {self, peer} the peer reads and holds 32-63
    // (one holder each), so what this member fetches continues the file's prefix only if asked in
    // piece order, give or take the tie window. Several member ids: the choice among ties depends
    // on a hash of the id.
    PieceMap map = new PieceMap(List.of(new StoreFile("w", 64 * 1024)), 1024);
    for (String self : List.of("a", "m1", "m2", "node-7", "zz")) {
      String peer = self.compareTo("p") < 0 ? "peer" : "aaa";
      Membership m = membership("pair-" + self, self, peer);
      SwarmPolicy<String> p =
          new SwarmPolicy<>(
              new SwarmPolicy.Config(self, TIMEOUT, 4, Duration.ofSeconds(3)), () -> now);
      p.applyMembership(m);
      p.startFill(map, 6, 1024);
      p.transportStarted();
      p.drain();
      String conn = ("c-" + peer).intern();
      p.onConnected(conn, peer);
      BitSet have = new BitSet();
      byte[][] h = new byte[map.size()][];
      int first = self.compareTo(peer) < 0 ? 32 : 0;
      for (int i = first; i < first + 32; i++) {
        have.set(i);
        h[i] = trueHash(i);
      }
      p.onFrame(conn, peer, new Frame.Bitfield(map.size(), have, h));
      List<String> sent = new ArrayList<>(requests(p.drain()));
      sent.addAll(requests(tick(p)));
      List<Integer> asked =
          sent.stream()
              .map(r -> Integer.parseInt(r.substring(r.indexOf(':') + 1)))
              .sorted()
              .toList();

      assertThat(asked).as(self).isNotEmpty().allMatch(i -> i >= first && i < first + 32);
      int highest = asked.get(asked.size() - 1);
      assertThat(highest - first + 1 - asked.size())
          .as("%s asked %s: pieces of %d-%d left unasked", self, asked, first, highest)
          .isLessThan(SwarmPlan.TIE_WINDOW);
    }
  }

  @Test
  void aMemberReadsTheHeadOfAFileThatContinuesInTheNextBlockFirst() {
    // Files a (pieces 0-3), b (4-9), c (10-11); x of {x, y} reads 0-5, where b's head (4-5) is
    // the part of b only x reads: that run comes first, then a from its start. y reads b's tail
    // (6-9) first, then c.
    PieceMap map =
        new PieceMap(
            List.of(
                new StoreFile("a", 4 * 1024),
                new StoreFile("b", 6 * 1024),
                new StoreFile("c", 2048)),
            1024);
    Membership xy = membership("xy", "x", "y");
    List<List<Run>> runs = new ArrayList<>();
    for (String self : List.of("x", "y")) {
      String peer = self.equals("x") ? "y" : "x";
      SwarmPolicy<String> p =
          new SwarmPolicy<>(
              new SwarmPolicy.Config(self, TIMEOUT, 4, Duration.ofSeconds(3)), () -> now);
      p.applyMembership(xy);
      p.startFill(map, 4, 8 * 1024);
      p.transportStarted();
      p.onConnected(("c-" + peer).intern(), peer);
      p.onFrame(
          ("c-" + peer).intern(),
          peer,
          new Frame.Bitfield(map.size(), new BitSet(), new byte[map.size()][]));
      p.drain();
      // One run at a time with one peer (sourceReadsInFlight): the second comes once the first
      // is stored.
      List<Run> mine = new ArrayList<>(runs(tick(p)));
      assertThat(mine).hasSize(1);
      readRun(p, mine.get(0));
      mine.addAll(runs(tick(p)));
      runs.add(mine);
    }

    assertThat(runs.get(0)).containsExactly(new Run(4, 2), new Run(0, 4));
    assertThat(runs.get(1)).containsExactly(new Run(6, 4), new Run(10, 2));
  }

  @Test
  void aMemberReadsTheSwarmsShareOfTheSourceConcurrencyAndAloneAllOfIt() {
    Membership four = membership("four", "a", "b", "c", "d");
    SwarmPolicy<String> a = member("a", four, 8, 1024);
    for (String id : List.of("b", "c", "d")) {
      a.onConnected(("c-" + id).intern(), id);
      a.onFrame(("c-" + id).intern(), id, bitfield());
    }
    a.drain();
    assertThat(runs(tick(a))).hasSize(SwarmPolicy.sourceReadsInFlight(8, 4)).hasSize(2);

    SwarmPolicy<String> x = alone("x", 3, 1024);
    assertThat(runs(tick(x))).containsExactly(new Run(0, 1), new Run(1, 1), new Run(2, 1));
  }

  @Test
  void theLastReaderTakesTheRunsOfTheMembersWhoseShareIsReadAndKeepsHalfItsPeerRequests() {
    // 48 pieces, members a-d: a's block is 0-11; b, c and d hold their blocks, so only a has
    // pieces of its share left.
    PieceMap map = new PieceMap(List.of(new StoreFile("w", 48 * 1024)), 1024);
    SwarmPolicy<String> a =
        new SwarmPolicy<>(
            new SwarmPolicy.Config("a", TIMEOUT, 4, Duration.ofSeconds(3)), () -> now);
    a.applyMembership(membership("four", "a", "b", "c", "d"));
    a.startFill(map, 8, 1024);
    a.transportStarted();
    a.drain();
    String[] peers = {"b", "c", "d"};
    for (int k = 0; k < peers.length; k++) {
      String id = peers[k];
      a.onConnected(("c-" + id).intern(), id);
      BitSet have = new BitSet();
      byte[][] h = new byte[map.size()][];
      for (int i = 12 * (k + 1); i < 12 * (k + 2); i++) {
        have.set(i);
        h[i] = trueHash(i);
      }
      a.onFrame(("c-" + id).intern(), id, new Frame.Bitfield(map.size(), have, h));
    }
    a.drain();
    advance(T / 2); // past the fill's first half peer timeout, when no member's pace is known

    List<Decision<String>> ds = tick(a);

    // The swarm's concurrency of 8 is a's alone: 6 runs (two per peer), not its quarter of 2.
    assertThat(runs(ds)).hasSize(SwarmPolicy.sourceReadsInFlight(8, 4, 1, 0)).hasSize(6);
    // Its source reads go first on its ingress: half of its 8 peer requests, not 2 at each peer.
    assertThat(requests(ds)).hasSize(SwarmPolicy.maxTotalInFlight(4) / 2).hasSize(4);
  }

  @Test
  void aShareLaggingByARangeTakesOneMoreRunOnceItsIngressIsSeenToKeepUp() {
    // Of {a, b, c}, b and c are 8 pieces of their shares ahead, then 16; a's holdings grow as fast
    // as theirs. The first round starts a's cap of 2 only: no whole window of holdings counts yet.
    // The second, one more.
    assertThat(runsStartedOverAWindow(3, 16, 8, 8, 8, 8))
        .as("lag 16 >= %d, ingress keeps up", SwarmPolicy.EXTRA_RUN_LAG)
        .containsExactly(2, 1);
    // Lag exactly 8 in both rounds (b and c gain nothing in the window, a gains 8): one more.
    assertThat(runsStartedOverAWindow(3, 16, 8, 8, 0, 8)).as("lag 8").containsExactly(2, 1);
  }

  @Test
  void aShareLaggingByLessThanARangeOrThroughASlowIngressOrInAPairOrAtTheEndKeepsItsCap() {
    assertThat(runsStartedOverAWindow(3, 16, 0, 0, 7, 7)).as("lag 7").containsExactly(2, 0);
    // Lag 16, but a gained nothing while b and c gained 8: its ingress paces it (own reads first).
    assertThat(runsStartedOverAWindow(3, 16, 8, 8, 8, 0)).as("slow ingress").containsExactly(2, 0);
    // Concurrency 8: one more each would be 9 reads in flight, beyond one loader's 8.
    assertThat(runsStartedOverAWindow(3, 8, 8, 8, 8, 8)).as("concurrency 8").containsExactly(2, 0);
    // Two members: a pair measured no faster with it (docs/DECISIONS.md).
    assertThat(runsStartedOverAWindow(2, 16, 8, 8, 8, 8)).as("a pair").containsExactly(1, 0);
    // c's share is read: a and b are the last readers, whose rule gives a 16 / 2 = 8, at most 2
    // per peer: 4 runs, and no more on top.
    assertThat(runsStartedOverAWindow(3, 16, 8, 32, 8, 8)).as("last readers").containsExactly(4, 0);
  }

  /**
   * Member a of {@code members} (a, b, c) on 32 pieces each (a's block 0-31, b's 32-63, c's 64-95),
   * one piece a run. b announces the first {@code bRead} pieces of its share and c the first {@code
   * cRead} of its; a starts its runs; in the next half peer timeout b and c each announce {@code
   * gain} more (c not beyond its block) and a stores {@code aGain} of b's pieces. The runs a
   * started in each of the two rounds.
   */
  private int[] runsStartedOverAWindow(
      int members, int concurrency, int bRead, int cRead, int gain, int aGain) {
    List<String> ids = List.of("a", "b", "c").subList(0, members);
    PieceMap map = new PieceMap(List.of(new StoreFile("w", members * 32 * 1024)), 1024);
    SwarmPolicy<String> a =
        new SwarmPolicy<>(
            new SwarmPolicy.Config("a", TIMEOUT, 4, Duration.ofSeconds(3)), () -> now);
    a.applyMembership(membership("lag", ids.toArray(String[]::new)));
    a.startFill(map, concurrency, 1024);
    a.transportStarted();
    a.drain();
    int[] read = {0, bRead, cRead};
    for (int k = 1; k < members; k++) {
      String id = ids.get(k);
      a.onConnected(("c-" + id).intern(), id);
      BitSet have = new BitSet();
      byte[][] h = new byte[map.size()][];
      for (int i = 32 * k; i < 32 * k + read[k]; i++) {
        have.set(i);
        h[i] = trueHash(i);
      }
      a.onFrame(("c-" + id).intern(), id, new Frame.Bitfield(map.size(), have, h));
    }
    a.drain();
    advance(T / 2);
    int started = runs(tick(a)).size();
    for (int k = 1; k < members; k++) {
      String id = ids.get(k);
      for (int i = 32 * k + read[k]; i < Math.min(32 * (k + 1), 32 * k + read[k] + gain); i++) {
        a.onFrame(("c-" + id).intern(), id, new Frame.Have(i, trueHash(i)));
      }
    }
    for (int i = 32; i < 32 + aGain; i++) {
      assertThat(a.onPieceStored("b", i, trueHash(i))).isTrue();
    }
    a.drain();
    advance(T / 2 + 1);
    return new int[] {started, runs(tick(a)).size()};
  }

  @Test
  void runsAreConsecutivePiecesOfOneFileUpToTheRangeSizeAndEachPieceIsAnnouncedWhenStored() {
    SwarmPolicy<String> x =
        new SwarmPolicy<>(new SwarmPolicy.Config("x", TIMEOUT, 4, Duration.ZERO), () -> now);
    x.applyMembership(membership("xy", "x", "y"));
    x.startFill(MAP, 2, 3 * 1024);
    x.transportStarted();
    x.onConnected("c-y", "y");
    x.onFrame("c-y", "y", bitfield());
    x.drain();
    // Alone in the plan once y is lost: x reads everything, three pieces a run, runs end at a file
    // end (pieces 0-7 are file a).
    advance(T + 1);
    x.onDisconnected("c-y", "y");
    x.drain();
    advance(T + 1);
    assertThat(runs(tick(x))).containsExactly(new Run(0, 3), new Run(3, 3));
    x.onPieceStored(null, 0, trueHash(0));
    x.onPieceStored(null, 1, trueHash(1));
    x.onPieceStored(null, 2, trueHash(2));
    x.onSourceRunEnded(new Run(0, 3), true);
    x.drain();
    assertThat(runs(tick(x))).containsExactly(new Run(6, 2));

    // With a peer connected, a run's pieces are marked READING before the read, and each piece
    // goes out with HAVE the moment it is stored, before its run ends.
    SwarmPolicy<String> a = aWithPeersHolding(new int[0], new int[0]);
    List<Decision<String>> ds = tick(a);
    List<Frame> toB = framesTo(ds, "c-b");
    assertThat(toB).first().isInstanceOf(Frame.Reading.class);
    int firstRead = runs(ds).get(0).first();
    a.onPieceStored(null, firstRead, trueHash(firstRead));
    assertThat(framesTo(a.drain(), "c-b"))
        .singleElement()
        .isInstanceOfSatisfying(
            Frame.Have.class, h -> assertThat(h.sha256()).isEqualTo(trueHash(firstRead)));
  }

  @Test
  void readingMarksAreRenewedEveryHalfPeerTimeoutWhileTheReadLasts() {
    SwarmPolicy<String> a = aWithPeersHolding(new int[0], new int[0]);
    List<Run> started = runs(tick(a));
    assertThat(started).isNotEmpty();
    advance(T / 2 + 1);
    List<Frame> renewed = framesTo(tick(a), "c-b");
    assertThat(renewed)
        .filteredOn(f -> f instanceof Frame.Reading)
        .extracting(f -> ((Frame.Reading) f).piece())
        .contains(started.get(0).first());
  }

  @Test
  void nothingIsReadFromThePlanUntilEveryLiveMemberSentItsBitfield() {
    SwarmPolicy<String> a = member("a", ABC, 6, 1024);
    a.onConnected("c-b", "b");
    a.onConnected("c-c", "c");
    a.onFrame("c-b", "b", bitfield());
    a.drain();
    assertThat(runs(tick(a))).as("c's BITFIELD is missing").isEmpty();
    a.onFrame("c-c", "c", bitfield());
    a.drain();
    assertThat(runs(tick(a))).extracting(Run::first).containsExactly(0, 1);
  }

  @Test
  void aMemberThatNeverConnectsIsLostAfterThePeerTimeoutAndItsBlockIsReadByTheOthers() {
    Membership ab = membership("ab", "a", "b");
    SwarmPolicy<String> a = member("a", ab, 12, 1024);
    assertThat(runs(tick(a))).as("b is live and its holdings unknown").isEmpty();
    advance(T + 1);
    List<Run> runs = runs(tick(a));
    BitSet read = new BitSet();
    runs.forEach(r -> read.set(r.first(), r.first() + r.count()));
    assertThat(read.cardinality()).isEqualTo(12);
  }

  @Test
  void aFillWithATransportWaitsForAMembershipThenLoadsAlone() {
    SwarmPolicy<String> a =
        new SwarmPolicy<>(
            new SwarmPolicy.Config("a", TIMEOUT, 4, Duration.ofSeconds(3)), () -> now);
    a.startFill(MAP, 2, 1024);
    a.transportStarted();
    a.drain();
    advance(Duration.ofSeconds(3).toNanos() - 1);
    assertThat(tick(a)).isEmpty();
    advance(1);
    List<Decision<String>> ds = tick(a);
    assertThat(notes(ds))
        .containsExactly(
            "no membership within PT3S (--membership-wait); loading from the source alone until"
                + " one arrives");
    assertThat(runs(ds)).hasSize(2);
  }

  @Test
  void aPieceOnlyAFailedHolderOffersIsReadFromTheSourceOnceItStarvedForThePeerTimeout() {
    Membership ab = membership("ab", "a", "b");
    SwarmPolicy<String> a = member("a", ab, 2, 1024);
    a.onConnected("c-b", "b");
    a.onFrame("c-b", "b", bitfield(range(6, 12)));
    a.drain();
    tick(a);
    a.onPieceRejected("b", 6, "piece 6 has sha256 00 but 11 is expected");
    a.drain();
    assertThat(runs(tick(a))).doesNotContain(new Run(6, 1));
    // b keeps delivering its other pieces' bytes (busy, not stuck), but piece 6 only it holds.
    advance(T / 2);
    a.onPieceProgress("c-b", "b", now);
    assertThat(runs(tick(a))).doesNotContain(new Run(6, 1));
    advance(T / 2 + 1);
    a.onPieceProgress("c-b", "b", now);
    List<Decision<String>> ds = tick(a);
    assertThat(runs(ds)).contains(new Run(6, 1));
    assertThat(notes(ds)).noneMatch(n -> n.contains("not received"));
  }

  // ------------------------------------------------------------------ hash authority

  @Test
  void aClaimThatDiffersFromTheReadersHashDropsItsMemberAndIsReported() {
    SwarmPolicy<String> a = member("a", ABC, 2, 1024);
    a.onConnected("c-b", "b");
    a.onConnected("c-c", "c");
    byte[] forged = forgedHash(5);
    a.onFrame("c-c", "c", new Frame.Have(5, forged)); // c is not piece 5's reader: a claim
    assertThat(a.expectedHash(5)).isNull();
    a.drain();

    a.onFrame("c-b", "b", new Frame.Have(5, trueHash(5))); // b is its reader

    List<Decision<String>> ds = a.drain();
    String why =
        "announced piece 5 with sha256 "
            + java.util.HexFormat.of().formatHex(forged)
            + " but its reader b announced "
            + java.util.HexFormat.of().formatHex(trueHash(5));
    assertThat(only(ds, Decision.Drop.class))
        .singleElement()
        .isEqualTo(new Decision.Drop<>("c", "c-c", why));
    assertThat(a.dropped())
        .extracting(d -> d.id() + ": " + d.reason())
        .containsExactly("c: " + why);
    assertThat(a.expectedHash(5)).isEqualTo(trueHash(5));
    a.onConnected("c-c2", "c");
    assertThat(only(a.drain(), Decision.Close.class))
        .singleElement()
        .isEqualTo(new Decision.Close<>("c-c2", "dropped earlier: " + why));
  }

  @Test
  void aClaimEqualToTheReadersHashMakesItsMemberAHolder() {
    SwarmPolicy<String> a = member("a", ABC, 2, 1024);
    a.onConnected("c-b", "b");
    a.onConnected("c-c", "c");
    a.onFrame("c-c", "c", bitfield(4));
    a.onFrame("c-b", "b", bitfield(4));
    a.drain();
    // Both hold piece 4 now: asked of one, it is asked of the other once the first is gone.
    List<String> asked = requests(tick(a));
    assertThat(asked).hasSize(1).allMatch(r -> r.endsWith(":4"));
    if (asked.get(0).startsWith("b:")) {
      a.onDisconnected("c-b", "b");
      a.drain();
      asked = requests(tick(a));
    }
    assertThat(asked).containsExactly("c:4");
  }

  @Test
  void aClaimOfAMemberThatBecomesThePiecesReaderIsPromotedWhenTheReadersChange() {
    SwarmPolicy<String> a = member("a", ABC, 2, 1024);
    a.onConnected("c-c", "c");
    // b never connects. Once it is lost its block 4-7 is re-split over {a, c}: 4, 5 to a, 6, 7 to
    // c.
    a.onFrame("c-c", "c", bitfield(4, 6, 8, 9, 10, 11));
    a.drain();
    assertThat(a.expectedHash(6)).isNull();
    advance(T + 1);
    tick(a);
    assertThat(a.expectedHash(6)).isEqualTo(trueHash(6));
    assertThat(a.expectedHash(4)).as("a reads piece 4 itself").isNull();
  }

  @Test
  void readingMarksOfAMemberThatIsNotThePiecesReaderDoNotHoldTheReaderBack() {
    Membership ab = membership("ab", "a", "b");
    SwarmPolicy<String> a = member("a", ab, 4, 1024);
    a.onConnected("c-b", "b");
    for (int i = 0; i < 6; i++) {
      a.onFrame("c-b", "b", new Frame.Reading(i)); // a's own block 0-5
    }
    a.onFrame("c-b", "b", bitfield());
    a.drain();
    // Marks before its BITFIELD may be reads b started under an earlier membership: they hold a
    // back for one peer timeout, and renewing them does not make them last longer.
    assertThat(runs(tick(a))).isEmpty();
    advance(T / 2);
    for (int i = 0; i < 6; i++) {
      a.onFrame("c-b", "b", new Frame.Reading(i));
    }
    advance(T / 2 + 1);
    assertThat(runs(tick(a))).extracting(Run::first).containsExactly(0);
    // Marks after its BITFIELD from a member that is not the pieces' reader are ignored.
    for (int i = 1; i < 6; i++) {
      a.onFrame("c-b", "b", new Frame.Reading(i));
    }
    assertThat(runs(tick(a))).isEmpty(); // a reads one run at a time with one peer
    readRun(a, new Run(0, 1));
    assertThat(runs(tick(a))).extracting(Run::first).containsExactly(1);
  }

  @Test
  void aReadStartedBeforeAJoinMovedItsPieceStaysItsReadersAndIsNotReadAgain() {
    SwarmPolicy<String> b = bWithPeersHolding(new int[0], new int[0], 4 * 1024);
    assertThat(runs(tick(b))).containsExactly(new Run(4, 4));
    // a reads its block 0-3 (blocks of 4 over {a, b, c}) and says so.
    for (int i = 0; i < 4; i++) {
      b.onFrame("c-a", "a", new Frame.Reading(i));
    }
    // d joins: blocks of 3 over {a, b, c, d}, so piece 3's reader is b now.
    b.applyMembership(membership("abcd", "a", "b", "c", "d"));
    b.onConnected("c-d", "d");
    b.onFrame("c-d", "d", bitfield());
    b.drain();
    advance(T * 3 / 4);
    b.onFrame("c-a", "a", new Frame.Reading(3)); // a's renewal: its read goes on
    advance(T / 2); // a's first mark has lapsed, the renewal has not
    assertThat(runs(tick(b))).as("piece 3 is a's read, not b's").isEmpty();

    b.onFrame("c-a", "a", new Frame.Have(3, trueHash(3)));
    assertThat(b.expectedHash(3)).as("a's hash is piece 3's").isEqualTo(trueHash(3));
    List<Decision<String>> ds = tick(b);
    assertThat(requests(ds)).contains("a:3");
    assertThat(runs(ds)).isEmpty();
  }

  @Test
  void aSourceReadThatContradictsTheReadersHashDropsTheReader() {
    Membership ab = membership("ab", "a", "b");
    SwarmPolicy<String> a = member("a", ab, 2, 1024);
    a.onConnected("c-b", "b");
    a.onFrame("c-b", "b", new Frame.Have(7, forgedHash(7)));
    a.drain();
    a.onPieceStored(null, 7, trueHash(7)); // a read piece 7 itself (a last resort)
    assertThat(only(a.drain(), Decision.Drop.class))
        .singleElement()
        .satisfies(
            d -> {
              assertThat(d.peer()).isEqualTo("b");
              assertThat(d.why()).endsWith("(read by this member)").contains("the source gives");
            });
  }

  // ------------------------------------------------------------------ resuming an earlier fill

  private static byte[][] hashesOf(BitSet held, java.util.function.IntFunction<byte[]> hash) {
    byte[][] out = new byte[MAP.size()][];
    for (int i = held.nextSetBit(0); i >= 0; i = held.nextSetBit(i + 1)) {
      out[i] = hash.apply(i);
    }
    return out;
  }

  private static BitSet pieces(int... indexes) {
    BitSet b = new BitSet();
    for (int i : indexes) {
      b.set(i);
    }
    return b;
  }

  private static List<Integer> kept(List<Decision<String>> ds) {
    return only(ds, Decision.Kept.class).stream().map(k -> ((Decision.Kept<?>) k).piece()).toList();
  }

  private static List<Integer> haves(List<Frame> frames) {
    return frames.stream()
        .filter(Frame.Have.class::isInstance)
        .map(f -> ((Frame.Have) f).piece())
        .toList();
  }

  @Test
  void keptPiecesItReadsItselfAreConfirmedByItsOwnHashAndNeitherReadNorFetchedAgain() {
    // a kept its whole block (0-3) and piece 5 of b's block from a fill that failed.
    SwarmPolicy<String> a = member("a", ABC, 6, 4 * 1024);
    BitSet held = pieces(0, 1, 2, 3, 5);
    a.resume(held, hashesOf(held, SwarmPolicyTest::trueHash));
    assertThat(notes(a.drain())).anyMatch(n -> n.startsWith("5 pieces are kept"));
    a.onConnected("c-b", "b");
    a.onConnected("c-c", "c");
    List<Decision<String>> connected = a.drain();
    Frame.Bitfield sent =
        framesTo(connected, "c-b").stream()
            .filter(Frame.Bitfield.class::isInstance)
            .map(Frame.Bitfield.class::cast)
            .findFirst()
            .orElseThrow();
    assertThat(sent.have().isEmpty()).as("nothing announced before it is confirmed").isTrue();
    a.onFrame("c-b", "b", bitfield());
    a.onFrame("c-c", "c", bitfield());
    a.drain();

    List<Decision<String>> ds = tick(a);
    assertThat(kept(ds))
        .as("confirmed by a's own hash: a is their reader")
        .containsExactly(0, 1, 2, 3);
    assertThat(haves(framesTo(ds, "c-c"))).containsExactly(0, 1, 2, 3);
    assertThat(runs(ds)).as("nothing of a's block is read again").isEmpty();
    assertThat(requests(ds)).isEmpty();
    assertThat(a.present()).isEqualTo(pieces(0, 1, 2, 3));
    assertThat(a.resumedPending()).isEqualTo(1);

    // b, the reader of 5, announces it with the hash a holds: kept, never requested.
    a.onFrame("c-b", "b", new Frame.Have(5, trueHash(5)));
    List<Decision<String>> confirmed = a.drain();
    assertThat(kept(confirmed)).containsExactly(5);
    assertThat(haves(framesTo(confirmed, "c-c"))).containsExactly(5);
    assertThat(only(confirmed, Decision.Drop.class)).isEmpty();
    a.onFrame("c-b", "b", new Frame.Have(4, trueHash(4)));
    List<Decision<String>> later = tick(a);
    assertThat(requests(later)).containsExactly("b:4");
    assertThat(a.present().get(5)).isTrue();
    assertThat(a.resumedPending()).isZero();
  }

  @Test
  void aKeptPieceWhoseReaderAnnouncesAnotherHashIsDroppedAndFetchedOnceFromThatReader() {
    SwarmPolicy<String> a = member("a", ABC, 6, 1024);
    BitSet held = pieces(5, 6);
    // Piece 5's bytes in a's store are not the ones its reader b announces.
    a.resume(held, hashesOf(held, i -> i == 5 ? forgedHash(5) : trueHash(i)));
    a.onConnected("c-b", "b");
    a.onConnected("c-c", "c");
    a.onFrame("c-b", "b", bitfield(range(4, 8)));
    a.onFrame("c-c", "c", bitfield());
    List<Decision<String>> ds = a.drain();
    assertThat(kept(ds)).containsExactly(6);
    assertThat(notes(ds))
        .anyMatch(
            n ->
                n.startsWith("piece 5 kept from an earlier fill has sha256 ")
                    && n.endsWith(
                        "but its reader b announced "
                            + hex(trueHash(5))
                            + "; dropped and fetched again"));
    assertThat(only(ds, Decision.Drop.class)).as("the reader is believed, not dropped").isEmpty();
    assertThat(a.resumedPending()).isZero();

    List<String> asked = requests(tick(a));
    assertThat(asked).contains("b:5").doesNotContain("b:6");
    assertThat(a.onPieceArrived("c-b", "b", 5)).isTrue();
    assertThat(a.expectedHash(5)).isEqualTo(trueHash(5));
    assertThat(a.onPieceVerified(5)).isTrue();
    assertThat(a.onPieceStored("b", 5, trueHash(5))).isTrue();
    assertThat(requests(tick(a))).doesNotContain("b:5");
    assertThat(a.present().get(5)).isTrue();
  }

  @Test
  void aMemberAloneKeepsEveryPieceItHoldsAndCompletesWithoutReading() {
    SwarmPolicy<String> a = alone("a", 4, 4 * 1024);
    BitSet held = new BitSet();
    held.set(0, MAP.size());
    held.clear(9);
    a.resume(held, hashesOf(held, SwarmPolicyTest::trueHash));
    List<Decision<String>> ds = tick(a);
    assertThat(kept(ds)).hasSize(MAP.size() - 1);
    assertThat(runs(ds)).containsExactly(new Run(9, 1));
  }

  @Test
  void resumeIsRefusedOnceAPeerConnected() {
    SwarmPolicy<String> a = member("a", ABC, 6, 1024);
    a.onConnected("c-b", "b");
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> a.resume(pieces(1), hashesOf(pieces(1), SwarmPolicyTest::trueHash)))
        .isInstanceOf(IllegalStateException.class);
  }

  private static String hex(byte[] b) {
    return java.util.HexFormat.of().formatHex(b);
  }

  // ------------------------------------------------------------------ connections and serving

  @Test
  void aNewConnectionGetsThisMembersReadingMarksAndThenItsBitfield() {
    SwarmPolicy<String> a = aWithPeersHolding(new int[0], new int[0]);
    List<Run> reading = runs(tick(a));
    a.onPieceStored(null, 0, trueHash(0));
    a.drain();
    a.onDisconnected("c-b", "b");
    a.onConnected("c-b2", "b");
    List<Frame> frames = framesTo(a.drain(), "c-b2");
    assertThat(frames.get(frames.size() - 1))
        .isInstanceOfSatisfying(
            Frame.Bitfield.class,
            b -> {
              assertThat(b.have().stream().toArray()).containsExactly(0);
              assertThat(b.sha256()[0]).isEqualTo(trueHash(0));
            });
    assertThat(frames.subList(0, frames.size() - 1))
        .allMatch(f -> f instanceof Frame.Reading)
        .hasSize(reading.size() - 1);
  }

  @Test
  void requestsAreServedRejectedOrRefusedAndAFloodIsCutOff() {
    SwarmPolicy<String> a =
        new SwarmPolicy<>(new SwarmPolicy.Config("a", TIMEOUT, 4, Duration.ZERO), () -> now);
    a.applyMembership(ABC);
    byte[][] h = new byte[12][];
    for (int i = 0; i < 12; i++) {
      h[i] = trueHash(i);
    }
    a.holdComplete(MAP, h);
    a.transportStarted();
    a.onConnected("c-b", "b");
    a.drain();

    a.onFrame("c-b", "b", new Frame.Request(3));
    assertThat(a.drain()).containsExactly(new Decision.SendPiece<>("c-b", 3, h[3]));
    a.onPieceSent("c-b", "b");
    for (int k = 1; k < SwarmPolicy.MAX_QUEUED_SENDS; k++) {
      a.onFrame("c-b", "b", new Frame.Request(3));
    }
    // Piece 3's upload slots go out at once; the other requests wait for them, still queued.
    assertThat(only(a.drain(), Decision.SendPiece.class)).hasSize(SwarmPolicy.UPLOAD_SLOTS);
    a.onFrame("c-b", "b", new Frame.Request(3));
    assertThat(a.drain()).isEmpty();
    a.onFrame("c-b", "b", new Frame.Request(3));
    assertThat(a.drain())
        .containsExactly(
            new Decision.Close<>(
                "c-b",
                "REQUEST for piece 3 while 256 requested pieces are still queued unread (limit"
                    + " 256)"));
    a.onFrame("c-b", "b", new Frame.Request(3));
    assertThat(a.drain()).as("the cut connection's remaining requests").isEmpty();

    a.onFrame("c-b", "b", new Frame.Request(12));
    assertThat(a.drain())
        .containsExactly(new Decision.Close<>("c-b", "REQUEST for piece 12 outside 0..11"));

    a.applyMembership(membership("ac", "a", "c"));
    assertThat(only(a.drain(), Decision.Close.class))
        .containsExactly(
            new Decision.Close<>(
                "c-b", "not a member at the address it authenticated with in membership ac"));
  }

  @Test
  void aFillNotYetHoldingAPieceRejectsARequestForIt() {
    SwarmPolicy<String> a = aWithPeersHolding(new int[0], new int[0]);
    a.onFrame("c-b", "b", new Frame.Request(9));
    assertThat(a.drain())
        .containsExactly(new Decision.Send<>("c-b", new Frame.Reject(9, "piece not held")));
  }

  @Test
  void aRejectedRequestIsAskedElsewhere() {
    SwarmPolicy<String> a = aWithPeersHolding(range(4, 8), range(4, 8));
    List<String> asked = requests(tick(a));
    String atB = asked.stream().filter(r -> r.startsWith("b:")).findFirst().orElseThrow();
    int piece = Integer.parseInt(atB.substring(2));
    a.onFrame("c-b", "b", new Frame.Reject(piece, "piece not held"));
    a.drain();
    assertThat(requests(tick(a))).contains("c:" + piece);
  }

  @Test
  void aMembershipIsAppliedOnceDialsTheHigherIdsAndDropsWhatLeftOrMoved() {
    SwarmPolicy<String> b =
        new SwarmPolicy<>(new SwarmPolicy.Config("b", TIMEOUT, 4, Duration.ZERO), () -> now);
    b.transportStarted();
    assertThat(b.applyMembership(ABC)).isTrue();
    List<Decision<String>> ds = b.drain();
    assertThat(only(ds, Decision.Dial.class))
        .containsExactly(new Decision.Dial<>("c", ABC.member("c").address()));
    assertThat(b.applyMembership(ABC)).isFalse();
    assertThat(b.drain()).isEmpty();

    b.onConnected("c-a", "a");
    b.onConnected("c-c", "c");
    b.drain();
    Membership moved =
        new Membership(
            "moved",
            List.of(
                ABC.member("a"),
                ABC.member("b"),
                new Membership.Member("c", InetSocketAddress.createUnresolved("10.9.9.9", 8472))));
    b.applyMembership(moved);
    ds = b.drain();
    assertThat(only(ds, Decision.Close.class))
        .containsExactly(
            new Decision.Close<>(
                "c-c", "not a member at the address it authenticated with in membership moved"));
    assertThat(only(ds, Decision.Dial.class))
        .containsExactly(new Decision.Dial<>("c", moved.member("c").address()));

    b.applyMembership(membership("ab", "a", "b"));
    assertThat(only(b.drain(), Decision.Forget.class)).containsExactly(new Decision.Forget<>("c"));
    b.onConnected("c-z", "z");
    assertThat(b.drain())
        .containsExactly(new Decision.Close<>("c-z", "not a member of the current membership"));
  }

  // ------------------------------------------------------------------ leaving, hand-over, backing

  /** {@code b} of {a, b, c}, with a and c connected and their BITFIELDs in. */
  private SwarmPolicy<String> bWithPeersHolding(int[] aHolds, int[] cHolds, long rangeSize) {
    SwarmPolicy<String> b = member("b", ABC, 6, rangeSize);
    b.onConnected("c-a", "a");
    b.onConnected("c-c", "c");
    b.onFrame("c-a", "a", bitfield(aHolds));
    b.onFrame("c-c", "c", bitfield(cHolds));
    b.drain();
    return b;
  }

  /** {@code run}, read from the source by {@code p}: each piece stored, then the run ended. */
  private static void readRun(SwarmPolicy<String> p, Run run) {
    for (int i = run.first(); i < run.first() + run.count(); i++) {
      p.onPieceStored(null, i, trueHash(i));
    }
    p.onSourceRunEnded(run, true);
  }

  /** Pieces 8-11, asked of c, arrive from it and are stored (c's block, which it holds). */
  private void fetchFromC(SwarmPolicy<String> b) {
    for (int round = 0; round < 3; round++) {
      for (int i = 8; i < 12; i++) {
        if (!b.present().get(i) && b.onPieceArrived("c-c", "c", i)) {
          b.onPieceStored("c", i, trueHash(i));
        }
      }
      tick(b);
    }
    assertThat(b.present().get(8, 12).cardinality()).isEqualTo(4);
    b.drain();
  }

  private static List<String> handovers(List<Decision<String>> ds, String conn) {
    return framesTo(ds, conn).stream()
        .filter(f -> f instanceof Frame.Handover)
        .map(f -> ((Frame.Handover) f).member())
        .toList();
  }

  @Test
  void aMemberWhoseLoadFailedForGoodHandsOverItselfAndStopsReadingAndServing() {
    SwarmPolicy<String> a = aWithPeersHolding(new int[0], new int[0]);
    assertThat(runs(tick(a))).isNotEmpty();
    a.leave("AccessDenied: reading a/0 from the source");
    List<Decision<String>> ds = a.drain();
    assertThat(handovers(ds, "c-b")).containsExactly("a");
    assertThat(handovers(ds, "c-c")).containsExactly("a");
    assertThat(a.handedOver()).containsKey("a");
    assertThat(runs(tick(a))).as("a stopped").isEmpty();
    a.onFrame("c-b", "b", new Frame.Request(0));
    assertThat(framesTo(a.drain(), "c-b")).singleElement().isInstanceOf(Frame.Reject.class);
  }

  @Test
  void aHandoverFromAPeerReSplitsTheMembersShareAtOnceWithoutWaitingForThePeerTimeout() {
    SwarmPolicy<String> b = bWithPeersHolding(new int[0], new int[0], 4 * 1024);
    assertThat(runs(tick(b))).containsExactly(new Run(4, 4));
    readRun(b, new Run(4, 4));
    // a's load failed for good: it tells everyone before it closes its port.
    b.onFrame("c-a", "a", new Frame.Handover("a", "its load failed for good: AccessDenied"));
    List<Decision<String>> ds = tick(b);
    assertThat(notes(ds))
        .anyMatch(n -> n.startsWith("member a's share of the source reads is handed over"));
    // a's block 0-3 is re-split over {b, c}: 0, 1 to b.
    assertThat(runs(ds)).containsExactly(new Run(0, 2));
    assertThat(handovers(ds, "c-c")).as("passed on once").containsExactly("a");
    b.onFrame("c-c", "c", new Frame.Handover("a", "its load failed for good: AccessDenied"));
    assertThat(handovers(tick(b), "c-c")).as("not passed on again").isEmpty();
    // A connection opened later learns the hand-over before the BITFIELD.
    b.onConnected("c-c2", "c");
    List<Frame> toC = framesTo(b.drain(), "c-c2");
    assertThat(toC).last().isInstanceOf(Frame.Bitfield.class);
    assertThat(toC)
        .filteredOn(f -> f instanceof Frame.Handover)
        .singleElement()
        .isEqualTo(new Frame.Handover("a", "its load failed for good: AccessDenied"));
  }

  @Test
  void aConnectedMemberThatAnnouncesNoneOfItsShareForThreePeerTimeoutsLosesItToTheOthers() {
    // c holds its block; a stays connected (keep-alives only) and never reads its block 0-3.
    SwarmPolicy<String> b = bWithPeersHolding(new int[0], range(8, 12), 4 * 1024);
    assertThat(runs(tick(b))).containsExactly(new Run(4, 4));
    readRun(b, new Run(4, 4));
    fetchFromC(b);
    advance(SwarmPolicy.SHARE_STALL_TIMEOUTS * T - 1);
    List<Decision<String>> before = tick(b);
    assertThat(handovers(before, "c-c")).isEmpty();
    assertThat(runs(before)).isEmpty();

    advance(2);
    List<Decision<String>> ds = tick(b);
    assertThat(handovers(ds, "c-a")).containsExactly("a");
    assertThat(handovers(ds, "c-c")).containsExactly("a");
    assertThat(b.handedOver().get("a"))
        .isEqualTo("announced none of the 4 pieces it reads from the source within PT3S");
    // c holds its own block, so a's whole block 0-3 goes to b, the only live member lacking it.
    assertThat(runs(ds)).containsExactly(new Run(0, 2));
    assertThat(b.handedOver()).doesNotContainKey("c");
  }

  @Test
  void aMemberThatFinishedItsShareGetsAFreshStallTimeoutForPiecesReSplitToIt() {
    // c announced its whole block at the start, then had nothing to read; when a's share is
    // handed over, c's part of it is new work, not a share c sat on for three peer timeouts.
    SwarmPolicy<String> b = bWithPeersHolding(new int[0], range(8, 12), 4 * 1024);
    tick(b);
    readRun(b, new Run(4, 4));
    fetchFromC(b);
    advance(SwarmPolicy.SHARE_STALL_TIMEOUTS * T + 1);
    assertThat(handovers(tick(b), "c-c")).containsExactly("a");
    advance(1);
    tick(b);
    assertThat(b.handedOver())
        .as("c just became the reader of part of a's block")
        .doesNotContainKey("c");
  }

  @Test
  void aMemberThatAnnouncesAPieceOfItsShareWithinTheStallTimeoutKeepsIt() {
    SwarmPolicy<String> b = bWithPeersHolding(new int[0], range(8, 12), 4 * 1024);
    tick(b);
    readRun(b, new Run(4, 4));
    fetchFromC(b);
    advance(2 * T);
    b.onFrame("c-a", "a", new Frame.Have(0, trueHash(0)));
    advance(2 * T);
    List<Decision<String>> ds = tick(b);
    assertThat(handovers(ds, "c-c")).isEmpty();
    assertThat(b.handedOver()).isEmpty();
    assertThat(runs(ds)).isEmpty();
  }

  @Test
  void noShareIsHandedOverWhileThisMembersOwnSourceReadsAreStalledToo() {
    // The source is down for everyone: b's own run makes no progress either.
    SwarmPolicy<String> b = bWithPeersHolding(new int[0], range(8, 12), 4 * 1024);
    assertThat(runs(tick(b))).containsExactly(new Run(4, 4));
    fetchFromC(b);
    for (int k = 0; k < 8; k++) {
      advance(T);
      tick(b);
    }
    assertThat(b.handedOver()).isEmpty();
    // The source is back: b stores a piece, and a, which still announced nothing, loses its share.
    b.onPieceStored(null, 4, trueHash(4));
    assertThat(handovers(tick(b), "c-c")).containsExactly("a");
  }

  /**
   * {@code b} of {a, b, c}: b read its block 4-7, a announced its block 0-3, c announced piece 8 of
   * its block 8-11 and is reading piece 9.
   */
  private SwarmPolicy<String> bWhileCLags() {
    SwarmPolicy<String> b = bWithPeersHolding(new int[0], new int[0], 4 * 1024);
    assertThat(runs(tick(b))).containsExactly(new Run(4, 4));
    readRun(b, new Run(4, 4));
    for (int i = 0; i < 4; i++) {
      b.onFrame("c-a", "a", new Frame.Have(i, trueHash(i)));
    }
    b.onFrame("c-c", "c", new Frame.Reading(8));
    b.onFrame("c-c", "c", new Frame.Have(8, trueHash(8)));
    b.onFrame("c-c", "c", new Frame.Reading(9));
    b.drain();
    return b;
  }

  @Test
  void aMemberWhoseShareProgressesFarSlowerThanTheOthersHandsItsUnreadPiecesOver() {
    SwarmPolicy<String> b = bWhileCLags();
    advance(T / 2);
    List<Decision<String>> first = tick(b);
    assertThat(handovers(first, "c-c")).as("slow for half a peer timeout first").isEmpty();
    assertThat(runs(first)).isEmpty();

    advance(T / 2);
    b.onFrame("c-c", "c", new Frame.Reading(9)); // c's read of piece 9 goes on
    List<Decision<String>> ds = tick(b);
    assertThat(handovers(ds, "c-a")).containsExactly("c");
    assertThat(handovers(ds, "c-c")).containsExactly("c");
    assertThat(b.handedOver().get("c"))
        .isEqualTo(
            "slow: announced 1 pieces of its share while the median member announced 4; its 3"
                + " pieces nobody holds yet go to the others");
    // c's block 8-11 is re-split over {a, b}: 8, 9 to a, 10, 11 to b. c keeps piece 9, which it
    // is still reading: b reads 10 and 11 only.
    assertThat(runs(ds)).containsExactly(new Run(10, 2));
  }

  /**
   * A member whose share lags while it holds as much as the others is not slow: connections that
   * start later get a smaller slice of a shared origin for a while, and the member takes more from
   * its peers meanwhile. Handing its share over would pile the reads onto fewer uplinks (the netns
   * bench at N = 4 handed two of four shares over 10 s into the load this way).
   */
  @Test
  void aMemberWhoseShareLagsButThatHoldsAsMuchAsTheOthersKeepsIt() {
    SwarmPolicy<String> b = bWhileCLags();
    // c got the others' blocks from its peers: 9 pieces held against a's and b's 4.
    for (int i = 0; i < 8; i++) {
      b.onFrame("c-c", "c", new Frame.Have(i, trueHash(i)));
    }
    b.drain();
    for (int k = 0; k < 4; k++) {
      advance(T / 2);
      b.onFrame("c-c", "c", new Frame.Reading(9));
      List<Decision<String>> ds = tick(b);
      assertThat(handovers(ds, "c-c")).isEmpty();
      assertThat(runs(ds)).isEmpty();
    }
    assertThat(b.handedOver()).isEmpty();
  }

  /** 48 pieces of 1 KiB in two files: with {a, b, c} the blocks are a 0-15, b 16-31, c 32-47. */
  private static final PieceMap MAP48 =
      new PieceMap(List.of(new StoreFile("a", 32 * 1024), new StoreFile("b", 16 * 1024)), 1024);

  /** An empty BITFIELD for {@link #MAP48}. */
  private static Frame.Bitfield none48() {
    return new Frame.Bitfield(MAP48.size(), new BitSet(), new byte[MAP48.size()][]);
  }

  /**
   * {@code c} of {a, b, c} on {@link #MAP48}, one run of 8 pieces at a time, half a peer timeout
   * into a window of holdings counts: in it c stored 8 pieces of its share (32-39) and {@code
   * fromPeers} pieces from its peers, while a and b announced 10 of their shares each and 10 of
   * each other's (20 pieces each). c's share lags a's and b's by 2 pieces, within the slow rule's
   * margin.
   */
  private SwarmPolicy<String> cBehindInAWindow(int fromPeers) {
    SwarmPolicy<String> c =
        new SwarmPolicy<>(
            new SwarmPolicy.Config("c", TIMEOUT, 4, Duration.ofSeconds(3)), () -> now);
    c.applyMembership(ABC);
    c.startFill(MAP48, 3, 8 * 1024);
    c.transportStarted();
    c.onConnected("c-a", "a");
    c.onConnected("c-b", "b");
    c.onFrame("c-a", "a", none48());
    c.onFrame("c-b", "b", none48());
    c.drain();
    assertThat(runs(tick(c))).containsExactly(new Run(32, 8));
    advance(T / 2);
    assertThat(requests(tick(c))).isEmpty(); // the window starts: nobody holds anything
    readRun(c, new Run(32, 8));
    for (int i = 0; i < 10; i++) {
      for (String x : List.of("a", "b")) {
        c.onFrame(("c-" + x).intern(), x, new Frame.Have(i, trueHash(i)));
        c.onFrame(("c-" + x).intern(), x, new Frame.Have(16 + i, trueHash(16 + i)));
      }
    }
    for (int k = 0; k < fromPeers; k++) {
      int i = k < 10 ? k : 16 + k - 10;
      c.onPieceStored("a", i, trueHash(i));
    }
    c.drain();
    advance(T / 2);
    return c;
  }

  /**
   * A member whose share lags and whose holdings grow slower than the others' is paced by its own
   * ingress, shared per flow by its source reads and its peer fetches: its own reads go first, with
   * half the peer requests in flight (4 of 8), so its share keeps the swarm's pace.
   */
  @Test
  void aMemberWhoseShareLagsAndWhoseHoldingsGrowSlowerKeepsFewerPeerRequestsInFlight() {
    SwarmPolicy<String> c = cBehindInAWindow(2); // 10 pieces gained against the others' 20
    List<Decision<String>> ds = tick(c);
    assertThat(runs(ds)).containsExactly(new Run(40, 8));
    assertThat(SwarmPolicy.maxTotalInFlight(4)).isEqualTo(8);
    assertThat(requests(ds))
        .as("peer requests beside its source read (8 before its own reads went first)")
        .hasSize(4);
  }

  /**
   * The same lag while its holdings grow as fast as the others' (a member that started later, or
   * whose slice of a shared origin is small, and takes more from its peers): its link is not what
   * paces it, and it keeps all its peer requests.
   */
  @Test
  void aMemberWhoseShareLagsButWhoseHoldingsGrowAsFastKeepsAllItsPeerRequests() {
    SwarmPolicy<String> c = cBehindInAWindow(12); // 20 pieces gained, as the others
    List<Decision<String>> ds = tick(c);
    assertThat(runs(ds)).containsExactly(new Run(40, 8));
    assertThat(requests(ds)).hasSize(8);
  }

  /** A member {@code self} with no membership and no fill yet. */
  private SwarmPolicy<String> unstarted(String self) {
    return new SwarmPolicy<>(
        new SwarmPolicy.Config(self, TIMEOUT, 4, Duration.ofSeconds(3)), () -> now);
  }

  /** {@code d} of {a, b, c, d} on {@link #MAP48}, concurrency 2, connected to all three. */
  private static void dOfFourConnected(SwarmPolicy<String> d) {
    d.applyMembership(membership("abcd", "a", "b", "c", "d"));
    d.startFill(MAP48, 2, 4 * 1024);
    d.transportStarted();
    for (String x : List.of("a", "b", "c")) {
      String conn = ("c-" + x).intern();
      d.onConnected(conn, x);
      d.onFrame(conn, x, none48());
    }
    d.drain();
  }

  /**
   * {@code d} of {a, b, c, d} on {@link #MAP48} (blocks a 0-11, b 12-23, c 24-35, d 36-47) with a
   * concurrency of 2: the swarm reads in turns, a and b first. Over half a peer timeout a and b
   * read their shares and fetch each other's, c fetches both (each gains 24 pieces), and d stores
   * {@code fromPeers} of them. Then a's and b's shares are held and the turn is c's and d's.
   */
  private List<Decision<String>> dWhenItsTurnComes(SwarmPolicy<String> d, int fromPeers) {
    dOfFourConnected(d);
    assertThat(runs(tick(d))).as("not d's turn yet").isEmpty();
    for (int i = 0; i < 24; i++) {
      for (String x : List.of("a", "b", "c")) {
        d.onFrame(("c-" + x).intern(), x, new Frame.Have(i, trueHash(i)));
      }
    }
    for (int i = 0; i < fromPeers; i++) {
      d.onPieceStored(i < 12 ? "a" : "b", i, trueHash(i));
    }
    d.drain();
    advance(T / 2);
    return tick(d);
  }

  /**
   * A member whose holdings grew by at most a third of the median member's when its reading turn
   * comes, before it read any of its share, hands its share over: read behind its slow ingress,
   * every member would wait for those pieces. The others read them (the HANDOVER makes them
   * re-plan).
   */
  @Test
  void aMemberWhoseIngressIsFarSlowerWhenItsReadingTurnComesHandsOverItsShareUnread() {
    SwarmPolicy<String> d = unstarted("d");
    List<Decision<String>> ds = dWhenItsTurnComes(d, 2); // 2 pieces gained against the others' 24
    assertThat(runs(ds)).as("nothing read behind its ingress").isEmpty();
    assertThat(d.handedOver()).containsOnlyKeys("d");
    assertThat(d.handedOver().get("d")).contains("its ingress is slow");
    for (String x : List.of("a", "b", "c")) {
      assertThat(handovers(ds, "c-" + x)).as("told to %s", x).containsExactly("d");
    }
  }

  /**
   * The control: holdings that grew by half the median member's (a slow ingress by the measure of
   * the own-reads-first rule, as members late in id order often show while the origin paces the
   * swarm) are not slow enough to give the share away; the member reads it.
   */
  @Test
  void aMemberWhoseIngressIsOnlyALittleSlowerReadsItsShareWhenItsTurnComes() {
    SwarmPolicy<String> d = unstarted("d");
    List<Decision<String>> ds = dWhenItsTurnComes(d, 12);
    assertThat(d.handedOver()).isEmpty();
    assertThat(runs(ds)).containsExactly(new Run(36, 4));
  }

  /**
   * A member whose link is that slow sends one copy at a time while the swarm reads in turns: each
   * copy leaves at its whole uplink, and the receivers pass the piece on, where four at once would
   * each take four times as long.
   */
  @Test
  void aMemberWhoseLinkIsFarSlowerSendsOneCopyAtATime() {
    SwarmPolicy<String> d = unstarted("d");
    dWhenItsTurnComes(d, 2);
    for (String x : List.of("a", "b", "c")) {
      d.onFrame(("c-" + x).intern(), x, new Frame.Request(0));
    }
    assertThat(pieceSends(d.drain())).containsExactly("a:0");
    // Requests that waited half a peer timeout go out beside it, but two copies of a piece at most
    // (twice its one slot, not twice four).
    advance(T / 2);
    d.onFrame("c-a", "a", new Frame.Request(1));
    assertThat(pieceSends(d.drain())).containsExactly("b:0");
    d.onPieceSent("c-a", "a");
    assertThat(pieceSends(d.drain())).containsExactly("c:0");

    SwarmPolicy<String> control = unstarted("d");
    dWhenItsTurnComes(control, 12);
    for (String x : List.of("a", "b", "c")) {
      control.onFrame(("c-" + x).intern(), x, new Frame.Request(0));
    }
    assertThat(pieceSends(control.drain())).containsExactly("a:0", "b:0", "c:0");
  }

  /**
   * The verdict of the last scheduling round does not outlive the member's completion (a complete
   * member's tick makes no more rounds): once it holds everything it sends as many copies as any.
   */
  @Test
  void aFarSlowerMemberThatCompletesSendsAsManyCopiesAsAnyMember() {
    SwarmPolicy<String> d = unstarted("d");
    dWhenItsTurnComes(d, 2);
    for (int i = 24; i < MAP48.size(); i++) {
      for (String x : List.of("a", "b", "c")) {
        d.onFrame(("c-" + x).intern(), x, new Frame.Have(i, trueHash(i)));
      }
    }
    for (int i = 2; i < MAP48.size(); i++) {
      d.onPieceStored("a", i, trueHash(i));
    }
    d.drain();
    assertThat(d.present().cardinality()).isEqualTo(MAP48.size());
    for (String x : List.of("a", "b", "c")) {
      d.onFrame(("c-" + x).intern(), x, new Frame.Request(5));
    }
    assertThat(pieceSends(d.drain())).containsExactly("a:5", "b:5", "c:5");
  }

  /**
   * A member ahead of the others gains only what is new to it: d stored the 20 pieces a and b
   * announced of their shares, then gained nothing in the next window while the others caught up
   * (14-24 pieces). Its growth is far below theirs, but it holds 20 against the median member's 24:
   * its link is not what paces it, so it reads its share when its turn comes and sends as many
   * copies as any member.
   */
  @Test
  void aMemberHoldingAboutAsMuchAsTheMedianIsNotFarSlowerForGainingLess() {
    SwarmPolicy<String> d = unstarted("d");
    dOfFourConnected(d);
    tick(d); // the first window starts
    for (int i = 0; i < 10; i++) {
      d.onFrame("c-a", "a", new Frame.Have(i, trueHash(i)));
      d.onFrame("c-b", "b", new Frame.Have(12 + i, trueHash(12 + i)));
      d.onPieceStored("a", i, trueHash(i));
      d.onPieceStored("b", 12 + i, trueHash(12 + i));
    }
    d.drain();
    advance(T / 2);
    assertThat(runs(tick(d))).as("a's and b's turn").isEmpty(); // d gained 20, a, b 10, c 0
    for (int i : new int[] {10, 11}) {
      d.onFrame("c-a", "a", new Frame.Have(i, trueHash(i)));
    }
    for (int i : new int[] {22, 23}) {
      d.onFrame("c-b", "b", new Frame.Have(i, trueHash(i)));
    }
    for (int i = 0; i < 24; i++) {
      String x = i < 12 ? "b" : "a";
      d.onFrame(("c-" + x).intern(), x, new Frame.Have(i, trueHash(i)));
      d.onFrame("c-c", "c", new Frame.Have(i, trueHash(i)));
    }
    d.drain();
    advance(T / 2);
    List<Decision<String>> ds = tick(d); // d gained nothing, a and b 14 each, c 24
    assertThat(d.handedOver()).isEmpty();
    assertThat(runs(ds)).containsExactly(new Run(36, 4));
    for (String x : List.of("a", "b", "c")) {
      d.onFrame(("c-" + x).intern(), x, new Frame.Request(0));
    }
    assertThat(pieceSends(d.drain())).containsExactly("a:0", "b:0", "c:0");
  }

  @Test
  void aSlowMemberThatCatchesUpWithinHalfAPeerTimeoutKeepsItsShare() {
    SwarmPolicy<String> b = bWhileCLags();
    advance(T / 2);
    tick(b);
    b.onFrame("c-c", "c", new Frame.Have(9, trueHash(9)));
    b.onFrame("c-c", "c", new Frame.Reading(10));
    b.onFrame("c-c", "c", new Frame.Have(10, trueHash(10)));
    advance(T / 2);
    List<Decision<String>> ds = tick(b);
    assertThat(b.handedOver()).isEmpty();
    assertThat(runs(ds)).isEmpty();
  }

  @Test
  void aHandedOverMemberStillReadingItsRunKeepsThosePiecesWhileItProgresses() {
    // a of {a, b, c} read its block 0-3; b holds its block 4-7, c holds piece 8 of its block and
    // is reading piece 9 when b hands c over.
    SwarmPolicy<String> a = member("a", ABC, 6, 4 * 1024);
    a.onConnected("c-b", "b");
    a.onConnected("c-c", "c");
    a.onFrame("c-b", "b", bitfield(range(4, 8)));
    a.onFrame("c-c", "c", bitfield(8));
    assertThat(runs(tick(a))).containsExactly(new Run(0, 4));
    readRun(a, new Run(0, 4));
    a.onFrame("c-c", "c", new Frame.Reading(9));
    a.onFrame("c-b", "b", new Frame.Handover("c", "slow"));
    a.drain();
    // c's block is re-split over {a, b}: 8, 9 to a; 8 is held and 9 is c's read in flight.
    assertThat(runs(tick(a))).isEmpty();
    // Once c stalls for the stall timeout its mark does not hold a back any more.
    for (int k = 0; k < 2 * SwarmPolicy.SHARE_STALL_TIMEOUTS; k++) {
      advance(T / 2);
      a.onFrame("c-c", "c", new Frame.Reading(9));
      tick(a);
    }
    advance(T / 2);
    a.onFrame("c-c", "c", new Frame.Reading(9));
    assertThat(runs(tick(a))).containsExactly(new Run(9, 1));
  }

  @Test
  void aMemberThatJoinsDoesNotReadAPieceAnotherMemberIsReading() {
    // d joins {a, b, c}: blocks of 3 over {a, b, c, d}, so d's block is 9-11, but c is still
    // reading piece 9, which it started when its block was 8-11; it says so before its BITFIELD.
    SwarmPolicy<String> d = member("d", membership("abcd", "a", "b", "c", "d"), 6, 4 * 1024);
    d.onConnected("c-a", "a");
    d.onConnected("c-b", "b");
    d.onConnected("c-c", "c");
    d.onFrame("c-a", "a", bitfield());
    d.onFrame("c-b", "b", bitfield());
    d.onFrame("c-c", "c", new Frame.Reading(9));
    d.onFrame("c-c", "c", bitfield(8));
    d.drain();
    assertThat(runs(tick(d))).containsExactly(new Run(10, 2));

    d.onFrame("c-c", "c", new Frame.Have(9, trueHash(9)));
    assertThat(d.expectedHash(9)).as("c's hash is piece 9's").isEqualTo(trueHash(9));
    assertThat(requests(tick(d))).contains("c:9");
  }

  @Test
  void aHandoverNamingThisMemberMakesItReadNothingMoreForThePlan() {
    SwarmPolicy<String> b = bWithPeersHolding(new int[0], new int[0], 4 * 1024);
    b.onFrame("c-c", "c", new Frame.Handover("b", "announced none of the 4 pieces"));
    b.drain();
    assertThat(runs(tick(b))).isEmpty();
    // It still fetches what the others hold.
    b.onFrame("c-a", "a", new Frame.Have(0, trueHash(0)));
    assertThat(requests(tick(b))).containsExactly("a:0");
  }

  @Test
  void aReaderWhosePieceDoesNotHashToItsOwnAnnouncementIsDroppedAtOnceAndItsHashesWithdrawn() {
    // a is the reader of 0-3 and announces forged hashes it cannot back; c holds piece 2 too
    // (announced with the true hash: a claim while a's hash stands, so c is not dropped).
    SwarmPolicy<String> b = member("b", ABC, 6, 1024);
    b.onConnected("c-a", "a");
    b.onConnected("c-c", "c");
    BitSet all = new BitSet();
    all.set(0, 4);
    byte[][] forged = new byte[MAP.size()][];
    for (int i = 0; i < 4; i++) {
      forged[i] = forgedHash(i);
    }
    b.onFrame("c-a", "a", new Frame.Bitfield(MAP.size(), all, forged));
    b.onFrame("c-c", "c", bitfield(2));
    b.drain();
    assertThat(b.expectedHash(2)).isEqualTo(forgedHash(2));
    assertThat(only(b.drain(), Decision.Drop.class)).isEmpty();
    List<Decision<String>> first = tick(b);
    assertThat(requests(first)).contains("a:0");

    b.onPieceHashMismatch("a", 0, trueHash(0));
    List<Decision<String>> ds = b.drain();
    assertThat(only(ds, Decision.Drop.class))
        .singleElement()
        .satisfies(
            d -> {
              assertThat(d.peer()).isEqualTo("a");
              assertThat(d.why())
                  .startsWith(
                      "announced piece 0 with sha256 "
                          + java.util.HexFormat.of().formatHex(forgedHash(0))
                          + " but sent bytes with sha256 "
                          + java.util.HexFormat.of().formatHex(trueHash(0)));
            });
    assertThat(b.expectedHash(0)).isNull();
    assertThat(b.dropped()).extracting(d -> d.id()).containsExactly("a");
    // a is not live: its block goes to b (0, 1) and c (2, 3). c's hash for 2 is now the
    // reader's, c a holder that b asks, and b reads 0 and 1 once from the source.
    runs(first).forEach(r -> b.onSourceRunEnded(r, false)); // b's own reads, ended unfinished
    List<Decision<String>> next = tick(b);
    assertThat(b.expectedHash(2)).isEqualTo(trueHash(2));
    assertThat(requests(next)).contains("c:2");
    // With two live members, one run at a time (sourceReadsInFlight): 0, then 1.
    assertThat(runs(next)).extracting(Run::first).containsExactly(0);
    readRun(b, new Run(0, 1));
    assertThat(runs(tick(b))).extracting(Run::first).containsExactly(1);
    assertThat(b.dropped()).extracting(d -> d.id()).containsExactly("a");
  }

  @Test
  void aPieceVerifiedAgainstAHashWithdrawnMeanwhileIsNotTakenAsPresent() {
    SwarmPolicy<String> b = member("b", ABC, 6, 1024);
    b.onConnected("c-a", "a");
    b.onConnected("c-c", "c");
    b.onFrame("c-a", "a", new Frame.Have(1, forgedHash(1)));
    b.onFrame("c-a", "a", new Frame.Have(0, forgedHash(0)));
    b.onFrame("c-a", "a", bitfield());
    b.onFrame("c-c", "c", bitfield());
    b.drain();
    assertThat(requests(tick(b))).contains("a:0", "a:1");
    b.onPieceHashMismatch("a", 0, trueHash(0));
    b.drain();
    // Piece 1 was verified against a's forged hash before a was dropped.
    assertThat(b.onPieceStored("a", 1, forgedHash(1))).isFalse();
    assertThat(b.present().get(1)).isFalse();
  }

  // ------------------------------------------------------------------ a late joiner

  /**
   * {@code c} of {a, b, c} joins after a and b hold everything: its block (8-11, all of file b) is
   * claimed by both with the true hashes; {@code verifiable} says whether the source publishes a
   * digest for the files.
   */
  private SwarmPolicy<String> lateC(boolean verifiable) {
    SwarmPolicy<String> c = member("c", ABC, 6, 4 * 1024);
    if (verifiable) {
      BitSet all = new BitSet();
      all.set(0, MAP.size());
      c.verifiable(all);
    }
    c.onConnected("c-a", "a");
    c.onConnected("c-b", "b");
    c.onFrame("c-a", "a", bitfield(range(0, 12)));
    c.onFrame("c-b", "b", bitfield(range(0, 12)));
    c.drain();
    return c;
  }

  /** Every requested piece arrives and is stored, for a few rounds; the decisions of them all. */
  private List<Decision<String>> deliverRequested(SwarmPolicy<String> c) {
    List<Decision<String>> all = new ArrayList<>();
    for (int round = 0; round < 6; round++) {
      List<Decision<String>> ds = tick(c);
      all.addAll(ds);
      for (String r : requests(ds)) {
        String peer = r.substring(0, r.indexOf(':'));
        int piece = Integer.parseInt(r.substring(r.indexOf(':') + 1));
        assertThat(c.onPieceArrived(peer.equals("a") ? "c-a" : "c-b", peer, piece)).isTrue();
        assertThat(c.expectedHash(piece)).isEqualTo(trueHash(piece));
        c.onPieceStored(peer, piece, trueHash(piece));
        all.addAll(c.drain());
      }
    }
    return all;
  }

  @Test
  void aLateJoinerFetchesItsBlockOnTheOthersClaimsAndAnnouncesItOnceItsFileMatchesTheSource() {
    SwarmPolicy<String> c = lateC(true);
    List<Decision<String>> ds = deliverRequested(c);
    assertThat(runs(ds)).as("nothing read from the source").isEmpty();
    assertThat(requests(ds)).hasSize(12);
    assertThat(c.present().get(8, 12).cardinality())
        .as("claimed pieces wait for their file's check")
        .isZero();
    assertThat(only(ds, Decision.CheckFile.class))
        .singleElement()
        .satisfies(
            f -> {
              assertThat(f.first()).isEqualTo(8);
              assertThat(f.count()).isEqualTo(4);
            });
    assertThat(c.complete()).isFalse();
    c.onFileChecked(8, true);
    List<Decision<String>> checked = c.drain();
    assertThat(only(checked, Decision.Confirmed.class).stream().map(Decision.Confirmed::piece))
        .containsExactly(8, 9, 10, 11);
    assertThat(haves(framesTo(checked, "c-a"))).containsExactly(8, 9, 10, 11);
    assertThat(c.expectedHash(8)).isEqualTo(trueHash(8));
    assertThat(c.complete()).isTrue();
    assertThat(c.dropped()).isEmpty();
  }

  @Test
  void claimedPiecesWhoseFileFailsTheSourcesDigestAreReadFromTheSourceOnceAndALiarIsDropped() {
    SwarmPolicy<String> c = member("c", ABC, 6, 4 * 1024);
    BitSet all = new BitSet();
    all.set(0, MAP.size());
    c.verifiable(all);
    c.onConnected("c-a", "a");
    c.onConnected("c-b", "b");
    // a and b both claim forged hashes for c's block and serve matching bytes (two liars that
    // agree): only the file's check against the source's digest catches it.
    BitSet have = new BitSet();
    have.set(0, 12);
    byte[][] h = new byte[MAP.size()][];
    for (int i = 0; i < 12; i++) {
      h[i] = i >= 8 ? forgedHash(i) : trueHash(i);
    }
    Frame.Bitfield forged = new Frame.Bitfield(MAP.size(), have, h);
    c.onFrame("c-a", "a", forged);
    c.onFrame("c-b", "b", forged);
    c.drain();
    for (int round = 0; round < 6; round++) {
      List<Decision<String>> ds = tick(c);
      for (String r : requests(ds)) {
        String peer = r.substring(0, r.indexOf(':'));
        int piece = Integer.parseInt(r.substring(r.indexOf(':') + 1));
        assertThat(c.onPieceArrived(peer.equals("a") ? "c-a" : "c-b", peer, piece)).isTrue();
        byte[] sent = piece >= 8 ? forgedHash(piece) : trueHash(piece);
        c.onPieceStored(peer, piece, sent);
        c.drain();
      }
    }
    c.onFileChecked(8, false);
    assertThat(notes(c.drain()))
        .anyMatch(
            n -> n.startsWith("b: the 4 pieces fetched from peers on their claim do not match"));
    List<Decision<String>> ds = tick(c);
    assertThat(runs(ds)).containsExactly(new Run(8, 4));
    for (int i = 8; i < 12; i++) {
      c.onPieceStored(null, i, trueHash(i));
    }
    assertThat(c.complete()).isTrue();
    assertThat(c.dropped())
        .extracting(io.tensorcast.api.wire.DataPlaneStatus.DroppedPeer::id)
        .containsExactlyInAnyOrder("a", "b");
    assertThat(runs(tick(c))).isEmpty();
  }

  @Test
  void withoutASourceDigestOrWhenAMemberStillNeedsThePieceTheReaderReadsItsBlock() {
    // No digest to check the file with: the claims are of no use, c reads its block.
    assertThat(runs(deliverRequested(lateC(false)))).containsExactly(new Run(8, 4));
    // b does not hold c's block yet: b waits for c's announcement, so c reads it.
    SwarmPolicy<String> c = member("c", ABC, 6, 4 * 1024);
    BitSet all = new BitSet();
    all.set(0, MAP.size());
    c.verifiable(all);
    c.onConnected("c-a", "a");
    c.onConnected("c-b", "b");
    c.onFrame("c-a", "a", bitfield(range(0, 12)));
    c.onFrame("c-b", "b", bitfield(range(4, 8)));
    c.drain();
    assertThat(runs(deliverRequested(c))).containsExactly(new Run(8, 4));
  }

  /**
   * {@code d} joins {a, b, c} after c read its old block 8-11 (all of file b) and a fetched it: in
   * {a, b, c, d} d is the reader of 9-11, which c and a claim while b does not hold them (b still
   * needs them and trusts c's hash from before d joined). Two members claiming a piece with one
   * hash means it spread on a reader's word: d fetches it on the claims and checks the file against
   * the source's digest instead of reading it again (it read 9-11 before this rule).
   */
  @Test
  void aNewcomerFetchesPiecesOfItsBlockThatSpreadBeforeItJoinedAndChecksTheirFile() {
    Membership abcd = membership("abcd", "a", "b", "c", "d");
    SwarmPolicy<String> d = member("d", abcd, 6, 4 * 1024);
    BitSet all = new BitSet();
    all.set(0, MAP.size());
    d.verifiable(all);
    d.onConnected("c-a", "a");
    d.onConnected("c-b", "b");
    d.onConnected("c-c", "c");
    d.onFrame("c-c", "c", bitfield(range(6, 12)));
    d.onFrame("c-a", "a", bitfield(0, 1, 2, 8, 9, 10, 11));
    d.onFrame("c-b", "b", bitfield(range(3, 6)));
    d.drain();
    List<Decision<String>> ds = deliverFromPeers(d);
    assertThat(runs(ds)).as("nothing read from the source").isEmpty();
    assertThat(d.present().get(9, 12).cardinality())
        .as("pieces fetched on claims wait for their file's check")
        .isZero();
    assertThat(only(ds, Decision.CheckFile.class))
        .singleElement()
        .satisfies(f -> assertThat(f.first()).isEqualTo(8));
    d.onFileChecked(8, true);
    List<Decision<String>> checked = d.drain();
    assertThat(only(checked, Decision.Confirmed.class).stream().map(Decision.Confirmed::piece))
        .containsExactly(9, 10, 11);
    assertThat(haves(framesTo(checked, "c-b"))).containsExactly(9, 10, 11);
    assertThat(d.complete()).isTrue();
    assertThat(d.dropped()).isEmpty();
  }

  /**
   * Every piece {@code p} requests arrives from the peer it asked (connection {@code c-<peer>})
   * with its true bytes and is stored, for a few rounds; the decisions of them all.
   */
  private List<Decision<String>> deliverFromPeers(SwarmPolicy<String> p) {
    List<Decision<String>> all = new ArrayList<>();
    for (int round = 0; round < 6; round++) {
      List<Decision<String>> got = tick(p);
      all.addAll(got);
      for (String r : requests(got)) {
        String peer = r.substring(0, r.indexOf(':'));
        int piece = Integer.parseInt(r.substring(r.indexOf(':') + 1));
        // Connections are compared by identity: the same (interned) string as onConnected's.
        assertThat(p.onPieceArrived(("c-" + peer).intern(), peer, piece)).isTrue();
        assertThat(p.expectedHash(piece)).isEqualTo(trueHash(piece));
        p.onPieceStored(peer, piece, trueHash(piece));
        all.addAll(p.drain());
      }
    }
    return all;
  }

  /**
   * The same newcomer while piece 8 of file b (c's) is not offered yet: 9-11 are neither read nor
   * fetched on the claims (the file's check would wait on it); once c announces 8 they are fetched
   * and the file checked.
   */
  @Test
  void aNewcomerWaitsForTheRestOfTheFileBeforeFetchingSpreadPiecesAndDoesNotReadThem() {
    Membership abcd = membership("abcd", "a", "b", "c", "d");
    SwarmPolicy<String> d = member("d", abcd, 6, 4 * 1024);
    BitSet all = new BitSet();
    all.set(0, MAP.size());
    d.verifiable(all);
    d.onConnected("c-a", "a");
    d.onConnected("c-b", "b");
    d.onConnected("c-c", "c");
    d.onFrame("c-c", "c", bitfield(6, 7, 9, 10, 11));
    d.onFrame("c-a", "a", bitfield(0, 1, 2, 9, 10, 11));
    d.onFrame("c-b", "b", bitfield(range(3, 6)));
    d.drain();
    List<Decision<String>> ds = deliverFromPeers(d);
    assertThat(runs(ds)).as("no source read of the spread pieces").isEmpty();
    assertThat(requests(ds).stream().map(r -> Integer.valueOf(r.substring(r.indexOf(':') + 1))))
        .as("pieces requested while piece 8 is not offered")
        .containsExactlyInAnyOrder(0, 1, 2, 3, 4, 5, 6, 7);
    d.onFrame("c-c", "c", new Frame.Have(8, trueHash(8)));
    d.drain();
    List<Decision<String>> later = deliverFromPeers(d);
    assertThat(runs(later)).isEmpty();
    assertThat(only(later, Decision.CheckFile.class))
        .singleElement()
        .satisfies(f -> assertThat(f.first()).isEqualTo(8));
  }

  /**
   * One peer holds a 96-piece file and delivers one piece per round to a member that keeps four
   * requests in flight: every piece counts one holder, so each request picks among the first {@link
   * SwarmPlan#TIE_WINDOW} missing pieces by the member's salt. Salts that never land on the
   * window's front (member "a" here: piece 50 was passed over for pieces up to 88) left the lowest
   * missing piece to the end, and the file's digest waited for it after the last byte; now no front
   * is passed over more than {@link SwarmPlan#FRONT_PATIENCE} times.
   */
  @Test
  void theLowestMissingPieceIsAskedForWithinFrontPatienceRequestsWhateverTheMembersId() {
    int n = 96;
    PieceMap map = new PieceMap(List.of(new StoreFile("w", n * 1024L)), 1024);
    BitSet all = new BitSet();
    all.set(0, n);
    byte[][] hashes = new byte[n][];
    for (int i = 0; i < n; i++) {
      hashes[i] = trueHash(i);
    }
    for (String self : List.of("a", "m1", "m2", "n1", "n2", "n3", "n4", "node-7", "zz")) {
      SwarmPolicy<String> p =
          new SwarmPolicy<>(
              new SwarmPolicy.Config(self, TIMEOUT, 4, Duration.ofSeconds(3)), () -> now);
      p.applyMembership(membership("e-" + self, self, "s"));
      p.startFill(map, 4, 1024);
      p.transportStarted();
      p.onConnected("c-s", "s");
      p.onFrame("c-s", "s", new Frame.Bitfield(n, all, hashes));
      p.drain();
      BitSet asked = new BitSet(n);
      int[] passes = new int[n];
      java.util.ArrayDeque<Integer> inFlight = new java.util.ArrayDeque<>();
      for (int round = 0; round < 4 * n && asked.cardinality() < n; round++) {
        List<Decision<String>> ds = tick(p);
        // Source reads (the member's own reads of the front) count as asked and end at once.
        for (Run run : runs(ds)) {
          for (int i = run.first(); i < run.first() + run.count(); i++) {
            asked.set(i);
            p.onPieceStored(null, i, trueHash(i));
          }
          p.onSourceRunEnded(run, true);
        }
        for (String r : requests(ds)) {
          int piece = Integer.parseInt(r.substring(r.indexOf(':') + 1));
          int front = asked.nextClearBit(0);
          if (piece != front) {
            passes[front]++;
            assertThat(passes[front])
                .as("%s: piece %d passed over at the front (request for %d)", self, front, piece)
                .isLessThanOrEqualTo(SwarmPlan.FRONT_PATIENCE);
          }
          asked.set(piece);
          inFlight.add(piece);
        }
        Integer next = inFlight.poll();
        if (next != null) {
          assertThat(p.onPieceArrived("c-s", "s", next)).isTrue();
          p.onPieceStored("s", next, trueHash(next));
          p.drain();
        }
        advance(1_000_000);
      }
      assertThat(asked.cardinality()).as("%s asked for every piece", self).isEqualTo(n);
    }
  }
}
