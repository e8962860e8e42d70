package io.tensorcast.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

class ReasonTest {
  @Test
  void onlySourceOutagesThrottlingAndChangesAreTransient() {
    assertThat(Arrays.stream(Reason.values()).filter(Reason::isTransient))
        .containsExactlyInAnyOrder(
            Reason.SourceUnavailable,
            Reason.Throttled,
            Reason.IncompleteArtifact,
            Reason.SourceChanged);
  }

  @Test
  void wireNamesOfANewerPeerAreReadAsUnknown() {
    assertThat(Reason.of("Throttled")).contains(Reason.Throttled);
    assertThat(Reason.of("SomethingNewer")).isEmpty();
    assertThat(Reason.of(null)).isEmpty();
    assertThat(Reason.isTransient("SourceUnavailable")).isTrue();
    assertThat(Reason.isTransient("SomethingNewer")).isFalse();
  }

  @Test
  void aFailedLoadIsPendingOnlyWhenTransientAndNotStopping() {
    assertThat(Phase.afterFailure("Throttled", false)).isEqualTo(Phase.Pending);
    assertThat(Phase.afterFailure("Throttled", true)).isEqualTo(Phase.Failed);
    assertThat(Phase.afterFailure("BucketNotFound", false)).isEqualTo(Phase.Failed);
  }

  @Test
  void toBuilderChangesOnlyTheFieldsSet() {
    DataPlaneStatus s =
        DataPlaneStatus.builder("a", Phase.Loading)
            .reason(Reason.Retrying)
            .message("m")
            .bytesTotal(100)
            .bytesLoaded(10)
            .fileStatuses(List.of())
            .peerEpoch("e")
            .peers(3)
            .build();
    DataPlaneStatus t = s.toBuilder().phase(Phase.Ready).bytesLoaded(100).build();
    assertThat(t.phase()).isEqualTo(Phase.Ready);
    assertThat(t.bytesLoaded()).isEqualTo(100);
    assertThat(t.reason()).isEqualTo("Retrying");
    assertThat(t.peerEpoch()).isEqualTo("e");
    assertThat(t.peers()).isEqualTo(3);
    assertThat(t.toBuilder().build()).isEqualTo(t);
  }
}
