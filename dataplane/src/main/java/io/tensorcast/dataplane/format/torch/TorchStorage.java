package io.tensorcast.dataplane.format.torch;

/**
 * One storage of a checkpoint: a run of {@code numel} elements of {@code dtype} held uncompressed
 * at {@code fileOffset} in the checkpoint file, so its bytes can be served straight from the file
 * or the store. Tensors that share a storage (views, the same tensor saved twice) reference the
 * same instance.
 *
 * @param key the storage key: the zip record {@code <prefix>/data/<key>}, or the legacy key
 * @param dtype element type
 * @param numel number of elements
 * @param fileOffset byte offset of element 0 in the checkpoint file
 * @param bigEndian whether elements are stored big-endian (zip {@code byteorder} record "big")
 */
public record TorchStorage(
    String key, TorchDtype dtype, long numel, long fileOffset, boolean bigEndian) {
  /** Bytes of the storage: {@code numel × dtype.elementSize()}. */
  public long byteLength() {
    return numel * dtype.elementSize();
  }
}
