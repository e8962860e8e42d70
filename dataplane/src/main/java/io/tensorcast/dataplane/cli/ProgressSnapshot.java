package io.tensorcast.dataplane.cli;

import java.util.Locale;
import java.util.OptionalLong;

/**
 * What a progress line shows at one moment.
 *
 * @param label what is in progress (e.g. the load phase {@code Loading}); at most ~10 characters
 *     keep the line's columns
 * @param bytesDone bytes transferred so far
 * @param bytesTotal the total in bytes; 0 or less while unknown
 * @param bytesPerSecond the windowed rate ({@link TransferRate#bytesPerSecond()})
 * @param secondsLeft the ETA from that rate; empty while unknown
 */
public record ProgressSnapshot(
    String label,
    long bytesDone,
    long bytesTotal,
    double bytesPerSecond,
    OptionalLong secondsLeft) {

  /** A snapshot of {@code rate} after {@link TransferRate#record} of {@code bytesDone}. */
  public static ProgressSnapshot of(
      String label, long bytesDone, long bytesTotal, TransferRate rate) {
    return new ProgressSnapshot(
        label, bytesDone, bytesTotal, rate.bytesPerSecond(), rate.secondsLeft(bytesTotal));
  }

  /** The fraction done in [0, 1]; 0 while the total is unknown. */
  public double fraction() {
    return bytesTotal <= 0 ? 0 : Math.min(1.0, Math.max(0.0, (double) bytesDone / bytesTotal));
  }

  /**
   * The columns after the bar: {@code 45.2% 172.0 MiB / 383.0 MiB 31.5 MiB/s ETA 7s} ({@code ETA -}
   * while unknown, {@code ?} for an unknown total; minutes and hours past 60 s).
   */
  public String numbers() {
    return String.format(
        Locale.ROOT,
        "%5.1f%%  %10s / %-10s %10s/s  ETA %s",
        100 * fraction(),
        Quantities.human(bytesDone),
        bytesTotal <= 0 ? "?" : Quantities.human(bytesTotal),
        Quantities.human((long) bytesPerSecond),
        secondsLeft.isPresent() ? duration(secondsLeft.getAsLong()) : "-");
  }

  /** {@code 7s}, {@code 2m05s}, {@code 1h02m}. */
  static String duration(long seconds) {
    if (seconds < 60) {
      return seconds + "s";
    }
    if (seconds < 3600) {
      return String.format(Locale.ROOT, "%dm%02ds", seconds / 60, seconds % 60);
    }
    return String.format(Locale.ROOT, "%dh%02dm", seconds / 3600, seconds % 3600 / 60);
  }
}
