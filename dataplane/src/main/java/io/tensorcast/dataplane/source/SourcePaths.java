package io.tensorcast.dataplane.source;

import io.tensorcast.api.Reason;
import java.util.Optional;

/**
 * The rule every artifact-relative path obeys before it is handed on (see {@link SourceFile}): a
 * path is '/'-separated and relative, so a consumer can join it to its own root without leaving
 * that root. Object-store keys and Hub file names are free text, so sources check each one.
 */
public final class SourcePaths {
  private SourcePaths() {}

  /**
   * Checks that {@code path} is a safe artifact-relative path: not empty, not absolute (no leading
   * {@code /}), no backslash, no NUL or other control character, and no empty, {@code .} or {@code
   * ..} segment.
   *
   * @return the rule broken, phrased to follow the path in a message; empty when the path is safe
   */
  public static Optional<String> problem(String path) {
    if (path.isEmpty()) {
      return Optional.of("is empty");
    }
    if (path.startsWith("/")) {
      return Optional.of("is absolute (starts with '/')");
    }
    for (int i = 0; i < path.length(); i++) {
      char c = path.charAt(i);
      if (c == '\\') {
        return Optional.of("contains a backslash");
      }
      if (c < 0x20 || c == 0x7f) {
        return Optional.of("contains the control character U+%04X".formatted((int) c));
      }
    }
    for (String segment : path.split("/", -1)) {
      if (segment.isEmpty()) {
        return Optional.of("has an empty segment ('//' or a trailing '/')");
      }
      if (segment.equals(".") || segment.equals("..")) {
        return Optional.of("has a '" + segment + "' segment");
      }
    }
    return Optional.empty();
  }

  /**
   * Throws a non-retryable {@code UnsafePath} {@link SourceException} when {@code path} breaks the
   * rule of {@link #problem(String)}.
   *
   * @param where the source and listing the path came from, for the message (e.g. {@code
   *     s3://bucket/prefix/})
   */
  public static void requireSafe(String path, String where) throws SourceException {
    Optional<String> problem = problem(path);
    if (problem.isPresent()) {
      throw new SourceException(
          Reason.UnsafePath,
          "refusing file '"
              + printable(path)
              + "' listed under "
              + where
              + ": the path "
              + problem.get()
              + "; artifact paths must be relative, '/'-separated, without '.', '..' or empty"
              + " segments",
          false);
    }
  }

  /** The path with control characters escaped, for messages. */
  static String printable(String path) {
    StringBuilder out = new StringBuilder(path.length());
    for (int i = 0; i < path.length(); i++) {
      char c = path.charAt(i);
      if (c < 0x20 || c == 0x7f) {
        out.append("\\u%04x".formatted((int) c));
      } else {
        out.append(c);
      }
    }
    return out.toString();
  }
}
