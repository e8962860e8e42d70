package io.tensorcast.api.v1alpha1;

/**
 * Condition types and statuses of {@code ModelArtifact.status.conditions}, in one place; their
 * reasons are {@link io.tensorcast.api.Reason}. Shape and conventions follow the Kubernetes API
 * conventions for conditions (type / status / reason / message / lastTransitionTime, CamelCase
 * reasons that a program can switch on; the message is for people).
 *
 * <p>Meaning of {@code status=True} per type: {@link #RESOLVED} the source was listed and sized for
 * this generation; {@link #SCHEDULED} every replica has a node and a pod; {@link #LOADED} every
 * byte is present and verified on every chosen node; {@link #READY} the artifact can be used (what
 * {@code kubectl wait --for=condition=Ready} and Argo CD look at); {@link #STALLED} it cannot get
 * to Ready without a change; {@link #DEGRADED} it is usable but something is wrong (a replica lost,
 * a peer failing); {@link #IN_USE} consumer pods use the artifact through its CSI volume, so its
 * copies are not removed under them (the message names the pods).
 */
public final class Conditions {

  // Types.
  public static final String RESOLVED = "Resolved";
  public static final String SCHEDULED = "Scheduled";
  public static final String LOADED = "Loaded";
  public static final String READY = "Ready";
  public static final String DEGRADED = "Degraded";
  public static final String IN_USE = "InUse";

  /**
   * {@code True} when the artifact makes no progress towards Ready until something changes: it
   * failed, too few nodes are eligible for its replicas, or a pod cannot run (crash loop, image not
   * pulled, Secret missing, not schedulable). kstatus (Flux's {@code wait}, Argo CD's check) reads
   * {@code Stalled=True} as failed; {@code kubectl wait --for=condition=Stalled} stops on it.
   */
  public static final String STALLED = "Stalled";

  // Statuses (the Kubernetes condition status values).
  public static final String TRUE = "True";
  public static final String FALSE = "False";
  public static final String UNKNOWN = "Unknown";

  private Conditions() {}
}
