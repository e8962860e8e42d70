package io.tensorcast.operator.events;

import io.fabric8.kubernetes.api.model.Condition;
import io.tensorcast.api.Reason;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.Conditions;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * Which Kubernetes Events a status change of a ModelArtifact or TensorShardSet gives. Pure: the
 * reconcilers pass the status they had and the one they wrote, {@link EventRecorder} writes the
 * result.
 *
 * <ul>
 *   <li>A <b>phase change</b>: one event with the reason and message of the condition that
 *       describes the new phase ({@code Resolving} → {@code Resolved}, {@code Loading} → {@code
 *       Loaded}, every other phase → {@code Ready}); type {@code Warning} for {@code Failed}, else
 *       {@code Normal}.
 *   <li>Without a phase change, a <b>failure</b>: {@code Stalled} becoming {@code True} or changing
 *       its reason while {@code True} (a crash loop, an image that cannot be pulled, not enough
 *       nodes), or {@code Ready=False} changing to a transient source failure ({@code
 *       SourceUnavailable}, {@code Throttled}) — one {@code Warning} with that condition's reason
 *       and message.
 * </ul>
 *
 * A status write that changes neither (progress, bytes, a node entry) gives no event, so repeated
 * reconciles of an unchanged object add none.
 */
public final class StatusEvents {

  private StatusEvents() {}

  /** {@code Normal} or {@code Warning}, as core/v1 Events spell them. */
  public static final String NORMAL = "Normal";

  public static final String WARNING = "Warning";

  /**
   * One event to record.
   *
   * @param type {@link #NORMAL} or {@link #WARNING}
   * @param reason CamelCase reason of the condition
   * @param message the condition's message
   */
  public record StatusEvent(String type, String reason, String message) {}

  /**
   * The events of a status change from ({@code oldPhase}, {@code oldConditions}) to ({@code
   * newPhase}, {@code newConditions}); empty when nothing an operator team watches changed.
   */
  public static List<StatusEvent> of(
      ArtifactPhase oldPhase,
      List<Condition> oldConditions,
      ArtifactPhase newPhase,
      List<Condition> newConditions) {
    List<StatusEvent> out = new ArrayList<>();
    if (newPhase != null && newPhase != oldPhase) {
      String type = newPhase == ArtifactPhase.Failed ? WARNING : NORMAL;
      Condition c =
          find(newConditions, conditionOf(newPhase))
              .or(() -> find(newConditions, Conditions.READY))
              .orElse(null);
      out.add(
          c == null
              ? new StatusEvent(type, newPhase.name(), "phase " + newPhase)
              : new StatusEvent(type, c.getReason(), c.getMessage()));
      return out;
    }
    Optional<Condition> stalled = find(newConditions, Conditions.STALLED);
    Optional<Condition> wasStalled = find(oldConditions, Conditions.STALLED);
    if (stalled.isPresent()
        && Conditions.TRUE.equals(stalled.get().getStatus())
        && !(wasStalled.isPresent()
            && Conditions.TRUE.equals(wasStalled.get().getStatus())
            && Objects.equals(wasStalled.get().getReason(), stalled.get().getReason()))) {
      out.add(new StatusEvent(WARNING, stalled.get().getReason(), stalled.get().getMessage()));
      return out;
    }
    Optional<Condition> ready = find(newConditions, Conditions.READY);
    Optional<Condition> wasReady = find(oldConditions, Conditions.READY);
    if (ready.isPresent()
        && Conditions.FALSE.equals(ready.get().getStatus())
        && transientFailure(ready.get().getReason())
        && !(wasReady.isPresent()
            && Objects.equals(wasReady.get().getReason(), ready.get().getReason()))) {
      out.add(new StatusEvent(WARNING, ready.get().getReason(), ready.get().getMessage()));
    }
    return out;
  }

  private static boolean transientFailure(String reason) {
    return Reason.of(reason).map(Reason::isTransient).orElse(false);
  }

  private static String conditionOf(ArtifactPhase phase) {
    return switch (phase) {
      case Resolving -> Conditions.RESOLVED;
      case Loading -> Conditions.LOADED;
      default -> Conditions.READY;
    };
  }

  private static Optional<Condition> find(List<Condition> conditions, String type) {
    return conditions == null
        ? Optional.empty()
        : conditions.stream().filter(c -> type.equals(c.getType())).findFirst();
  }
}
