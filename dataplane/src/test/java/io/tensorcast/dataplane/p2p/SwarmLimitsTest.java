package io.tensorcast.dataplane.p2p;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The request and source-read limits a member derives from its flags and the swarm's size. */
class SwarmLimitsTest {

  @Test
  void theSwarmTogetherReadsWithOneLoadersConcurrencyAndAtMostTwoReadsPerPeer() {
    assertThat(PeerSwarm.sourceReadsInFlight(16, 1)).isEqualTo(16); // alone: the loader's own
    assertThat(PeerSwarm.sourceReadsInFlight(8, 0)).isEqualTo(8); // alone
    assertThat(PeerSwarm.sourceReadsInFlight(16, 2)).isEqualTo(2); // share 8, one peer: 2
    assertThat(PeerSwarm.sourceReadsInFlight(16, 3)).isEqualTo(4); // share 6, two peers: 4
    assertThat(PeerSwarm.sourceReadsInFlight(16, 4)).isEqualTo(4); // share 4 under the cap of 6
    assertThat(PeerSwarm.sourceReadsInFlight(16, 8)).isEqualTo(2);
    assertThat(PeerSwarm.sourceReadsInFlight(16, 40)).isEqualTo(1); // never 0
    assertThat(PeerSwarm.sourceReadsInFlight(1, 4)).isEqualTo(1);
    assertThat(PeerSwarm.sourceReadsInFlight(1, 2)).isEqualTo(1);
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
