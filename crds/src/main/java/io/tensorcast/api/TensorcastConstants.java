package io.tensorcast.api;

/**
 * Names shared by the operator, the data plane and the RDMA device plugin: the API group, the
 * extended resource and node label the device plugin publishes, the labels on data-plane pods and
 * the finalizer. Values are Kubernetes label keys/values and resource names, so they follow the
 * Kubernetes syntax rules for those (prefix {@code tensorcast.io/} for ours, {@code
 * app.kubernetes.io/} for the recommended labels).
 */
public final class TensorcastConstants {

  /** API group of every Tensorcast custom resource. */
  public static final String GROUP = "tensorcast.io";

  /**
   * Extended resource the RDMA device plugin advertises in a node's allocatable (count of RDMA
   * devices usable by pods); data-plane pods that need RDMA request one.
   */
  public static final String RDMA_RESOURCE = "tensorcast.io/rdma";

  /** Node label key the RDMA device plugin sets on nodes where it found an RDMA device. */
  public static final String RDMA_NODE_LABEL = "tensorcast.io/rdma";

  /** Value of {@link #RDMA_NODE_LABEL} on RDMA-capable nodes. */
  public static final String RDMA_NODE_LABEL_VALUE = "true";

  /** Recommended Kubernetes label naming the application; set on every data-plane pod. */
  public static final String LABEL_NAME = "app.kubernetes.io/name";

  /** Value of {@link #LABEL_NAME} on data-plane pods. */
  public static final String LABEL_NAME_DATAPLANE = "tensorcast-dataplane";

  /** Recommended Kubernetes label naming the tool that manages an object. */
  public static final String LABEL_MANAGED_BY = "app.kubernetes.io/managed-by";

  /** Value of {@link #LABEL_MANAGED_BY} on objects the operator creates. */
  public static final String LABEL_MANAGED_BY_OPERATOR = "tensorcast-operator";

  /**
   * Label on data-plane pods holding the name of the ModelArtifact they serve (same namespace); the
   * operator selects an artifact's pods with it.
   */
  public static final String LABEL_ARTIFACT = "tensorcast.io/artifact";

  /**
   * Finalizer the operator puts on a ModelArtifact so that pods are stopped and the page-locked
   * store is freed on every node before the object goes away.
   */
  public static final String FINALIZER = "tensorcast.io/finalizer";

  /**
   * Annotation on a ModelArtifact: any new value makes the operator load a Failed artifact again
   * now, without waiting for its next retry and without a spec change. Its value is recorded in
   * {@code status.retryRequest}; a value seen while the artifact is not Failed does nothing.
   */
  public static final String ANNOTATION_RETRY = "tensorcast.io/retry";

  /**
   * Suffix, before {@code .yml}, of the generated CRD files without CEL ({@code
   * x-kubernetes-validations}) rules, for Kubernetes before 1.25: {@code
   * META-INF/fabric8/<crd>-v1-below-1.25.yml} next to {@code <crd>-v1.yml}.
   */
  public static final String CRD_WITHOUT_CEL_SUFFIX = "-below-1.25";

  /** First Kubernetes minor version (of 1.x) whose API servers run CRD CEL rules by default. */
  public static final int CEL_MINOR_VERSION = 25;

  /**
   * Directory where each data-plane pod finds its ModelArtifact's Secret (read-only): the files
   * {@link #SECRET_PEER_SECRET}, {@link #SECRET_READ_TOKEN} and {@link #SECRET_ADMIN_TOKEN}.
   */
  public static final String ARTIFACT_SECRET_DIR = "/var/run/secrets/tensorcast";

  /**
   * Key of the per-ModelArtifact Secret holding the peer secret: base64 text of 32 bytes, known
   * only to the operator and the artifact's data-plane pods; the peer handshake proves knowledge of
   * it. Changes with every generation of the artifact.
   */
  public static final String SECRET_PEER_SECRET = "peer-secret";

  /**
   * Key of the per-ModelArtifact Secret holding the bearer token of scope {@code read} ({@code GET
   * /status}, {@code /v1/tensors}): what consumers present. At least 32 characters; fixed for the
   * life of the ModelArtifact.
   */
  public static final String SECRET_READ_TOKEN = "read-token";

  /**
   * Key of the per-ModelArtifact Secret holding the bearer token of scope {@code admin} ({@code PUT
   * /v1/peers}, and everything {@code read} allows): what the operator presents. At least 32
   * characters; fixed for the life of the ModelArtifact.
   */
  public static final String SECRET_ADMIN_TOKEN = "admin-token";

  /**
   * Key of the artifact Secret holding the write token of a written artifact's put API (the unix
   * socket its writer pods reach on their node): writer pods take it, nothing else accepts it.
   */
  public static final String SECRET_WRITE_TOKEN = "write-token";

  /**
   * Prefix of the pod label that admits a pod to a ModelArtifact's control port: a pod of the
   * artifact's namespace labelled {@code consumer.tensorcast.io/<artifact name>: "true"} may reach
   * its data-plane pods on the control port (the operator's NetworkPolicy); it still needs the read
   * token.
   */
  public static final String CONSUMER_LABEL_PREFIX = "consumer.tensorcast.io/";

  /**
   * Prefix of the pod label that admits a pod to a TensorShardSet's control port: a pod of the
   * set's namespace labelled {@code shardset.consumer.tensorcast.io/<set name>: "true"} (distinct
   * from {@link #CONSUMER_LABEL_PREFIX}, so that a ModelArtifact and a TensorShardSet of the same
   * name admit different pods); it still needs the set's read token.
   */
  public static final String SHARD_SET_CONSUMER_LABEL_PREFIX = "shardset.consumer.tensorcast.io/";

  /**
   * Directory where a TensorShardSet's data-plane pod finds the read token of the ModelArtifact it
   * reads slices from (file {@link #SECRET_READ_TOKEN}, read-only): the only key of that artifact's
   * Secret it mounts.
   */
  public static final String COPY_TOKEN_DIR = "/var/run/secrets/tensorcast-copies";

  private TensorcastConstants() {}
}
