package io.tensorcast.dataplane.p2p;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The request and source-read limits a member derives from its flags and the swarm's size. */
class SwarmLimitsTest {

  @Test
  void theSwarmTogetherReadsWithOneLoadersConcurrencyAndAtMostOneReadPerPeer() {
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 1)).isEqualTo(16); // alone: the loader's own
    assertThat(SwarmPolicy.sourceReadsInFlight(8, 0)).isEqualTo(8); // alone
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 2)).isEqualTo(1); // share 8, one peer: 1
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 3)).isEqualTo(2); // share 6, two peers: 2
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 4)).isEqualTo(3); // share 4, three peers: 3
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 5)).isEqualTo(4); // share 4 under the cap of 4
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 8)).isEqualTo(2);
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 40)).isEqualTo(1); // never 0
    assertThat(SwarmPolicy.sourceReadsInFlight(1, 4)).isEqualTo(1);
    assertThat(SwarmPolicy.sourceReadsInFlight(1, 2)).isEqualTo(1);
  }

  @Test
  void theLastReadersShareTheConcurrencyOfTheMembersWhoseShareIsRead() {
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 4, 4, 0)).isEqualTo(3); // every member reading
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 4, 2, 1)).isEqualTo(6); // 8, three peers: 6
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 4, 1, 0)).isEqualTo(6);
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 8, 4, 3)).isEqualTo(4); // was 2
    // 16 among 3: 6, 5, 5 by rank (id order).
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 8, 3, 0)).isEqualTo(6);
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 8, 3, 1)).isEqualTo(5);
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 8, 3, 2)).isEqualTo(5);
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 8, 1, 0)).isEqualTo(14); // seven peers: 14
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 12, 1, 0)).isEqualTo(15); // below concurrency
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 2, 1, 0)).isEqualTo(2); // one peer: 2
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 1, 1, 0)).isEqualTo(16); // alone: all of it
    assertThat(SwarmPolicy.sourceReadsInFlight(2, 2, 1, 0)).isEqualTo(1);
    assertThat(SwarmPolicy.sourceReadsInFlight(16, 4, 0, 0)).isEqualTo(6); // none counted: as one
    // Together the last readers read with at most one loader's concurrency (or one run each).
    for (int c = 1; c <= 32; c++) {
      for (int live = 2; live <= 20; live++) {
        for (int readers = 1; readers < live; readers++) {
          int sum = 0;
          for (int rank = 0; rank < readers; rank++) {
            int runs = SwarmPolicy.sourceReadsInFlight(c, live, readers, rank);
            assertThat(runs).isPositive().isLessThanOrEqualTo(Math.max(1, 2 * (live - 1)));
            sum += runs;
          }
          assertThat(sum)
              .as("concurrency %d, %d live, %d readers left", c, live, readers)
              .isLessThanOrEqualTo(Math.max(c, readers));
        }
      }
    }
  }

  @Test
  void requestsPerPeerShrinkAsPeersShareTheMembersTotalButNotBelowTwo() {
    int total = SwarmPolicy.maxTotalInFlight(4);
    assertThat(total).isEqualTo(8);
    assertThat(SwarmPolicy.perPeerInFlight(4, total, 1)).isEqualTo(4);
    assertThat(SwarmPolicy.perPeerInFlight(4, total, 2)).isEqualTo(4);
    assertThat(SwarmPolicy.perPeerInFlight(4, total, 3)).isEqualTo(2);
    assertThat(SwarmPolicy.perPeerInFlight(4, total, 7)).isEqualTo(2);
    assertThat(SwarmPolicy.perPeerInFlight(4, total, 0)).isEqualTo(4);
    assertThat(SwarmPolicy.perPeerInFlight(1, 2, 7)).isEqualTo(1); // a limit of 1 stays 1
  }

  @Test
  void membersDoNotAllAskTheSamePeerFirstWhenPeersAreEquallyLoaded() {
    for (int n : new int[] {4, 8, 16, 32}) {
      List<String> ids = IntStream.rangeClosed(1, n).mapToObj(i -> "n" + i).toList();
      Map<String, Integer> firstChoices = new HashMap<>();
      for (String self : ids) {
        String first =
            ids.stream()
                .filter(p -> !p.equals(self))
                .min(Comparator.comparingLong(p -> SwarmPolicy.tieRank(self, p)))
                .orElseThrow();
        firstChoices.merge(first, 1, Integer::sum);
      }
      // In the peers map's order every member but n1 asked n1 first (n - 1 of n).
      assertThat(Collections.max(firstChoices.values()))
          .as("members asking the same peer first, of %d: %s", n, firstChoices)
          .isLessThan(n - 1)
          .isLessThanOrEqualTo(Math.max(3, n / 4));
    }
    assertThat(SwarmPolicy.tieRank("a", "b")).isNotEqualTo(SwarmPolicy.tieRank("b", "a"));
  }
}
