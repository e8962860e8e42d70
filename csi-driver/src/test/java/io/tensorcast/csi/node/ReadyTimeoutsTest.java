package io.tensorcast.csi.node;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class ReadyTimeoutsTest {

  @Test
  void parsesKubernetesAndIsoDurations() {
    assertThat(ReadyTimeouts.parse("90s")).isEqualTo(Duration.ofSeconds(90));
    assertThat(ReadyTimeouts.parse("5m")).isEqualTo(Duration.ofMinutes(5));
    assertThat(ReadyTimeouts.parse("1h30m")).isEqualTo(Duration.ofMinutes(90));
    assertThat(ReadyTimeouts.parse("2m30s")).isEqualTo(Duration.ofSeconds(150));
    assertThat(ReadyTimeouts.parse("500ms")).isEqualTo(Duration.ofMillis(500));
    assertThat(ReadyTimeouts.parse("0s")).isEqualTo(Duration.ZERO);
    assertThat(ReadyTimeouts.parse("PT5M")).isEqualTo(Duration.ofMinutes(5));
  }

  @Test
  void refusesWhatIsNotADuration() {
    for (String bad : new String[] {"", "5", "m", "five minutes", "5min", "30s5m", "-5m", "PTx"}) {
      assertThat(ReadyTimeouts.parse(bad)).as(bad).isNull();
    }
  }

  @Test
  void formatsForMessages() {
    assertThat(ReadyTimeouts.format(Duration.ofSeconds(3725))).isEqualTo("1h2m5s");
    assertThat(ReadyTimeouts.format(Duration.ofSeconds(59))).isEqualTo("59s");
    assertThat(ReadyTimeouts.format(Duration.ofMillis(2500))).isEqualTo("2.500s");
  }
}
