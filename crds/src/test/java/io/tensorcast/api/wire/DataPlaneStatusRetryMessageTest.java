package io.tensorcast.api.wire;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class DataPlaneStatusRetryMessageTest {
  private static final String FAILURE =
      "listing s3://b/m/: the store failed (HTTP 500 InternalError: oops)";

  @Test
  void retryMessageNamesTheWaitAndTheNextAttempt() {
    assertThat(DataPlaneStatus.retryMessage(FAILURE, Duration.ofMillis(40_000), 3))
        .isEqualTo(FAILURE + "; retrying in 40s (attempt 3)");
    assertThat(DataPlaneStatus.retryMessage(FAILURE, Duration.ofMillis(250), 2))
        .endsWith("; retrying in 250ms (attempt 2)");
    assertThat(DataPlaneStatus.retryMessage(FAILURE, Duration.ofMillis(39_001), 3))
        .endsWith("; retrying in 40s (attempt 3)");
    assertThat(DataPlaneStatus.retryMessage(FAILURE, Duration.ofSeconds(270), 9))
        .endsWith("; retrying in 4m30s (attempt 9)");
    assertThat(DataPlaneStatus.retryMessage(FAILURE, Duration.ofSeconds(300), 9))
        .endsWith("; retrying in 5m (attempt 9)");
    assertThat(DataPlaneStatus.retryMessage(FAILURE, Duration.ofMillis(-5), 2))
        .endsWith("; retrying in 0ms (attempt 2)");
  }

  @Test
  void everyPollOfOneWaitLosesTheSameCountdown() {
    List<String> polls =
        List.of(
            DataPlaneStatus.retryMessage(FAILURE, Duration.ofSeconds(270), 4),
            DataPlaneStatus.retryMessage(FAILURE, Duration.ofSeconds(40), 4),
            DataPlaneStatus.retryMessage(FAILURE, Duration.ofMillis(3), 4));
    assertThat(polls).doesNotHaveDuplicates();
    assertThat(polls.stream().map(DataPlaneStatus::withoutRetryCountdown).distinct())
        .containsExactly(FAILURE + "; retrying (attempt 4)");
  }

  @Test
  void otherMessagesAreKept() {
    assertThat(DataPlaneStatus.withoutRetryCountdown(null)).isNull();
    assertThat(DataPlaneStatus.withoutRetryCountdown(FAILURE)).isEqualTo(FAILURE);
    String loading = "a.safetensors at byte 5: attempt 1 failed (x); retrying in 200 ms";
    assertThat(DataPlaneStatus.withoutRetryCountdown(loading)).isEqualTo(loading);
  }

  @Test
  void theHelpersAreNotSerialised() throws Exception {
    DataPlaneStatus s =
        DataPlaneStatus.builder("a", DataPlaneStatus.Phase.Pending)
            .reason("SourceUnavailable")
            .message(DataPlaneStatus.retryMessage(FAILURE, Duration.ofSeconds(10), 2))
            .source("s3://b/m/")
            .fileStatuses(List.of())
            .build();
    String json = new ObjectMapper().writeValueAsString(s);
    assertThat(json).doesNotContain("retryMessage").doesNotContain("withoutRetryCountdown");
    assertThat(new ObjectMapper().readValue(json, DataPlaneStatus.class)).isEqualTo(s);
  }
}
