package io.tensorcast.dataplane.format;

import io.tensorcast.dataplane.format.safetensors.SafetensorsLimits;
import io.tensorcast.dataplane.format.torch.TorchLimits;

/**
 * Every bound the format readers apply to one file, in one place: what {@code dataplane load},
 * {@code inspect} and {@code serve} take as {@code --max-…} flags (the operator passes them from
 * its configuration). Each bound limits what a reader keeps or does, not only the bytes it reads,
 * so a small hostile file is refused by a named bound instead of growing into memory or time. A
 * refusal names the file, the bound, its flag and the numbers.
 *
 * @param maxHeaderBytes longest safetensors header, bytes ({@code --max-header-bytes})
 * @param maxTensors most tensors per file: safetensors header entries (and {@code __metadata__}
 *     entries), torch tensors listed, index {@code weight_map} entries ({@code --max-tensors})
 * @param maxRank most dimensions of one tensor ({@code --max-rank})
 * @param maxPickleBytes longest torch pickle, bytes ({@code --max-pickle-bytes})
 * @param maxPickleObjects most values one pickle builds, and most steps of the walk over its object
 *     tree ({@code --max-pickle-objects})
 * @param maxNesting deepest nesting of a torch object tree ({@code --max-nesting})
 * @param maxReuse most paths to one shared torch container or tensor that holds tensors, and the
 *     most the listed tensors' bytes may exceed their storages' bytes by, as a factor ({@code
 *     --max-reuse})
 * @param maxZipEntries most records in a torch zip's central directory ({@code --max-zip-entries})
 * @param maxZipRatio most declared inflated bytes per compressed byte of a compressed zip entry
 *     over 1 MiB ({@code --max-zip-ratio})
 * @param maxIndexBytes longest index file ({@code *.safetensors.index.json}, {@code
 *     *.bin.index.json}), bytes ({@code --max-index-bytes})
 */
public record FormatLimits(
    long maxHeaderBytes,
    int maxTensors,
    int maxRank,
    long maxPickleBytes,
    int maxPickleObjects,
    int maxNesting,
    int maxReuse,
    int maxZipEntries,
    int maxZipRatio,
    long maxIndexBytes) {

  /** Default of {@link #maxHeaderBytes()}: the reference implementation's MAX_HEADER_SIZE. */
  public static final long DEFAULT_MAX_HEADER_BYTES = 100_000_000L;

  /** Default of {@link #maxTensors()}. */
  public static final int DEFAULT_MAX_TENSORS = 1_000_000;

  /** Default of {@link #maxRank()}. */
  public static final int DEFAULT_MAX_RANK = 64;

  /** Default of {@link #maxPickleBytes()}: 1 GiB. */
  public static final long DEFAULT_MAX_PICKLE_BYTES = 1L << 30;

  /** Default of {@link #maxPickleObjects()}. */
  public static final int DEFAULT_MAX_PICKLE_OBJECTS = 10_000_000;

  /** Default of {@link #maxNesting()}. */
  public static final int DEFAULT_MAX_NESTING = 200;

  /** Default of {@link #maxReuse()}. */
  public static final int DEFAULT_MAX_REUSE = 16;

  /** Default of {@link #maxZipEntries()}. */
  public static final int DEFAULT_MAX_ZIP_ENTRIES = 1_000_000;

  /** Default of {@link #maxZipRatio()} (inflated : compressed). */
  public static final int DEFAULT_MAX_ZIP_RATIO = 100;

  /** Default of {@link #maxIndexBytes()}: 64 MiB (a 180B model's index is about 50 KiB). */
  public static final long DEFAULT_MAX_INDEX_BYTES = 64L << 20;

  /** The defaults above; {@link #safetensors()} and {@link #torch()} of it are the readers'. */
  public static final FormatLimits DEFAULT =
      new FormatLimits(
          DEFAULT_MAX_HEADER_BYTES,
          DEFAULT_MAX_TENSORS,
          DEFAULT_MAX_RANK,
          DEFAULT_MAX_PICKLE_BYTES,
          DEFAULT_MAX_PICKLE_OBJECTS,
          DEFAULT_MAX_NESTING,
          DEFAULT_MAX_REUSE,
          DEFAULT_MAX_ZIP_ENTRIES,
          DEFAULT_MAX_ZIP_RATIO,
          DEFAULT_MAX_INDEX_BYTES);

  /**
   * @throws IllegalArgumentException naming the flag of a bound out of its range
   */
  public FormatLimits {
    range("--max-header-bytes", maxHeaderBytes, 2, SafetensorsLimits.MAX_HEADER_BYTES_ALLOWED);
    range("--max-tensors", maxTensors, 1, Integer.MAX_VALUE);
    range("--max-rank", maxRank, 1, 1024);
    range("--max-pickle-bytes", maxPickleBytes, 1, Long.MAX_VALUE);
    range("--max-pickle-objects", maxPickleObjects, 1, Integer.MAX_VALUE);
    range("--max-nesting", maxNesting, 1, 10_000);
    range("--max-reuse", maxReuse, 1, Integer.MAX_VALUE);
    range("--max-zip-entries", maxZipEntries, 1, Integer.MAX_VALUE);
    range("--max-zip-ratio", maxZipRatio, 1, Integer.MAX_VALUE);
    range("--max-index-bytes", maxIndexBytes, 2, Integer.MAX_VALUE - 8);
  }

  private static void range(String flag, long value, long min, long max) {
    if (value < min || value > max) {
      throw new IllegalArgumentException(
          flag + " must be between " + min + " and " + max + ", got " + value);
    }
  }

  /** The safetensors reader's share. */
  public SafetensorsLimits safetensors() {
    return new SafetensorsLimits(maxHeaderBytes, maxTensors, maxRank);
  }

  /**
   * The torch reader's share; its memo, stack and string bounds are {@link TorchLimits#DEFAULT}'s,
   * never above the objects and pickle bounds.
   */
  public TorchLimits torch() {
    TorchLimits d = TorchLimits.DEFAULT;
    return new TorchLimits(
        maxPickleBytes,
        Math.min(d.maxMemoEntries(), maxPickleObjects),
        Math.min(d.maxStackDepth(), maxPickleObjects),
        (int) Math.min(d.maxStringBytes(), maxPickleBytes),
        maxNesting,
        maxRank,
        maxPickleObjects,
        maxTensors,
        maxReuse,
        maxZipEntries,
        maxZipRatio);
  }
}
