package io.tensorcast.csi.mount;

import java.io.IOException;
import java.nio.file.Path;

/**
 * The mount operations the node driver needs. {@link LinuxMounter} runs {@code mount(8)} and {@code
 * umount(8)}; both need {@code CAP_SYS_ADMIN} in the host's mount namespace (the driver's container
 * is privileged).
 */
public interface Mounter {

  /**
   * Makes {@code target} (an existing directory) show {@code source} read-only: a bind mount, then
   * a read-only remount of that bind mount only. Never leaves a writable mount behind: when the
   * remount fails, the bind mount is undone before the error is thrown.
   *
   * @throws IOException naming the command and its output when a step fails
   */
  void bindReadOnly(Path source, Path target) throws IOException;

  /**
   * Unmounts the topmost mount at {@code target}.
   *
   * @throws IOException naming the command and its output (e.g. the target is busy)
   */
  void unmount(Path target) throws IOException;

  /**
   * Whether {@code path} is a mount point in this process's mount namespace.
   *
   * @throws IOException when the mount table cannot be read
   */
  boolean isMountPoint(Path path) throws IOException;
}
