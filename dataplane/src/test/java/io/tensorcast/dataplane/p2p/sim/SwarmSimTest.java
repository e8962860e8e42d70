package io.tensorcast.dataplane.p2p.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.tensorcast.dataplane.p2p.SwarmPlan;
import io.tensorcast.dataplane.p2p.sim.SwarmSim.NodeResult;
import io.tensorcast.dataplane.p2p.sim.SwarmSim.NodeSpec;
import io.tensorcast.dataplane.p2p.sim.SwarmSim.Result;
import io.tensorcast.dataplane.p2p.sim.SwarmSim.Scenario;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The swarm simulator with the real policy, on small swarms (virtual time only). */
@Timeout(60)
class SwarmSimTest {
  private static final long MS = 1_000_000L;
  private static final int PIECE = 64 * 1024;

  private static Scenario scenario(long[] files, List<NodeSpec> nodes, double originBps) {
    return new Scenario(
        files,
        PIECE,
        nodes,
        originBps,
        1000,
        MS,
        16,
        8L * PIECE,
        4,
        Duration.ofSeconds(2),
        0,
        0,
        0,
        500 * MS,
        100 * MS,
        Duration.ofHours(1).toNanos());
  }

  private static List<NodeSpec> uniform(int n, double bps) {
    List<NodeSpec> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      out.add(new NodeSpec("m" + i, bps, bps, 0, -1));
    }
    return out;
  }

  @Test
  void oneNodeReadsOnePieceInTwoLatenciesPlusItsSizeOverTheOriginLink() {
    Result r = new SwarmSim(scenario(new long[] {PIECE}, uniform(1, 10e6), 1e6)).run();

    assertThat(r.finished()).isTrue();
    NodeResult n = r.nodes().get(0);
    // Request to the origin (1 ms), 65,536 B at 1 MB/s, the last byte to the node (1 ms).
    assertThat(n.time()).isCloseTo(2 * MS + 65_536_000L, within(2L));
    assertThat(n.sourceBytes()).isEqualTo(PIECE);
    assertThat(r.originBytes()).isCloseTo(PIECE, within(1.0));
    assertThat(r.originRequests()).isEqualTo(1);
  }

  @Test
  void fourNodesReadTheArtifactOnceFromTheOriginAndFinishNearTheBound() {
    long[] files = {3L * 1024 * 1024, 2L * 1024 * 1024, 3L * 1024 * 1024};
    double b = 4e6;
    Result r = new SwarmSim(scenario(files, uniform(4, b), b)).run();

    assertThat(r.finished()).isTrue();
    long size = 8L * 1024 * 1024;
    assertThat(r.originBytes()).isCloseTo(size, within(1.0));
    double bound = (size + 3.0 * PIECE) / b * 1e9;
    for (NodeResult n : r.nodes()) {
      assertThat(n.sourceBytes() + n.peerBytes()).as(n.id()).isEqualTo(size);
      assertThat(n.sourceBytes())
          .as("%s reads about its quarter", n.id())
          .isBetween(size / 8, size / 2);
      assertThat(n.time() / bound).as("%s time / bound", n.id()).isBetween(1.0, 1.15);
    }
  }

  @Test
  void aNodeThatLeavesMidTransferDoesNotKeepTheOthersFromFinishing() {
    long[] files = {4L * 1024 * 1024};
    List<NodeSpec> nodes = uniform(4, 4e6);
    nodes.set(2, new NodeSpec("m2", 4e6, 4e6, 0, 400 * MS));
    nodes.add(new NodeSpec("m9", 4e6, 4e6, 300 * MS, -1));
    Result r = new SwarmSim(scenario(files, nodes, 4e6)).run();

    assertThat(r.finished()).isTrue();
    for (NodeResult n : r.nodes()) {
      if (n.id().equals("m2")) {
        assertThat(n.left()).isTrue();
        assertThat(n.readyAt()).isNegative();
      } else {
        assertThat(n.sourceBytes() + n.peerBytes()).as(n.id()).isEqualTo(4L * 1024 * 1024);
        assertThat(n.readyAt()).as(n.id()).isPositive();
      }
    }
    assertThat(r.nodes().get(4).startAt()).isEqualTo(300 * MS);
  }

  @Test
  void theSameScenarioGivesTheSameRun() {
    Scenario s = SwarmSimBench.scenario(5, "churn", 24L * 1024 * 1024, 7);

    Result a = new SwarmSim(s).run();
    Result b = new SwarmSim(s).run();

    assertThat(a.finished()).isTrue();
    assertThat(a.nodes()).isEqualTo(b.nodes());
    assertThat(a.originBytes()).isEqualTo(b.originBytes());
    assertThat(a.events()).isEqualTo(b.events());
    assertThat(a.nodes()).filteredOn(NodeResult::left).hasSize(1);
    assertThat(a.nodes()).filteredOn(n -> n.startAt() > 0).hasSize(1);
  }

  @Test
  void membersJoiningAndLeavingMidTransferReadLittleTwiceFromTheOrigin() {
    long size = 128L * 1024 * 1024;
    Result r = new SwarmSim(SwarmSimBench.scenario(8, "churn", size, 1)).run();

    assertThat(r.finished()).isTrue();
    // The member killed mid-run leaves the bytes of its unfinished runs and the pieces only it
    // held; nothing else is read twice.
    assertThat(r.originBytes() / size).as("origin bytes / S").isLessThanOrEqualTo(1.06);
  }

  /**
   * Files of 30, 50, 20 and 28 pieces (plus a few bytes each) at N = 2 and 4: the 50-piece file
   * straddles the first block boundary (and at N = 4 spans three blocks), the 20-piece one the
   * last. Each member reads the straddling files' parts first, so at every node the files'
   * contiguous prefixes have taken in all but the last few pieces when the last piece lands (the
   * runs and requests still in flight at the end; here fewer than {@link SwarmPlan#TIE_WINDOW}
   * pieces). Front to back, one node had the straddling file's whole tail left: 16 pieces.
   */
  @Test
  void filesThatStraddleTwoBlocksAreCompleteLongBeforeTheLastPiece() {
    long[] files = {30L * PIECE + 7, 50L * PIECE + 11, 20L * PIECE + 3, 28L * PIECE + 5};
    for (int n : new int[] {2}) {
      Result r = new SwarmSim(scenario(files, uniform(n, 10e6), 10e6)).run();

      assertThat(r.finished()).isTrue();
      for (NodeResult node : r.nodes()) {
        assertThat(node.hashedAfterLast())
            .as("N = %d, %s: bytes the prefix digests take in after the last piece", n, node.id())
            .isLessThanOrEqualTo((long) SwarmPlan.TIE_WINDOW * PIECE);
      }
    }
  }
}
