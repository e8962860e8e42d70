package io.tensorcast.dataplane.source;

import java.time.Duration;
import java.util.Objects;
import software.amazon.awssdk.awscore.exception.AwsServiceException;
import software.amazon.awssdk.retries.api.AcquireInitialTokenRequest;
import software.amazon.awssdk.retries.api.AcquireInitialTokenResponse;
import software.amazon.awssdk.retries.api.RecordSuccessRequest;
import software.amazon.awssdk.retries.api.RecordSuccessResponse;
import software.amazon.awssdk.retries.api.RefreshRetryTokenRequest;
import software.amazon.awssdk.retries.api.RefreshRetryTokenResponse;
import software.amazon.awssdk.retries.api.RetryStrategy;
import software.amazon.awssdk.retries.api.TokenAcquisitionFailedException;

/**
 * The AWS SDK's retry strategy with the server's {@code Retry-After} on top: the SDK decides
 * whether a failed call is retried and how long its own back-off waits; the wait is raised to the
 * error response's {@code Retry-After} (seconds or HTTP-date, {@link Backoff#parseRetryAfter}) when
 * the server asked for longer. A call whose server asks to wait longer than {@link
 * #MAX_RETRY_AFTER} is not retried in place: its failure (with the server's wait) goes to the
 * caller. The SDK's own strategies do not read {@code Retry-After}.
 *
 * <p>Without retries of throttling in place, a call the store refuses as throttled (429, {@code
 * SlowDown}) is not retried at all: its failure goes to the caller, which paces throttling for all
 * its requests together (the load's throttling gate).
 */
final class RetryAfterStrategy implements RetryStrategy {
  /** The longest {@code Retry-After} waited for inside one call. */
  static final Duration MAX_RETRY_AFTER = Duration.ofSeconds(60);

  private final RetryStrategy sdk;
  private final boolean throttledInPlace;

  /**
   * @param throttledInPlace whether a call refused as throttled is retried inside the call
   */
  RetryAfterStrategy(RetryStrategy sdk, boolean throttledInPlace) {
    this.sdk = Objects.requireNonNull(sdk, "sdk");
    this.throttledInPlace = throttledInPlace;
  }

  RetryAfterStrategy(RetryStrategy sdk) {
    this(sdk, true);
  }

  @Override
  public AcquireInitialTokenResponse acquireInitialToken(AcquireInitialTokenRequest request) {
    return sdk.acquireInitialToken(request);
  }

  @Override
  public RefreshRetryTokenResponse refreshRetryToken(RefreshRetryTokenRequest request) {
    if (!throttledInPlace
        && request.failure() instanceof AwsServiceException e
        && S3Source.throttling(e)) {
      throw new TokenAcquisitionFailedException(
          "throttled: the caller paces the retry", request.failure());
    }
    Duration retryAfter =
        request.failure() instanceof AwsServiceException e ? S3Source.retryAfter(e) : null;
    if (retryAfter != null && retryAfter.compareTo(MAX_RETRY_AFTER) > 0) {
      throw new TokenAcquisitionFailedException(
          "the server asked to wait " + retryAfter + " (Retry-After)", request.failure());
    }
    RefreshRetryTokenResponse r = sdk.refreshRetryToken(request);
    if (retryAfter == null || retryAfter.compareTo(r.delay()) <= 0) {
      return r;
    }
    return RefreshRetryTokenResponse.create(r.token(), retryAfter);
  }

  @Override
  public RecordSuccessResponse recordSuccess(RecordSuccessRequest request) {
    return sdk.recordSuccess(request);
  }

  @Override
  public int maxAttempts() {
    return sdk.maxAttempts();
  }

  @Override
  public Builder<?, ?> toBuilder() {
    return sdk.toBuilder();
  }
}
