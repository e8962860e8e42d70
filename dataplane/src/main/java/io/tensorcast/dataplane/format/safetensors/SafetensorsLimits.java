package io.tensorcast.dataplane.format.safetensors;

/**
 * Bounds on what the safetensors header parser reads and keeps for one file. The header's byte
 * length bounds the JSON; these bound what the parser builds from it, so a header under the byte
 * cap cannot make it keep tens of millions of dimensions or entries. A header over a bound is
 * refused with {@link SafetensorsFormatException#HEADER_TOO_LARGE} (byte length) or {@link
 * SafetensorsFormatException#LIMIT_EXCEEDED}, naming the bound, its flag and the number found,
 * before the parser keeps what is over it.
 *
 * @param maxHeaderBytes longest header accepted, in bytes (the length prefix's value)
 * @param maxTensors most tensors in one header; also the most {@code __metadata__} entries
 * @param maxRank most dimensions of one tensor's shape
 */
public record SafetensorsLimits(long maxHeaderBytes, int maxTensors, int maxRank) {

  /**
   * 100,000,000 header bytes (the reference implementation's MAX_HEADER_SIZE), 1,000,000 tensors,
   * rank 64.
   */
  public static final SafetensorsLimits DEFAULT =
      new SafetensorsLimits(SafetensorsHeader.MAX_HEADER_LENGTH, 1_000_000, 64);

  /** Largest header length a reader can hold in one array. */
  public static final long MAX_HEADER_BYTES_ALLOWED = Integer.MAX_VALUE - 8;

  /**
   * The widest bounds any configuration allows: for reading again a header that a load already
   * validated within its (possibly raised) limits, such as the copy in the store.
   */
  public static final SafetensorsLimits WIDEST =
      new SafetensorsLimits(MAX_HEADER_BYTES_ALLOWED, Integer.MAX_VALUE, 1024);

  /**
   * @throws IllegalArgumentException if a bound is below 1, or the header bound above {@link
   *     #MAX_HEADER_BYTES_ALLOWED}
   */
  public SafetensorsLimits {
    if (maxHeaderBytes < 2 || maxHeaderBytes > MAX_HEADER_BYTES_ALLOWED) {
      throw new IllegalArgumentException(
          "maxHeaderBytes must be between 2 and "
              + MAX_HEADER_BYTES_ALLOWED
              + ", got "
              + maxHeaderBytes);
    }
    if (maxTensors < 1 || maxRank < 1) {
      throw new IllegalArgumentException(
          "maxTensors and maxRank must be at least 1, got " + maxTensors + ", " + maxRank);
    }
  }

  public SafetensorsLimits withMaxHeaderBytes(long v) {
    return new SafetensorsLimits(v, maxTensors, maxRank);
  }

  public SafetensorsLimits withMaxTensors(int v) {
    return new SafetensorsLimits(maxHeaderBytes, v, maxRank);
  }

  public SafetensorsLimits withMaxRank(int v) {
    return new SafetensorsLimits(maxHeaderBytes, maxTensors, v);
  }
}
