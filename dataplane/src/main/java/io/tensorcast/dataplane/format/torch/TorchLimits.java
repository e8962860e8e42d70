package io.tensorcast.dataplane.format.torch;

/**
 * Bounds on what the torch reader keeps and does for one checkpoint, so that a small hostile file
 * cannot exhaust memory, the stack or the CPU. A checkpoint over a bound is refused with {@link
 * TorchFormatException#LIMIT_EXCEEDED}, naming the bound, its command-line flag and the number
 * found.
 *
 * @param maxPickleBytes longest pickle ({@code data.pkl}, or the legacy stream) read, in bytes
 * @param maxMemoEntries most memo entries (BINPUT/MEMOIZE) in one pickle
 * @param maxStackDepth most objects on the pickle stack plus marks
 * @param maxStringBytes longest single string or bytes value, in bytes
 * @param maxNesting deepest nesting of containers in the object tree, and of nested rebuild calls
 * @param maxRank most dimensions of one tensor
 * @param maxObjects most values one pickle builds (every value pushed on the pickle stack) and most
 *     steps the walk over the object tree takes
 * @param maxTensors most tensors listed for one checkpoint (a tensor reached by two paths counts
 *     twice)
 * @param maxReuse most paths by which one container or tensor that holds tensors may be reached
 *     (memo reuse); also the most the listed tensors' bytes may exceed the storages' bytes by, as a
 *     factor (tied weights and views share storages)
 * @param maxZipEntries most records in the zip central directory, counted before it is read
 * @param maxZipRatio most inflated bytes per compressed byte declared by a compressed zip entry
 *     larger than {@link #ZIP_RATIO_FLOOR_BYTES}
 */
public record TorchLimits(
    long maxPickleBytes,
    int maxMemoEntries,
    int maxStackDepth,
    int maxStringBytes,
    int maxNesting,
    int maxRank,
    int maxObjects,
    int maxTensors,
    int maxReuse,
    int maxZipEntries,
    int maxZipRatio) {

  /** Compressed entries declaring at most this many inflated bytes are not ratio-checked. */
  public static final long ZIP_RATIO_FLOOR_BYTES = 1 << 20;

  /**
   * 1 GiB pickles, 4M memo entries, 1M stack entries, 256 MiB strings, nesting 200, rank 64, 10M
   * objects, 1M tensors, reuse 16, 1M zip entries, zip ratio 100:1.
   */
  public static final TorchLimits DEFAULT =
      new TorchLimits(
          1L << 30,
          4 << 20,
          1 << 20,
          256 << 20,
          200,
          64,
          10_000_000,
          1_000_000,
          16,
          1_000_000,
          100);

  /**
   * @throws IllegalArgumentException if a bound is below 1
   */
  public TorchLimits {
    long[] values = {
      maxPickleBytes,
      maxMemoEntries,
      maxStackDepth,
      maxStringBytes,
      maxNesting,
      maxRank,
      maxObjects,
      maxTensors,
      maxReuse,
      maxZipEntries,
      maxZipRatio
    };
    for (long v : values) {
      if (v < 1) {
        throw new IllegalArgumentException("torch reader limits must be at least 1, got " + v);
      }
    }
  }

  public TorchLimits withMaxMemoEntries(int v) {
    return new TorchLimits(
        maxPickleBytes,
        v,
        maxStackDepth,
        maxStringBytes,
        maxNesting,
        maxRank,
        maxObjects,
        maxTensors,
        maxReuse,
        maxZipEntries,
        maxZipRatio);
  }

  public TorchLimits withMaxStackDepth(int v) {
    return new TorchLimits(
        maxPickleBytes,
        maxMemoEntries,
        v,
        maxStringBytes,
        maxNesting,
        maxRank,
        maxObjects,
        maxTensors,
        maxReuse,
        maxZipEntries,
        maxZipRatio);
  }

  public TorchLimits withMaxRank(int v) {
    return new TorchLimits(
        maxPickleBytes,
        maxMemoEntries,
        maxStackDepth,
        maxStringBytes,
        maxNesting,
        v,
        maxObjects,
        maxTensors,
        maxReuse,
        maxZipEntries,
        maxZipRatio);
  }

  public TorchLimits withMaxObjects(int v) {
    return new TorchLimits(
        maxPickleBytes,
        maxMemoEntries,
        maxStackDepth,
        maxStringBytes,
        maxNesting,
        maxRank,
        v,
        maxTensors,
        maxReuse,
        maxZipEntries,
        maxZipRatio);
  }

  public TorchLimits withMaxTensors(int v) {
    return new TorchLimits(
        maxPickleBytes,
        maxMemoEntries,
        maxStackDepth,
        maxStringBytes,
        maxNesting,
        maxRank,
        maxObjects,
        v,
        maxReuse,
        maxZipEntries,
        maxZipRatio);
  }

  public TorchLimits withMaxZipEntries(int v) {
    return new TorchLimits(
        maxPickleBytes,
        maxMemoEntries,
        maxStackDepth,
        maxStringBytes,
        maxNesting,
        maxRank,
        maxObjects,
        maxTensors,
        maxReuse,
        v,
        maxZipRatio);
  }
}
