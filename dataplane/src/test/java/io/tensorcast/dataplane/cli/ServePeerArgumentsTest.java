package io.tensorcast.dataplane.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.dataplane.p2p.Membership;
import io.tensorcast.dataplane.p2p.PeerSettings;
import io.tensorcast.dataplane.pod.ServeSettings;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The peer-to-peer flags of {@code dataplane serve}, parsed the way the pod's arguments are. */
class ServePeerArgumentsTest {
  private static ServeSettings parse(Map<String, String> env, String... extra) {
    List<String> args =
        new ArrayList<>(List.of("serve", "--artifact-id", "a", "--uri", "s3://b/p/"));
    args.addAll(List.of(extra));
    return ServeArguments.parse(args, env);
  }

  @Test
  void defaultsArePeerToPeerOnPodIpWithPodNameAnd1MiPieces() {
    PeerSettings p = parse(Map.of("POD_IP", "10.1.2.3", "POD_NAME", "pod-7")).peer();
    assertThat(p.listen()).isEqualTo(new InetSocketAddress("10.1.2.3", 8472));
    assertThat(p.peerId()).isEqualTo("pod-7");
    assertThat(p.pieceSize()).isEqualTo(1024 * 1024).isEqualTo(PeerSettings.DEFAULT_PIECE_SIZE);
    assertThat(p.staticPeers()).isNull();
    assertThat(p.membershipWait()).isEqualTo(Duration.ofSeconds(10));
    assertThat(p.peerTimeout()).isEqualTo(Duration.ofSeconds(10));
  }

  @Test
  void flagsAreRead() {
    PeerSettings p =
        parse(
                Map.of(),
                "--peer-listen",
                "127.0.0.5:9000",
                "--peer-id",
                "x",
                "--piece-size",
                "64Ki",
                "--peers",
                "y=127.0.0.6:9000,x=127.0.0.5:9000",
                "--membership-wait",
                "500ms",
                "--peer-timeout",
                "2s")
            .peer();
    assertThat(p.listen()).isEqualTo(new InetSocketAddress("127.0.0.5", 9000));
    assertThat(p.pieceSize()).isEqualTo(65536);
    assertThat(p.staticPeers().members())
        .extracting(Membership.Member::id)
        .containsExactly("x", "y");
    // The epoch is the operator's: hex SHA-256 of the sorted id=address lines.
    assertThat(p.staticPeers().epoch())
        .isEqualTo(
            java.util.HexFormat.of().formatHex(sha256("x=127.0.0.5:9000\ny=127.0.0.6:9000\n")));
    assertThat(p.membershipWait()).isEqualTo(Duration.ofMillis(500));
    assertThat(p.peerTimeout()).isEqualTo(Duration.ofSeconds(2));
  }

  @Test
  void sourceOnlyAndOffDisablePeerToPeer() {
    assertThat(parse(Map.of(), "--distribution", "source-only").peer()).isNull();
    assertThat(parse(Map.of(), "--peer-listen", "off").peer()).isNull();
  }

  @Test
  void badValuesNameTheOption() {
    assertThatThrownBy(() -> parse(Map.of(), "--distribution", "torrent"))
        .hasMessage("--distribution must be peer-to-peer or source-only, got 'torrent'");
    assertThatThrownBy(() -> parse(Map.of(), "--peer-timeout", "soon"))
        .hasMessage("--peer-timeout: 'soon' is not a duration such as 500ms, 10s or 2m");
    assertThatThrownBy(() -> parse(Map.of(), "--piece-size", "128Mi"))
        .hasMessage("--piece-size must be between 1 byte and 64Mi, got 128Mi");
    assertThatThrownBy(() -> parse(Map.of(), "--peers", "pod-0"))
        .hasMessage("--peers: entry 'pod-0' is not ID=HOST:PORT (e.g. pod-0=10.0.0.5:8472)");
    assertThatThrownBy(() -> parse(Map.of(), "--peer-listen", "host"))
        .hasMessage("--peer-listen: 'host' is not HOST:PORT");
  }

  private static byte[] sha256(String s) {
    try {
      return java.security.MessageDigest.getInstance("SHA-256")
          .digest(s.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
