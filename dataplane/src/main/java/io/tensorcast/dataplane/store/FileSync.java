package io.tensorcast.dataplane.store;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Locale;
import java.util.Set;

/**
 * Forces a data file's bytes (written through its {@code MAP_SHARED} mapping) or a directory's
 * entries to the device, so that a record claiming them ({@code .tensorcast/<id>.json} with a
 * file's digest, {@code .tensorcast/<id>.stored} with its stored ranges) is never on the device
 * before the bytes it claims. On a memory-backed root (tmpfs, ramfs) there is no device: nothing
 * survives a power loss, so {@link #forRoot} returns {@link #NONE} there and the store pays
 * nothing.
 */
@FunctionalInterface
interface FileSync {
  /** Memory-backed file systems: no device to force bytes to. */
  Set<String> MEMORY_BACKED = Set.of("tmpfs", "ramfs", "hugetlbfs");

  /**
   * Forces {@code path} (a regular file or a directory) to the device.
   *
   * @throws IOException from {@code fsync(2)}
   */
  void force(Path path) throws IOException;

  /** Does nothing: the root is memory-backed. */
  FileSync NONE = p -> {};

  /** {@code fsync(2)} through {@link FileChannel#force}, for files and directories alike. */
  FileSync FSYNC =
      p -> {
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
          ch.force(true);
        }
      };

  /**
   * {@link #NONE} when {@code root} is on a memory-backed file system ({@link #MEMORY_BACKED}),
   * else {@link #FSYNC}; {@link #FSYNC} too when the file system's type cannot be read.
   */
  static FileSync forRoot(Path root) {
    try {
      String type = Files.getFileStore(root).type().toLowerCase(Locale.ROOT);
      return MEMORY_BACKED.contains(type) ? NONE : FSYNC;
    } catch (IOException e) {
      return FSYNC;
    }
  }
}
