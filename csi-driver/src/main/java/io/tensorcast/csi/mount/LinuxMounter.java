package io.tensorcast.csi.mount;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * {@link Mounter} through {@code mount(8)} and {@code umount(8)} (util-linux): {@code mount --bind
 * SOURCE TARGET}, then {@code mount -o remount,bind,ro TARGET} (the remount changes only the new
 * bind mount, not the store's file system), and {@code umount TARGET}. Mount points are read from
 * {@code /proc/self/mountinfo}. Each command is given {@value #TIMEOUT_SECONDS} s.
 */
public final class LinuxMounter implements Mounter {

  static final int TIMEOUT_SECONDS = 30;

  private final Path mountinfo;

  public LinuxMounter() {
    this(Path.of("/proc/self/mountinfo"));
  }

  LinuxMounter(Path mountinfo) {
    this.mountinfo = mountinfo;
  }

  @Override
  public void bindReadOnly(Path source, Path target) throws IOException {
    run(List.of("mount", "--bind", source.toString(), target.toString()));
    try {
      run(List.of("mount", "-o", "remount,bind,ro", target.toString()));
    } catch (IOException e) {
      try {
        run(List.of("umount", target.toString()));
      } catch (IOException undo) {
        e.addSuppressed(undo);
      }
      throw e;
    }
  }

  @Override
  public void unmount(Path target) throws IOException {
    run(List.of("umount", target.toString()));
  }

  @Override
  public boolean isMountPoint(Path path) throws IOException {
    Path p = path.toAbsolutePath().normalize();
    return MountTable.mountPoints(mountinfo).contains(p);
  }

  private static void run(List<String> command) throws IOException {
    Process process =
        new ProcessBuilder(new ArrayList<>(command)).redirectErrorStream(true).start();
    String output;
    try (InputStream in = process.getInputStream()) {
      process.getOutputStream().close();
      boolean done = process.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      if (!done) {
        process.destroyForcibly();
        throw new IOException(
            String.join(" ", command) + " did not finish within " + TIMEOUT_SECONDS + " s");
      }
      output = new String(in.readAllBytes(), StandardCharsets.UTF_8).trim();
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
      throw new IOException(String.join(" ", command) + " was interrupted", e);
    }
    if (process.exitValue() != 0) {
      throw new IOException(
          String.join(" ", command)
              + " failed with exit status "
              + process.exitValue()
              + (output.isEmpty() ? "" : ": " + output));
    }
  }
}
