package io.tensorcast.rdma.plugin;

import java.util.Optional;

/**
 * The device IDs this plugin advertises: one ID per shareable slot of an RDMA device, {@code
 * <device>-<slot>} with slot {@code 0..slots-1}, e.g. {@code mlx5_0-3}. The kubelet limits a device
 * ID to 63 characters (deviceplugin/v1beta1 {@code Device.ID}).
 */
public final class DeviceIds {

  /** Longest device ID the kubelet accepts. */
  public static final int MAX_ID_LENGTH = 63;

  private DeviceIds() {}

  /** The ID of slot {@code slot} of device {@code device}. */
  public static String id(String device, int slot) {
    return device + "-" + slot;
  }

  /**
   * The device name of an ID built by {@link #id}; empty when the ID has no {@code -<number>}
   * suffix.
   */
  public static Optional<String> deviceOf(String id) {
    int dash = id.lastIndexOf('-');
    if (dash <= 0 || dash == id.length() - 1) {
      return Optional.empty();
    }
    for (int i = dash + 1; i < id.length(); i++) {
      if (!Character.isDigit(id.charAt(i))) {
        return Optional.empty();
      }
    }
    return Optional.of(id.substring(0, dash));
  }

  /** The slot number of an ID built by {@link #id}; -1 when it has none. */
  public static int slotOf(String id) {
    return deviceOf(id).map(d -> Integer.parseInt(id.substring(d.length() + 1))).orElse(-1);
  }
}
