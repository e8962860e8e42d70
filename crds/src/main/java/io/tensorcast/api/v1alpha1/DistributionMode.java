package io.tensorcast.api.v1alpha1;

/** How bytes reach the nodes ({@code spec.distribution.mode}). */
public enum DistributionMode {
  /**
   * Cooperative cold load: each piece is read from the source by one pod and every other pod gets
   * it from a peer, so each byte leaves the object store about once per cluster.
   */
  PeerToPeer,
  /** Every pod reads every byte from the source; no peer transfer. */
  SourceOnly
}
