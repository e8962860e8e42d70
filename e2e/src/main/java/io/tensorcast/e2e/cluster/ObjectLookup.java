package io.tensorcast.e2e.cluster;

import java.util.Map;

/**
 * Reads Secrets and ConfigMaps for {@link SimulatedKubelet}; the seam that makes it unit-testable.
 */
interface ObjectLookup {

  /**
   * The Secret's {@code data}, base64-decoded (key → bytes), or {@code null} when it does not
   * exist.
   */
  Map<String, byte[]> secret(String namespace, String name);

  /**
   * The ConfigMap's {@code data} and decoded {@code binaryData} merged, or {@code null} when it
   * does not exist.
   */
  Map<String, byte[]> configMap(String namespace, String name);
}
