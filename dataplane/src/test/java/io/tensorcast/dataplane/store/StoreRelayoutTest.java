package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.tensorcast.api.Reason;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@link PinnedStore#relayout}: an artifact laid out again for a changed file list keeps the bytes,
 * completion and stored ranges of every file with the same path and size, on a real {@code
 * /dev/shm} store, and a store opened afterwards adopts the new layout.
 */
class StoreRelayoutTest {
  private static final long PAGE = 4096;
  private static final long MIB = 1 << 20;

  private ShmRoot shm;
  private Path root;
  private final List<PinnedStore> stores = new ArrayList<>();

  @BeforeEach
  void setUp() throws IOException {
    shm = ShmRoot.create();
    root = shm.dir.resolve("store");
  }

  @AfterEach
  void tearDown() throws IOException {
    stores.forEach(PinnedStore::close);
    shm.close();
  }

  private PinnedStore store(long budget) throws StoreException {
    PinnedStore s = new PinnedStore(root, budget, LockPolicy.REQUIRED, PAGE);
    stores.add(s);
    return s;
  }

  private static byte[] pattern(long seed, int n) {
    byte[] b = new byte[n];
    new Random(seed).nextBytes(b);
    return b;
  }

  private static byte[] read(StoredArtifact a, String path, int offset, int length) {
    byte[] b = new byte[length];
    a.read(path, offset, ByteBuffer.wrap(b));
    return b;
  }

  @Test
  void unchangedFilesKeepBytesCompletionAndRangesTheOthersAreRecreatedOrDeleted() throws Exception {
    PinnedStore store = store(MIB);
    StoredArtifact old =
        store.allocate(
            "relaid",
            List.of(
                new StoreFile("keep.bin", 5000),
                new StoreFile("part.bin", 9000),
                new StoreFile("nested/gone.bin", 3000),
                new StoreFile("resized.bin", 4000)));
    byte[] keep = pattern(1, 5000);
    byte[] part = pattern(2, 4096);
    old.write("keep.bin", 0, ByteBuffer.wrap(keep));
    old.recordStored("keep.bin", "etag-k", 0, 5000);
    String keepSha = old.markComplete("keep.bin");
    old.write("part.bin", 0, ByteBuffer.wrap(part));
    old.recordStored("part.bin", "etag-p", 0, 4096);
    old.write("resized.bin", 0, ByteBuffer.wrap(pattern(3, 4000)));
    old.recordStored("resized.bin", "etag-r1", 0, 4000);
    old.write("nested/gone.bin", 0, ByteBuffer.wrap(pattern(4, 3000)));
    old.writeStoredRanges();

    StoredArtifact a =
        store.relayout(
            "relaid",
            List.of(
                new StoreFile("keep.bin", 5000),
                new StoreFile("part.bin", 9000),
                new StoreFile("resized.bin", 7000),
                new StoreFile("new/added.bin", 100)));

    assertThat(store.get("relaid")).containsSame(a);
    assertThat(a.files())
        .extracting(StoreFile::path)
        .containsExactly("keep.bin", "part.bin", "resized.bin", "new/added.bin");
    assertThat(a.isComplete("keep.bin")).isTrue();
    assertThat(a.completedDigest("keep.bin")).contains(keepSha);
    assertThat(a.storedVersion("keep.bin")).contains("etag-k");
    assertThat(read(a, "keep.bin", 0, 5000)).isEqualTo(keep);
    assertThat(a.isComplete("part.bin")).isFalse();
    assertThat(a.storedVersion("part.bin")).contains("etag-p");
    assertThat(a.storedRanges("part.bin", "etag-p")).containsExactly(new long[] {0, 4096});
    assertThat(read(a, "part.bin", 0, 4096)).isEqualTo(part);
    assertThat(a.storedVersion("resized.bin")).isEmpty();
    assertThat(read(a, "resized.bin", 0, 7000)).isEqualTo(new byte[7000]);
    assertThat(Files.size(root.resolve("relaid/resized.bin"))).isEqualTo(7000);
    assertThat(ShmRoot.listTree(root.resolve("relaid")))
        .containsExactly("keep.bin", "new", "new/added.bin", "part.bin", "resized.bin");
    assertThat(a.lockStatus().locked()).isTrue();
    // Charged the new layout's pages: 2 + 3 + 2 + 1.
    assertThat(store.bytesInUse()).isEqualTo(8 * PAGE);
    // The old object behaves as unloaded; the new one is written like a fresh allocation.
    assertThatThrownBy(() -> old.read("keep.bin", 0, ByteBuffer.allocate(1)))
        .isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> a.write("keep.bin", 0, ByteBuffer.allocate(1)))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("complete");
    byte[] rest = pattern(5, 9000 - 4096);
    a.write("part.bin", 4096, ByteBuffer.wrap(rest));
    a.recordStored("part.bin", "etag-p", 4096, rest.length);
    a.writeStoredRanges();

    // A store opened on the root afterwards adopts the new layout with its ranges.
    store.close();
    PinnedStore again = store(MIB);
    assertThat(again.recovery())
        .singleElement()
        .satisfies(r -> assertThat(r.reason()).isEqualTo("Resumable"));
    StoredArtifact adopted = again.get("relaid").orElseThrow();
    assertThat(adopted.files()).isEqualTo(a.files());
    assertThat(adopted.completedDigest("keep.bin")).contains(keepSha);
    assertThat(adopted.storedRanges("part.bin", "etag-p")).containsExactly(new long[] {0, 9000});
    assertThat(adopted.storedRanges("resized.bin", "etag-r1")).isEmpty();
    assertThat(read(adopted, "part.bin", 4096, rest.length)).isEqualTo(rest);
  }

  @Test
  void aLayoutThatDoesNotFitTheBudgetChangesNothing() throws Exception {
    PinnedStore store = store(4 * PAGE);
    StoredArtifact a =
        store.allocate("tight", List.of(new StoreFile("a", PAGE), new StoreFile("b", PAGE)));
    byte[] bytes = pattern(6, (int) PAGE);
    a.write("a", 0, ByteBuffer.wrap(bytes));

    InsufficientMemoryException e =
        catchThrowableOfType(
            () ->
                store.relayout(
                    "tight", List.of(new StoreFile("a", PAGE), new StoreFile("b", 4 * PAGE))),
            InsufficientMemoryException.class);
    assertThat(e.getMessage()).contains("tight");

    assertThat(store.get("tight")).containsSame(a);
    assertThat(read(a, "a", 0, (int) PAGE)).isEqualTo(bytes);
    assertThat(store.bytesInUse()).isEqualTo(2 * PAGE);
    assertThat(Files.size(root.resolve("tight/b"))).isEqualTo(PAGE);
  }

  @Test
  void anArtifactTheStoreDoesNotHoldIsNotFound() throws Exception {
    PinnedStore store = store(MIB);
    StoreException e =
        catchThrowableOfType(
            () -> store.relayout("nothing-here", List.of(new StoreFile("a", 1))),
            StoreException.class);
    assertThat(e.reason()).isEqualTo(Reason.ArtifactNotFound);
    assertThat(root.resolve("nothing-here")).doesNotExist();
  }
}
