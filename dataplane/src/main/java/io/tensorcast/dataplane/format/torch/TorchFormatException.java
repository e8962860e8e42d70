package io.tensorcast.dataplane.format.torch;

import java.util.Optional;

/**
 * A torch checkpoint is refused: it breaks a rule of the torch serialization format, needs code to
 * load (a global outside the {@code torch.load(weights_only=True)} allowlist), or exceeds a bound.
 * The message names the file, what was found with its numbers, and the rule id.
 *
 * <p>{@link #rule()} is a stable kebab-case id (one of the constants below); {@link #global()}
 * names the refused pickle global ({@code module.name}) when the refusal is about one.
 */
public class TorchFormatException extends Exception {
  private static final long serialVersionUID = 1L;

  /** Neither a zip archive with {@code <prefix>/data.pkl} nor the legacy pickle stream. */
  public static final String NOT_A_CHECKPOINT = "not-a-checkpoint";

  /** A TorchScript archive ({@code torch.jit.save}): code, not a weights checkpoint. */
  public static final String TORCHSCRIPT = "torchscript-archive";

  /** The pickle names a global outside the weights_only allowlist. */
  public static final String DISALLOWED_GLOBAL = "disallowed-global";

  /** The pickle calls (REDUCE/NEWOBJ/BUILD) something that is not an allowed rebuild function. */
  public static final String DISALLOWED_CALL = "disallowed-call";

  /** A pickle opcode outside the subset torch writes (protocols 2-5). */
  public static final String UNSUPPORTED_OPCODE = "unsupported-opcode";

  /** The pickle stream is malformed (stack underflow, bad types, truncated, ...). */
  public static final String MALFORMED_PICKLE = "malformed-pickle";

  /** A bound of the reader was exceeded (memo, stack, nesting, string length, pickle size). */
  public static final String LIMIT_EXCEEDED = "limit-exceeded";

  /** A persistent id names a storage that the file does not hold. */
  public static final String MISSING_STORAGE = "missing-storage";

  /** A storage's byte size disagrees with its element count × element size, or the file. */
  public static final String STORAGE_SIZE = "storage-size";

  /** A tensor's shape, strides or storage offset are invalid or exceed its storage. */
  public static final String INVALID_TENSOR = "invalid-tensor";

  /**
   * Two tensors get the same name once the keys of their paths are joined with {@code .} (e.g.
   * {@code {'a.b': t1, 'a': {'b': t2}}}).
   */
  public static final String DUPLICATE_TENSOR_NAME = "duplicate-tensor-name";

  /** A zip entry name is absolute, contains {@code ..} or a backslash. */
  public static final String UNSAFE_ENTRY_NAME = "unsafe-entry-name";

  /** The zip container is unreadable or breaks a rule of the torch zip layout. */
  public static final String INVALID_ARCHIVE = "invalid-archive";

  /** A valid torch feature this reader does not implement (quantized, sparse, TAR container). */
  public static final String UNSUPPORTED_FEATURE = "unsupported-feature";

  private final String fileName;
  private final String rule;
  private final String global;

  /**
   * @param fileName the file as the caller named it
   * @param rule one of this class's rule ids
   * @param detail what was found, with the numbers
   */
  public TorchFormatException(String fileName, String rule, String detail) {
    this(fileName, rule, null, detail);
  }

  /**
   * @param global the refused pickle global as {@code module.name}, or null
   */
  public TorchFormatException(String fileName, String rule, String global, String detail) {
    super(fileName + ": " + detail + " [rule " + rule + "]");
    this.fileName = fileName;
    this.rule = rule;
    this.global = global;
  }

  /** The file at fault, as the caller named it. */
  public String fileName() {
    return fileName;
  }

  /** The rule broken: a kebab-case id such as {@link #DISALLOWED_GLOBAL}. */
  public String rule() {
    return rule;
  }

  /** The refused pickle global ({@code module.name}), when the refusal is about one. */
  public Optional<String> global() {
    return Optional.ofNullable(global);
  }
}
