package io.tensorcast.api;

import io.fabric8.kubernetes.api.model.CSIVolumeSource;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Volume;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * How consumer pods ask for an artifact's copy, shared by the CSI node driver (which mounts it) and
 * the operator (which counts the pods that use it and labels the nodes that hold it).
 *
 * <p>A consumer pod declares an inline ephemeral CSI volume:
 *
 * <pre>
 *   volumes:
 *     - name: model
 *       csi:
 *         driver: csi.tensorcast.io
 *         readOnly: true
 *         volumeAttributes:
 *           modelArtifact: llama        # a ModelArtifact of the pod's own namespace
 *           readyTimeout: 5m            # optional: how long one mount waits for the copy
 * </pre>
 *
 * A reference is a plain name, or {@code <namespace>/<name>} where the namespace must be the pod's;
 * a pod may never use an artifact of another namespace.
 *
 * <p>Nodes where the artifact's current generation is Ready carry the label {@link #nodeLabelKey}
 * with the generation as value, so consumers can ask for such a node with node affinity.
 */
public final class ConsumerVolumes {

  /** The CSI driver name (CSIDriver object, {@code csi.driver} of a pod's volume). */
  public static final String DRIVER = "csi.tensorcast.io";

  /** Volume attribute: the ModelArtifact to mount. */
  public static final String ATTR_MODEL_ARTIFACT = "modelArtifact";

  /**
   * Volume attribute: the namespace of the artifact; optional, and if set it must be the pod's own.
   */
  public static final String ATTR_NAMESPACE = "namespace";

  /**
   * Volume attribute: how long one mount waits for the copy to be Ready on the pod's node, as a
   * duration such as {@code 90s}, {@code 5m}, {@code 1h30m} or ISO-8601 {@code PT5M}.
   */
  public static final String ATTR_READY_TIMEOUT = "readyTimeout";

  /**
   * Prefix of the per-artifact node label keys, {@code modelartifact.tensorcast.io/<ns>.<name>}.
   */
  public static final String NODE_LABEL_PREFIX = "modelartifact.tensorcast.io/";

  /** Longest name part of a label key (Kubernetes label syntax). */
  private static final int MAX_LABEL_NAME = 63;

  private ConsumerVolumes() {}

  /**
   * The label key marking nodes where the artifact's current generation is Ready: {@code
   * modelartifact.tensorcast.io/<namespace>.<name>}. When {@code <namespace>.<name>} is longer than
   * 63 characters, it is cut to 52 characters (trailing '-' and '.' dropped) and followed by '-'
   * and 10 hex of the SHA-256 of {@code <namespace>/<name>}, so the key stays a valid, unique label
   * key.
   */
  public static String nodeLabelKey(String namespace, String name) {
    String full = namespace + "." + name;
    if (full.length() <= MAX_LABEL_NAME) {
      return NODE_LABEL_PREFIX + full;
    }
    String hash = StoreLayout.sha256Hex(namespace + "/" + name).substring(0, 10);
    String cut = full.substring(0, MAX_LABEL_NAME - hash.length() - 1);
    while (cut.endsWith("-") || cut.endsWith(".")) {
      cut = cut.substring(0, cut.length() - 1);
    }
    return NODE_LABEL_PREFIX + cut + "-" + hash;
  }

  /**
   * The artifact name a reference stands for when read in {@code podNamespace}: {@code name} for
   * {@code name} and for {@code podNamespace/name}; empty for a reference to another namespace, or
   * one that is empty or has more than one '/'.
   */
  public static Optional<String> sameNamespaceName(String reference, String podNamespace) {
    if (reference == null) {
      return Optional.empty();
    }
    String ref = reference.trim();
    int slash = ref.indexOf('/');
    if (slash < 0) {
      return ref.isEmpty() ? Optional.empty() : Optional.of(ref);
    }
    if (ref.indexOf('/', slash + 1) >= 0) {
      return Optional.empty();
    }
    String ns = ref.substring(0, slash);
    String name = ref.substring(slash + 1);
    return ns.equals(podNamespace) && !name.isEmpty() ? Optional.of(name) : Optional.empty();
  }

  /**
   * The ModelArtifacts of the pod's namespace that the pod's {@value #DRIVER} volumes name (those a
   * driver would mount: references to another namespace, or a {@value #ATTR_NAMESPACE} attribute
   * naming another namespace, are left out because the driver refuses them).
   */
  public static Set<String> modelArtifactsNamed(Pod pod) {
    Set<String> out = new LinkedHashSet<>();
    if (pod.getSpec() == null || pod.getSpec().getVolumes() == null) {
      return out;
    }
    String podNamespace = pod.getMetadata().getNamespace();
    for (Volume v : pod.getSpec().getVolumes()) {
      CSIVolumeSource csi = v.getCsi();
      if (csi == null || !DRIVER.equals(csi.getDriver())) {
        continue;
      }
      Map<String, String> attrs = csi.getVolumeAttributes();
      if (attrs == null) {
        continue;
      }
      String ns = attrs.get(ATTR_NAMESPACE);
      if (ns != null && !ns.equals(podNamespace)) {
        continue;
      }
      sameNamespaceName(attrs.get(ATTR_MODEL_ARTIFACT), podNamespace).ifPresent(out::add);
    }
    return out;
  }
}
