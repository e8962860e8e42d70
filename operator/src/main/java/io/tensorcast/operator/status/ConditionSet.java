package io.tensorcast.operator.status;

import io.fabric8.kubernetes.api.model.Condition;
import io.tensorcast.api.Reason;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;

/**
 * Builds a status's conditions the Kubernetes way: one entry per type, in a fixed order, each with
 * {@code observedGeneration}, and a {@code lastTransitionTime} that changes only when the
 * condition's {@code status} changes (the time is kept from the previous status otherwise), so that
 * an unchanged world produces an unchanged status.
 */
final class ConditionSet {
  /** Longest message kept; longer ones are cut with an ellipsis. */
  static final int MAX_MESSAGE = 2048;

  private final List<Condition> previous;
  private final long generation;
  private final String now;
  private final List<Condition> out = new ArrayList<>();

  /**
   * @param previous the conditions of the status being replaced (may be null)
   * @param generation the generation the new conditions describe
   * @param now the time of this reconcile
   */
  ConditionSet(List<Condition> previous, long generation, Instant now) {
    this.previous = previous == null ? List.of() : previous;
    this.generation = generation;
    this.now = now.truncatedTo(ChronoUnit.SECONDS).toString();
  }

  /** Adds (or replaces) the condition of {@code type}. */
  ConditionSet set(String type, String status, Reason reason, String message) {
    return set(type, status, reason.name(), message);
  }

  /**
   * Adds (or replaces) the condition of {@code type} with a reason as a data-plane pod reported it
   * (a newer data plane may report a reason this operator does not know).
   */
  ConditionSet set(String type, String status, String reason, String message) {
    out.removeIf(c -> type.equals(c.getType()));
    String since =
        previous.stream()
            .filter(c -> type.equals(c.getType()) && status.equals(c.getStatus()))
            .map(Condition::getLastTransitionTime)
            .filter(t -> t != null && !t.isEmpty())
            .findFirst()
            .orElse(now);
    Condition c = new Condition();
    c.setType(type);
    c.setStatus(status);
    c.setReason(reason);
    // Never empty: an empty string can turn into null on the way (YAML), which the schema refuses.
    c.setMessage(cut(message == null || message.isEmpty() ? reason : message));
    c.setLastTransitionTime(since);
    c.setObservedGeneration(generation);
    out.add(c);
    return this;
  }

  List<Condition> build() {
    return new ArrayList<>(out);
  }

  /** The condition of {@code type} in {@code conditions}, or null. */
  static Condition find(List<Condition> conditions, String type) {
    if (conditions == null) {
      return null;
    }
    return conditions.stream().filter(c -> type.equals(c.getType())).findFirst().orElse(null);
  }

  /** Whether {@code conditions} has {@code type} with {@code status} for {@code generation}. */
  static boolean is(List<Condition> conditions, String type, String status, long generation) {
    Condition c = find(conditions, type);
    return c != null
        && status.equals(c.getStatus())
        && c.getObservedGeneration() != null
        && c.getObservedGeneration() == generation;
  }

  private static String cut(String message) {
    return message.length() <= MAX_MESSAGE
        ? message
        : message.substring(0, MAX_MESSAGE - 3) + "...";
  }
}
