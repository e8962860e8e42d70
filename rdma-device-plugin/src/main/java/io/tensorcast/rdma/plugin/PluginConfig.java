package io.tensorcast.rdma.plugin;

import io.tensorcast.api.TensorcastConstants;
import java.nio.file.Path;
import java.time.Duration;

/**
 * Settings of one device plugin instance.
 *
 * @param pluginDir the kubelet's device plugin directory ({@code /var/lib/kubelet/device-plugins}),
 *     holding {@code kubelet.sock} and this plugin's socket
 * @param socketName file name of this plugin's socket in {@code pluginDir}; sent as {@code
 *     RegisterRequest.endpoint}
 * @param resourceName extended resource advertised ({@link TensorcastConstants#RDMA_RESOURCE})
 * @param slotsPerDevice shareable slots advertised per RDMA device, 1..1000
 * @param hostDevRoot the host's {@code /dev} as the kubelet sees it: {@code DeviceSpec.host_path}
 *     values are built under it
 * @param pollInterval how often sysfs and both sockets are checked
 */
public record PluginConfig(
    Path pluginDir,
    String socketName,
    String resourceName,
    int slotsPerDevice,
    String hostDevRoot,
    Duration pollInterval) {

  /** Default socket file name. */
  public static final String DEFAULT_SOCKET_NAME = "tensorcast-rdma.sock";

  /** Name of the kubelet's registration socket in the device plugin directory. */
  public static final String KUBELET_SOCKET = "kubelet.sock";

  public PluginConfig {
    if (slotsPerDevice < 1 || slotsPerDevice > 1000) {
      throw new IllegalArgumentException(
          "slots per device must be between 1 and 1000, got " + slotsPerDevice);
    }
    if (socketName.isEmpty() || socketName.contains("/")) {
      throw new IllegalArgumentException(
          "socket name must be a plain file name inside the plugin directory, got '"
              + socketName
              + "'");
    }
    if (socketName.equals(KUBELET_SOCKET)) {
      throw new IllegalArgumentException("socket name must not be the kubelet's own kubelet.sock");
    }
    if (pollInterval.isNegative() || pollInterval.isZero()) {
      throw new IllegalArgumentException("poll interval must be positive, got " + pollInterval);
    }
  }

  /**
   * Defaults for a node: {@code /var/lib/kubelet/device-plugins}, 5 s polling, host {@code /dev}.
   */
  public static PluginConfig defaults(int slotsPerDevice) {
    return new PluginConfig(
        Path.of("/var/lib/kubelet/device-plugins"),
        DEFAULT_SOCKET_NAME,
        TensorcastConstants.RDMA_RESOURCE,
        slotsPerDevice,
        "/dev",
        Duration.ofSeconds(5));
  }

  /** This plugin's socket path. */
  public Path socketPath() {
    return pluginDir.resolve(socketName);
  }

  /** The kubelet's registration socket path. */
  public Path kubeletSocketPath() {
    return pluginDir.resolve(KUBELET_SOCKET);
  }
}
