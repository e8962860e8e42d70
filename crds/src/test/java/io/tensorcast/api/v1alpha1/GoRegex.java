package io.tensorcast.api.v1alpha1;

import java.util.regex.Pattern;

/**
 * Compiles a CRD {@code pattern} with the semantics the API server gives it (Go RE2, searched with
 * {@code MatchString}). The one difference that matters for our anchored patterns: Go's {@code $}
 * (without the {@code m} flag) matches only at the end of the text, Java's also before a final line
 * terminator; Java's {@code \z} is Go's {@code $}.
 */
final class GoRegex {

  private GoRegex() {}

  static Pattern compile(String pattern) {
    if (pattern.endsWith("$") && !pattern.endsWith("\\$")) {
      pattern = pattern.substring(0, pattern.length() - 1) + "\\z";
    }
    return Pattern.compile(pattern);
  }

  /** True when the API server would accept {@code value} for {@code pattern}. */
  static boolean accepts(String pattern, String value) {
    return compile(pattern).matcher(value).find();
  }
}
