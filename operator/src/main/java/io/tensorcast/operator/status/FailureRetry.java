package io.tensorcast.operator.status;

import io.tensorcast.api.Reason;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.time.temporal.ChronoUnit;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * When a Failed ModelArtifact is loaded again without a spec change. Pure: the reconciler asks
 * {@link #retryNow} before it keeps a recorded failure, and {@link #plan} gives the retry fields of
 * every status it writes.
 *
 * <p>Failures whose cause may go away by itself or by a change outside the spec ({@link #retried}:
 * a bucket, prefix, object, repository or revision that does not exist yet, an empty listing,
 * refused or missing credentials, a source that stayed unavailable) are retried: the {@code n}-th
 * failed attempt of a copy generation waits {@code initial × 2^(n-1)}, capped at {@code max}
 * (defaults 30 s, 1 min, 2 min, 4 min, 8 min, then 10 min), and {@code status.nextRetryTime} says
 * when; {@code Stalled} is {@code False} meanwhile. Every other failure (an invalid spec, a
 * malformed file, a size above the limit) stays until the spec changes ({@code Stalled=True}).
 *
 * <p>Annotation {@value TensorcastConstants#ANNOTATION_RETRY} with a value other than {@code
 * status.retryRequest} retries any recorded failure now (e.g. after the object in the bucket was
 * replaced); the value is recorded so that it acts once.
 */
public final class FailureRetry {

  private FailureRetry() {}

  /** Reasons of failures the operator retries by itself. */
  static final Set<String> RETRIED =
      Set.of(
          Reason.SourceNotFound.name(),
          Reason.BucketNotFound.name(),
          Reason.ObjectNotFound.name(),
          Reason.RepoNotFound.name(),
          Reason.RevisionNotFound.name(),
          Reason.EntryNotFound.name(),
          Reason.GatedRepo.name(),
          Reason.AccessDenied.name(),
          Reason.Unauthorized.name(),
          Reason.CredentialsNotFound.name(),
          Reason.EmptyArtifact.name(),
          Reason.ObjectChanged.name(),
          Reason.SourceUnavailable.name(),
          Reason.Throttled.name(),
          Reason.IncompleteArtifact.name());

  /** Whether a failure with {@code reason} is retried without a spec change. */
  public static boolean retried(String reason) {
    return reason != null && RETRIED.contains(reason);
  }

  /**
   * The wait after the {@code attempts}-th failed attempt: {@code initial × 2^(attempts-1)}, capped
   * at {@code max}.
   *
   * @param attempts failed attempts so far, ≥ 1
   */
  public static Duration backoff(int attempts, Duration initial, Duration max) {
    if (attempts < 1) {
      throw new IllegalArgumentException("attempts " + attempts + " < 1");
    }
    Duration d = initial;
    for (int i = 1; i < attempts && d.compareTo(max) < 0; i++) {
      d = d.multipliedBy(2);
    }
    return d.compareTo(max) > 0 ? max : d;
  }

  /** The value of the retry annotation, if set. */
  public static Optional<String> annotation(ModelArtifact artifact) {
    Map<String, String> a = artifact.getMetadata().getAnnotations();
    return Optional.ofNullable(a == null ? null : a.get(TensorcastConstants.ANNOTATION_RETRY));
  }

  /** Whether the retry annotation holds a value the operator has not acted on. */
  public static boolean requested(ModelArtifact artifact) {
    Optional<String> value = annotation(artifact);
    ModelArtifactStatus s = artifact.getStatus();
    return value.isPresent()
        && !Objects.equals(value.get(), s == null ? null : s.getRetryRequest());
  }

  /**
   * Whether a recorded failure is to be passed over now: the retry annotation has a new value, or
   * the recorded {@code status.nextRetryTime} has come.
   */
  public static boolean retryNow(ModelArtifact artifact, Instant now) {
    return requested(artifact)
        || nextRetry(artifact.getStatus()).map(t -> !now.isBefore(t)).orElse(false);
  }

  /** {@code status.nextRetryTime}, if set and readable. */
  public static Optional<Instant> nextRetry(ModelArtifactStatus status) {
    if (status == null || status.getNextRetryTime() == null) {
      return Optional.empty();
    }
    try {
      return Optional.of(Instant.parse(status.getNextRetryTime()));
    } catch (DateTimeParseException e) {
      return Optional.empty();
    }
  }

  /** What this pass did about a failure, for {@link #apply}. */
  public enum Outcome {
    /** No failure this pass. */
    NONE,
    /** A failure the operator computed itself (checked anew each pass; not an attempt). */
    COMPUTED,
    /** A pod reported a failure: one more failed attempt. */
    ATTEMPT_FAILED,
    /** The failure recorded earlier is kept; its retry time stands. */
    KEPT
  }

  /**
   * The retry fields of this pass's status and the failure to report.
   *
   * @param failure the failure to report (its {@link StatusAggregator.Failure#retry} set when the
   *     operator retries it by itself), or empty
   * @param attempts {@code status.retryAttempts}, or null
   * @param nextRetryTime {@code status.nextRetryTime}, or null
   * @param retryRequest {@code status.retryRequest}, or null
   */
  public record Plan(
      Optional<StatusAggregator.Failure> failure,
      Integer attempts,
      String nextRetryTime,
      String retryRequest) {

    /** Writes the retry fields into {@code status} (attempts are dropped once it is Ready). */
    public void fill(ModelArtifactStatus status) {
      status.setRetryAttempts(status.getPhase() == ArtifactPhase.Ready ? null : attempts);
      status.setNextRetryTime(nextRetryTime);
      status.setRetryRequest(retryRequest);
    }
  }

  /**
   * Plans the retry fields from the artifact's previous status and what this pass did. Attempts
   * count within a copy generation; {@code nextRetryTime} is set only while a retried failure is
   * recorded; {@code retryRequest} is the annotation's current value (acted on or not needed).
   *
   * @param copyGeneration the copy generation of this pass's status
   * @param failure this pass's failure (required unless {@code outcome} is {@link Outcome#NONE})
   */
  public static Plan plan(
      ModelArtifact artifact,
      long copyGeneration,
      Outcome outcome,
      Optional<StatusAggregator.Failure> failure,
      Instant now,
      Duration initial,
      Duration max) {
    ModelArtifactStatus old = artifact.getStatus();
    boolean sameCopy =
        old != null && old.getCopyGeneration() != null && old.getCopyGeneration() == copyGeneration;
    int attempts =
        sameCopy && old.getRetryAttempts() != null ? Math.max(0, old.getRetryAttempts()) : 0;
    String request = annotation(artifact).orElse(old == null ? null : old.getRetryRequest());
    Integer kept = attempts > 0 ? attempts : null;
    switch (outcome) {
      case NONE, COMPUTED -> {
        return new Plan(failure, kept, null, request);
      }
      case ATTEMPT_FAILED -> {
        StatusAggregator.Failure f = failure.orElseThrow();
        int n = attempts + 1;
        if (!retried(f.reason())) {
          return new Plan(failure, n, null, request);
        }
        Instant at = now.plus(backoff(n, initial, max)).truncatedTo(ChronoUnit.SECONDS);
        return new Plan(Optional.of(f.retrying(retryText(at, n))), n, at.toString(), request);
      }
      case KEPT -> {
        StatusAggregator.Failure f = failure.orElseThrow();
        Optional<Instant> at = sameCopy ? nextRetry(old) : Optional.empty();
        if (at.isEmpty() || !retried(f.reason())) {
          return new Plan(failure, kept, null, request);
        }
        return new Plan(
            Optional.of(f.retrying(retryText(at.get(), Math.max(1, attempts)))),
            kept,
            at.get().toString(),
            request);
      }
      default -> throw new IllegalStateException(outcome.name());
    }
  }

  private static String retryText(Instant at, int attempts) {
    return "loading again at "
        + at
        + " after "
        + attempts
        + " failed attempt(s) (annotate "
        + TensorcastConstants.ANNOTATION_RETRY
        + " with a new value to retry now)";
  }
}
