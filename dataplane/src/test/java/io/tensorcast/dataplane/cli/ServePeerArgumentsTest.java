package io.tensorcast.dataplane.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.http.ControlAuth;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.p2p.PeerSettings;
import io.tensorcast.dataplane.pod.ServeSettings;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The peer-to-peer flags of {@code dataplane serve}, parsed the way the pod's arguments are. */
class ServePeerArgumentsTest {
  private static ServeSettings parse(Map<String, String> env, String... extra) {
    List<String> args =
        new ArrayList<>(List.of("serve", "--artifact-id", "a", "--uri", "s3://b/p/"));
    args.addAll(List.of(extra));
    return ServeArguments.parse(args, env);
  }

  @Test
  void rangeSizeAutoPlans8MiRangesAndLetsALoadAloneMergeThemUpTo32MiWhileAGivenSizeIsExact() {
    ReadOptions auto = parse(Map.of("POD_IP", "10.1.2.3")).read();
    assertThat(auto.rangeSize()).isEqualTo(8 << 20);
    assertThat(auto.maxRangeSize()).isEqualTo(32 << 20);
    assertThat(parse(Map.of("POD_IP", "10.1.2.3"), "--range-size", "auto").read()).isEqualTo(auto);
    assertThat(parse(Map.of("POD_IP", "10.1.2.3"), "--range-size", "Auto").read()).isEqualTo(auto);

    ReadOptions given = parse(Map.of("POD_IP", "10.1.2.3"), "--range-size", "16Mi").read();
    assertThat(given.rangeSize()).isEqualTo(16 << 20);
    assertThat(given.maxRangeSize()).isEqualTo(16 << 20);
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
  void flagsAreRead(@TempDir Path dir) throws Exception {
    byte[] key = new byte[32];
    key[0] = 7;
    Path secret =
        Files.writeString(dir.resolve("peer-secret"), Base64.getEncoder().encodeToString(key));
    PeerSettings p =
        parse(
                Map.of(),
                "--peer-secret-file",
                secret.toString(),
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
    assertThat(p.secret().key()).isEqualTo(key);
    assertThat(p.secret().file()).isEqualTo(secret);
  }

  @Test
  void aStaticSwarmNeedsAPeerSecretAndABadOneIsNamed(@TempDir Path dir) throws Exception {
    assertThatThrownBy(() -> parse(Map.of(), "--peers", "x=127.0.0.5:9000"))
        .hasMessageStartingWith(
            "--peers needs --peer-secret-file: the members of a swarm prove a shared secret");
    Path shortSecret = Files.writeString(dir.resolve("short"), "c2hvcnQ=");
    assertThatThrownBy(() -> parse(Map.of(), "--peer-secret-file", shortSecret.toString()))
        .hasMessage(
            "--peer-secret-file: peer secret in "
                + shortSecret
                + " holds 5 bytes; at least 32 random bytes are needed (e.g. `head -c 32"
                + " /dev/urandom | base64`)");
    Path notBase64 = Files.writeString(dir.resolve("text"), "this is not base64 at all!!");
    assertThatThrownBy(() -> parse(Map.of(), "--peer-secret-file", notBase64.toString()))
        .hasMessageStartingWith(
            "--peer-secret-file: peer secret in " + notBase64 + " is not base64");
    // Operator membership without a secret: the pod runs, its peer port stays closed.
    assertThat(parse(Map.of()).peer().secret()).isNull();
  }

  @Test
  void tokensComeFromFilesOrAreGeneratedIntoAnOwnerOnlyFile(@TempDir Path dir) throws Exception {
    Path read = Files.writeString(dir.resolve("read"), "read-token-0123456789abcdef\n");
    Path admin = Files.writeString(dir.resolve("admin"), "admin-token-0123456789abcdef");
    ControlAuth both =
        parse(
                Map.of(),
                "--read-token-file",
                read.toString(),
                "--admin-token-file",
                admin.toString())
            .controlAuth();
    assertThat(both.scope("Bearer read-token-0123456789abcdef")).isEqualTo(ControlAuth.Scope.READ);
    assertThat(both.scope("Bearer admin-token-0123456789abcdef"))
        .isEqualTo(ControlAuth.Scope.ADMIN);
    // The old flag is the admin token; the read token is then generated.
    Path out = dir.resolve("generated.tokens");
    ControlAuth legacy =
        parse(Map.of(), "--control-token-file", admin.toString(), "--tokens-out", out.toString())
            .controlAuth();
    assertThat(legacy.scope("Bearer admin-token-0123456789abcdef"))
        .isEqualTo(ControlAuth.Scope.ADMIN);
    assertThat(Files.readAllLines(out))
        .filteredOn(l -> !l.startsWith("#"))
        .containsExactly("read=" + legacy.read().value());
    assertThat(Files.getPosixFilePermissions(out))
        .isEqualTo(PosixFilePermissions.fromString("rw-------"));
    // Nothing given: both generated, written to a new owner-only file.
    ControlAuth none = parse(Map.of(), "--tokens-out", out.toString()).controlAuth();
    assertThat(Files.readAllLines(out))
        .filteredOn(l -> !l.startsWith("#"))
        .containsExactly("read=" + none.read().value(), "admin=" + none.admin().value());
    assertThat(none.read().value()).hasSize(43).isNotEqualTo(none.admin().value());
    assertThatThrownBy(
            () ->
                parse(
                    Map.of(),
                    "--control-token-file",
                    admin.toString(),
                    "--admin-token-file",
                    admin.toString()))
        .hasMessage(
            "--control-token-file is the old name of --admin-token-file; give only one of them");
    assertThatThrownBy(
            () ->
                parse(
                    Map.of(),
                    "--read-token-file",
                    admin.toString(),
                    "--admin-token-file",
                    admin.toString()))
        .hasMessage(
            "the read and admin tokens are the same; the read scope would allow PUT /v1/peers");
  }

  @Test
  void insecureEndpointAndRevisionReachTheSettings() {
    ServeSettings s = parse(Map.of(), "--allow-insecure-endpoint", "--revision", "v1.0");
    assertThat(s.allowInsecureEndpoint()).isTrue();
    assertThat(s.revision()).isEqualTo("v1.0");
    assertThat(parse(Map.of()).allowInsecureEndpoint()).isFalse();
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
