package io.tensorcast.operator.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fabric8.kubernetes.api.model.Quantity;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

class OperatorConfigTest {

  @Test
  void defaults() {
    OperatorConfig c = OperatorConfig.defaults();

    assertThat(c.dataPlaneImage()).isEqualTo("tensorcast/dataplane:0.1.0");
    assertThat(c.controlPort()).isEqualTo(8471);
    assertThat(c.peerPort()).isEqualTo(8472);
    assertThat(c.metricsPort()).isEqualTo(8080);
    assertThat(c.storeRoot()).isEqualTo("/dev/shm/tensorcast");
    assertThat(c.memoryOverheadBytes()).isEqualTo(256L * 1024 * 1024);
    assertThat(c.pollInterval()).isEqualTo(Duration.ofSeconds(2));
    assertThat(c.controlTokenSecret()).isEmpty();
  }

  @Test
  void readsEveryVariable() {
    OperatorConfig c =
        OperatorConfig.fromLookup(
            Map.of(
                    "TENSORCAST_DATAPLANE_IMAGE", "registry/dp:1",
                    "TENSORCAST_DATAPLANE_IMAGE_PULL_POLICY", "Always",
                    "TENSORCAST_CONTROL_PORT", "9000",
                    "TENSORCAST_STORE_ROOT", "/mnt/store",
                    "TENSORCAST_MEMORY_OVERHEAD", "64Mi",
                    "TENSORCAST_POLL_INTERVAL", "PT0.5S",
                    "TENSORCAST_READY_RESYNC", "30",
                    "TENSORCAST_STATUS_TIMEOUT", "PT1S",
                    "TENSORCAST_CONTROL_TOKEN_SECRET", "tok",
                    "TENSORCAST_CONTROL_TOKEN_FILE", "/etc/tok")
                ::get);

    assertThat(c.dataPlaneImage()).isEqualTo("registry/dp:1");
    assertThat(c.imagePullPolicy()).isEqualTo("Always");
    assertThat(c.controlPort()).isEqualTo(9000);
    assertThat(c.storeRoot()).isEqualTo("/mnt/store");
    assertThat(c.memoryOverheadBytes()).isEqualTo(64L * 1024 * 1024);
    assertThat(c.pollInterval()).isEqualTo(Duration.ofMillis(500));
    assertThat(c.readyResync()).isEqualTo(Duration.ofSeconds(30));
    assertThat(c.controlTokenFile()).contains(Path.of("/etc/tok"));
  }

  @Test
  void badValuesNameTheVariable() {
    assertThatThrownBy(() -> OperatorConfig.fromLookup(Map.of("TENSORCAST_CONTROL_PORT", "x")::get))
        .hasMessageContaining("TENSORCAST_CONTROL_PORT='x' is not an integer");
    assertThatThrownBy(
            () -> OperatorConfig.fromLookup(Map.of("TENSORCAST_MEMORY_OVERHEAD", "lots")::get))
        .hasMessageContaining("TENSORCAST_MEMORY_OVERHEAD='lots'");
    assertThatThrownBy(() -> OperatorConfig.fromLookup(Map.of("TENSORCAST_STORE_ROOT", "rel")::get))
        .hasMessageContaining("not an absolute path (TENSORCAST_STORE_ROOT)");
    assertThatThrownBy(
            () -> OperatorConfig.fromLookup(Map.of("TENSORCAST_CONTROL_TOKEN_SECRET", "s")::get))
        .hasMessageContaining("go together");
  }

  @Test
  void readsThePeerAndMetricsPortsAndRejectsClashes() {
    OperatorConfig c =
        OperatorConfig.fromLookup(
            Map.of("TENSORCAST_PEER_PORT", "9472", "TENSORCAST_METRICS_PORT", "0")::get);

    assertThat(c.peerPort()).isEqualTo(9472);
    assertThat(c.metricsPort()).isZero();
    assertThatThrownBy(() -> OperatorConfig.fromLookup(Map.of("TENSORCAST_PEER_PORT", "8471")::get))
        .hasMessageContaining("peer port and control port are both 8471");
    assertThatThrownBy(() -> OperatorConfig.fromLookup(Map.of("TENSORCAST_PEER_PORT", "0")::get))
        .hasMessageContaining("peer port 0 is outside 1-65535 (TENSORCAST_PEER_PORT)");
    assertThatThrownBy(
            () -> OperatorConfig.fromLookup(Map.of("TENSORCAST_METRICS_PORT", "70000")::get))
        .hasMessageContaining("(TENSORCAST_METRICS_PORT)");
  }

  @Test
  void healthPortLeaderElectionAndDataPlanePodSettings() {
    OperatorConfig defaults = OperatorConfig.defaults();
    assertThat(defaults.healthPort()).isEqualTo(8081);
    assertThat(defaults.leaderElection()).isEmpty();
    assertThat(defaults.dataPlanePod()).isEqualTo(OperatorConfig.DataPlanePodSettings.none());

    OperatorConfig c =
        OperatorConfig.fromLookup(
            Map.of(
                    "TENSORCAST_HEALTH_PORT", "9091",
                    "TENSORCAST_LEADER_ELECTION_LEASE", "tensorcast-operator",
                    "TENSORCAST_LEADER_ELECTION_NAMESPACE", "tensorcast",
                    "TENSORCAST_LEADER_ELECTION_LEASE_DURATION", "PT3S",
                    "TENSORCAST_DATAPLANE_IMAGE_PULL_SECRETS", "a,b",
                    "TENSORCAST_DATAPLANE_PRIORITY_CLASS", "high",
                    "TENSORCAST_DATAPLANE_CPU_REQUEST", "2")
                ::get);

    assertThat(c.healthPort()).isEqualTo(9091);
    OperatorConfig.LeaderElection le = c.leaderElection().orElseThrow();
    assertThat(le.lease()).isEqualTo("tensorcast-operator");
    assertThat(le.namespace()).contains("tensorcast");
    assertThat(le.leaseDuration()).isEqualTo(Duration.ofSeconds(3));
    assertThat(le.renewDeadline()).isEqualTo(Duration.ofSeconds(2));
    assertThat(le.retryPeriod()).isEqualTo(Duration.ofMillis(400));
    assertThat(OperatorConfig.DEFAULT_LEASE_DURATION.multipliedBy(2).dividedBy(15))
        .as("retry period of the default lease, JOSDK's default")
        .isEqualTo(Duration.ofSeconds(2));
    assertThat(c.dataPlanePod().imagePullSecrets()).containsExactly("a", "b");
    assertThat(c.dataPlanePod().priorityClassName()).contains("high");
    assertThat(c.dataPlanePod().cpuRequest()).contains(new Quantity("2"));
  }

  @Test
  void badHealthLeaseAndPodSettingsNameTheVariable() {
    assertThatThrownBy(
            () ->
                OperatorConfig.fromLookup(
                    Map.of("TENSORCAST_HEALTH_PORT", "8080", "TENSORCAST_METRICS_PORT", "8080")
                        ::get))
        .hasMessageContaining("health port and metrics port are both 8080");
    assertThatThrownBy(
            () -> OperatorConfig.fromLookup(Map.of("TENSORCAST_HEALTH_PORT", "abc")::get))
        .hasMessageContaining("TENSORCAST_HEALTH_PORT='abc' is not an integer");
    assertThatThrownBy(
            () ->
                OperatorConfig.fromLookup(
                    Map.of("TENSORCAST_LEADER_ELECTION_LEASE", "Not_A_Name")::get))
        .hasMessageContaining("TENSORCAST_LEADER_ELECTION_LEASE='Not_A_Name'");
    assertThatThrownBy(
            () ->
                OperatorConfig.fromLookup(
                    Map.of(
                            "TENSORCAST_LEADER_ELECTION_LEASE", "l",
                            "TENSORCAST_LEADER_ELECTION_LEASE_DURATION", "PT0.5S")
                        ::get))
        .hasMessageContaining("shorter than 1 s (TENSORCAST_LEADER_ELECTION_LEASE_DURATION)");
    assertThatThrownBy(
            () ->
                OperatorConfig.fromLookup(
                    Map.of("TENSORCAST_DATAPLANE_IMAGE_PULL_SECRETS", "ok,Bad Name")::get))
        .hasMessageContaining("TENSORCAST_DATAPLANE_IMAGE_PULL_SECRETS='Bad Name'");
    assertThatThrownBy(
            () ->
                OperatorConfig.fromLookup(Map.of("TENSORCAST_DATAPLANE_CPU_REQUEST", "lots")::get))
        .hasMessageContaining("TENSORCAST_DATAPLANE_CPU_REQUEST='lots'");
    assertThatThrownBy(
            () -> OperatorConfig.fromLookup(Map.of("TENSORCAST_DATAPLANE_CPU_REQUEST", "0")::get))
        .hasMessageContaining("must be more than 0");
  }
}
