package io.tensorcast.dataplane.p2p;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The request and source-read limits a member derives from its flags and the swarm's size. */
class SwarmLimitsTest {

  @Test
  void theSwarmTogetherReadsWithOneLoadersConcurrency() {
    assertThat(PeerSwarm.sourceReadsInFlight(16, 1)).isEqualTo(16);
    assertThat(PeerSwarm.sourceReadsInFlight(16, 2)).isEqualTo(8);
    assertThat(PeerSwarm.sourceReadsInFlight(16, 3)).isEqualTo(6); // rounded up: 18 in all
    assertThat(PeerSwarm.sourceReadsInFlight(16, 8)).isEqualTo(2);
    assertThat(PeerSwarm.sourceReadsInFlight(16, 40)).isEqualTo(1); // never 0
    assertThat(PeerSwarm.sourceReadsInFlight(1, 4)).isEqualTo(1);
    assertThat(PeerSwarm.sourceReadsInFlight(8, 0)).isEqualTo(8); // alone
  }

  @Test
  void requestsPerPeerShrinkAsPeersShareTheMembersTotalButNotBelowTwo() {
    int total = PeerSwarm.maxTotalInFlight(4);
    assertThat(total).isEqualTo(8);
    assertThat(PeerSwarm.perPeerInFlight(4, total, 1)).isEqualTo(4);
    assertThat(PeerSwarm.perPeerInFlight(4, total, 2)).isEqualTo(4);
    assertThat(PeerSwarm.perPeerInFlight(4, total, 3)).isEqualTo(2);
    assertThat(PeerSwarm.perPeerInFlight(4, total, 7)).isEqualTo(2);
    assertThat(PeerSwarm.perPeerInFlight(4, total, 0)).isEqualTo(4);
    assertThat(PeerSwarm.perPeerInFlight(1, 2, 7)).isEqualTo(1); // a limit of 1 stays 1
  }
}
