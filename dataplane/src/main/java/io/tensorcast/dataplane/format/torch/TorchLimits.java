package io.tensorcast.dataplane.format.torch;

/**
 * Bounds that keep a hostile checkpoint from exhausting memory or the stack while it is read. A
 * checkpoint over a bound is refused with {@link TorchFormatException#LIMIT_EXCEEDED} naming the
 * bound and the number found.
 *
 * @param maxPickleBytes longest pickle ({@code data.pkl}) read, in bytes
 * @param maxMemoEntries most memo entries (BINPUT/MEMOIZE) in one pickle
 * @param maxStackDepth most objects on the pickle stack plus marks
 * @param maxStringBytes longest single string or bytes value, in bytes
 * @param maxNesting deepest nesting of containers in the object tree
 * @param maxRank most tensor dimensions
 */
public record TorchLimits(
    long maxPickleBytes,
    int maxMemoEntries,
    int maxStackDepth,
    int maxStringBytes,
    int maxNesting,
    int maxRank) {
  /** 1 GiB pickles, 4M memo entries, 1M stack entries, 256 MiB strings, nesting 200, rank 64. */
  public static final TorchLimits DEFAULT =
      new TorchLimits(1L << 30, 4 << 20, 1 << 20, 256 << 20, 200, 64);
}
