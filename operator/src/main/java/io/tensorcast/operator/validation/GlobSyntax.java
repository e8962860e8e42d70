package io.tensorcast.operator.validation;

import java.util.Optional;

/**
 * Syntax check of one include/exclude glob of {@code spec.source}, with the rules of the data
 * plane's matcher (gitignore-style: {@code *}, {@code ?}, {@code [...]}, <code>{a,b}</code>, whole
 * segment {@code **}, leading {@code /} anchors, trailing {@code /} names a directory, {@code \}
 * escapes). The operator checks syntax only, so a bad pattern fails the artifact before any pod is
 * created; matching is the data plane's job. Keep the rules in step with the data plane's {@code
 * PathGlob}.
 */
public final class GlobSyntax {
  private GlobSyntax() {}

  /**
   * Returns the first rule {@code glob} breaks, or empty when it is well formed.
   *
   * @param glob the pattern as written in the spec
   */
  public static Optional<String> check(String glob) {
    if (glob == null || glob.isEmpty()) {
      return Optional.of("glob is empty; give a pattern such as '*.safetensors'");
    }
    String body = glob;
    if (body.endsWith("/") && !body.endsWith("\\/")) {
      body = body.substring(0, body.length() - 1);
    }
    if (body.startsWith("/")) {
      body = body.substring(1);
    }
    if (body.isEmpty()) {
      return Optional.of("glob '" + glob + "' matches no path: it names only the root");
    }
    for (String segment : body.split("/", -1)) {
      if (segment.isEmpty()) {
        return Optional.of("glob '" + glob + "' has an empty segment ('//'); paths have none");
      }
      if (segment.equals(".") || segment.equals("..")) {
        return Optional.of(
            "glob '" + glob + "' has a '" + segment + "' segment; artifact paths have none");
      }
      if (segment.equals("**")) {
        continue;
      }
      if (segment.contains("**")) {
        return Optional.of(
            "glob '"
                + glob
                + "': '**' must be a whole path segment (as in 'a/**/b'), found in '"
                + segment
                + "'");
      }
      Optional<String> bad = checkSegment(glob, segment);
      if (bad.isPresent()) {
        return bad;
      }
    }
    return Optional.empty();
  }

  private static Optional<String> checkSegment(String glob, String segment) {
    boolean inBraces = false;
    for (int i = 0; i < segment.length(); i++) {
      char c = segment.charAt(i);
      switch (c) {
        case '\\' -> {
          if (i + 1 >= segment.length()) {
            return Optional.of("glob '" + glob + "' ends with a lone '\\'; escape it as '\\\\'");
          }
          i++;
        }
        case '[' -> {
          int close = classEnd(segment, i);
          if (close < 0) {
            return Optional.of(
                "glob '" + glob + "': '[' without a closing ']' in segment '" + segment + "'");
          }
          i = close;
        }
        case '{' -> {
          if (inBraces) {
            return Optional.of("glob '" + glob + "': nested '{' is not supported");
          }
          if (segment.indexOf('}', i) < 0) {
            return Optional.of(
                "glob '" + glob + "': '{' without a closing '}' (a '/' cannot appear inside)");
          }
          inBraces = true;
        }
        case '}' -> {
          if (!inBraces) {
            return Optional.of(
                "glob '" + glob + "': '}' without an opening '{'; escape it as '\\}'");
          }
          inBraces = false;
        }
        default -> {}
      }
    }
    return Optional.empty();
  }

  /** Index of the ']' closing the class opened at {@code start}, or -1. */
  private static int classEnd(String segment, int start) {
    int i = start + 1;
    if (i < segment.length() && (segment.charAt(i) == '!' || segment.charAt(i) == '^')) {
      i++;
    }
    boolean first = true;
    while (i < segment.length() && (segment.charAt(i) != ']' || first)) {
      if (segment.charAt(i) == '\\' && i + 1 < segment.length()) {
        i++;
      }
      first = false;
      i++;
    }
    return i < segment.length() ? i : -1;
  }
}
