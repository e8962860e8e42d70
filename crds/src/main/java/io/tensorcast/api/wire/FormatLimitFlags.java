package io.tensorcast.api.wire;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * The data plane's format-reader bounds as command-line flags ({@code dataplane serve --max-tensors
 * 2000000 ...}): the names the operator may pass to data-plane pods from its configuration, and the
 * parser of that configuration ({@code max-tensors=2000000,max-zip-ratio=200}). What each bound
 * means and its default are the data plane's ({@code FormatLimits}); its command line checks the
 * ranges.
 */
public final class FormatLimitFlags {
  /** Flag names without the leading {@code --}. */
  public static final List<String> NAMES =
      List.of(
          "max-header-bytes",
          "max-tensors",
          "max-rank",
          "max-pickle-bytes",
          "max-pickle-objects",
          "max-nesting",
          "max-reuse",
          "max-zip-entries",
          "max-zip-ratio",
          "max-index-bytes");

  private static final Pattern COUNT = Pattern.compile("[1-9][0-9]{0,9}");
  private static final Pattern QUANTITY = Pattern.compile("[1-9][0-9]{0,18}(?:[KMGTPE]i?|k)?");

  private FormatLimitFlags() {}

  /**
   * Parses {@code name=value} pairs separated by commas (spaces around them ignored); names are
   * those of {@link #NAMES}, values positive integers, and for the {@code -bytes} bounds also
   * Kubernetes quantities such as {@code 64Mi}.
   *
   * @return name → value, sorted by name (so the flags built from it are stable); empty for a null
   *     or blank text
   * @throws IllegalArgumentException naming the pair and the rule it breaks
   */
  public static Map<String, String> parse(String text) {
    Map<String, String> out = new TreeMap<>();
    if (text == null || text.isBlank()) {
      return out;
    }
    for (String pair : text.split(",")) {
      String p = pair.strip();
      int eq = p.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException(
            "'" + p + "' is not name=value (e.g. max-tensors=2000000)");
      }
      String name = p.substring(0, eq).strip();
      String value = p.substring(eq + 1).strip();
      if (!NAMES.contains(name)) {
        throw new IllegalArgumentException(
            "'" + name + "' is not a format limit; the limits are " + String.join(", ", NAMES));
      }
      boolean bytes = name.endsWith("-bytes");
      if (!(bytes ? QUANTITY : COUNT).matcher(value).matches()) {
        throw new IllegalArgumentException(
            name
                + "='"
                + value
                + "' is not "
                + (bytes ? "a positive byte quantity such as 64Mi" : "a positive integer"));
      }
      if (out.put(name, value) != null) {
        throw new IllegalArgumentException("'" + name + "' is given twice");
      }
    }
    return out;
  }

  /** The flags for {@code limits}: {@code --name=value} each, in the map's order. */
  public static List<String> args(Map<String, String> limits) {
    Map<String, String> copy = new LinkedHashMap<>(limits);
    return copy.entrySet().stream().map(e -> "--" + e.getKey() + "=" + e.getValue()).toList();
  }
}
