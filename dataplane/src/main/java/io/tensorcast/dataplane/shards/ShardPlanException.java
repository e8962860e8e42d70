package io.tensorcast.dataplane.shards;

import io.tensorcast.api.Reason;

/**
 * A TensorShardSet's rules, layout and tensors do not fit together; nothing was loaded. The reason
 * is one of {@link Reason#SplitDimOutOfRange}, {@link Reason#NotDivisible}, {@link
 * Reason#RuleMatchesNoTensor}, {@link Reason#TensorNotCovered}, {@link Reason#ExpertsNotDivisible},
 * {@link Reason#NoRuleSet}, {@link Reason#InvalidShardRules}; the message names the tensor, rule
 * and numbers.
 */
public final class ShardPlanException extends Exception {
  private static final long serialVersionUID = 1L;

  private final Reason reason;

  public ShardPlanException(Reason reason, String message) {
    super(message);
    this.reason = reason;
  }

  /** Why the plan does not fit. */
  public Reason reason() {
    return reason;
  }
}
