package io.tensorcast.csi;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;

/**
 * Settings of one node driver.
 *
 * @param nodeName the node this driver runs on ({@code spec.nodeName} of its pod); it mounts only
 *     copies that the artifact's status reports Ready on this node
 * @param storeRoot the node's store root as this process sees it (the operator's {@code
 *     TENSORCAST_STORE_ROOT}, mounted at the same path): copies are {@code
 *     <storeRoot>/<namespace>.<name>/<artifactId>}
 * @param kubeletRoot the kubelet's root directory as this process sees it ({@code
 *     /var/lib/kubelet}); target paths must lie under {@code <kubeletRoot>/pods/}
 * @param defaultReadyTimeout how long one mount waits for the copy when the volume sets no {@code
 *     readyTimeout}
 * @param maxReadyTimeout the largest {@code readyTimeout} a volume may ask for
 */
public record DriverConfig(
    String nodeName,
    Path storeRoot,
    Path kubeletRoot,
    Duration defaultReadyTimeout,
    Duration maxReadyTimeout) {

  /** 3 minutes: a model of a few GiB loads well within it on a working cluster. */
  public static final Duration DEFAULT_READY_TIMEOUT = Duration.ofMinutes(3);

  /** 1 hour. */
  public static final Duration MAX_READY_TIMEOUT = Duration.ofHours(1);

  public DriverConfig {
    Objects.requireNonNull(nodeName, "nodeName");
    if (nodeName.isBlank()) {
      throw new IllegalArgumentException("node name is required (--node-name or NODE_NAME)");
    }
    storeRoot = storeRoot.toAbsolutePath().normalize();
    kubeletRoot = kubeletRoot.toAbsolutePath().normalize();
    if (defaultReadyTimeout.isNegative() || defaultReadyTimeout.compareTo(maxReadyTimeout) > 0) {
      throw new IllegalArgumentException(
          "default ready timeout "
              + defaultReadyTimeout
              + " must be between 0 and the maximum "
              + maxReadyTimeout);
    }
  }

  /** A config with the default and maximum ready timeouts. */
  public static DriverConfig of(String nodeName, Path storeRoot, Path kubeletRoot) {
    return new DriverConfig(
        nodeName, storeRoot, kubeletRoot, DEFAULT_READY_TIMEOUT, MAX_READY_TIMEOUT);
  }
}
