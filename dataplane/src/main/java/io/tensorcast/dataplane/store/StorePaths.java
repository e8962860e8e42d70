package io.tensorcast.dataplane.store;

import io.tensorcast.api.Reason;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The rules for artifact ids and file paths in the store. A path that breaks a rule could escape
 * the artifact's directory, collide with another file or be unopenable; it is refused before
 * anything is created, with the rule in the message.
 */
final class StorePaths {
  /** DNS-1123 label (RFC 1123, as Kubernetes uses it): also keeps the state file name short. */
  private static final Pattern DNS_1123_LABEL = Pattern.compile("[a-z0-9]([-a-z0-9]*[a-z0-9])?");

  static final int MAX_ID_LENGTH = 63;

  /** NAME_MAX of Linux file systems, in bytes of the UTF-8 name. */
  static final int NAME_MAX = 255;

  /** PATH_MAX of Linux minus the terminating NUL, in bytes. */
  static final int PATH_MAX = 4095;

  private StorePaths() {}

  static boolean isValidArtifactId(String id) {
    return id != null && id.length() <= MAX_ID_LENGTH && DNS_1123_LABEL.matcher(id).matches();
  }

  static void checkArtifactId(String id) throws StoreException {
    if (!isValidArtifactId(id)) {
      throw new StoreException(
          Reason.InvalidArtifactId,
          "artifact id "
              + (id == null ? "null" : "'" + printable(id) + "'")
              + " is not a DNS-1123 label: lowercase letters, digits and '-', starting and ending"
              + " with a letter or digit, at most "
              + MAX_ID_LENGTH
              + " characters");
    }
  }

  /**
   * Checks every path and size of an artifact's file list.
   *
   * @return the same files, as an unmodifiable list
   * @throws StoreException reasons {@code NoFiles}, {@code InvalidPath}, {@code InvalidSize},
   *     {@code DuplicatePath}, {@code PathConflict}
   */
  static List<StoreFile> checkFiles(String artifactId, List<StoreFile> files)
      throws StoreException {
    if (files == null || files.isEmpty()) {
      throw new StoreException(Reason.NoFiles, "artifact " + artifactId + " lists no files");
    }
    Set<String> paths = new HashSet<>();
    for (StoreFile f : files) {
      if (f == null) {
        throw new StoreException(
            Reason.InvalidPath, "artifact " + artifactId + " lists a null file");
      }
      String broken = brokenRule(f.path());
      if (broken != null) {
        throw new StoreException(
            Reason.InvalidPath,
            "artifact " + artifactId + ": path '" + printable(f.path()) + "' " + broken);
      }
      if (f.size() < 0) {
        throw new StoreException(
            Reason.InvalidSize,
            "artifact "
                + artifactId
                + ": file '"
                + f.path()
                + "' has negative size "
                + f.size()
                + "; sizes are byte counts >= 0");
      }
      if (!paths.add(f.path())) {
        throw new StoreException(
            Reason.DuplicatePath,
            "artifact " + artifactId + ": path '" + f.path() + "' is listed more than once");
      }
    }
    for (StoreFile f : files) {
      String p = f.path();
      for (int i = p.indexOf('/'); i > 0; i = p.indexOf('/', i + 1)) {
        String dir = p.substring(0, i);
        if (paths.contains(dir)) {
          throw new StoreException(
              Reason.PathConflict,
              "artifact "
                  + artifactId
                  + ": '"
                  + dir
                  + "' is listed as a file but '"
                  + p
                  + "' needs it to be a directory");
        }
      }
    }
    return List.copyOf(new ArrayList<>(files));
  }

  /** The rule {@code path} breaks, phrased to follow "path 'x' ", or null if it is fine. */
  static String brokenRule(String path) {
    if (path.isEmpty()) {
      return "is empty";
    }
    for (int i = 0; i < path.length(); i++) {
      char c = path.charAt(i);
      if (c == 0) {
        return "contains a NUL character";
      }
      if (c == '\\') {
        return "contains a backslash; paths are '/'-separated and a backslash is refused so that"
            + " no reader takes it for a separator";
      }
      if (c < 0x20 || c == 0x7f) {
        return String.format("contains the control character U+%04X", (int) c);
      }
    }
    if (path.startsWith("/")) {
      return "is absolute; paths are relative to the artifact directory";
    }
    if (path.getBytes(StandardCharsets.UTF_8).length > PATH_MAX) {
      return "is longer than " + PATH_MAX + " bytes (PATH_MAX)";
    }
    for (String segment : path.split("/", -1)) {
      if (segment.isEmpty()) {
        return "is not normalised: it has an empty segment ('//' or a trailing '/')";
      }
      if (segment.equals("..")) {
        return "has a '..' segment; paths may not leave the artifact directory";
      }
      if (segment.equals(".")) {
        return "is not normalised: it has a '.' segment";
      }
      if (segment.getBytes(StandardCharsets.UTF_8).length > NAME_MAX) {
        return "has a segment longer than " + NAME_MAX + " bytes (NAME_MAX)";
      }
    }
    return null;
  }

  /** The text with control characters, backslashes and NULs shown as escapes, at most 200 chars. */
  static String printable(String s) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < s.length() && b.length() < 200; i++) {
      char c = s.charAt(i);
      if (c < 0x20 || c == 0x7f) {
        b.append(String.format("\\u%04x", (int) c));
      } else if (c == '\\') {
        b.append("\\\\");
      } else {
        b.append(c);
      }
    }
    return s.length() > 200 ? b + "..." : b.toString();
  }
}
