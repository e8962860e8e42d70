package io.tensorcast.dataplane.p2p;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.dataplane.store.StoreFile;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class SwarmPlanTest {

  @Test
  void piecesDoNotCrossFilesAndCoverEveryByte() {
    PieceMap m =
        new PieceMap(
            List.of(new StoreFile("a", 10), new StoreFile("empty", 0), new StoreFile("b", 8)), 4);
    assertThat(m.pieces())
        .containsExactly(
            new PieceMap.Piece(0, "a", 0, 4),
            new PieceMap.Piece(1, "a", 4, 4),
            new PieceMap.Piece(2, "a", 8, 2),
            new PieceMap.Piece(3, "b", 0, 4),
            new PieceMap.Piece(4, "b", 4, 4));
    assertThat(m.totalBytes()).isEqualTo(18);
  }

  @Test
  void digestDependsOnPieceSizeAndListing() {
    List<StoreFile> files = List.of(new StoreFile("a", 10));
    assertThat(new PieceMap(files, 4).digestHex()).isEqualTo(new PieceMap(files, 4).digestHex());
    assertThat(new PieceMap(files, 4).digestHex()).isNotEqualTo(new PieceMap(files, 5).digestHex());
    assertThat(new PieceMap(List.of(new StoreFile("a", 11)), 4).digestHex())
        .isNotEqualTo(new PieceMap(files, 4).digestHex());
  }

  @Test
  void badPieceSizeAndRepeatedFileAreRefused() {
    assertThatThrownBy(() -> new PieceMap(List.of(), 0))
        .hasMessageContaining("piece size must be between 1 and");
    assertThatThrownBy(() -> new PieceMap(List.of(new StoreFile("a", 1), new StoreFile("a", 2)), 4))
        .hasMessageContaining("file a is listed twice");
  }

  @Test
  void coldPlanGivesEachPieceToExactlyOneMemberInContiguousBlocksWhateverTheOrder() {
    Set<String> members = Set.of("pod-c", "pod-a", "pod-d", "pod-b");
    SwarmPlan p1 = SwarmPlan.compute(103, members, members, Map.of());
    SwarmPlan p2 =
        SwarmPlan.compute(103, Set.of("pod-b", "pod-d", "pod-a", "pod-c"), members, Map.of());
    for (int i = 0; i < 103; i++) {
      assertThat(p1.sourceOwner(i)).isNotNull().isEqualTo(p2.sourceOwner(i));
    }
    // Exactly once: the members' sets are disjoint and cover all pieces.
    BitSet union = new BitSet();
    int total = 0;
    for (String m : p1.members()) {
      BitSet mine = p1.assignedTo(m);
      total += mine.cardinality();
      union.or(mine);
      // contiguous: one run
      assertThat(mine.nextClearBit(mine.nextSetBit(0))).isEqualTo(mine.length());
      assertThat(mine.cardinality()).isBetween(25, 26);
    }
    assertThat(total).isEqualTo(103);
    assertThat(union.cardinality()).isEqualTo(103);
    assertThat(p1.sourceOwner(0)).isEqualTo("pod-a");
    assertThat(p1.sourceOwner(102)).isEqualTo("pod-d");
  }

  @Test
  void heldPiecesAreNeverAssignedAndLostMembersWorkIsReassigned() {
    Set<String> members = Set.of("a", "b", "c", "d");
    SwarmPlan before = SwarmPlan.compute(40, members, members, Map.of());
    BitSet bHolds = new BitSet();
    bHolds.set(10, 15); // b read 5 of its 10 pieces
    BitSet aHolds = new BitSet();
    aHolds.set(0, 10);
    aHolds.set(12); // and a fetched one of them
    Map<String, BitSet> holdings = new HashMap<>();
    holdings.put("a", aHolds);
    holdings.put("b", bHolds);
    Set<String> live = Set.of("a", "c", "d"); // b is lost
    SwarmPlan after = SwarmPlan.compute(40, members, live, holdings);
    // Pieces still present somewhere live are not read again.
    assertThat(after.sourceOwner(12)).isNull();
    for (int i = 0; i < 10; i++) {
      assertThat(after.sourceOwner(i)).isNull();
    }
    // b's pieces present only at b (lost) and its unread pieces go to live members, once each.
    for (int i : new int[] {10, 11, 13, 14, 15, 16, 17, 18, 19}) {
      assertThat(after.sourceOwner(i)).isIn("a", "c", "d");
    }
    // c's and d's own blocks are unchanged.
    for (int i = 20; i < 40; i++) {
      assertThat(after.sourceOwner(i)).isEqualTo(before.sourceOwner(i));
    }
    assertThat(after.counts().values().stream().mapToInt(Integer::intValue).sum())
        .isEqualTo(40 - 11);
    // The same inputs give the same plan.
    SwarmPlan again = SwarmPlan.compute(40, members, live, holdings);
    for (int i = 0; i < 40; i++) {
      assertThat(again.sourceOwner(i)).isEqualTo(after.sourceOwner(i));
    }
  }

  @Test
  void aLoneMemberReadsEverything() {
    SwarmPlan p = SwarmPlan.compute(7, Set.of("a", "b"), Set.of("a"), Map.of());
    assertThat(p.assignedTo("a").cardinality()).isEqualTo(7);
    assertThatThrownBy(() -> SwarmPlan.compute(7, Set.of("a"), Set.of(), Map.of()))
        .hasMessageContaining("at least one live member");
  }

  @Test
  void membersJoiningMidLoadGetOnlyWhatNobodyHoldsOrReads() {
    // "a" loaded alone: holds 0..53 and is reading 54 and 55 (its READING marks count as held).
    BitSet aClaims = new BitSet();
    aClaims.set(0, 56);
    Set<String> all = Set.of("a", "b", "c");
    SwarmPlan p = SwarmPlan.compute(120, all, all, Map.of("a", aClaims));
    // a's new block (0..39) is all held: a reads nothing more; b gets the rest of its block
    // after a's reads in flight, c all of its block.
    assertThat(p.assignedTo("a").isEmpty()).isTrue();
    BitSet b = new BitSet();
    b.set(56, 80);
    assertThat(p.assignedTo("b")).isEqualTo(b);
    BitSet c = new BitSet();
    c.set(80, 120);
    assertThat(p.assignedTo("c")).isEqualTo(c);
  }

  @Test
  void rarestPieceFirstWithSaltedTies() {
    BitSet c = new BitSet();
    c.set(1);
    c.set(2);
    c.set(3);
    int[] holders = {0, 3, 2, 2};
    assertThat(SwarmPlan.rarest(c, holders, 0)).isEqualTo(2);
    assertThat(SwarmPlan.rarest(c, holders, 3)).isEqualTo(3);
    assertThat(SwarmPlan.rarest(new BitSet(), holders, 0)).isEqualTo(-1);
  }

  @Test
  void membersAskingOneHolderForItsRarePiecesAskForDifferentOnes() {
    // Pieces 24-36 are held by one peer only, every other piece by two: six members (salts 0-5)
    // ask that peer for six different pieces, so each leaves it once and is passed on.
    int[] holders = new int[128];
    java.util.Arrays.fill(holders, 2);
    BitSet c = new BitSet();
    c.set(0, 128);
    for (int i = 24; i <= 36; i++) {
      holders[i] = 1;
    }
    java.util.Set<Integer> picked = new java.util.TreeSet<>();
    for (int salt = 0; salt < 6; salt++) {
      int piece = SwarmPlan.rarest(c, holders, salt);
      assertThat(piece).isBetween(24, 36);
      picked.add(piece);
    }
    assertThat(picked).hasSize(6);
  }

  @Test
  void tiesAtOneHolderArePickedAmongTheFirstPiecesInOrderWhateverTheSalt() {
    // A peer's fresh pieces 100-999, each held by that peer alone.
    BitSet c = new BitSet();
    c.set(100, 1000);
    int[] holders = new int[1000];
    java.util.Arrays.fill(holders, 1);
    java.util.Set<Integer> picked = new java.util.TreeSet<>();
    for (int salt = -5000; salt < 5000; salt += 37) {
      int piece = SwarmPlan.rarest(c, holders, salt);
      assertThat(piece).as("salt %d", salt).isBetween(100, 100 + SwarmPlan.TIE_WINDOW - 1);
      picked.add(piece);
    }
    assertThat(picked).as("members with different salts spread over the window").hasSize(8);
  }

  @Test
  void aMembersSuccessivePicksLeaveFewerHolesThanTheWindowBelowTheHighestPick() {
    // What one member asks one peer for, pick after pick, at its salt and load levels.
    for (int salt : new int[] {0, 7, 123_456, "member-3".hashCode(), -99}) {
      BitSet c = new BitSet();
      c.set(0, 300);
      int[] holders = new int[300];
      java.util.Arrays.fill(holders, 1);
      int highest = -1;
      for (int k = 0; k < 300; k++) {
        int piece = SwarmPlan.rarest(c, holders, salt + (k % 4) * 7919);
        c.clear(piece);
        highest = Math.max(highest, piece);
        int holes = c.get(0, highest).cardinality();
        assertThat(holes)
            .as("salt %d, pick %d (piece %d): unasked pieces below the highest", salt, k, piece)
            .isLessThan(SwarmPlan.TIE_WINDOW);
      }
    }
  }

  @Test
  void aMembersPicksTakeTheWindowsFrontAfterFrontPatiencePassesWhateverTheSalt() {
    // One peer's pieces 0-299, one holder each; the member asks at load levels 0-3 in turn.
    int starved = 0;
    for (int salt : new int[] {0, 7, 123_456, "n2".hashCode(), "member-3".hashCode(), -99}) {
      for (boolean bounded : new boolean[] {false, true}) {
        BitSet c = new BitSet();
        c.set(0, 300);
        int[] holders = new int[300];
        java.util.Arrays.fill(holders, 1);
        byte[] passedOver = bounded ? new byte[300] : null;
        int longest = 0;
        for (int k = 0, waited = 0; k < 300; k++) {
          int front = c.nextSetBit(0);
          int piece = SwarmPlan.rarest(c, holders, salt + (k % 4) * 7919, passedOver);
          waited = piece == front ? 0 : waited + 1;
          longest = Math.max(longest, waited);
          c.clear(piece);
        }
        if (bounded) {
          assertThat(longest).as("salt %d", salt).isLessThanOrEqualTo(SwarmPlan.FRONT_PATIENCE);
        } else if (longest > 100) {
          starved++;
        }
      }
    }
    assertThat(starved)
        .as("salts whose unbounded picks leave the front for 100+ picks")
        .isPositive();
  }

  @Test
  void aRarerPieceBeyondTheWindowComesBeforeTheWindowsTies() {
    BitSet c = new BitSet();
    c.set(0, 50);
    int[] holders = new int[50];
    java.util.Arrays.fill(holders, 3);
    holders[40] = 1;
    holders[45] = 1;
    assertThat(SwarmPlan.rarest(c, holders, 0)).isEqualTo(40);
    assertThat(SwarmPlan.rarest(c, holders, 1)).isEqualTo(45);
    holders[40] = 3;
    holders[45] = 3;
    holders[49] = 2;
    assertThat(SwarmPlan.rarest(c, holders, 5)).isEqualTo(49);
  }

  @Test
  void keptReadersWithTodaysHoldingsGiveTheSamePlanAsComputingItAnew() {
    // The policy keeps the readers while (members, live) stay the same and applies the holdings of
    // each round to them: that must be the plan compute() gives, piece for piece.
    java.util.Random rnd = new java.util.Random(7);
    for (int round = 0; round < 200; round++) {
      int pieces = 1 + rnd.nextInt(300);
      List<String> members = new java.util.ArrayList<>();
      int m = 1 + rnd.nextInt(40);
      for (int i = 0; i < m; i++) {
        members.add(String.format("n%03d", i));
      }
      List<String> alive = new java.util.ArrayList<>();
      for (String id : members) {
        if (rnd.nextInt(4) > 0) {
          alive.add(id);
        }
      }
      if (alive.isEmpty()) {
        alive.add(members.get(rnd.nextInt(m)));
      }
      Map<String, BitSet> holdings = new HashMap<>();
      BitSet held = new BitSet();
      for (String id : members) {
        BitSet h = new BitSet();
        for (int k = rnd.nextInt(pieces / 4 + 1); k > 0; k--) {
          h.set(rnd.nextInt(pieces));
        }
        holdings.put(id, h);
        if (alive.contains(id)) {
          held.or(h);
        }
      }
      SwarmPlan fresh = SwarmPlan.compute(pieces, Set.copyOf(members), Set.copyOf(alive), holdings);
      SwarmPlan kept =
          SwarmPlan.of(SwarmPlan.readers(pieces, members, alive), members, alive, held);
      assertThat(kept.live()).isEqualTo(fresh.live());
      for (int i = 0; i < pieces; i++) {
        assertThat(kept.reader(i)).as("reader of %d", i).isEqualTo(fresh.reader(i));
        assertThat(kept.sourceOwner(i)).as("owner of %d", i).isEqualTo(fresh.sourceOwner(i));
      }
    }
  }

  /** Files starting at the given pieces, as {@link SwarmPlan#fileStarts} of a map has them. */
  private static BitSet starts(int... pieces) {
    BitSet b = new BitSet();
    for (int i : pieces) {
      b.set(i);
    }
    return b;
  }

  /** The pieces {@code member} reads, in the order {@link SwarmPlan#readingOrder} gives. */
  private static List<Integer> readsOf(String member, String[] readers, BitSet fileStarts) {
    List<Integer> out = new java.util.ArrayList<>();
    for (int i : SwarmPlan.readingOrder(readers, fileStarts)) {
      if (readers[i].equals(member)) {
        out.add(i);
      }
    }
    return out;
  }

  private static List<Integer> span(int from, int to) {
    return java.util.stream.IntStream.range(from, to).boxed().toList();
  }

  private static List<Integer> concat(List<Integer> a, List<Integer> b) {
    List<Integer> out = new java.util.ArrayList<>(a);
    out.addAll(b);
    return out;
  }

  @Test
  void aFileThatStraddlesTwoBlocksIsReadFirstFromBothSidesOfTheBoundary() {
    // Files at pieces 0-29, 30-79, 80-99, 100-127; blocks 0-63 (a) and 64-127 (b): file 30-79
    // straddles. a reads that file's head (30-63) first, then 0-29; b reads its tail (64-79) first,
    // then the rest front to back. Either's last read ends a file.
    BitSet files = starts(0, 30, 80, 100);
    String[] readers = SwarmPlan.readers(128, List.of("a", "b"), List.of("a", "b"));

    assertThat(readsOf("a", readers, files)).isEqualTo(concat(span(30, 64), span(0, 30)));
    assertThat(readsOf("b", readers, files)).isEqualTo(span(64, 128));
  }

  @Test
  void aBlockReadsTheHeadOfTheFileItHandsOnThenTheTailOfTheFileItTakesOverThenTheRest() {
    // Files at 0-29, 30-79, 80-99, 100-127; blocks of 32. a: the head of 30-79 first. b: all
    // inside 30-79, front to back. c: the head of 80-99 (80-95) first, then the tail of 30-79
    // (64-79), nothing else. d: the tail of 80-99 (96-99), then 100-127.
    BitSet files = starts(0, 30, 80, 100);
    List<String> four = List.of("a", "b", "c", "d");
    String[] readers = SwarmPlan.readers(128, four, four);

    assertThat(readsOf("a", readers, files)).isEqualTo(concat(span(30, 32), span(0, 30)));
    assertThat(readsOf("b", readers, files)).isEqualTo(span(32, 64));
    assertThat(readsOf("c", readers, files)).isEqualTo(concat(span(80, 96), span(64, 80)));
    assertThat(readsOf("d", readers, files)).isEqualTo(span(96, 128));
    int[] order = SwarmPlan.readingOrder(readers, files);
    assertThat(java.util.Arrays.stream(order).sorted().toArray())
        .isEqualTo(java.util.stream.IntStream.range(0, 128).toArray());
  }

  @Test
  void blocksThatStartAndEndAtFileBoundariesAreReadFrontToBack() {
    BitSet files = starts(0, 16, 32, 48);
    List<String> four = List.of("a", "b", "c", "d");
    String[] readers = SwarmPlan.readers(64, four, four);

    assertThat(SwarmPlan.readingOrder(readers, files))
        .isEqualTo(java.util.stream.IntStream.range(0, 64).toArray());
  }

  @Test
  void anOrphanedBlockIsReadInTheOrderOfTheBlocksItIsReSplitInto() {
    // b (16-31) is lost; its pieces go to a (16-21), c (22-26) and d (27-31). a's block is now
    // 0-21 and ends in the head of file 20-35: a reads 20-21 first. c's and d's parts of b lie
    // inside that file and are read front to back, before their own blocks.
    BitSet files = starts(0, 20, 36, 48);
    String[] readers = SwarmPlan.readers(64, List.of("a", "b", "c", "d"), List.of("a", "c", "d"));

    assertThat(readsOf("a", readers, files)).isEqualTo(concat(span(20, 22), span(0, 20)));
    assertThat(readsOf("c", readers, files)).isEqualTo(concat(span(22, 27), span(32, 48)));
    assertThat(readsOf("d", readers, files)).isEqualTo(concat(span(27, 32), span(48, 64)));
  }

  @Test
  void fileStartsAreThePiecesAtOffsetZero() {
    PieceMap m =
        new PieceMap(
            List.of(new StoreFile("a", 10), new StoreFile("empty", 0), new StoreFile("b", 8)), 4);
    assertThat(SwarmPlan.fileStarts(m)).isEqualTo(starts(0, 3));
  }
}
