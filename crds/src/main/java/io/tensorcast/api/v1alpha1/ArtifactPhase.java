package io.tensorcast.api.v1alpha1;

/**
 * Coarse state of an artifact ({@code status.phase}) or of one node's copy ({@code
 * status.nodes[].phase}). Conditions carry the detail; the phase is a summary for people.
 */
public enum ArtifactPhase {
  /** Accepted, nothing started yet (no node chosen or pod not running). */
  Pending,
  /** Listing the source: files, sizes, revision, checksums, safetensors headers. */
  Resolving,
  /** Bytes are being copied into the page-locked store. */
  Loading,
  /** Every byte is present and verified (on every node, for the artifact). */
  Ready,
  /** Stopped on an error that needs a change of spec or environment; see the conditions. */
  Failed
}
