package io.tensorcast.dataplane.consumer;

import java.util.ArrayList;
import java.util.List;

/**
 * Evaluation of an HTTP {@code Range} request header against a body of known length, per RFC 9110
 * §14.1–14.2: one byte range ({@code bytes=first-last}, open-ended {@code bytes=first-}, suffix
 * {@code bytes=-N}) is served as 206; several ranges are served as the whole body, 200, which §14.2
 * allows (no multipart/byteranges); when no range is satisfiable the answer is 416.
 *
 * <p>A header that is not a valid {@code bytes} ranges-specifier (another unit, bad syntax, {@code
 * first > last}) is ignored as §14.2 permits: the whole body is served.
 *
 * @param kind what to answer
 * @param first first byte of a {@link Kind#PARTIAL} range (inclusive), else 0
 * @param last last byte of a {@link Kind#PARTIAL} range (inclusive), else {@code length - 1}
 */
public record ByteRange(Kind kind, long first, long last) {

  /** The answer to a Range request. */
  public enum Kind {
    /** 200 with the whole body: no Range, an ignored Range, or several ranges. */
    WHOLE,
    /** 206 with bytes {@code [first, last]}. */
    PARTIAL,
    /** 416 with {@code Content-Range: bytes *}{@code /length}: no range is satisfiable. */
    UNSATISFIABLE
  }

  /** Bytes in a {@link Kind#PARTIAL} range: {@code last - first + 1}. */
  public long length() {
    return last - first + 1;
  }

  /**
   * Evaluates a {@code Range} header.
   *
   * @param header the header value, or {@code null} when absent
   * @param length the body length in bytes, {@code >= 0}
   */
  public static ByteRange evaluate(String header, long length) {
    ByteRange whole = new ByteRange(Kind.WHOLE, 0, length - 1);
    if (header == null) {
      return whole;
    }
    int eq = header.indexOf('=');
    if (eq < 0 || !header.substring(0, eq).strip().equalsIgnoreCase("bytes")) {
      return whole; // another range unit: ignore
    }
    List<long[]> specs = new ArrayList<>(); // {first, last} or {-1, suffix}
    for (String raw : header.substring(eq + 1).split(",", -1)) {
      String spec = raw.strip();
      if (spec.isEmpty()) {
        continue; // empty list elements are allowed (RFC 9110 §5.6.1)
      }
      int dash = spec.indexOf('-');
      if (dash < 0) {
        return whole;
      }
      String a = spec.substring(0, dash);
      String b = spec.substring(dash + 1);
      if (a.isEmpty()) {
        long suffix = digits(b);
        if (suffix < 0) {
          return whole;
        }
        specs.add(new long[] {-1, suffix});
      } else {
        long first = digits(a);
        long last = b.isEmpty() ? Long.MAX_VALUE : digits(b);
        if (first < 0 || last < 0 || first > last) {
          return whole; // invalid range-spec: the whole specifier is invalid
        }
        specs.add(new long[] {first, last});
      }
    }
    if (specs.isEmpty()) {
      return whole;
    }
    List<ByteRange> satisfiable = new ArrayList<>();
    for (long[] s : specs) {
      if (s[0] < 0) {
        if (s[1] > 0 && length > 0) {
          satisfiable.add(new ByteRange(Kind.PARTIAL, Math.max(0, length - s[1]), length - 1));
        }
      } else if (s[0] < length) {
        satisfiable.add(new ByteRange(Kind.PARTIAL, s[0], Math.min(s[1], length - 1)));
      }
    }
    if (satisfiable.isEmpty()) {
      return new ByteRange(Kind.UNSATISFIABLE, 0, length - 1);
    }
    return specs.size() == 1 ? satisfiable.get(0) : whole;
  }

  /** A non-negative decimal, saturated at Long.MAX_VALUE; -1 if not only digits or empty. */
  private static long digits(String s) {
    if (s.isEmpty()) {
      return -1;
    }
    long v = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c < '0' || c > '9') {
        return -1;
      }
      v = v > (Long.MAX_VALUE - (c - '0')) / 10 ? Long.MAX_VALUE : v * 10 + (c - '0');
    }
    return v;
  }
}
