package io.tensorcast.dataplane.store;

import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/** A fresh temporary directory under {@code /dev/shm} for one test, deleted on close. */
final class ShmRoot implements AutoCloseable {
  static final Path SHM = Path.of("/dev/shm");

  final Path dir;

  private ShmRoot(Path dir) {
    this.dir = dir;
  }

  static ShmRoot create() throws IOException {
    return new ShmRoot(Files.createTempDirectory(SHM, "tensorcast-store-test-"));
  }

  /** Every path under {@code dir}, relative, '/'-separated, sorted (directories included). */
  static List<String> listTree(Path dir) throws IOException {
    List<String> out = new ArrayList<>();
    if (!Files.exists(dir)) {
      return out;
    }
    try (Stream<Path> s = Files.walk(dir)) {
      s.filter(p -> !p.equals(dir)).forEach(p -> out.add(dir.relativize(p).toString()));
    }
    out.sort(null);
    return out;
  }

  @Override
  public void close() throws IOException {
    TestFiles.deleteTree(dir);
  }
}
