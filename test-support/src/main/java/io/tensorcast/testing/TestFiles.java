package io.tensorcast.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/** File helpers for tests. */
public final class TestFiles {
  private TestFiles() {}

  /**
   * Deletes {@code dir} and everything under it, deepest first, without following symbolic links (a
   * link is deleted, not what it points to). Nothing happens when {@code dir} is null or absent;
   * entries that disappear meanwhile are skipped.
   *
   * @throws IOException when an entry cannot be deleted or listed
   */
  public static void deleteTree(Path dir) throws IOException {
    if (dir == null || !Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
      return;
    }
    List<Path> entries;
    try (Stream<Path> walk = Files.walk(dir)) {
      entries = walk.sorted(Comparator.reverseOrder()).toList();
    } catch (UncheckedIOException e) {
      throw e.getCause();
    }
    for (Path p : entries) {
      Files.deleteIfExists(p);
    }
  }

  /** As {@link #deleteTree}, ignoring failures: for temporary directories at shutdown. */
  public static void deleteTreeQuietly(Path dir) {
    try {
      deleteTree(dir);
    } catch (IOException | UncheckedIOException e) {
      // best effort
    }
  }
}
