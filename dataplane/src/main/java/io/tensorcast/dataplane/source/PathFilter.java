package io.tensorcast.dataplane.source;

import io.tensorcast.api.PathGlob;
import java.util.List;
import java.util.stream.Collectors;

/**
 * The include/exclude selection of an artifact's files: a path is kept when it matches at least one
 * include glob (or there are none) and no exclude glob. Globs follow {@link PathGlob}.
 */
public final class PathFilter {
  private static final PathFilter ALL = new PathFilter(List.of(), List.of());

  private final List<PathGlob> include;
  private final List<PathGlob> exclude;

  private PathFilter(List<PathGlob> include, List<PathGlob> exclude) {
    this.include = List.copyOf(include);
    this.exclude = List.copyOf(exclude);
  }

  /** Keeps every path. */
  public static PathFilter all() {
    return ALL;
  }

  /**
   * Compiles the globs.
   *
   * @throws IllegalArgumentException naming the field ({@code include[i]} / {@code exclude[i]}),
   *     the glob and the rule it breaks
   */
  public static PathFilter of(List<String> include, List<String> exclude) {
    return new PathFilter(compile("include", include), compile("exclude", exclude));
  }

  private static List<PathGlob> compile(String field, List<String> globs) {
    PathGlob[] out = new PathGlob[globs.size()];
    for (int i = 0; i < out.length; i++) {
      try {
        out[i] = PathGlob.compile(globs.get(i));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(field + "[" + i + "]: " + e.getMessage(), e);
      }
    }
    return List.of(out);
  }

  /** Whether the artifact-relative path is selected. */
  public boolean accepts(String path) {
    boolean included = include.isEmpty() || include.stream().anyMatch(g -> g.matches(path));
    return included && exclude.stream().noneMatch(g -> g.matches(path));
  }

  /** The include globs as written. */
  public List<String> include() {
    return include.stream().map(PathGlob::glob).toList();
  }

  /** The exclude globs as written. */
  public List<String> exclude() {
    return exclude.stream().map(PathGlob::glob).toList();
  }

  @Override
  public String toString() {
    return "include="
        + include.stream().map(PathGlob::glob).collect(Collectors.joining(",", "[", "]"))
        + " exclude="
        + exclude.stream().map(PathGlob::glob).collect(Collectors.joining(",", "[", "]"));
  }
}
