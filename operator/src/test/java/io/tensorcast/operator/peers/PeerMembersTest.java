package io.tensorcast.operator.peers;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.tensorcast.api.wire.Membership;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;

class PeerMembersTest {

  static Pod pod(String name, String phase, String ip, boolean terminating) {
    PodBuilder b =
        new PodBuilder()
            .withNewMetadata()
            .withName(name)
            .withNamespace("ns")
            .endMetadata()
            .withNewStatus()
            .withPhase(phase)
            .withPodIP(ip)
            .endStatus();
    if (terminating) {
      b.editMetadata().withDeletionTimestamp("2026-01-01T00:00:00Z").endMetadata();
    }
    return b.build();
  }

  @Test
  void membersAreRunningPodsWithAnIpSortedByNameAndTheEpochHashesTheirLines() throws Exception {
    List<Pod> pods =
        List.of(
            pod("m-c", "Running", "10.0.0.3", false),
            pod("m-a", "Running", "10.0.0.1", false),
            pod("m-pending", "Pending", null, false),
            pod("m-noip", "Running", "", false),
            pod("m-going", "Running", "10.0.0.9", true),
            pod("m-failed", "Failed", "10.0.0.8", false),
            pod("m-b", "Running", "fd00::2", false));

    Membership m = PeerMembers.of(pods, 8472);

    assertThat(m.members())
        .containsExactly(
            new Membership.Member("m-a", new InetSocketAddress("10.0.0.1", 8472)),
            new Membership.Member("m-b", new InetSocketAddress("fd00::2", 8472)),
            new Membership.Member("m-c", new InetSocketAddress("10.0.0.3", 8472)));
    String lines = "m-a=10.0.0.1:8472\nm-b=[fd00::2]:8472\nm-c=10.0.0.3:8472\n";
    String expected =
        HexFormat.of()
            .formatHex(
                MessageDigest.getInstance("SHA-256")
                    .digest(lines.getBytes(StandardCharsets.UTF_8)));
    assertThat(m.epoch()).isEqualTo(expected).hasSize(64);
    assertThat(m.members())
        .extracting(Membership.Member::hostPort)
        .containsExactly("10.0.0.1:8472", "[fd00::2]:8472", "10.0.0.3:8472");
  }

  @Test
  void theEpochDependsOnTheMemberSetOnly() {
    Pod a = pod("m-a", "Running", "10.0.0.1", false);
    Pod b = pod("m-b", "Running", "10.0.0.2", false);
    Pod bMoved = pod("m-b", "Running", "10.0.0.7", false);

    String ab = PeerMembers.of(List.of(a, b), 8472).epoch();

    assertThat(PeerMembers.of(List.of(b, a), 8472).epoch()).isEqualTo(ab);
    assertThat(PeerMembers.of(List.of(a), 8472).epoch()).isNotEqualTo(ab);
    assertThat(PeerMembers.of(List.of(a, bMoved), 8472).epoch()).isNotEqualTo(ab);
    assertThat(PeerMembers.of(List.of(a, b), 9000).epoch()).isNotEqualTo(ab);
    assertThat(PeerMembers.of(List.of(), 8472).members()).isEmpty();
  }
}
