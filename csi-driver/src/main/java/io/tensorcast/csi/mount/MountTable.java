package io.tensorcast.csi.mount;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Mount points listed in a {@code mountinfo} file ({@code /proc/self/mountinfo}, see proc(5)):
 * field 5 of each line, with the kernel's octal escapes ({@code \040} for a space, {@code \011},
 * {@code \012}, {@code \134}) decoded.
 */
public final class MountTable {

  private MountTable() {}

  /** The mount points in {@code mountinfo}, in file order (a path appears once per mount). */
  public static List<Path> mountPoints(Path mountinfo) throws IOException {
    List<Path> out = new ArrayList<>();
    for (String line : Files.readAllLines(mountinfo)) {
      String[] fields = line.split(" ");
      if (fields.length > 4) {
        out.add(Path.of(unescape(fields[4])));
      }
    }
    return out;
  }

  /** Decodes the octal escapes {@code \ooo} the kernel writes for space, tab, newline and '\'. */
  static String unescape(String s) {
    if (s.indexOf('\\') < 0) {
      return s;
    }
    StringBuilder b = new StringBuilder(s.length());
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\\' && isOctal(s, i + 1)) {
        b.append((char) Integer.parseInt(s.substring(i + 1, i + 4), 8));
        i += 3;
      } else {
        b.append(c);
      }
    }
    return b.toString();
  }

  private static boolean isOctal(String s, int from) {
    if (from + 3 > s.length()) {
      return false;
    }
    for (int i = from; i < from + 3; i++) {
      char c = s.charAt(i);
      if (c < '0' || c > '7') {
        return false;
      }
    }
    return true;
  }
}
