package io.tensorcast.dataplane.p2p;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.p2p.SwarmSimulation.Node;
import java.time.Duration;
import java.util.BitSet;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Swarm rules that take several members, on {@link SwarmSimulation}'s virtual clock: the same
 * scenarios {@code PeerToPeerLoadIT} and {@code PeerTrustIT} run with real processes and sockets,
 * here in milliseconds of real time and deterministic.
 */
class SwarmSimulationTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(1);
  private static final long MIB = 1024 * 1024;

  /** 7.25 MiB in three files: 116 pieces of 64 KiB, the last of each file shorter. */
  private static SwarmSimulation sim() {
    return new SwarmSimulation(3 * MIB + 1000, 2 * MIB, 2 * MIB + 7);
  }

  @Test
  void fourMembersReadEveryPieceFromTheSourceExactlyOnceAndShareTheRest() {
    SwarmSimulation s = sim();
    String[] ids = {"m0", "m1", "m2", "m3"};
    Membership m = SwarmSimulation.membership("e1", ids);
    for (String id : ids) {
      s.startFill(id, m, TIMEOUT, 8, 8 * 64 * 1024);
    }

    assertThat(s.runUntilComplete(Duration.ofMinutes(5))).isTrue();

    assertThat(s.readsPerPiece()).containsOnly(1);
    for (String id : ids) {
      Node n = s.nodes.get(id);
      assertThat(n.sourceBlock()).as("%s reads its own block", id).isEqualTo(s.block(id, ids));
      assertThat(n.sourceReads.size() + n.peerPieces()).isEqualTo(s.map.size());
      assertThat(n.fromPeers).as("%s got pieces from every other member", id).hasSize(3);
      assertThat(n.maxRuns)
          .as("source runs %s had in flight at once (concurrency 8 over 4 members)", id)
          .isLessThanOrEqualTo(SwarmPolicy.sourceReadsInFlight(8, 4))
          .isEqualTo(2);
    }
  }

  @Test
  void aMemberKilledMidLoadHasItsUnfinishedPiecesReadByTheOthersAfterThePeerTimeout() {
    SwarmSimulation s = sim();
    String[] ids = {"k0", "k1", "k2", "k3"};
    Membership m = SwarmSimulation.membership("e1", ids);
    for (String id : ids) {
      s.startFill(id, m, TIMEOUT, 2, 64 * 1024);
    }
    s.runFor(Duration.ofMillis(60));
    Node victim = s.nodes.get("k2");
    int victimRead = victim.sourceReads.size();
    assertThat(victimRead).as("the victim read part of its block").isPositive();
    assertThat(victimRead).isLessThan(s.block("k2", ids).cardinality());
    s.kill("k2");

    assertThat(s.runUntilComplete(Duration.ofMinutes(5))).isTrue();

    int[] reads = s.readsPerPiece();
    BitSet victimBlock = s.block("k2", ids);
    int survivorReads = 0;
    for (String id : List.of("k0", "k1", "k3")) {
      survivorReads += s.nodes.get(id).sourceReads.size();
    }
    // Every piece is held by the survivors; what the victim had not read (or not passed on) was
    // read again, nothing of the survivors' own blocks twice.
    assertThat(survivorReads).isLessThanOrEqualTo(s.map.size() + victimRead);
    for (int i = 0; i < reads.length; i++) {
      if (!victimBlock.get(i)) {
        assertThat(reads[i]).as("reads of piece %d outside the victim's block", i).isEqualTo(1);
      }
    }
  }

  @Test
  void membersJoiningMidLoadReadTheirOwnBlocksAndTheFirstMemberNothingOfTheirs() {
    SwarmSimulation s = sim();
    s.sourcePieceTime = Duration.ofMillis(20).toNanos();
    String[] ids = {"j0", "j1", "j2"};
    Node a = s.startFill("j0", SwarmSimulation.membership("alone", "j0"), TIMEOUT, 2, 64 * 1024);
    s.startFill("j1", null, TIMEOUT, 2, 64 * 1024);
    s.startFill("j2", null, TIMEOUT, 2, 64 * 1024);
    s.runFor(Duration.ofMillis(600));
    int readAlone = a.sourceReads.size();
    assertThat(readAlone).as("j0 read past the first third alone").isGreaterThan(s.map.size() / 2);
    assertThat(readAlone).isLessThan(s.map.size());
    BitSet aloneBlock = a.sourceBlock();

    Membership all = SwarmSimulation.membership("joined", ids);
    for (String id : ids) {
      s.applyMembership(id, all);
    }
    assertThat(s.runUntilComplete(Duration.ofMinutes(5))).isTrue();

    BitSet afterJoin = a.sourceBlock();
    afterJoin.andNot(aloneBlock);
    BitSet othersBlocks = s.block("j1", ids);
    othersBlocks.or(s.block("j2", ids));
    afterJoin.and(othersBlocks);
    // A run in flight when the membership arrived may end in the others' blocks.
    assertThat(afterJoin.cardinality())
        .as("pieces of j1's and j2's blocks j0 read after the membership arrived")
        .isLessThanOrEqualTo(2);
    for (String id : List.of("j1", "j2")) {
      BitSet read = s.nodes.get(id).sourceBlock();
      BitSet own = s.block(id, ids);
      BitSet outside = (BitSet) read.clone();
      outside.andNot(own);
      assertThat(outside.cardinality()).as("pieces outside %s's block that it read", id).isZero();
      // Its whole block but what j0 was reading when j1 and j2 joined: j0's READING marks came
      // before its BITFIELD, so the newcomer fetches those pieces instead of reading them again.
      BitSet notRead = (BitSet) own.clone();
      notRead.andNot(read);
      BitSet readByJ0 = (BitSet) notRead.clone();
      readByJ0.and(a.sourceBlock());
      assertThat(readByJ0)
          .as("%s's block pieces it left to j0's read in flight", id)
          .isEqualTo(notRead);
    }
    assertThat(s.nodes.get("j1").fromPeers).containsKey("j0");
  }

  @Test
  void aCopyAdoptedAfterARestartGivesANewcomerEverythingButItsOwnBlock() {
    SwarmSimulation s = sim();
    String[] ids = {"r0", "r1"};
    Membership m = SwarmSimulation.membership("e1", ids);
    s.startComplete("r0", m, TIMEOUT);
    Node b = s.startFill("r1", m, TIMEOUT, 4, 8 * 64 * 1024);

    assertThat(s.runUntilComplete(Duration.ofMinutes(5))).isTrue();

    assertThat(s.nodes.get("r0").sourceReads).isEmpty();
    assertThat(b.sourceBlock()).isEqualTo(s.block("r1", ids));
    assertThat(b.fromPeers.get("r0")).isEqualTo(s.block("r0", ids).cardinality());
  }

  @Test
  void aMemberThatAnnouncesForgedHashesForPiecesItDoesNotReadIsDroppedByEveryHonestMember() {
    SwarmSimulation s = sim();
    String[] ids = {"h0", "h1", "h2", "zz-liar"};
    Membership m = SwarmSimulation.membership("e1", ids);
    Node liar = s.node("zz-liar");
    // It claims (BITFIELD) pieces of h0's block with forged hashes, before anyone read them.
    BitSet h0Block = s.block("h0", ids);
    for (int i = h0Block.nextSetBit(0);
        i >= 0 && liar.forged.size() < 5;
        i = h0Block.nextSetBit(i + 1)) {
      liar.forged.add(i);
    }
    s.startFill("zz-liar", m, TIMEOUT, 2, 64 * 1024);
    for (String id : List.of("h0", "h1", "h2")) {
      s.startFill(id, m, TIMEOUT, 2, 64 * 1024);
    }

    s.runFor(Duration.ofSeconds(20));

    for (String id : List.of("h0", "h1", "h2")) {
      Node n = s.nodes.get(id);
      assertThat(n.policy.complete()).as("%s complete", id).isTrue();
      assertThat(n.policy.dropped())
          .as("%s dropped the liar", id)
          .anySatisfy(
              d -> {
                assertThat(d.id()).isEqualTo("zz-liar");
                assertThat(d.reason()).contains("with sha256").contains("but");
              });
      for (int i : liar.forged) {
        assertThat(n.policy.expectedHash(i)).isEqualTo(SwarmSimulation.trueHash(i));
      }
      assertThat(n.fromPeers).doesNotContainKey("zz-liar");
    }
  }

  @Test
  void theSameEventsGiveTheSameDecisions() {
    List<String> first = runOnce();
    List<String> second = runOnce();
    assertThat(first).isNotEmpty().isEqualTo(second);
  }

  private static List<String> runOnce() {
    SwarmSimulation s = sim();
    String[] ids = {"d0", "d1", "d2"};
    Membership m = SwarmSimulation.membership("e1", ids);
    for (String id : ids) {
      s.startFill(id, m, TIMEOUT, 4, 4 * 64 * 1024);
    }
    s.runFor(Duration.ofMillis(100));
    s.kill("d1");
    assertThat(s.runUntilComplete(Duration.ofMinutes(5))).isTrue();
    List<String> trace = new java.util.ArrayList<>(s.log);
    s.nodes.forEach((id, n) -> trace.add(id + " read " + n.sourceReads + " got " + n.fromPeers));
    return trace;
  }
}
