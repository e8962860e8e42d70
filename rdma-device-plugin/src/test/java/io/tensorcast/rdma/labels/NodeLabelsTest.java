package io.tensorcast.rdma.labels;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.rdma.FakeSysfs;
import io.tensorcast.rdma.discovery.RdmaInventory;
import io.tensorcast.rdma.discovery.SysfsRdmaDiscovery;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class NodeLabelsTest {

  @TempDir Path dir;

  private RdmaInventory scan(FakeSysfs fs) {
    return new SysfsRdmaDiscovery(fs.sysRoot(), fs.devRoot()).discover();
  }

  @Test
  void labelsTheFastestActivePortAndCountsUsableDevices() {
    FakeSysfs fs =
        new FakeSysfs(dir)
            .device("mlx5_0", 0, 0, "4: ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)")
            .device("mlx5_1", 1, 0, "4: ACTIVE", "InfiniBand", "200 Gb/sec (4X HDR)")
            .device("mlx5_2", 2, 1, "1: DOWN", "InfiniBand", "400 Gb/sec (4X NDR)");
    assertThat(NodeLabels.desired(scan(fs)))
        .containsExactlyInAnyOrderEntriesOf(
            Map.of(
                "tensorcast.io/rdma", "true",
                "tensorcast.io/rdma-link-layer", "InfiniBand",
                "tensorcast.io/rdma-rate", "200",
                "tensorcast.io/rdma-devices", "2"));
  }

  @Test
  void fractionalRatesStayExact() {
    FakeSysfs fs =
        new FakeSysfs(dir).device("rxe0", 0, 0, "4: ACTIVE", "Ethernet", "2.5 Gb/sec (1X SDR)");
    assertThat(NodeLabels.desired(scan(fs))).containsEntry("tensorcast.io/rdma-rate", "2.5");
  }

  @Test
  void noUsableDeviceMeansNoLabels() {
    FakeSysfs fs = new FakeSysfs(dir).device("mlx5_0", 0, 0, "1: DOWN", "InfiniBand", "200 Gb/sec");
    assertThat(NodeLabels.desired(scan(fs))).isEmpty();
    assertThat(NodeLabels.desired(scan(new FakeSysfs(dir.resolve("none"))))).isEmpty();
  }

  @Test
  void valuesAreMadeLabelSafe() {
    assertThat(NodeLabels.labelValue("InfiniBand")).contains("InfiniBand");
    assertThat(NodeLabels.labelValue(" Infini Band (x) ")).contains("Infini-Band--x");
    assertThat(NodeLabels.labelValue("x".repeat(70))).contains("x".repeat(63));
    assertThat(NodeLabels.labelValue("(?)")).isEmpty();
  }

  @Test
  void mergePatchSetsOursAndNullsTheRest() {
    assertThat(NodeLabeler.mergePatch(Map.of("tensorcast.io/rdma", "true")))
        .isEqualTo(
            "{\"metadata\":{\"labels\":{\"tensorcast.io/rdma\":\"true\","
                + "\"tensorcast.io/rdma-link-layer\":null,\"tensorcast.io/rdma-rate\":null,"
                + "\"tensorcast.io/rdma-devices\":null}}}");
  }
}
