package io.tensorcast.dataplane.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class TransferRateTest {
  private static final long S = 1_000_000_000L;
  private static final long MIB = 1 << 20;

  /**
   * A load that lists for 60 s (no bytes) then runs at 100 MiB/s: after 2 s of transfer the ETA for
   * the last 1000 MiB is 10 s from the window, where the average since the start (200 MiB in 62 s)
   * would say about 310 s.
   */
  @Test
  void aSlowStartDoesNotSkewTheRateOrTheEta() {
    TransferRate rate = new TransferRate(Duration.ofSeconds(8));
    long t = 0;
    for (; t <= 60 * S; t += S / 2) {
      rate.record(t, 0);
    }
    long done = 0;
    for (int tick = 1; tick <= 4; tick++) {
      done += 50 * MIB;
      rate.record(t, done);
      t += S / 2;
    }

    // the window still holds 6 s of the idle start: (200 MiB) over 8 s
    assertThat(rate.bytesPerSecond()).isCloseTo(25.0 * MIB, within(1.0));
    for (int tick = 5; tick <= 16; tick++) {
      done += 50 * MIB;
      rate.record(t, done);
      t += S / 2;
    }
    // 8 s of transfer in the window: exactly 100 MiB/s, and 1000 MiB - 800 MiB left...
    assertThat(rate.bytesPerSecond()).isCloseTo(100.0 * MIB, within(1.0));
    assertThat(rate.secondsLeft(done + 1000 * MIB)).hasValue(10);
  }

  @Test
  void theRateFollowsASlowdownWithinTheWindow() {
    TransferRate rate = new TransferRate(Duration.ofSeconds(5));
    long done = 0;
    long t = 0;
    for (int i = 0; i < 20; i++, t += S) {
      done += 100 * MIB;
      rate.record(t, done);
    }
    for (int i = 0; i < 6; i++, t += S) {
      done += 10 * MIB;
      rate.record(t, done);
    }
    assertThat(rate.bytesPerSecond()).isCloseTo(10.0 * MIB, within(1.0));
  }

  @Test
  void noRateNoEtaUntilBytesMove() {
    TransferRate rate = new TransferRate(Duration.ofSeconds(8));
    assertThat(rate.bytesPerSecond()).isZero();
    assertThat(rate.secondsLeft(100)).isEmpty();
    rate.record(0, 0);
    rate.record(S, 0);
    assertThat(rate.secondsLeft(100)).isEmpty();
    assertThat(rate.secondsLeft(0)).as("unknown total").isEmpty();
  }

  @Test
  void bytesGoingDownRestartTheWindow() {
    TransferRate rate = new TransferRate(Duration.ofSeconds(8));
    rate.record(0, 0);
    rate.record(S, 500 * MIB);
    rate.record(2 * S, 0); // the load started over
    assertThat(rate.bytesPerSecond()).isZero();
    rate.record(3 * S, 20 * MIB);
    assertThat(rate.bytesPerSecond()).isCloseTo(20.0 * MIB, within(1.0));
    assertThat(rate.secondsLeft(20 * MIB)).hasValue(0);
  }

  @Test
  void etaFormatting() {
    assertThat(ProgressSnapshot.duration(7)).isEqualTo("7s");
    assertThat(ProgressSnapshot.duration(125)).isEqualTo("2m05s");
    assertThat(ProgressSnapshot.duration(3720)).isEqualTo("1h02m");
  }
}
