package io.tensorcast.api.v1alpha1;

/**
 * What an artifact holds ({@code spec.kind}). Constants are named exactly as they appear on the
 * wire (CamelCase, the Kubernetes convention for enum values).
 */
public enum ArtifactKind {
  /** Weights of a trained model (safetensors or torch files), read-only once loaded. */
  ModelWeights,
  /** A snapshot of an inference KV cache. */
  KVCache,
  /** A reinforcement-learning checkpoint (policy weights published during training). */
  RLCheckpoint
}
