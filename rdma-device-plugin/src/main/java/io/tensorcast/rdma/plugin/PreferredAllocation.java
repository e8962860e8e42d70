package io.tensorcast.rdma.plugin;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.ToIntFunction;

/**
 * Chooses which slot IDs a container should get ({@code GetPreferredAllocation}): keep a
 * container's slots on as few RDMA devices as possible, and when it must span devices keep them on
 * one NUMA node.
 *
 * <p>Order of preference for each further slot: a device already chosen, then a device on a NUMA
 * node already chosen, then the device with the most free slots (so the rest of the request fits on
 * it), then device name and slot number (stable answers). {@code must_include} IDs are always taken
 * first, as the kubelet requires.
 */
public final class PreferredAllocation {

  private PreferredAllocation() {}

  /**
   * @param available IDs the kubelet can give ({@code available_deviceIDs})
   * @param mustInclude IDs the answer must contain ({@code must_include_deviceIDs})
   * @param size number of IDs wanted ({@code allocation_size})
   * @param numaNodeOfDevice NUMA node of a device name, -1 when unknown
   * @return {@code max(size, mustInclude.size())} IDs at most, fewer only when {@code available}
   *     has fewer; must-include IDs first
   */
  public static List<String> choose(
      List<String> available,
      List<String> mustInclude,
      int size,
      ToIntFunction<String> numaNodeOfDevice) {
    Set<String> chosen = new LinkedHashSet<>(mustInclude);
    List<String> free = new ArrayList<>();
    for (String id : new LinkedHashSet<>(available)) {
      if (!chosen.contains(id)) {
        free.add(id);
      }
    }
    while (chosen.size() < size && !free.isEmpty()) {
      Set<String> chosenDevices = new LinkedHashSet<>();
      Set<Integer> chosenNuma = new LinkedHashSet<>();
      for (String id : chosen) {
        String dev = device(id);
        chosenDevices.add(dev);
        int numa = numaNodeOfDevice.applyAsInt(dev);
        if (numa >= 0) {
          chosenNuma.add(numa);
        }
      }
      Map<String, Integer> freePerDevice = new HashMap<>();
      for (String id : free) {
        freePerDevice.merge(device(id), 1, Integer::sum);
      }
      Comparator<String> order =
          Comparator.<String>comparingInt(id -> chosenDevices.contains(device(id)) ? 0 : 1)
              .thenComparingInt(
                  id -> chosenNuma.contains(numaNodeOfDevice.applyAsInt(device(id))) ? 0 : 1)
              .thenComparingInt(id -> -freePerDevice.get(device(id)))
              .thenComparing(PreferredAllocation::device)
              .thenComparingInt(DeviceIds::slotOf)
              .thenComparing(Comparator.naturalOrder());
      String best = free.stream().min(order).orElseThrow();
      chosen.add(best);
      free.remove(best);
    }
    return List.copyOf(chosen);
  }

  private static String device(String id) {
    return DeviceIds.deviceOf(id).orElse(id);
  }
}
