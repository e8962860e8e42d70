package io.tensorcast.dataplane.consumer;

/**
 * Entity-tag comparison for {@code If-Match}, {@code If-None-Match} and {@code If-Range} (RFC 9110
 * §8.8.3.2): strong comparison needs both tags strong and equal; weak comparison ignores the {@code
 * W/} prefix.
 */
final class EntityTags {
  private EntityTags() {}

  /**
   * Whether a list header ({@code *} or comma-separated entity-tags) matches {@code etag}.
   *
   * @param header the header value
   * @param etag this representation's strong tag, quoted
   * @param strong strong comparison ({@code If-Match}) or weak ({@code If-None-Match})
   */
  static boolean matches(String header, String etag, boolean strong) {
    String h = header.strip();
    if (h.equals("*")) {
      return true;
    }
    int i = 0;
    while (i < h.length()) {
      char c = h.charAt(i);
      if (c == ',' || c == ' ' || c == '\t') {
        i++;
        continue;
      }
      boolean weak = false;
      if (h.startsWith("W/", i)) {
        weak = true;
        i += 2;
      }
      if (i >= h.length() || h.charAt(i) != '"') {
        return false; // malformed: no match
      }
      int close = h.indexOf('"', i + 1);
      if (close < 0) {
        return false;
      }
      String tag = h.substring(i, close + 1);
      if (tag.equals(etag) && !(strong && weak)) {
        return true;
      }
      i = close + 1;
    }
    return false;
  }

  /** Strong comparison of one entity-tag (as {@code If-Range} carries it) with {@code etag}. */
  static boolean strongEquals(String tag, String etag) {
    return tag.equals(etag);
  }
}
