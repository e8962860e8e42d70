package io.tensorcast.rdma.plugin;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import java.util.function.ToIntFunction;
import org.junit.jupiter.api.Test;

class PreferredAllocationTest {

  // mlx5_0 and mlx5_1 on NUMA node 0, mlx5_2 on node 1.
  private static final ToIntFunction<String> NUMA =
      d -> Map.of("mlx5_0", 0, "mlx5_1", 0, "mlx5_2", 1).getOrDefault(d, -1);

  @Test
  void keepsAContainerOnTheDeviceOfItsMustIncludeSlot() {
    List<String> got =
        PreferredAllocation.choose(
            List.of("mlx5_0-0", "mlx5_1-0", "mlx5_1-1", "mlx5_2-0", "mlx5_2-1", "mlx5_2-2"),
            List.of("mlx5_2-1"),
            3,
            NUMA);
    assertThat(got).containsExactly("mlx5_2-1", "mlx5_2-0", "mlx5_2-2");
  }

  @Test
  void startsOnTheDeviceWithTheMostFreeSlots() {
    List<String> got =
        PreferredAllocation.choose(
            List.of("mlx5_0-3", "mlx5_1-0", "mlx5_1-1", "mlx5_2-0"), List.of(), 2, NUMA);
    assertThat(got).containsExactly("mlx5_1-0", "mlx5_1-1");
  }

  @Test
  void spillsOverToTheSameNumaNodeBeforeAnother() {
    // mlx5_2 has more free slots, but the request starts on mlx5_0 (node 0): mlx5_1 is preferred.
    List<String> got =
        PreferredAllocation.choose(
            List.of("mlx5_0-0", "mlx5_1-0", "mlx5_2-0", "mlx5_2-1", "mlx5_2-2"),
            List.of("mlx5_0-0"),
            2,
            NUMA);
    assertThat(got).containsExactly("mlx5_0-0", "mlx5_1-0");
  }

  @Test
  void answersWithWhatIsAvailableWhenTooFew() {
    assertThat(PreferredAllocation.choose(List.of("mlx5_0-0"), List.of(), 3, NUMA))
        .containsExactly("mlx5_0-0");
    assertThat(PreferredAllocation.choose(List.of(), List.of("mlx5_0-1"), 1, NUMA))
        .containsExactly("mlx5_0-1");
  }

  @Test
  void deviceIdsRoundTrip() {
    assertThat(DeviceIds.id("mlx5_0", 7)).isEqualTo("mlx5_0-7");
    assertThat(DeviceIds.deviceOf("rxe-eth0-12")).contains("rxe-eth0");
    assertThat(DeviceIds.slotOf("rxe-eth0-12")).isEqualTo(12);
    assertThat(DeviceIds.deviceOf("mlx5_0")).isEmpty();
    assertThat(DeviceIds.deviceOf("mlx5_0-")).isEmpty();
    assertThat(DeviceIds.slotOf("mlx5_0-x")).isEqualTo(-1);
  }
}
