package io.tensorcast.dataplane.store;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The shared corpus of real artifact files: the {@code tensorcast.corpus} system property if that
 * directory exists, else {@code /work/shared/corpus}; tests skip with a message if neither exists.
 */
final class Corpus {
  private Corpus() {}

  static Path dir() {
    String prop = System.getProperty("tensorcast.corpus");
    if (prop != null && Files.isDirectory(Path.of(prop))) {
      return Path.of(prop);
    }
    Path fallback = Path.of("/work/shared/corpus");
    assumeTrue(
        Files.isDirectory(fallback),
        "corpus not found at tensorcast.corpus=" + prop + " nor at " + fallback + "; skipping");
    return fallback;
  }
}
