package io.tensorcast.api;

import io.tensorcast.api.v1alpha1.SourceSpec;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * One include/exclude glob (the {@code include}/{@code exclude} fields of a ModelArtifact source),
 * matched against an artifact-relative, '/'-separated path such as {@code
 * text_encoder/model.safetensors}. The syntax follows {@code .gitignore}, so that the patterns
 * people already write for the Hub ({@code *.safetensors}, {@code *.json}) work unchanged:
 *
 * <ul>
 *   <li>{@code *} matches any run of characters except {@code /}; {@code ?} one character except
 *       {@code /}.
 *   <li>{@code [abc]}, {@code [a-z]}, {@code [!a-z]} (or {@code [^a-z]}) match one character of (or
 *       not of) the class; never {@code /}.
 *   <li>{@code {safetensors,json}} matches either alternative (not nested, no {@code /} inside).
 *   <li>{@code **} as a whole segment matches zero or more directories: {@code **}{@code /x.bin}
 *       matches {@code x.bin} and {@code a/b/x.bin}; a trailing {@code /**} matches everything
 *       below. {@code **} inside a segment (e.g. {@code a**}) is an error.
 *   <li>A pattern without {@code /} (except a trailing one) matches the file name at any depth:
 *       {@code *.json} matches {@code config.json} and {@code tokenizer/vocab.json}.
 *   <li>A pattern with a {@code /} at the start or in the middle is anchored at the artifact root:
 *       {@code /config.json} and {@code unet/*.safetensors} match only there.
 *   <li>A trailing {@code /} names a directory: {@code vae/} matches every file below any directory
 *       named {@code vae}; {@code /vae/} only the top-level one.
 *   <li>{@code \} escapes the next character, also inside {@code [...]}: {@code [\]]} is the class
 *       of {@code ]}. Matching is case-sensitive.
 * </ul>
 *
 * <p>This is the one implementation of the grammar: the operator validates {@code spec.source} with
 * {@link #compile} and the data plane matches with it, so the operator accepts exactly what the
 * data plane can match.
 */
public final class PathGlob {
  private final String glob;
  private final Pattern regex;

  private PathGlob(String glob, Pattern regex) {
    this.glob = glob;
    this.regex = regex;
  }

  /**
   * Compiles a glob.
   *
   * @throws IllegalArgumentException naming the glob and the rule broken (empty glob, longer than
   *     {@value SourceSpec#MAX_GLOB_LENGTH} characters, {@code **} inside a segment, unclosed
   *     {@code [} or <code>{</code>, reversed range in {@code [...]}, empty segment, {@code
   *     .}/{@code ..} segment, trailing {@code \})
   */
  public static PathGlob compile(String glob) {
    if (glob == null || glob.isEmpty()) {
      throw new IllegalArgumentException("glob is empty; give a pattern such as '*.safetensors'");
    }
    if (glob.length() > SourceSpec.MAX_GLOB_LENGTH) {
      throw new IllegalArgumentException(
          "glob '"
              + glob.substring(0, 40)
              + "...' is "
              + glob.length()
              + " characters long; at most "
              + SourceSpec.MAX_GLOB_LENGTH);
    }
    String body = glob;
    boolean directory = false;
    if (body.endsWith("/") && !body.endsWith("\\/")) {
      directory = true;
      body = body.substring(0, body.length() - 1);
    }
    boolean anchored = body.startsWith("/");
    if (anchored) {
      body = body.substring(1);
    }
    if (body.isEmpty()) {
      throw new IllegalArgumentException(
          "glob '" + glob + "' matches no path: it names only the root");
    }
    if (!anchored && !body.contains("/")) {
      body = "**/" + body;
    }
    if (directory) {
      body = body + "/**";
    }
    String[] segments = body.split("/", -1);
    StringBuilder re = new StringBuilder();
    boolean needSeparator = false;
    for (int i = 0; i < segments.length; i++) {
      String segment = segments[i];
      boolean last = i == segments.length - 1;
      if (segment.isEmpty()) {
        throw new IllegalArgumentException(
            "glob '" + glob + "' has an empty segment ('//'); paths have none");
      }
      if (segment.equals(".") || segment.equals("..")) {
        throw new IllegalArgumentException(
            "glob '" + glob + "' has a '" + segment + "' segment; artifact paths have none");
      }
      if (segment.equals("**")) {
        if (last) {
          re.append(needSeparator ? "/.+" : ".+");
        } else {
          re.append(needSeparator ? "/" : "").append("(?:[^/]+/)*");
          needSeparator = false;
        }
        continue;
      }
      re.append(needSeparator ? "/" : "");
      translateSegment(glob, segment, re);
      needSeparator = true;
    }
    try {
      return new PathGlob(glob, Pattern.compile(re.toString(), Pattern.DOTALL));
    } catch (PatternSyntaxException e) {
      throw new IllegalArgumentException(
          "glob '" + glob + "' cannot be matched: " + e.getDescription(), e);
    }
  }

  private static void translateSegment(String glob, String segment, StringBuilder re) {
    if (segment.contains("**")) {
      throw new IllegalArgumentException(
          "glob '"
              + glob
              + "': '**' must be a whole path segment (as in 'a/**/b'), found in '"
              + segment
              + "'");
    }
    int i = 0;
    boolean inBraces = false;
    while (i < segment.length()) {
      char c = segment.charAt(i);
      switch (c) {
        case '*' -> re.append("[^/]*");
        case '?' -> re.append("[^/]");
        case '\\' -> {
          if (i + 1 >= segment.length()) {
            throw new IllegalArgumentException(
                "glob '" + glob + "' ends with a lone '\\'; escape it as '\\\\'");
          }
          i++;
          re.append(Pattern.quote(String.valueOf(segment.charAt(i))));
        }
        case '[' -> i = translateClass(glob, segment, i, re);
        case '{' -> {
          if (inBraces) {
            throw new IllegalArgumentException("glob '" + glob + "': nested '{' is not supported");
          }
          if (segment.indexOf('}', i) < 0) {
            throw new IllegalArgumentException(
                "glob '" + glob + "': '{' without a closing '}' (a '/' cannot appear inside)");
          }
          inBraces = true;
          re.append("(?:");
        }
        case '}' -> {
          if (!inBraces) {
            throw new IllegalArgumentException(
                "glob '" + glob + "': '}' without an opening '{'; escape it as '\\}'");
          }
          inBraces = false;
          re.append(')');
        }
        case ',' -> re.append(inBraces ? "|" : ",");
        default -> re.append(Pattern.quote(String.valueOf(c)));
      }
      i++;
    }
  }

  /**
   * Translates {@code [...]} starting at {@code start}; returns the index of the closing ']'. Every
   * member is written as a regex code-unit escape, so no character of the glob is read as regex
   * syntax.
   */
  private static int translateClass(String glob, String segment, int start, StringBuilder re) {
    int i = start + 1;
    boolean negate = false;
    if (i < segment.length() && (segment.charAt(i) == '!' || segment.charAt(i) == '^')) {
      negate = true;
      i++;
    }
    StringBuilder cls = new StringBuilder();
    boolean first = true;
    while (i < segment.length() && (segment.charAt(i) != ']' || first)) {
      first = false;
      if (segment.charAt(i) == '\\' && i + 1 < segment.length()) {
        i++;
      }
      char lo = segment.charAt(i);
      i++;
      if (i + 1 < segment.length() && segment.charAt(i) == '-' && segment.charAt(i + 1) != ']') {
        i++;
        if (segment.charAt(i) == '\\' && i + 1 < segment.length()) {
          i++;
        }
        char hi = segment.charAt(i);
        i++;
        if (hi < lo) {
          throw new IllegalArgumentException(
              "glob '" + glob + "': range '" + lo + "-" + hi + "' in '[...]' is reversed");
        }
        cls.append(codeUnit(lo)).append('-').append(codeUnit(hi));
      } else {
        cls.append(codeUnit(lo));
      }
    }
    if (i >= segment.length()) {
      throw new IllegalArgumentException(
          "glob '" + glob + "': '[' without a closing ']' in segment '" + segment + "'");
    }
    if (negate) {
      re.append("(?:(?!/)[^").append(cls).append("])");
    } else {
      re.append('[').append(cls).append(']');
    }
    return i;
  }

  private static String codeUnit(char c) {
    return "\\x{" + Integer.toHexString(c) + "}";
  }

  /** Whether the artifact-relative path (e.g. {@code unet/model.safetensors}) matches. */
  public boolean matches(String path) {
    return regex.matcher(path).matches();
  }

  /** The glob as written. */
  public String glob() {
    return glob;
  }

  @Override
  public String toString() {
    return glob;
  }
}
