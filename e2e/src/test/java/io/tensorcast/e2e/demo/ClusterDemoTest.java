package io.tensorcast.e2e.demo;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import org.junit.jupiter.api.Test;

class ClusterDemoTest {

  /** Before the size is known the demo's progress line says so, never {@code null}. */
  @Test
  void aProgressLineBeforeTheSizeIsKnownHasNoNull() {
    ModelArtifactStatus s = new ModelArtifactStatus();
    s.setPhase(ArtifactPhase.Pending);
    s.setReady("0/2");

    String line = ClusterDemo.describe(s);

    assertThat(line)
        .doesNotContain("null")
        .contains("size=unknown")
        .contains("progress=-")
        .startsWith("phase=Pending");
  }
}
