package io.tensorcast.csi.node;

import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Parses the {@code readyTimeout} volume attribute: a Kubernetes-style duration made of whole
 * hours, minutes, seconds and milliseconds in that order ({@code 90s}, {@code 5m}, {@code 1h30m},
 * {@code 500ms}) or an ISO-8601 duration ({@code PT5M}).
 */
final class ReadyTimeouts {
  private static final Pattern GO =
      Pattern.compile("(?:(\\d{1,5})h)?(?:(\\d{1,7})m(?!s))?(?:(\\d{1,9})s)?(?:(\\d{1,9})ms)?");

  private ReadyTimeouts() {}

  /**
   * @return the duration, or null when {@code text} is neither form
   */
  static Duration parse(String text) {
    String t = text.trim();
    if (t.isEmpty()) {
      return null;
    }
    if (t.startsWith("P") || t.startsWith("p")) {
      try {
        return Duration.parse(t);
      } catch (DateTimeParseException e) {
        return null;
      }
    }
    Matcher m = GO.matcher(t);
    if (!m.matches()) {
      return null;
    }
    Duration d = Duration.ZERO;
    if (m.group(1) != null) {
      d = d.plusHours(Long.parseLong(m.group(1)));
    }
    if (m.group(2) != null) {
      d = d.plusMinutes(Long.parseLong(m.group(2)));
    }
    if (m.group(3) != null) {
      d = d.plusSeconds(Long.parseLong(m.group(3)));
    }
    if (m.group(4) != null) {
      d = d.plusMillis(Long.parseLong(m.group(4)));
    }
    return d;
  }

  /** {@code 1h30m0s}-style text for messages. */
  static String format(Duration d) {
    long s = d.toSeconds();
    long ms = d.toMillisPart();
    StringBuilder b = new StringBuilder();
    if (s >= 3600) {
      b.append(s / 3600).append('h');
    }
    if (s >= 60) {
      b.append((s % 3600) / 60).append('m');
    }
    b.append(s % 60);
    if (ms > 0) {
      b.append('.').append(String.format("%03d", ms));
    }
    return b.append('s').toString();
  }
}
