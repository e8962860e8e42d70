package io.tensorcast.testing;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The shared corpus of real artifact files ({@code shared/corpus}), read in place and never copied
 * into the repository. Found through the system property {@code tensorcast.corpus} when that
 * directory exists, else {@code /work/shared/corpus}; tests that need it are skipped with a message
 * when neither exists.
 */
public final class Corpus {
  private static final Path FALLBACK = Path.of("/work/shared/corpus");

  private Corpus() {}

  /** One line of {@code MANIFEST.tsv}. */
  public record Entry(String relativePath, String sha256, long bytes, String kind) {}

  /** The corpus directory, if there is one. */
  public static java.util.Optional<Path> find() {
    String property = System.getProperty("tensorcast.corpus");
    if (property != null && Files.isDirectory(Path.of(property))) {
      return java.util.Optional.of(Path.of(property).toAbsolutePath().normalize());
    }
    if (Files.isDirectory(FALLBACK)) {
      return java.util.Optional.of(FALLBACK);
    }
    return java.util.Optional.empty();
  }

  /** The corpus directory, or a skipped test. */
  public static Path dir() {
    java.util.Optional<Path> found = find();
    if (found.isPresent()) {
      return found.get();
    }
    String property = System.getProperty("tensorcast.corpus");
    assumeTrue(
        false,
        "corpus not found (tensorcast.corpus="
            + property
            + ", fallback "
            + FALLBACK
            + "); this test needs the shared corpus of real files and is skipped");
    throw new IllegalStateException("unreachable");
  }

  /** {@code MANIFEST.tsv}, keyed by relative path, in file order. */
  public static Map<String, Entry> manifest() {
    try {
      List<String> lines = Files.readAllLines(dir().resolve("MANIFEST.tsv"));
      Map<String, Entry> entries = new LinkedHashMap<>();
      for (String line : lines.subList(1, lines.size())) {
        if (line.isBlank()) {
          continue;
        }
        String[] f = line.split("\t", -1);
        entries.put(f[0], new Entry(f[0], f[1], Long.parseLong(f[2]), f[3]));
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
}
