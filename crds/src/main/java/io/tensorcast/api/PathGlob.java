package io.tensorcast.api;

import io.tensorcast.api.v1alpha1.SourceSpec;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;

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
 *
 * <p>A glob compiles to a nondeterministic automaton that {@link #matches} runs over the path one
 * character (UTF-16 code unit) at a time, keeping the set of states it may be in: matching costs at
 * most path length × glob length steps whatever the pattern, so a hostile glob such as {@code
 * *a*a*a*a*b} cannot make a match backtrack for minutes, as a regular-expression translation would.
 */
public final class PathGlob {
  private final String glob;
  private final Nfa nfa;

  private PathGlob(String glob, Nfa nfa) {
    this.glob = glob;
    this.nfa = nfa;
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
    Nfa.Builder nfa = new Nfa.Builder();
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
          if (needSeparator) {
            nfa.one(Nfa.literal('/'));
          }
          nfa.oneOrMore(Nfa.ANY);
        } else {
          if (needSeparator) {
            nfa.one(Nfa.literal('/'));
          }
          nfa.directories();
          needSeparator = false;
        }
        continue;
      }
      if (needSeparator) {
        nfa.one(Nfa.literal('/'));
      }
      translateSegment(glob, segment, nfa);
      needSeparator = true;
    }
    return new PathGlob(glob, nfa.build());
  }

  private static void translateSegment(String glob, String segment, Nfa.Builder nfa) {
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
        case '*' -> nfa.zeroOrMore(Nfa.NOT_SLASH);
        case '?' -> nfa.one(Nfa.NOT_SLASH);
        case '\\' -> {
          if (i + 1 >= segment.length()) {
            throw new IllegalArgumentException(
                "glob '" + glob + "' ends with a lone '\\'; escape it as '\\\\'");
          }
          i++;
          nfa.one(Nfa.literal(segment.charAt(i)));
        }
        case '[' -> i = translateClass(glob, segment, i, nfa);
        case '{' -> {
          if (inBraces) {
            throw new IllegalArgumentException("glob '" + glob + "': nested '{' is not supported");
          }
          if (segment.indexOf('}', i) < 0) {
            throw new IllegalArgumentException(
                "glob '" + glob + "': '{' without a closing '}' (a '/' cannot appear inside)");
          }
          inBraces = true;
          nfa.openAlternatives();
        }
        case '}' -> {
          if (!inBraces) {
            throw new IllegalArgumentException(
                "glob '" + glob + "': '}' without an opening '{'; escape it as '\\}'");
          }
          inBraces = false;
          nfa.closeAlternatives();
        }
        case ',' -> {
          if (inBraces) {
            nfa.nextAlternative();
          } else {
            nfa.one(Nfa.literal(','));
          }
        }
        default -> nfa.one(Nfa.literal(c));
      }
      i++;
    }
  }

  /**
   * Translates {@code [...]} starting at {@code start}; returns the index of the closing ']'. Every
   * member is a literal character or range; none matches '/'.
   */
  private static int translateClass(String glob, String segment, int start, Nfa.Builder nfa) {
    int i = start + 1;
    boolean negate = false;
    if (i < segment.length() && (segment.charAt(i) == '!' || segment.charAt(i) == '^')) {
      negate = true;
      i++;
    }
    StringBuilder ranges = new StringBuilder(); // pairs of (lo, hi)
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
        ranges.append(lo).append(hi);
      } else {
        ranges.append(lo).append(lo);
      }
    }
    if (i >= segment.length()) {
      throw new IllegalArgumentException(
          "glob '" + glob + "': '[' without a closing ']' in segment '" + segment + "'");
    }
    nfa.one(Nfa.charClass(ranges.toString(), negate));
    return i;
  }

  /** Whether the artifact-relative path (e.g. {@code unet/model.safetensors}) matches. */
  public boolean matches(String path) {
    return nfa.matches(path);
  }

  /** The glob as written. */
  public String glob() {
    return glob;
  }

  @Override
  public String toString() {
    return glob;
  }

  /** A character test of one automaton step. */
  @FunctionalInterface
  private interface CharTest {
    boolean test(char c);
  }

  /**
   * A Thompson automaton: states with at most one character step and any number of empty steps, run
   * by keeping the set of live states.
   */
  private static final class Nfa {
    static final CharTest ANY = c -> true;
    static final CharTest NOT_SLASH = c -> c != '/';

    private final CharTest[] test; // null: no character step
    private final int[] next; // the state a character step leads to
    private final int[][] empty; // empty steps
    private final int accept;

    private Nfa(CharTest[] test, int[] next, int[][] empty, int accept) {
      this.test = test;
      this.next = next;
      this.empty = empty;
      this.accept = accept;
    }

    static CharTest literal(char l) {
      return c -> c == l;
    }

    /** {@code ranges}: pairs of characters (lo, hi), inclusive; never matches '/'. */
    static CharTest charClass(String ranges, boolean negate) {
      char[] r = ranges.toCharArray();
      return c -> {
        if (c == '/') {
          return false;
        }
        boolean in = false;
        for (int k = 0; k < r.length && !in; k += 2) {
          in = c >= r[k] && c <= r[k + 1];
        }
        return in != negate;
      };
    }

    boolean matches(String path) {
      int n = test.length;
      BitSet live = new BitSet(n);
      BitSet step = new BitSet(n);
      int[] stack = new int[n];
      closeOver(live, 0, stack);
      for (int i = 0; i < path.length() && !live.isEmpty(); i++) {
        char c = path.charAt(i);
        step.clear();
        for (int s = live.nextSetBit(0); s >= 0; s = live.nextSetBit(s + 1)) {
          if (test[s] != null && test[s].test(c) && !step.get(next[s])) {
            closeOver(step, next[s], stack);
          }
        }
        BitSet t = live;
        live = step;
        step = t;
      }
      return live.get(accept);
    }

    /** Adds {@code from} and every state its empty steps reach to {@code set}. */
    private void closeOver(BitSet set, int from, int[] stack) {
      int top = 0;
      if (!set.get(from)) {
        set.set(from);
        stack[top++] = from;
      }
      while (top > 0) {
        for (int e : empty[stack[--top]]) {
          if (!set.get(e)) {
            set.set(e);
            stack[top++] = e;
          }
        }
      }
    }

    /** Builds the automaton left to right; {@code end} is the state the next piece starts from. */
    static final class Builder {
      private final List<CharTest> test = new ArrayList<>();
      private final List<Integer> next = new ArrayList<>();
      private final List<List<Integer>> empty = new ArrayList<>();
      private int end = state();
      private int braceStart = -1;
      private final List<Integer> alternativeEnds = new ArrayList<>();

      private int state() {
        test.add(null);
        next.add(-1);
        empty.add(new ArrayList<>());
        return test.size() - 1;
      }

      private void step(int from, CharTest t, int to) {
        test.set(from, t);
        next.set(from, to);
      }

      /** Exactly one character that {@code t} accepts. */
      void one(CharTest t) {
        int s = state();
        int after = state();
        empty.get(end).add(s);
        step(s, t, after);
        end = after;
      }

      /** Any run (possibly empty) of characters that {@code t} accepts. */
      void zeroOrMore(CharTest t) {
        int loop = state();
        int after = state();
        empty.get(end).add(loop);
        step(loop, t, loop);
        empty.get(loop).add(after);
        end = after;
      }

      /** A non-empty run of characters that {@code t} accepts. */
      void oneOrMore(CharTest t) {
        one(t);
        zeroOrMore(t);
      }

      /** Zero or more whole directories, each a non-empty name and a '/'. */
      void directories() {
        int head = end;
        one(NOT_SLASH);
        zeroOrMore(NOT_SLASH);
        int slash = state();
        empty.get(end).add(slash);
        step(slash, literal('/'), head);
        int after = state();
        empty.get(head).add(after);
        end = after;
      }

      void openAlternatives() {
        braceStart = end;
        alternativeEnds.clear();
        end = state();
        empty.get(braceStart).add(end);
      }

      void nextAlternative() {
        alternativeEnds.add(end);
        end = state();
        empty.get(braceStart).add(end);
      }

      void closeAlternatives() {
        alternativeEnds.add(end);
        int after = state();
        for (int e : alternativeEnds) {
          empty.get(e).add(after);
        }
        end = after;
        braceStart = -1;
      }

      Nfa build() {
        int n = test.size();
        int[][] e = new int[n][];
        int[] nx = new int[n];
        for (int s = 0; s < n; s++) {
          e[s] = empty.get(s).stream().mapToInt(Integer::intValue).toArray();
          nx[s] = next.get(s);
        }
        return new Nfa(test.toArray(new CharTest[0]), nx, e, end);
      }
    }
  }
}
