package io.tensorcast.dataplane.shards;

/**
 * A TensorShardSet's rules, layout and tensors do not fit together; nothing was loaded. The reason
 * is one of the {@code REASON_*} constants, the message names the tensor, rule and numbers.
 */
public final class ShardPlanException extends Exception {
  private static final long serialVersionUID = 1L;

  /** A split dimension is outside a tensor's dimensions. */
  public static final String SPLIT_DIM_OUT_OF_RANGE = "SplitDimOutOfRange";

  /** A dimension does not divide by the tp size (or sub-byte elements by bytes). */
  public static final String NOT_DIVISIBLE = "NotDivisible";

  /** An explicit rule matches no tensor of the artifact. */
  public static final String RULE_MATCHES_NO_TENSOR = "RuleMatchesNoTensor";

  /** A tensor no explicit rule covers. */
  public static final String TENSOR_NOT_COVERED = "TensorNotCovered";

  /** The ep size does not divide the expert count, or there are no experts to own. */
  public static final String EXPERTS_NOT_DIVISIBLE = "ExpertsNotDivisible";

  /** No rules given and no built-in set for the architecture (or no config.json). */
  public static final String NO_RULE_SET = "NoRuleSet";

  /** The rules, the layout or a tensor cannot be used otherwise (the message says why). */
  public static final String INVALID_SHARD_RULES = "InvalidShardRules";

  private final String reason;

  public ShardPlanException(String reason, String message) {
    super(message);
    this.reason = reason;
  }

  /** CamelCase reason, one of the constants. */
  public String reason() {
    return reason;
  }
}
