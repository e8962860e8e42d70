package io.tensorcast.api.v1alpha1;

/** File format of an artifact ({@code spec.format}); wire names equal the constant names. */
public enum ArtifactFormat {
  /** Decide per file from its name and first bytes. */
  Auto,
  /** safetensors: 8-byte little-endian header length, JSON header, raw tensor bytes. */
  Safetensors,
  /** PyTorch checkpoints ({@code torch.save} zip or legacy pickle); pickles are never executed. */
  Torch
}
