package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.Reason;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A store on a tmpfs that is full before the artifact is: the write that does not fit fails with
 * {@code FilesystemFull} naming the file and range (the process does not die of SIGBUS), and with
 * pages reserved up front the allocation fails instead. Mounts a 2 MiB tmpfs (root only, as every
 * store test that locks pages).
 */
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class FullFileSystemIT {
  private static final int MIB = 1 << 20;
  private Path mountPoint;

  @BeforeEach
  void mount() throws Exception {
    mountPoint = Files.createTempDirectory("tensorcast-full-fs-");
    run("mount", "-t", "tmpfs", "-o", "size=2m", "tensorcast-full-fs", mountPoint.toString());
  }

  @AfterEach
  void unmount() throws Exception {
    run("umount", mountPoint.toString());
    Files.delete(mountPoint);
  }

  @Test
  void aWriteBeyondTheFileSystemIsFilesystemFullNamingTheRange() throws Exception {
    assertThat(MemoryLockSupport.populateWriteSupported()).isTrue();
    try (PinnedStore store =
        new PinnedStore(
            mountPoint.resolve("store"), 64 * MIB, LockPolicy.BEST_EFFORT, 4096, true)) {
      StoredArtifact a = store.allocate("m", List.of(new StoreFile("w.bin", 8 * MIB)));
      a.write("w.bin", 0, ByteBuffer.allocate(MIB)); // fits
      assertThatThrownBy(() -> a.writable("w.bin", 4 * MIB, 2 * MIB))
          .isInstanceOfSatisfying(
              StoreWriteException.class,
              e -> assertThat(e.reason()).isEqualTo(Reason.FilesystemFull))
          .hasMessageContaining("bytes [4194304, 6291456) of 'w.bin'")
          .hasMessageContaining("EFAULT")
          .hasMessageContaining("is full");
      store.unload("m");
      assertThat(mountPoint.resolve("store").resolve("m")).doesNotExist();
    }
  }

  @Test
  void aRangeWrittenThroughTheFileBeyondTheFileSystemIsFilesystemFullNamingTheFile()
      throws Exception {
    try (PinnedStore store =
        new PinnedStore(
            mountPoint.resolve("store"), 64 * MIB, LockPolicy.BEST_EFFORT, 4096, true)) {
      StoredArtifact a = store.allocate("m", List.of(new StoreFile("w.bin", 8 * MIB)));
      byte[] piece = new byte[256 * 1024];
      try (StoredArtifact.RangeWriter w = a.openRange("w.bin", 0, MIB)) {
        for (int i = 0; i < 4; i++) {
          w.write(piece, 0, piece.length); // fits
        }
      }
      StoredArtifact.RangeWriter w = a.openRange("w.bin", 4 * MIB, 2 * MIB);
      assertThatThrownBy(
              () -> {
                for (int i = 0; i < 8; i++) {
                  w.write(piece, 0, piece.length);
                }
              })
          .isInstanceOfSatisfying(
              StoreWriteException.class,
              e -> assertThat(e.reason()).isEqualTo(Reason.FilesystemFull))
          .hasMessageContaining("of 'w.bin'")
          .hasMessageContaining("No space left")
          .hasMessageContaining("is full");
      w.close();
      store.unload("m");
      assertThat(mountPoint.resolve("store").resolve("m")).doesNotExist();
    }
  }

  @Test
  void withPagesReservedUpFrontTheAllocationIsFilesystemFull() throws Exception {
    try (PinnedStore store =
        new PinnedStore(
            mountPoint.resolve("store"), 64 * MIB, LockPolicy.BEST_EFFORT, 4096, false)) {
      assertThatThrownBy(() -> store.allocate("m", List.of(new StoreFile("w.bin", 8 * MIB))))
          .isInstanceOfSatisfying(
              StoreException.class, e -> assertThat(e.reason()).isEqualTo(Reason.FilesystemFull))
          .hasMessageContaining("'w.bin'");
      assertThat(store.bytesInUse()).isZero();
    }
  }

  private static void run(String... command) throws Exception {
    Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(String.join(" ", command) + ": " + out).isZero();
  }
}
