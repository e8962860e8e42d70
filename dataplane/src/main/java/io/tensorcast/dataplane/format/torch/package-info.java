/**
 * Torch checkpoints ({@code torch.save}: {@code .pt}, {@code .pth}, {@code .bin}) read with the
 * semantics of {@code torch.load(weights_only=True)} and without running anything from the file.
 *
 * <p>{@link io.tensorcast.dataplane.format.torch.TorchCheckpointReader} reads the zip container
 * (any inner prefix, {@code byteorder}, {@code .storage_alignment}) and the legacy pickle stream
 * from a {@link io.tensorcast.dataplane.format.torch.ByteSource} (local file, ranged reads of a
 * remote object, or the store) and returns a {@link
 * io.tensorcast.dataplane.format.torch.TorchCheckpoint}: the object tree and each {@link
 * io.tensorcast.dataplane.format.torch.TorchTensor} (dtype, shape, strides, storage offset) on its
 * {@link io.tensorcast.dataplane.format.torch.TorchStorage}, located by byte offset in the file.
 * Refusals are {@link io.tensorcast.dataplane.format.torch.TorchFormatException}s naming the file,
 * the rule and, for a global outside the allowlist, the global.
 */
package io.tensorcast.dataplane.format.torch;
