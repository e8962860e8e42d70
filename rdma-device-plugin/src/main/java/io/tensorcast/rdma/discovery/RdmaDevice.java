package io.tensorcast.rdma.discovery;

import java.util.List;
import java.util.Optional;

/**
 * An RDMA device found in sysfs ({@code /sys/class/infiniband/<name>}).
 *
 * @param name kernel device name, e.g. {@code mlx5_0}
 * @param ports its ports, ordered by port number
 * @param uverbs the user verbs character device serving it, e.g. {@code uverbs0} (from {@code
 *     /sys/class/infiniband_verbs/uverbsN/ibdev}); empty when no verbs device maps to it
 * @param uverbsPresent whether {@code <devRoot>/infiniband/<uverbs>} exists, i.e. whether a
 *     container could be given the device
 * @param numaNode NUMA node of the device's PCI function from {@code device/numa_node}; {@code -1}
 *     when unknown (the kernel writes -1 on single-node machines)
 */
public record RdmaDevice(
    String name,
    List<RdmaPort> ports,
    Optional<String> uverbs,
    boolean uverbsPresent,
    int numaNode) {

  public RdmaDevice {
    ports = List.copyOf(ports);
  }

  /**
   * Whether pods can use the device now: at least one port is {@link RdmaPort#ACTIVE} and its user
   * verbs device exists. This is what the plugin reports as {@code Healthy}.
   */
  public boolean usable() {
    return uverbsPresent && uverbs.isPresent() && ports.stream().anyMatch(RdmaPort::active);
  }

  /** Why {@link #usable()} is false, in words naming the sysfs/dev file; empty when usable. */
  public String whyUnusable() {
    if (uverbs.isEmpty()) {
      return "no /sys/class/infiniband_verbs/uverbs*/ibdev names " + name;
    }
    if (!uverbsPresent) {
      return "device file infiniband/" + uverbs.get() + " is missing under the dev root";
    }
    if (ports.isEmpty()) {
      return "no ports under /sys/class/infiniband/" + name + "/ports";
    }
    if (ports.stream().noneMatch(RdmaPort::active)) {
      StringBuilder b = new StringBuilder("no port is ACTIVE (");
      for (int i = 0; i < ports.size(); i++) {
        RdmaPort p = ports.get(i);
        b.append(i == 0 ? "" : ", ")
            .append("port ")
            .append(p.port())
            .append(": ")
            .append(p.state())
            .append('/')
            .append(p.physState());
      }
      return b.append(')').toString();
    }
    return "";
  }
}
