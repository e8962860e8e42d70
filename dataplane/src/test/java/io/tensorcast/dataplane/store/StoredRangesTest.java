package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class StoredRangesTest {

  private static List<List<Long>> of(StoredRanges r) {
    return r.ranges().stream().map(a -> List.of(a[0], a[1])).toList();
  }

  @Test
  void rangesAreKeptSortedAndAdjacentOrOverlappingOnesMerge() {
    StoredRanges r = new StoredRanges("etag-1");
    r.add(100, 200);
    r.add(0, 50);
    r.add(300, 400);
    assertThat(of(r)).containsExactly(List.of(0L, 50L), List.of(100L, 200L), List.of(300L, 400L));
    r.add(50, 100); // touches both neighbours
    assertThat(of(r)).containsExactly(List.of(0L, 200L), List.of(300L, 400L));
    r.add(150, 350); // overlaps both
    assertThat(of(r)).containsExactly(List.of(0L, 400L));
    r.add(10, 20); // inside
    r.add(5, 5); // empty
    assertThat(of(r)).containsExactly(List.of(0L, 400L));
  }

  @Test
  void aRangeCoveringSeveralIsOneAndTheVersionIsCompared() {
    StoredRanges r = new StoredRanges("v1");
    r.add(10, 20);
    r.add(30, 40);
    r.add(50, 60);
    r.add(0, 100);
    assertThat(of(r)).containsExactly(List.of(0L, 100L));
    assertThat(r.isVersion("v1")).isTrue();
    assertThat(r.isVersion("v2")).isFalse();
  }

  @Test
  void everyTornPrefixOfARangesFileIsRefusedWhole(@TempDir Path dir) throws Exception {
    Map<String, StoredRanges> byPath = new LinkedHashMap<>();
    StoredRanges a = new StoredRanges("etag-a");
    a.add(0, 4096);
    a.add(8192, 10_000);
    StoredRanges b = new StoredRanges("etag-b");
    b.add(100, 200);
    byPath.put("a.safetensors", a);
    byPath.put("sub/b.bin", b);
    Path file = StoredRanges.pathFor(dir, "art");
    StoredRanges.write(file, byPath);
    assertThat(dir.resolve(".art.stored.tmp")).doesNotExist();
    Map<String, Long> sizes = Map.of("a.safetensors", 10_000L, "sub/b.bin", 300L);

    Map<String, StoredRanges> back = StoredRanges.read(file, sizes);
    assertThat(back).containsOnlyKeys("a.safetensors", "sub/b.bin");
    assertThat(of(back.get("a.safetensors")))
        .containsExactly(List.of(0L, 4096L), List.of(8192L, 10_000L));
    assertThat(back.get("sub/b.bin").version()).isEqualTo("etag-b");

    // What a crash could leave if the file were written in place: any prefix of it.
    byte[] whole = Files.readAllBytes(file);
    for (int n = 0; n < whole.length; n++) {
      Path torn = dir.resolve("torn-" + n + ".stored");
      Files.write(torn, java.util.Arrays.copyOf(whole, n));
      assertThat(StoredRanges.read(torn, sizes))
          .as("the first %d of %d bytes", n, whole.length)
          .isEmpty();
    }
  }

  /**
   * A store reopened over an incomplete artifact whose ranges file is torn does not adopt it: no
   * stored range is trusted, the copy is removed and its next load reads every file. With the whole
   * ranges file the same copy is adopted as resumable.
   */
  @Test
  void aTornRangesFileMakesTheStoreRemoveTheCopyRatherThanTrustIt() throws Exception {
    try (ShmRoot shm = ShmRoot.create()) {
      Path root = shm.dir.resolve("store");
      for (boolean torn : new boolean[] {false, true}) {
        PinnedStore first = new PinnedStore(root, 1 << 20, LockPolicy.DISABLED);
        StoredArtifact art = first.allocate("half", List.of(new StoreFile("w.bin", 10_000)));
        art.write("w.bin", 0, ByteBuffer.wrap(new byte[4096]));
        art.recordStored("w.bin", "etag-1", 0, 4096);
        art.writeStoredRanges();
        first.close();
        Path ranges = StoredRanges.pathFor(root.resolve(".tensorcast"), "half");
        if (torn) {
          try (FileChannel ch = FileChannel.open(ranges, StandardOpenOption.WRITE)) {
            ch.truncate(Files.size(ranges) / 2);
          }
        }

        PinnedStore second = new PinnedStore(root, 1 << 20, LockPolicy.DISABLED);
        try {
          assertThat(second.recovery())
              .extracting(RecoveryAction::name, RecoveryAction::reason)
              .as("torn: %s", torn)
              .containsExactly(
                  org.assertj.core.groups.Tuple.tuple(
                      "half", torn ? "IncompleteFiles" : "Resumable"));
          if (torn) {
            assertThat(second.get("half")).isEmpty();
            assertThat(ranges).doesNotExist();
          } else {
            assertThat(of(second.get("half").orElseThrow().storedRanges("w.bin", "etag-1")))
                .isEqualTo(List.of(List.of(0L, 4096L)));
            second.unload("half");
          }
        } finally {
          second.close();
        }
      }
    }
  }

  private static List<List<Long>> of(List<long[]> ranges) {
    return ranges.stream().map(a -> List.of(a[0], a[1])).toList();
  }
}
