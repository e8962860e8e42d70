package io.tensorcast.rdma.discovery;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.rdma.FakeSysfs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SysfsRdmaDiscoveryTest {

  @TempDir Path dir;

  @Test
  void aNodeWithoutInfinibandClassHasNoDevices() {
    FakeSysfs fs = new FakeSysfs(dir);
    RdmaInventory inv = new SysfsRdmaDiscovery(fs.sysRoot(), fs.devRoot()).discover();
    assertThat(inv.devices()).isEmpty();
    assertThat(inv.rdmaCmPresent()).isFalse();
  }

  @Test
  void readsPortsNumaAndVerbsMappingOfEachDevice() {
    FakeSysfs fs =
        new FakeSysfs(dir)
            .device("mlx5_1", 3, 1, "1: DOWN", "Ethernet", "100 Gb/sec (4X EDR)")
            .device("mlx5_0", 0, 0, "4: ACTIVE", "InfiniBand", "200 Gb/sec (4X HDR)");

    RdmaInventory inv = new SysfsRdmaDiscovery(fs.sysRoot(), fs.devRoot()).discover();

    assertThat(inv.rdmaCmPresent()).isTrue();
    assertThat(inv.devices()).extracting(RdmaDevice::name).containsExactly("mlx5_0", "mlx5_1");
    RdmaDevice up = inv.devices().get(0);
    assertThat(up.uverbs()).contains("uverbs0");
    assertThat(up.uverbsPresent()).isTrue();
    assertThat(up.numaNode()).isZero();
    assertThat(up.ports())
        .containsExactly(
            new RdmaPort(1, "ACTIVE", "LinkUp", "InfiniBand", "200 Gb/sec (4X HDR)", 200.0));
    assertThat(up.usable()).isTrue();
    assertThat(up.whyUnusable()).isEmpty();

    RdmaDevice down = inv.devices().get(1);
    assertThat(down.uverbs()).contains("uverbs3");
    assertThat(down.numaNode()).isEqualTo(1);
    assertThat(down.ports().get(0).state()).isEqualTo("DOWN");
    assertThat(down.ports().get(0).linkLayer()).isEqualTo("Ethernet");
    assertThat(down.usable()).isFalse();
    assertThat(down.whyUnusable()).isEqualTo("no port is ACTIVE (port 1: DOWN/Disabled)");
    assertThat(inv.usableDevices()).extracting(RdmaDevice::name).containsExactly("mlx5_0");
  }

  @Test
  void aDeviceIsUsableWhenAnyPortIsActive() {
    FakeSysfs fs =
        new FakeSysfs(dir)
            .device("mlx5_0", 0, 0, "1: DOWN", "InfiniBand", "100 Gb/sec (4X EDR)")
            .port("mlx5_0", 2, "4: ACTIVE", "5: LinkUp", "InfiniBand", "100 Gb/sec (4X EDR)");
    RdmaDevice d = new SysfsRdmaDiscovery(fs.sysRoot(), fs.devRoot()).discover().devices().get(0);
    assertThat(d.ports()).extracting(RdmaPort::port).containsExactly(1, 2);
    assertThat(d.usable()).isTrue();
  }

  @Test
  void anActiveDeviceWithoutItsVerbsDeviceFileIsNotUsable() {
    FakeSysfs fs =
        new FakeSysfs(dir)
            .device("mlx5_0", 0, 0, "4: ACTIVE", "InfiniBand", "200 Gb/sec (4X HDR)")
            .removeDev("infiniband/uverbs0")
            .removeDev("infiniband/rdma_cm");
    RdmaInventory inv = new SysfsRdmaDiscovery(fs.sysRoot(), fs.devRoot()).discover();
    RdmaDevice d = inv.devices().get(0);
    assertThat(d.uverbs()).contains("uverbs0");
    assertThat(d.uverbsPresent()).isFalse();
    assertThat(d.usable()).isFalse();
    assertThat(d.whyUnusable())
        .isEqualTo("device file infiniband/uverbs0 is missing under the dev root");
    assertThat(inv.rdmaCmPresent()).isFalse();
  }

  @Test
  void aDeviceNoVerbsDeviceNamesIsNotUsable() throws Exception {
    FakeSysfs fs =
        new FakeSysfs(dir).device("mlx5_0", 0, -1, "4: ACTIVE", "InfiniBand", "200 Gb/sec");
    Files.writeString(fs.sysRoot().resolve("class/infiniband_verbs/uverbs0/ibdev"), "mlx5_9\n");
    RdmaDevice d = new SysfsRdmaDiscovery(fs.sysRoot(), fs.devRoot()).discover().devices().get(0);
    assertThat(d.uverbs()).isEqualTo(Optional.empty());
    assertThat(d.numaNode()).isEqualTo(-1);
    assertThat(d.whyUnusable())
        .isEqualTo("no /sys/class/infiniband_verbs/uverbs*/ibdev names mlx5_0");
  }

  @Test
  void unreadableOrOddValuesBecomeUnknownNotErrors() throws Exception {
    FakeSysfs fs =
        new FakeSysfs(dir).device("rxe0", 0, 0, "4: ACTIVE", "Ethernet", "10 Gb/sec (1X QDR)");
    Path port = fs.sysRoot().resolve("class/infiniband/rxe0/ports/1");
    Files.delete(port.resolve("link_layer"));
    Files.writeString(port.resolve("rate"), "weird\n");
    Files.writeString(fs.sysRoot().resolve("class/infiniband/rxe0/device/numa_node"), "x\n");
    Files.createDirectories(fs.sysRoot().resolve("class/infiniband/rxe0/ports/not-a-port"));
    RdmaDevice d = new SysfsRdmaDiscovery(fs.sysRoot(), fs.devRoot()).discover().devices().get(0);
    assertThat(d.ports()).hasSize(1);
    assertThat(d.ports().get(0).linkLayer()).isEqualTo(RdmaPort.UNKNOWN);
    assertThat(d.ports().get(0).rateGbps()).isNaN();
    assertThat(d.numaNode()).isEqualTo(-1);
  }

  @Test
  void parsesKernelStateAndRateTexts() {
    assertThat(SysfsRdmaDiscovery.stateName("4: ACTIVE\n")).isEqualTo("ACTIVE");
    assertThat(SysfsRdmaDiscovery.stateName("2: INIT")).isEqualTo("INIT");
    assertThat(SysfsRdmaDiscovery.stateName("5: LinkUp")).isEqualTo("LinkUp");
    assertThat(SysfsRdmaDiscovery.stateName("")).isEqualTo(RdmaPort.UNKNOWN);
    assertThat(SysfsRdmaDiscovery.rateGbps("2.5 Gb/sec (1X SDR)")).isEqualTo(2.5);
    assertThat(SysfsRdmaDiscovery.rateGbps("400 Gb/sec (4X NDR)")).isEqualTo(400.0);
    assertThat(SysfsRdmaDiscovery.rateGbps("")).isNaN();
  }
}
