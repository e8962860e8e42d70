package io.tensorcast.dataplane.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.OptionalLong;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class ProgressRendererTest {
  private static final long MIB = 1 << 20;
  private static final String ERASE = "\u001b[K";

  private static ProgressSnapshot at(String label, long doneMib, long etaSeconds) {
    return new ProgressSnapshot(
        label, doneMib * MIB, 400 * MIB, 50.0 * MIB, OptionalLong.of(etaSeconds));
  }

  @Test
  void theBarRedrawsOneLineInPlace() {
    StringWriter text = new StringWriter();
    ProgressRenderer.Bar bar = new ProgressRenderer.Bar(new PrintWriter(text));

    bar.update(at("Loading", 100, 6));
    bar.update(at("Loading", 200, 4));
    bar.finish(at("Ready", 400, 0));

    assertThat(text.toString())
        .isEqualTo(
            "\rLoading   [######..................]  25.0%   100.0 MiB / 400.0 MiB    50.0 MiB/s"
                + "  ETA 6s"
                + ERASE
                + "\rLoading   [############............]  50.0%   200.0 MiB / 400.0 MiB    50.0"
                + " MiB/s  ETA 4s"
                + ERASE
                + "\rReady     [########################] 100.0%   400.0 MiB / 400.0 MiB    50.0"
                + " MiB/s  ETA 0s"
                + ERASE
                + "\n");
  }

  /** A log line written while the bar shows erases the bar, takes its own line, the bar returns. */
  @Test
  void logLinesGoAboveTheBarNeverIntoIt() {
    StringWriter text = new StringWriter();
    ProgressRenderer.Bar bar = new ProgressRenderer.Bar(new PrintWriter(text));
    PrintStream log = new PrintStream(bar.logSink(), true, StandardCharsets.UTF_8);

    bar.update(at("Loading", 100, 6));
    log.print("12:00:00.000 WARN  S3Source - retrying GET (attempt 2)\n");

    String barLine =
        "\rLoading   [######..................]  25.0%   100.0 MiB / 400.0 MiB    50.0 MiB/s  ETA"
            + " 6s"
            + ERASE;
    assertThat(text.toString())
        .isEqualTo(
            barLine
                + "\r"
                + ERASE
                + "12:00:00.000 WARN  S3Source - retrying GET (attempt 2)\n"
                + barLine);
  }

  @Test
  void withoutABarLogLinesPassThroughUnchanged() {
    StringWriter text = new StringWriter();
    ProgressRenderer.Bar bar = new ProgressRenderer.Bar(new PrintWriter(text));
    PrintStream log = new PrintStream(bar.logSink(), true, StandardCharsets.UTF_8);

    log.print("a log line\n");

    assertThat(text.toString()).isEqualTo("a log line\n");
  }

  /** Plain lines: no control characters, one per interval, one per label change, a last one. */
  @Test
  void plainLinesArePeriodicAndFreeOfControlCharacters() {
    StringWriter text = new StringWriter();
    AtomicLong now = new AtomicLong();
    ProgressRenderer.Plain plain =
        new ProgressRenderer.Plain(new PrintWriter(text), now::get, Duration.ofSeconds(5));

    plain.update(new ProgressSnapshot("Listing", 0, 0, 0, OptionalLong.empty()));
    for (int s = 1; s <= 12; s++) {
      now.set(s * 500_000_000L); // ticks every 0.5 s for 6 s
      plain.update(at("Loading", 10L * s, 60));
    }
    plain.finish(at("Ready", 400, 0));

    assertThat(text.toString().lines())
        .containsExactly(
            "Listing     0.0%         0 B / ?                 0 B/s  ETA -",
            "Loading     2.5%    10.0 MiB / 400.0 MiB    50.0 MiB/s  ETA 1m00s",
            "Loading    27.5%   110.0 MiB / 400.0 MiB    50.0 MiB/s  ETA 1m00s",
            "Ready     100.0%   400.0 MiB / 400.0 MiB    50.0 MiB/s  ETA 0s");
    assertThat(text.toString()).doesNotContain("\r").doesNotContain("\u001b");
  }
}
