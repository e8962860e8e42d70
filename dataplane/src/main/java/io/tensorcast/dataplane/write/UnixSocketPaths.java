package io.tensorcast.dataplane.write;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Binds or connects a unix socket whose path is longer than the kernel allows in a {@code
 * sockaddr_un} ({@value #MAX_PATH_BYTES} bytes): through a short symbolic link to the socket's
 * directory, made in a fresh private ({@code 0700}) temporary directory and removed right after.
 * The socket file itself stays where it was asked for. A store root such as {@code
 * /dev/shm/tensorcast/<namespace>.<artifact>} easily exceeds the limit with long names.
 */
public final class UnixSocketPaths {
  /** Longest socket path (bytes, without the terminating NUL) {@code sockaddr_un} holds. */
  public static final int MAX_PATH_BYTES = 107;

  private UnixSocketPaths() {}

  /** What to do with the (possibly shortened) path of the socket. */
  @FunctionalInterface
  public interface Action<T> {
    T run(Path socket) throws IOException, InterruptedException;
  }

  /** Whether {@code socket}'s absolute path fits a {@code sockaddr_un} as it is. */
  public static boolean fits(Path socket) {
    return socket.toAbsolutePath().toString().getBytes(StandardCharsets.UTF_8).length
        <= MAX_PATH_BYTES;
  }

  /**
   * Runs {@code action} with {@code socket}'s absolute path when it fits, else with a short path
   * that resolves to the same file through a symbolic link to its directory.
   *
   * @throws IOException when the socket's own file name is too long even so, or the link cannot be
   *     made (the message names the path and the limit)
   */
  public static <T> T through(Path socket, Action<T> action)
      throws IOException, InterruptedException {
    Path abs = socket.toAbsolutePath();
    if (fits(abs)) {
      return action.run(abs);
    }
    Path parent = abs.getParent();
    Path name = abs.getFileName();
    if (parent == null || name == null) {
      throw new IOException("unix socket path " + abs + " names no file in a directory");
    }
    Path dir = Files.createTempDirectory("tcs");
    Path link = dir.resolve("d");
    Path shortPath = link.resolve(name.toString());
    try {
      if (!fits(shortPath)) {
        throw new IOException(
            "unix socket path "
                + abs
                + " is "
                + abs.toString().getBytes(StandardCharsets.UTF_8).length
                + " bytes, over the limit of "
                + MAX_PATH_BYTES
                + ", and its file name is too long to reach it through a short link in "
                + dir);
      }
      Files.createSymbolicLink(link, parent);
      return action.run(shortPath);
    } finally {
      Files.deleteIfExists(link);
      Files.deleteIfExists(dir);
    }
  }
}
