package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import java.util.Objects;

/**
 * Automatic retries of a failed generation whose cause can go away without a spec change ({@code
 * status.retry}): an empty prefix that gets objects, a bucket that gets created, credentials that
 * get their permissions. The operator loads again at {@code nextAttemptTime}, or at once when the
 * annotation {@code tensorcast.io/retry} gets a value other than {@code lastRequest}.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class RetryStatus {

  @JsonPropertyDescription("Number of failed loads of this generation so far, 1 or more.")
  private Integer failures;

  @JsonPropertyDescription(
      "When the next load starts (RFC 3339, UTC); the back-off doubles from 30 s per failure up"
          + " to 10 min.")
  private String nextAttemptTime;

  @JsonPropertyDescription(
      "Value of the tensorcast.io/retry annotation last acted on; a new value retries at once.")
  private String lastRequest;

  public Integer getFailures() {
    return failures;
  }

  public void setFailures(Integer failures) {
    this.failures = failures;
  }

  public String getNextAttemptTime() {
    return nextAttemptTime;
  }

  public void setNextAttemptTime(String nextAttemptTime) {
    this.nextAttemptTime = nextAttemptTime;
  }

  public String getLastRequest() {
    return lastRequest;
  }

  public void setLastRequest(String lastRequest) {
    this.lastRequest = lastRequest;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof RetryStatus that
        && Objects.equals(failures, that.failures)
        && Objects.equals(nextAttemptTime, that.nextAttemptTime)
        && Objects.equals(lastRequest, that.lastRequest);
  }

  @Override
  public int hashCode() {
    return Objects.hash(failures, nextAttemptTime, lastRequest);
  }
}
