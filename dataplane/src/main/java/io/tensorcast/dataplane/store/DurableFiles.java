package io.tensorcast.dataplane.store;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;

/** The store's one way to replace a small record file (state, stored ranges) crash-safely. */
final class DurableFiles {
  private DurableFiles() {}

  /**
   * Writes {@code bytes} to {@code target} durably and atomically: a temporary file in the same
   * directory, forced to the device ({@link FileChannel#force}), renamed over {@code target}
   * (atomic), then the directory forced so the rename itself survives a crash. A reader sees the
   * old file or the new one, whole; never a torn one that this method left.
   *
   * @throws IOException from the file system (an interrupt of the writing thread included); the
   *     temporary file is removed, the target never half-written
   */
  static void replace(Path target, byte[] bytes) throws IOException {
    Path tmp = target.resolveSibling("." + target.getFileName() + ".tmp");
    FileChannel opened =
        FileChannel.open(
            tmp,
            StandardOpenOption.CREATE,
            StandardOpenOption.TRUNCATE_EXISTING,
            StandardOpenOption.WRITE);
    try (FileChannel ch = opened) {
      ByteBuffer b = ByteBuffer.wrap(bytes);
      while (b.hasRemaining()) {
        ch.write(b);
      }
      ch.force(true);
    } catch (IOException e) {
      // Interrupted (the channel closed under the write) or the device failed: the temporary
      // file this call opened goes, the target stays as it was.
      try {
        Files.deleteIfExists(tmp);
      } catch (IOException | RuntimeException d) {
        e.addSuppressed(d);
      }
      throw e;
    }
    Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    Path dir = target.toAbsolutePath().getParent();
    if (dir != null) {
      try (FileChannel ch = FileChannel.open(dir, StandardOpenOption.READ)) {
        ch.force(true);
      }
    }
  }
}
