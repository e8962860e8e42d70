package io.tensorcast.testing;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The shared corpus of real artifact files, read in place and never copied into the repository.
 *
 * <p>Where it is: the directory named by the system property {@code tensorcast.corpus} (the build
 * sets it) when that exists, else {@code ../shared/corpus} relative to the repository root, which
 * is found by walking up from the working directory to the nearest directory holding {@code .git},
 * else the outermost one holding a {@code pom.xml}. Tests that need it are skipped with a message
 * naming both places when neither exists.
 */
public final class Corpus {
  private static final Pattern LEADING_INT = Pattern.compile("^(\\d+)");
  private static final String HEADER = "relative_path\tsha256\tbytes\tkind\twriter\tsource\tnotes";

  private Corpus() {}

  /**
   * One row of {@code MANIFEST.tsv}.
   *
   * @param path the file's path relative to the corpus directory
   * @param sha256 its SHA-256, lowercase hex
   * @param bytes its size
   * @param kind what it is ({@code safetensors}, {@code torch-zip}, {@code config-json}, ...)
   * @param writer the tool that wrote it
   * @param source where it was taken from
   * @param notes {@code key=value} facts and prose, separated by {@code ;}
   */
  public record Entry(
      String path,
      String sha256,
      long bytes,
      String kind,
      String writer,
      String source,
      String notes) {

    /**
     * {@code key=value} fields of the notes column ({@code tensors=20; dtypes=F32x18,I64x2; …}), in
     * order; parts without {@code =} are prose and skipped.
     */
    public Map<String, String> noteFields() {
      Map<String, String> fields = new LinkedHashMap<>();
      for (String part : notes.split(";")) {
        int eq = part.indexOf('=');
        if (eq > 0) {
          String key = part.substring(0, eq).trim();
          if (key.matches("[A-Za-z0-9_]+")) {
            fields.put(key, part.substring(eq + 1).trim());
          }
        }
      }
      return fields;
    }

    /** The leading integer of a note field ({@code header_len=81 (NOT 8-aligned)} gives 81). */
    public OptionalLong noteLong(String key) {
      String v = noteFields().get(key);
      if (v == null) {
        return OptionalLong.empty();
      }
      Matcher m = LEADING_INT.matcher(v);
      if (!m.find()) {
        throw new IllegalStateException(path + ": note " + key + "=" + v + " is not a number");
      }
      return OptionalLong.of(Long.parseLong(m.group(1)));
    }
  }

  /** The corpus directory, if there is one. */
  public static Optional<Path> find() {
    String property = System.getProperty("tensorcast.corpus");
    if (property != null && !property.isBlank() && Files.isDirectory(Path.of(property))) {
      return Optional.of(Path.of(property).toAbsolutePath().normalize());
    }
    return besideRepository().filter(Files::isDirectory);
  }

  /** The corpus directory, or a skipped test. */
  public static Path dir() {
    Optional<Path> found = find();
    assumeTrue(
        found.isPresent(),
        () ->
            "corpus not found (-Dtensorcast.corpus="
                + System.getProperty("tensorcast.corpus")
                + ", "
                + besideRepository().map(Path::toString).orElse("no repository root above " + cwd())
                + "); this test needs the shared corpus of real files and is skipped");
    return found.orElseThrow();
  }

  /** A file of the corpus by its relative path ({@code safetensors/...}), or a skipped test. */
  public static Path file(String relative) {
    return dir().resolve(relative);
  }

  /** {@code MANIFEST.tsv}, keyed by relative path, in file order. */
  public static Map<String, Entry> manifest() {
    Path file = dir().resolve("MANIFEST.tsv");
    try {
      List<String> lines = Files.readAllLines(file);
      if (lines.isEmpty() || !lines.get(0).startsWith(HEADER)) {
        throw new IllegalStateException(
            file + ": the first line is not the header '" + HEADER + "'");
      }
      Map<String, Entry> entries = new LinkedHashMap<>();
      for (String line : lines.subList(1, lines.size())) {
        if (line.isBlank()) {
          continue;
        }
        String[] c = line.split("\t", -1);
        if (c.length != 7) {
          throw new IllegalStateException(file + ": expected 7 columns in " + line);
        }
        entries.put(c[0], new Entry(c[0], c[1], Long.parseLong(c[2]), c[3], c[4], c[5], c[6]));
      }
      return entries;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Every {@code *.safetensors} file of the corpus (broken ones included), sorted. */
  public static List<Path> safetensorsFiles() {
    try (Stream<Path> walk = Files.walk(dir())) {
      return walk.filter(p -> p.getFileName().toString().endsWith(".safetensors"))
          .filter(Files::isRegularFile)
          .sorted()
          .toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** {@code <repository root>/../shared/corpus}, or empty when no repository root is found. */
  static Optional<Path> besideRepository() {
    return repositoryRoot(cwd()).map(root -> root.resolveSibling("shared").resolve("corpus"));
  }

  /**
   * The repository root above {@code from}: the nearest directory holding {@code .git} (a
   * directory, or a file in a worktree), else the outermost one holding a {@code pom.xml}.
   */
  static Optional<Path> repositoryRoot(Path from) {
    Path outermostPom = null;
    for (Path d = from.toAbsolutePath().normalize(); d != null; d = d.getParent()) {
      if (Files.exists(d.resolve(".git"))) {
        return Optional.of(d);
      }
      if (Files.isRegularFile(d.resolve("pom.xml"))) {
        outermostPom = d;
      }
    }
    return Optional.ofNullable(outermostPom);
  }

  private static Path cwd() {
    return Path.of(System.getProperty("user.dir"));
  }
}
