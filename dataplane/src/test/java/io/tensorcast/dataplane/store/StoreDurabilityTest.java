package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * On a disk-backed root the store forces a data file's bytes and its directory entries to the
 * device before it writes a record that claims them (the stored ranges, a completed file's
 * SHA-256), so that a power loss after the record cannot leave a store that claims bytes it does
 * not have. A recording {@link FileSync} sees each force together with what the records held at
 * that moment.
 */
class StoreDurabilityTest {
  private static final long PAGE = 4096;
  private final List<PinnedStore> stores = new ArrayList<>();
  private final List<Path> roots = new ArrayList<>();

  /** One force: the path, and whether the records claimed its bytes already. */
  private record Forced(Path path, boolean rangesListedIt, boolean stateHadItsSha) {}

  @AfterEach
  void tearDown() throws IOException {
    stores.forEach(PinnedStore::close);
    for (Path r : roots) {
      TestFiles.deleteTree(r);
    }
  }

  private static byte[] pattern(long seed, int n) {
    byte[] b = new byte[n];
    new Random(seed).nextBytes(b);
    return b;
  }

  /** A directory on the build's own (disk) file system, not tmpfs. */
  private Path diskRoot() throws IOException {
    Path target = Path.of("target").toAbsolutePath();
    Files.createDirectories(target);
    Path dir = Files.createTempDirectory(target, "store-durability-");
    roots.add(dir);
    return dir.resolve("store");
  }

  @Test
  void dataIsForcedBeforeTheStoredRangesAndTheCompletionThatClaimIt() throws Exception {
    Path root = diskRoot();
    PinnedStore store = new PinnedStore(root, 1 << 20, LockPolicy.DISABLED, PAGE);
    stores.add(store);
    Path ranges = root.resolve(".tensorcast/durable.stored");
    Path state = root.resolve(".tensorcast/durable.json");
    byte[] b = pattern(2, 5000);
    String bSha = PinnedStoreTest.sha256(b);
    List<Forced> forced = Collections.synchronizedList(new ArrayList<>());
    store.fileSync(
        p -> {
          forced.add(
              new Forced(
                  p,
                  Files.exists(ranges) && Files.readString(ranges).contains("d/a.bin"),
                  Files.readString(state).contains(bSha)));
          FileSync.FSYNC.force(p); // and really force it, on a real disk
        });
    StoredArtifact a =
        store.allocate(
            "durable", List.of(new StoreFile("d/a.bin", 10_000), new StoreFile("b.bin", 5000)));
    Path dir = root.resolve("durable");

    a.write("d/a.bin", 0, ByteBuffer.wrap(pattern(1, 4096)));
    a.recordStored("d/a.bin", "etag-a", 0, 4096);
    a.writeStoredRanges();

    assertThat(Files.readString(ranges)).contains("d/a.bin");
    assertThat(forced)
        .as("forced before the ranges file listed d/a.bin")
        .contains(new Forced(dir.resolve("d/a.bin"), false, false))
        .contains(new Forced(dir.resolve("d"), false, false))
        .contains(new Forced(dir, false, false))
        .contains(new Forced(root, false, false))
        .noneMatch(f -> f.path().equals(dir.resolve("b.bin")));
    int before = forced.size();

    // Nothing new recorded: nothing forced again.
    a.writeStoredRanges();
    assertThat(forced).hasSize(before);

    a.write("b.bin", 0, ByteBuffer.wrap(b));
    assertThat(a.markComplete("b.bin")).isEqualTo(bSha);
    assertThat(Files.readString(state)).contains(bSha);
    assertThat(forced.subList(before, forced.size()))
        .as("forced before the state file recorded b.bin's sha256")
        .containsExactly(new Forced(dir.resolve("b.bin"), true, false));
  }

  @Test
  void aMemoryBackedRootIsNeverForcedADiskBackedOneIs() throws Exception {
    try (ShmRoot shm = ShmRoot.create()) {
      assertThat(FileSync.forRoot(shm.dir)).isSameAs(FileSync.NONE);
    }
    Path disk = diskRoot().getParent();
    assertThat(Files.getFileStore(disk).type()).isNotIn(FileSync.MEMORY_BACKED);
    assertThat(FileSync.forRoot(disk)).isSameAs(FileSync.FSYNC);
  }
}
