package io.tensorcast.dataplane.p2p.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The simulator's network model on its virtual clock (no wall time is measured). */
class FlowNetworkTest {
  private static final long SECOND = 1_000_000_000L;

  @Test
  void aTransferOnAnIdleLinkTakesItsSizeOverTheBandwidth() {
    EventLoop loop = new EventLoop();
    FlowNetwork net = new FlowNetwork(loop, 0);
    FlowNetwork.Link up = new FlowNetwork.Link("a/up", 1_000_000);
    FlowNetwork.Link down = new FlowNetwork.Link("b/down", 10_000_000);
    List<Long> done = new ArrayList<>();
    loop.at(3 * SECOND, () -> net.start(up, down, 2_500_000, () -> done.add(loop.now())));

    loop.runUntil(100 * SECOND);

    assertThat(done).hasSize(1);
    assertThat(done.get(0) - 3 * SECOND).isCloseTo(2_500_000_000L, within(2L));
    assertThat(up.bytes).isCloseTo(2_500_000, within(1.0));
    assertThat(down.bytes).isCloseTo(2_500_000, within(1.0));
    assertThat(net.activeFlows()).isZero();
  }

  @Test
  void twoTransfersShareOneUplinkEvenlyAndTheSecondGetsItAllWhenTheFirstEnds() {
    EventLoop loop = new EventLoop();
    FlowNetwork net = new FlowNetwork(loop, 0);
    FlowNetwork.Link up = new FlowNetwork.Link("a/up", 1_000_000);
    FlowNetwork.Link d1 = new FlowNetwork.Link("b/down", 10_000_000);
    FlowNetwork.Link d2 = new FlowNetwork.Link("c/down", 10_000_000);
    long[] end = new long[2];
    loop.at(0, () -> net.start(up, d1, 1_000_000, () -> end[0] = loop.now()));
    // Alone for 0.5 s (0.5 MB moved), then both at 0.5 MB/s: the second (0.25 MB) ends at 1.0 s,
    // the first has 0.25 MB left then, at the whole 1 MB/s: 1.25 s.
    loop.at(SECOND / 2, () -> net.start(up, d2, 250_000, () -> end[1] = loop.now()));

    loop.runUntil(100 * SECOND);

    assertThat(end[1]).isCloseTo(SECOND, within(2L));
    assertThat(end[0]).isCloseTo(SECOND + SECOND / 4, within(2L));
  }

  @Test
  void twoTransfersIntoOneDownlinkShareIt() {
    EventLoop loop = new EventLoop();
    FlowNetwork net = new FlowNetwork(loop, 0);
    FlowNetwork.Link u1 = new FlowNetwork.Link("a/up", 10_000_000);
    FlowNetwork.Link u2 = new FlowNetwork.Link("b/up", 10_000_000);
    FlowNetwork.Link down = new FlowNetwork.Link("c/down", 2_000_000);
    long[] end = new long[2];
    loop.at(0, () -> net.start(u1, down, 1_000_000, () -> end[0] = loop.now()));
    loop.at(0, () -> net.start(u2, down, 1_000_000, () -> end[1] = loop.now()));

    loop.runUntil(100 * SECOND);

    assertThat(end[0]).isCloseTo(SECOND, within(2L));
    assertThat(end[1]).isCloseTo(SECOND, within(2L));
  }

  @Test
  void aFlowHeldBackAtItsDownlinkLeavesTheRestOfTheUplinkToTheOthers() {
    EventLoop loop = new EventLoop();
    FlowNetwork net = new FlowNetwork(loop, 0);
    FlowNetwork.Link up = new FlowNetwork.Link("a/up", 1_000_000);
    FlowNetwork.Link slow = new FlowNetwork.Link("slow/down", 250_000);
    FlowNetwork.Link fast = new FlowNetwork.Link("fast/down", 10_000_000);
    FlowNetwork.Flow[] f = new FlowNetwork.Flow[2];
    loop.at(
        0,
        () -> {
          f[0] = net.start(up, slow, 10_000_000, () -> {});
          f[1] = net.start(up, fast, 10_000_000, () -> {});
        });

    loop.runUntil(SECOND);
    net.sync();

    assertThat(f[0].rate * 1e9).isCloseTo(250_000, within(1.0));
    assertThat(f[1].rate * 1e9).isCloseTo(750_000, within(1.0));
    assertThat(up.bytes).isCloseTo(1_000_000, within(2.0));
  }

  @Test
  void aCancelledFlowStopsWhereItIsAndDoesNotReportItsEnd() {
    EventLoop loop = new EventLoop();
    FlowNetwork net = new FlowNetwork(loop, 0);
    FlowNetwork.Link up = new FlowNetwork.Link("a/up", 1_000_000);
    FlowNetwork.Link down = new FlowNetwork.Link("b/down", 1_000_000);
    boolean[] done = new boolean[1];
    FlowNetwork.Flow[] f = new FlowNetwork.Flow[1];
    loop.at(0, () -> f[0] = net.start(up, down, 1_000_000, () -> done[0] = true));
    loop.at(SECOND / 4, () -> net.cancel(f[0]));

    loop.runUntil(10 * SECOND);
    net.sync();

    assertThat(done[0]).isFalse();
    assertThat(f[0].moved()).isCloseTo(250_000, within(2L));
    assertThat(up.bytes).isCloseTo(250_000, within(2.0));
  }

  @Test
  void aQuantumDelaysAFlowThatStartsRightAfterARecomputationByAtMostTheQuantum() {
    EventLoop loop = new EventLoop();
    long quantum = SECOND / 100;
    FlowNetwork net = new FlowNetwork(loop, quantum);
    FlowNetwork.Link up = new FlowNetwork.Link("a/up", 1_000_000);
    FlowNetwork.Link d1 = new FlowNetwork.Link("b/down", 1_000_000);
    FlowNetwork.Link d2 = new FlowNetwork.Link("c/down", 1_000_000);
    long[] end = new long[1];
    loop.at(0, () -> net.start(up, d1, 10, () -> {}));
    loop.at(1, () -> net.start(up, d2, 1_000_000, () -> end[0] = loop.now()));

    loop.runUntil(100 * SECOND);

    assertThat(end[0]).isBetween(SECOND, SECOND + 2 * quantum);
  }
}
