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
    assertThat(c.masterKeyFile()).isEmpty();
    assertThat(c.allowedEndpoints().isEmpty()).isTrue();
    assertThat(c.dataPlaneUser()).isEqualTo(10001);
    assertThat(c.networkPolicy()).isTrue();
    assertThat(c.operatorNamespace()).isEmpty();
  }

  @Test
  void readsEveryVariable() {
    OperatorConfig c =
        OperatorConfig.fromLookup(
            Map.ofEntries(
                    Map.entry("TENSORCAST_DATAPLANE_IMAGE", "registry/dp:1"),
                    Map.entry("TENSORCAST_DATAPLANE_IMAGE_PULL_POLICY", "Always"),
                    Map.entry("TENSORCAST_CONTROL_PORT", "9000"),
                    Map.entry("TENSORCAST_STORE_ROOT", "/mnt/store"),
                    Map.entry("TENSORCAST_MEMORY_OVERHEAD", "64Mi"),
                    Map.entry("TENSORCAST_POLL_INTERVAL", "PT0.5S"),
                    Map.entry("TENSORCAST_READY_RESYNC", "30"),
                    Map.entry("TENSORCAST_STATUS_TIMEOUT", "PT1S"),
                    Map.entry("TENSORCAST_MASTER_KEY_FILE", "/etc/tensorcast/master-key"),
                    Map.entry(
                        "TENSORCAST_ALLOWED_ENDPOINTS",
                        "https://s3.*.amazonaws.com, https://minio.storage:9000"),
                    Map.entry("TENSORCAST_DATAPLANE_USER", "20002"),
                    Map.entry("TENSORCAST_NETWORK_POLICY", "false"),
                    Map.entry("TENSORCAST_OPERATOR_NAMESPACE", "tensorcast"))
                ::get);

    assertThat(c.dataPlaneImage()).isEqualTo("registry/dp:1");
    assertThat(c.imagePullPolicy()).isEqualTo("Always");
    assertThat(c.controlPort()).isEqualTo(9000);
    assertThat(c.storeRoot()).isEqualTo("/mnt/store");
    assertThat(c.memoryOverheadBytes()).isEqualTo(64L * 1024 * 1024);
    assertThat(c.pollInterval()).isEqualTo(Duration.ofMillis(500));
    assertThat(c.readyResync()).isEqualTo(Duration.ofSeconds(30));
    assertThat(c.masterKeyFile()).contains(Path.of("/etc/tensorcast/master-key"));
    assertThat(c.allowedEndpoints().entries())
        .containsExactly("https://s3.*.amazonaws.com", "https://minio.storage:9000");
    assertThat(c.dataPlaneUser()).isEqualTo(20002);
    assertThat(c.networkPolicy()).isFalse();
    assertThat(c.operatorNamespace()).contains("tensorcast");
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
            () -> OperatorConfig.fromLookup(Map.of("TENSORCAST_DATAPLANE_USER", "0")::get))
        .hasMessageContaining("data-plane user 0 is not a non-root uid")
        .hasMessageContaining("(TENSORCAST_DATAPLANE_USER)");
    assertThatThrownBy(
            () -> OperatorConfig.fromLookup(Map.of("TENSORCAST_NETWORK_POLICY", "yes")::get))
        .hasMessageContaining("TENSORCAST_NETWORK_POLICY='yes' is not true or false");
    assertThatThrownBy(
            () ->
                OperatorConfig.fromLookup(
                    Map.of("TENSORCAST_ALLOWED_ENDPOINTS", "https://ok.example, s3.example")::get))
        .hasMessageContaining(
            "TENSORCAST_ALLOWED_ENDPOINTS: allowed endpoint 's3.example' is not"
                + " scheme://host[:port]");
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

  @Test
  void formatLimitsAreReadSortedAndCheckedByName() {
    OperatorConfig c =
        OperatorConfig.fromLookup(
            Map.of(
                    "TENSORCAST_FORMAT_LIMITS",
                    " max-zip-ratio=200 , max-header-bytes=200Mi,max-tensors=2000000")
                ::get);

    assertThat(c.formatLimits())
        .containsExactly(
            Map.entry("max-header-bytes", "200Mi"),
            Map.entry("max-tensors", "2000000"),
            Map.entry("max-zip-ratio", "200"));
    assertThat(OperatorConfig.defaults().formatLimits()).isEmpty();
    assertThatThrownBy(
            () ->
                OperatorConfig.fromLookup(Map.of("TENSORCAST_FORMAT_LIMITS", "max-tensor=5")::get))
        .hasMessageContaining(
            "TENSORCAST_FORMAT_LIMITS: 'max-tensor' is not a format limit; the limits are"
                + " max-header-bytes, max-tensors");
    assertThatThrownBy(
            () ->
                OperatorConfig.fromLookup(
                    Map.of("TENSORCAST_FORMAT_LIMITS", "max-tensors=2Mi")::get))
        .hasMessageContaining("max-tensors='2Mi' is not a positive integer");
    assertThatThrownBy(
            () ->
                OperatorConfig.fromLookup(
                    Map.of("TENSORCAST_FORMAT_LIMITS", "max-rank=4; rm -rf /")::get))
        .hasMessageContaining("max-rank='4; rm -rf /' is not a positive integer");
  }
}
