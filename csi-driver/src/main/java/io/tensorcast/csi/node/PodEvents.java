package io.tensorcast.csi.node;

/** Where the driver reports what it did for a pod, as Kubernetes Events on the pod. */
public interface PodEvents {

  /** Does nothing. */
  PodEvents NONE = (namespace, name, uid, reason, message) -> {};

  /**
   * Records a Normal event on the pod; never throws and never blocks the caller for long.
   *
   * @param reason CamelCase reason, e.g. {@code ModelArtifactMounted}
   */
  void normal(String namespace, String name, String uid, String reason, String message);
}
