package io.tensorcast.dataplane.format.index;

/**
 * An index file of a sharded checkpoint is broken or does not describe the artifact's shards. The
 * message names the file, the position (line, column) or the name at fault, and the rule id.
 */
public class IndexFormatException extends Exception {
  private static final long serialVersionUID = 1L;

  /** The file is larger than the limit (--max-index-bytes). */
  public static final String TOO_LARGE = "index-too-large";

  /** The file is not valid UTF-8 JSON. */
  public static final String INVALID_JSON = "invalid-json";

  /** The file holds a git merge-conflict marker ({@code <<<<<<<}, {@code =======}, ...). */
  public static final String MERGE_CONFLICT = "merge-conflict";

  /** A JSON object repeats a key. */
  public static final String DUPLICATE_KEY = "duplicate-key";

  /** The JSON lacks {@code weight_map}, or a field has the wrong type. */
  public static final String INVALID_STRUCTURE = "invalid-structure";

  /** {@code weight_map} has more entries than the limit (--max-tensors). */
  public static final String LIMIT_EXCEEDED = "limit-exceeded";

  /** A shard file name is empty, absolute, or leaves the index's directory. */
  public static final String UNSAFE_SHARD_PATH = "unsafe-shard-path";

  /** A shard the index names is not among the source's files. */
  public static final String MISSING_SHARD = "missing-shard";

  /** A shard the index names is left out by the include/exclude filters. */
  public static final String EXCLUDED_SHARD = "excluded-shard";

  /** A shard the index names is neither a safetensors file nor a torch checkpoint. */
  public static final String UNREADABLE_SHARD = "unreadable-shard";

  /** The index maps a tensor to a shard whose header does not declare it. */
  public static final String TENSOR_NOT_IN_SHARD = "tensor-not-in-shard";

  /** Two shards of the index declare the same tensor. */
  public static final String DUPLICATE_TENSOR = "duplicate-tensor";

  /** {@code metadata.total_size} differs from the bytes of the tensors the index maps. */
  public static final String TOTAL_SIZE_MISMATCH = "total-size-mismatch";

  private final String fileName;
  private final String rule;

  /**
   * @param fileName the index file, as the caller named it
   * @param rule one of this class's rule ids
   * @param detail what was found, with the position or name and the numbers
   */
  public IndexFormatException(String fileName, String rule, String detail) {
    super(fileName + ": " + detail + " [rule " + rule + "]");
    this.fileName = fileName;
    this.rule = rule;
  }

  /** The index file at fault. */
  public String fileName() {
    return fileName;
  }

  /** The rule broken: a kebab-case id such as {@link #MISSING_SHARD}. */
  public String rule() {
    return rule;
  }
}
