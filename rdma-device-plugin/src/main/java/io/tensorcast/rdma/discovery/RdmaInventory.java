package io.tensorcast.rdma.discovery;

import java.util.List;

/**
 * What one sysfs scan found on the node.
 *
 * @param devices every RDMA device under {@code <sysRoot>/class/infiniband}, ordered by name
 * @param rdmaCmPresent whether {@code <devRoot>/infiniband/rdma_cm} (the RDMA connection manager
 *     device, node-wide) exists
 */
public record RdmaInventory(List<RdmaDevice> devices, boolean rdmaCmPresent) {

  public RdmaInventory {
    devices = List.copyOf(devices);
  }

  /** A node without RDMA devices. */
  public static RdmaInventory empty() {
    return new RdmaInventory(List.of(), false);
  }

  /** The devices that pods can use now ({@link RdmaDevice#usable()}). */
  public List<RdmaDevice> usableDevices() {
    return devices.stream().filter(RdmaDevice::usable).toList();
  }
}
