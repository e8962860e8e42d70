package io.tensorcast.dataplane.format.torch;

import java.nio.ByteOrder;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * A torch checkpoint as {@code torch.load(weights_only=True)} would rebuild it, without its storage
 * bytes: the object tree and every tensor in it, each pointing at the byte range of its storage in
 * the file.
 *
 * <p>The object tree ({@link #root()}) holds {@code null}, {@link Boolean}, {@link Long}, {@link
 * java.math.BigInteger}, {@link Double}, {@link String}, {@code byte[]}, {@link PickleTuple},
 * {@link List}, {@link Map} (dict and OrderedDict, insertion order), {@link java.util.Set} and
 * {@link TorchTensor}. Instance attributes of an OrderedDict (a state_dict's {@code _metadata}) are
 * not kept.
 *
 * @param fileName the file as the caller named it
 * @param format container format
 * @param archivePrefix the zip's inner directory (the {@code X} of {@code X/data.pkl}; torch names
 *     it after the file it saved to, but it need not equal this file's name); empty for legacy
 * @param byteOrder byte order of the storages (zip {@code byteorder} record; little when absent)
 * @param storageAlignment the {@code .storage_alignment} record, when present: every storage's file
 *     offset is a multiple of it (checked)
 * @param version the {@code version} record (zip) or the legacy protocol version
 * @param root the unpickled object tree; a container or tensor the pickle shares (through its memo)
 *     is one shared object here too, a tensor carrying the name of its first path
 * @param tensors every tensor reached in the tree, depth-first in insertion order, named by path (a
 *     tensor reached by two paths is listed twice, sharing one storage)
 * @param storages the storages the tensors reference, by key
 */
public record TorchCheckpoint(
    String fileName,
    Format format,
    Optional<String> archivePrefix,
    ByteOrder byteOrder,
    OptionalLong storageAlignment,
    Optional<String> version,
    Object root,
    List<TorchTensor> tensors,
    Map<String, TorchStorage> storages) {

  /** Container format of a checkpoint file. */
  public enum Format {
    /**
     * {@code torch.save} since 1.6: a zip archive {@code <prefix>/data.pkl} + {@code data/<key>}.
     */
    ZIP,
    /** {@code torch.save(..., _use_new_zipfile_serialization=False)}: pickles then raw storages. */
    LEGACY
  }

  public TorchCheckpoint {
    Objects.requireNonNull(fileName);
    Objects.requireNonNull(format);
    tensors = List.copyOf(tensors);
    storages = Map.copyOf(storages);
  }

  /** The tensor named {@code name}, if the tree has one. */
  public Optional<TorchTensor> tensor(String name) {
    return tensors.stream().filter(t -> t.name().equals(name)).findFirst();
  }

  /**
   * Equal when the layout is equal: format, prefix, byte order, tensors (names, shapes, strides,
   * offsets) and storages (keys, dtypes, sizes, file offsets). The tree's other values are not
   * compared.
   */
  @Override
  public boolean equals(Object o) {
    return o instanceof TorchCheckpoint c
        && format == c.format
        && archivePrefix.equals(c.archivePrefix)
        && byteOrder.equals(c.byteOrder)
        && tensors.equals(c.tensors)
        && storages.equals(c.storages);
  }

  @Override
  public int hashCode() {
    return Objects.hash(format, archivePrefix, tensors.size(), storages.keySet());
  }
}
