package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.source.DigestHasher;
import io.tensorcast.dataplane.source.PublishedDigest.Algorithm;
import io.tensorcast.testing.Corpus;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class PinnedStoreTest {
  private static final long KIB = 1024;
  private static final long MIB = 1024 * KIB;
  private static final long PAGE = 4096;

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
    assertThat(shm.dir).doesNotExist();
  }

  private PinnedStore store(long budget, LockPolicy policy, long window) throws StoreException {
    PinnedStore s = new PinnedStore(root, budget, policy, window);
    stores.add(s);
    return s;
  }

  static byte[] pattern(long seed, int n) {
    byte[] b = new byte[n];
    new Random(seed).nextBytes(b);
    return b;
  }

  static String sha256(byte[] b) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
  }

  private static long vmLckBytes() throws IOException {
    return MemoryLockSupport.vmLckBytesIn(Files.readString(Path.of("/proc/self/status")));
  }

  @Test
  void bytesWrittenThroughTheMappingAreTheFileBytesAcrossWindowBoundaries() throws Exception {
    PinnedStore store = store(MIB, LockPolicy.REQUIRED, PAGE);
    int modelSize = (int) (3 * PAGE + 123);
    StoredArtifact a =
        store.allocate(
            "tiny-llama",
            List.of(
                new StoreFile("config.json", 1000),
                new StoreFile("model.safetensors", modelSize),
                new StoreFile("nested/dir/tokenizer.bin", 9000),
                new StoreFile("empty.bin", 0)));

    byte[] config = pattern(1, 1000);
    byte[] model = pattern(2, modelSize);
    byte[] tokenizer = pattern(3, 9000);
    a.write("config.json", 0, ByteBuffer.wrap(config));
    // 3000-byte pieces straddle the 4096-byte windows at 4096, 8192 and 12288
    for (int off = 0; off < modelSize; off += 3000) {
      int len = Math.min(3000, modelSize - off);
      a.writable("model.safetensors", off, len).put(model, off, len);
    }
    a.writable("nested/dir/tokenizer.bin", 0, 9000).put(tokenizer);

    Path dir = root.resolve("tiny-llama");
    assertThat(a.directory()).isEqualTo(dir);
    assertThat(Files.readAllBytes(dir.resolve("config.json"))).isEqualTo(config);
    assertThat(Files.readAllBytes(dir.resolve("model.safetensors"))).isEqualTo(model);
    assertThat(Files.readAllBytes(dir.resolve("nested/dir/tokenizer.bin"))).isEqualTo(tokenizer);
    assertThat(Files.size(dir.resolve("empty.bin"))).isZero();
    // the artifact directory holds exactly the artifact's files; bookkeeping lives elsewhere
    assertThat(ShmRoot.listTree(dir))
        .containsExactly(
            "config.json",
            "empty.bin",
            "model.safetensors",
            "nested",
            "nested/dir",
            "nested/dir/tokenizer.bin");

    assertThat(a.sha256("model.safetensors")).isEqualTo(sha256(model));
    assertThat(a.sha256("empty.bin")).isEqualTo(sha256(new byte[0]));
    ByteBuffer ro = a.readOnly("model.safetensors", 4000, 200);
    assertThat(ro.isReadOnly()).isTrue();
    byte[] got = new byte[200];
    ro.get(got);
    assertThat(got).isEqualTo(java.util.Arrays.copyOfRange(model, 4000, 4200));
    ByteBuffer dst = ByteBuffer.allocate(5000);
    a.read("model.safetensors", 7000, dst);
    assertThat(dst.array()).isEqualTo(java.util.Arrays.copyOfRange(model, 7000, 12000));

    assertThat(a.bytesAllocated()).isEqualTo(1000 + modelSize + 9000);
    assertThat(a.lockStatus().locked()).isTrue();
    assertThat(a.lockStatus().lockedBytes()).isEqualTo(a.bytesAllocated());
    assertThat(a.lockStatus().reason()).isEqualTo(Reason.Locked);
    assertThat(a.preallocated()).isTrue();
  }

  @Test
  void aConsumerMappingTheFileSeesTheStoresWrites() throws Exception {
    PinnedStore store = store(MIB, LockPolicy.DISABLED, PAGE);
    StoredArtifact a = store.allocate("m", List.of(new StoreFile("w.bin", 10_000)));
    assertThat(a.lockStatus().reason()).isEqualTo(Reason.LockingDisabled);
    try (FileChannel ch = FileChannel.open(a.directory().resolve("w.bin"))) {
      MappedByteBuffer consumer = ch.map(FileChannel.MapMode.READ_ONLY, 0, 10_000);
      assertThat(consumer.get(9_999)).isZero();
      byte[] data = pattern(9, 10_000);
      a.write("w.bin", 0, ByteBuffer.wrap(data));
      byte[] seen = new byte[10_000];
      consumer.get(0, seen);
      assertThat(seen).isEqualTo(data);
    }
  }

  @Test
  void realCorpusFilesRoundTripAndVerifyAgainstTheirManifestHashes() throws Exception {
    Path corpus = Corpus.dir();
    List<String[]> rows =
        Files.readAllLines(corpus.resolve("MANIFEST.tsv")).stream()
            .skip(1)
            .map(l -> l.split("\t"))
            .toList();
    List<StoreFile> files =
        rows.stream().map(r -> new StoreFile(r[0], Long.parseLong(r[2]))).toList();
    LockPolicy policy =
        MemoryLockSupport.hasCapIpcLock() ? LockPolicy.REQUIRED : LockPolicy.BEST_EFFORT;
    PinnedStore store = store(256 * MIB, policy, 64 * KIB);
    StoredArtifact a = store.allocate("corpus", files);

    ByteBuffer piece = ByteBuffer.allocate(50_000); // pieces straddle the 64 KiB windows
    for (StoreFile f : files) {
      try (FileChannel in = FileChannel.open(corpus.resolve(f.path()))) {
        long off = 0;
        while (true) {
          piece.clear();
          if (in.read(piece) < 0) {
            break;
          }
          piece.flip();
          int n = piece.remaining();
          a.write(f.path(), off, piece);
          off += n;
        }
        assertThat(off).isEqualTo(f.size());
      }
    }
    for (String[] r : rows) {
      assertThat(a.markComplete(r[0], r[1])).isEqualTo(r[1]);
      assertThat(Files.mismatch(corpus.resolve(r[0]), root.resolve("corpus").resolve(r[0])))
          .as(r[0])
          .isEqualTo(-1L);
    }
    assertThat(a.isComplete()).isTrue();
    String state = Files.readString(root.resolve(".tensorcast/corpus.json"));
    for (String[] r : rows) {
      assertThat(state).contains("\"sha256\" : \"" + r[1] + "\"");
    }
    if (policy == LockPolicy.REQUIRED) {
      assertThat(a.lockStatus().lockedBytes()).isEqualTo(a.bytesAllocated());
    }
  }

  @Test
  void budgetIsCheckedBeforeAnythingIsCreatedAndReturnedOnUnload() throws Exception {
    PinnedStore store = store(16 * PAGE, LockPolicy.DISABLED, PAGE);
    List<String> emptyStore = ShmRoot.listTree(root);
    assertThat(emptyStore).containsExactly(".tensorcast", ".tensorcast/store.lock");

    InsufficientMemoryException e =
        catchThrowableOfType(
            InsufficientMemoryException.class,
            () ->
                store.allocate(
                    "big",
                    List.of(new StoreFile("a.bin", 40_000), new StoreFile("b.bin", 30_000))));
    // 40000 -> 10 pages, 30000 -> 8 pages
    assertThat(e.neededBytes()).isEqualTo(18 * PAGE);
    assertThat(e.budgetBytes()).isEqualTo(16 * PAGE);
    assertThat(e.freeBytes()).isEqualTo(16 * PAGE);
    assertThat(e.reason()).isEqualTo(Reason.InsufficientMemory);
    assertThat(e.getMessage())
        .contains("artifact big needs 73728 bytes")
        .contains("budget is 65536 bytes, 0 bytes are in use")
        .contains("only 65536 bytes are free");
    assertThat(ShmRoot.listTree(root)).isEqualTo(emptyStore);

    store.allocate("first", List.of(new StoreFile("a.bin", 40_000)));
    assertThat(store.bytesInUse()).isEqualTo(10 * PAGE);
    InsufficientMemoryException second =
        catchThrowableOfType(
            InsufficientMemoryException.class,
            () -> store.allocate("second", List.of(new StoreFile("b.bin", 30_000))));
    assertThat(second.inUseBytes()).isEqualTo(10 * PAGE);
    assertThat(second.getMessage()).contains("40960 bytes are in use").contains("24576 bytes");
    assertThat(root.resolve("second")).doesNotExist();
    assertThat(root.resolve(".tensorcast/second.json")).doesNotExist();

    store.unload("first");
    assertThat(store.bytesInUse()).isZero();
    assertThat(store.bytesFree()).isEqualTo(16 * PAGE);
    store.allocate("second", List.of(new StoreFile("b.bin", 30_000)));
    assertThat(store.bytesInUse()).isEqualTo(8 * PAGE);
  }

  @Test
  void aHostilePathIsRefusedAndNothingIsCreated() throws Exception {
    PinnedStore store = store(MIB, LockPolicy.DISABLED, PAGE);
    List<String> before = ShmRoot.listTree(shm.dir);
    String escape = "../../escaped-" + System.nanoTime();
    StoreException e =
        catchThrowableOfType(
            StoreException.class,
            () ->
                store.allocate(
                    "m", List.of(new StoreFile("ok.bin", 10), new StoreFile(escape, 10))));
    assertThat(e.reason()).isEqualTo(Reason.InvalidPath);
    assertThat(e.getMessage()).contains("has a '..' segment");
    assertThat(ShmRoot.listTree(shm.dir)).isEqualTo(before);
    assertThat(root.resolve("m").resolve(escape).normalize()).doesNotExist();
    assertThat(store.bytesInUse()).isZero();
  }

  @Test
  void rangesWrittenThroughTheFileAreMappedLockedAndReadBackThroughTheFile() throws Exception {
    boolean cap = MemoryLockSupport.hasCapIpcLock();
    final int mib = 1 << 20;
    PinnedStore store =
        new PinnedStore(
            root, 64L * mib, cap ? LockPolicy.REQUIRED : LockPolicy.DISABLED, 16L * mib, true);
    stores.add(store);
    int size = 24 * mib + 5;
    StoredArtifact a = store.allocate("m", List.of(new StoreFile("w.bin", size)));
    byte[] data = pattern(11, size);
    // two 8 MiB ranges in 256 KiB pieces, as the range reader writes them; the rest untouched
    for (int off = 0; off < 16 * mib; off += 8 * mib) {
      try (StoredArtifact.RangeWriter w = a.openRange("w.bin", off, 8 * mib)) {
        for (int p = off; p < off + 8 * mib; p += 256 * 1024) {
          w.write(data, p, 256 * 1024);
        }
        assertThat(w.position()).isEqualTo(off + 8L * mib);
        assertThatThrownBy(() -> w.write(data, 0, 1))
            .isInstanceOf(IndexOutOfBoundsException.class)
            .hasMessageContaining("pass the end of the range");
      }
    }
    // exactly the ranges opened are allocated and (with the capability) locked in the mapping
    assertThat(allocatedBytesByDu(a.directory())).isBetween(16L * mib, 17L * mib);
    if (cap) {
      assertThat(lockedBytesMapped(a.directory().resolve("w.bin"))).isEqualTo(16L * mib);
    }
    // the mapping shows the bytes written through the file
    byte[] seen = new byte[4096];
    a.readOnly("w.bin", 8 * mib - 2048, 4096).get(seen);
    assertThat(seen).isEqualTo(java.util.Arrays.copyOfRange(data, 8 * mib - 2048, 8 * mib + 2048));
    // and reading back through the file hands over the same bytes, chunk by chunk
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    List<Integer> chunks = new ArrayList<>();
    a.consumeFromFile(
        "w.bin",
        0,
        16 * mib,
        ByteBuffer.allocate(3 * mib),
        b -> {
          chunks.add(b.remaining());
          md.update(b);
        });
    assertThat(chunks).containsExactly(3 * mib, 3 * mib, 3 * mib, 3 * mib, 3 * mib, mib);
    assertThat(HexFormat.of().formatHex(md.digest()))
        .isEqualTo(sha256(java.util.Arrays.copyOf(data, 16 * mib)));
    assertThatThrownBy(
            () -> a.consumeFromFile("w.bin", size - 1, 2, ByteBuffer.allocate(8), b -> {}))
        .isInstanceOf(IndexOutOfBoundsException.class);

    try (StoredArtifact.RangeWriter w = a.openRange("w.bin", 16 * mib, size - 16 * mib)) {
      w.write(data, 16 * mib, size - 16 * mib);
    }
    assertThat(a.markComplete("w.bin")).isEqualTo(sha256(data));
    assertThatThrownBy(() -> a.openRange("w.bin", 0, 1))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("complete files are read-only");
    store.unload("m");
    assertThatThrownBy(() -> a.openRange("w.bin", 0, 1)).isInstanceOf(IllegalStateException.class);
  }

  @ParameterizedTest(name = "pages reserved on write: {0}")
  @ValueSource(booleans = {true, false})
  void pagesAreReservedAndLockedAsWrittenAndUnloadFreesThem(boolean onWrite) throws Exception {
    boolean cap = MemoryLockSupport.hasCapIpcLock();
    if (onWrite) {
      assertThat(MemoryLockSupport.populateWriteSupported())
          .as("MADV_POPULATE_WRITE (Linux 5.14) on this kernel")
          .isTrue();
    }
    PinnedStore store =
        new PinnedStore(
            root, 512 * MIB, cap ? LockPolicy.REQUIRED : LockPolicy.DISABLED, 16 * MIB, onWrite);
    stores.add(store);
    FileStore shmFs = Files.getFileStore(ShmRoot.SHM);
    long freeBefore = shmFs.getUsableSpace();
    long lockedBefore = vmLckBytes();

    String first = "model-00001-of-00002.safetensors";
    String second = "model-00002-of-00002.safetensors";
    StoredArtifact a =
        store.allocate(
            "big-model",
            List.of(new StoreFile(first, 96 * MIB), new StoreFile(second, 32 * MIB + 5)));
    long size = 128 * MIB + 5;
    if (cap) {
      assertThat(a.lockStatus().locked()).isTrue();
      assertThat(a.lockStatus().lockedBytes()).isEqualTo(size);
      // the kernel agrees: this process's locked memory grew by the artifact
      assertThat(vmLckBytes() - lockedBefore).isGreaterThanOrEqualTo(size);
    }
    assertThat(a.preallocated()).isTrue();
    if (onWrite) {
      // nothing touched yet: no page of the artifact is allocated or locked
      assertThat(allocatedBytesByDu(a.directory())).isLessThan(MIB);
      assertThat(lockedBytesMapped(a.directory().resolve(first))).isZero();
      for (long off = 0; off < 96 * MIB; off += 8 * MIB) {
        a.writable(first, off, (int) (8 * MIB)).put(pattern(off, (int) (8 * MIB)));
      }
      a.write(second, 0, ByteBuffer.wrap(pattern(1, 4096)));
      // exactly the pages written are there, and (with the capability) locked
      assertThat(allocatedBytesByDu(a.directory())).isBetween(96 * MIB, 97 * MIB);
      if (cap) {
        assertThat(lockedBytesMapped(a.directory().resolve(first))).isEqualTo(96 * MIB);
        assertThat(lockedBytesMapped(a.directory().resolve(second))).isEqualTo(4096);
      }
    } else {
      // posix_fallocate reserved the tmpfs pages up front: the file system lost them already
      assertThat(freeBefore - shmFs.getUsableSpace()).isGreaterThanOrEqualTo(size - 16 * MIB);
      assertThat(allocatedBytesByDu(a.directory())).isGreaterThanOrEqualTo(size);
      if (cap) {
        assertThat(lockedBytesMapped(a.directory().resolve(second))).isEqualTo(32 * MIB + 4096);
      }
    }

    store.unload("big-model");
    assertThat(root.resolve("big-model")).doesNotExist();
    assertThat(root.resolve(".tensorcast/big-model.json")).doesNotExist();
    assertThat(ShmRoot.listTree(root)).containsExactly(".tensorcast", ".tensorcast/store.lock");
    assertThat(shmFs.getUsableSpace()).isGreaterThanOrEqualTo(freeBefore - 16 * MIB);
    assertThat(vmLckBytes()).isEqualTo(lockedBefore);
    assertThat(store.bytesInUse()).isZero();

    store.unload("big-model"); // idempotent
    assertThatThrownBy(() -> a.write(first, 0, ByteBuffer.allocate(1)))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("was unloaded");
  }

  /**
   * Bytes of this process's mappings of {@code file} that are locked ({@code Locked:} in smaps).
   */
  @Test
  void aRangeThatStopsEarlyOrStraddlesPagesHasEveryPageItWroteMappedAndLocked() throws Exception {
    assumeTrue(MemoryLockSupport.hasCapIpcLock(), "locking needs CAP_IPC_LOCK");
    PinnedStore store = new PinnedStore(root, 1L << 20, LockPolicy.REQUIRED, 4096, true);
    stores.add(store);
    int size = 3 * 4096 + 100;
    StoredArtifact a = store.allocate("m", List.of(new StoreFile("w.bin", size)));
    byte[] data = pattern(5, size);
    // bytes [100, 5100) of a range [100, 8100) that stops early: pages 0 and 1, on close
    StoredArtifact.RangeWriter early = a.openRange("w.bin", 100, 8000);
    early.write(data, 100, 5000);
    assertThat(lockedBytesMapped(a.directory().resolve("w.bin"))).isZero();
    early.close();
    assertThat(lockedBytesMapped(a.directory().resolve("w.bin"))).isEqualTo(2 * 4096L);
    // [8100, size) starts inside page 1 and ends inside page 3: pages 1 to 3, at its last byte
    try (StoredArtifact.RangeWriter rest = a.openRange("w.bin", 8100, size - 8100)) {
      rest.write(data, 8100, size - 8100);
      assertThat(lockedBytesMapped(a.directory().resolve("w.bin"))).isEqualTo(4 * 4096L);
    }
    byte[] seen = new byte[size - 8100];
    a.readOnly("w.bin", 8100, seen.length).get(seen);
    assertThat(seen).isEqualTo(java.util.Arrays.copyOfRange(data, 8100, size));
  }

  private static long lockedBytesMapped(Path file) throws IOException {
    long locked = 0;
    boolean inMapping = false;
    for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
      if (line.matches("^[0-9a-f]+-[0-9a-f]+ .*")) {
        inMapping = line.endsWith(" " + file);
      } else if (inMapping && line.startsWith("Locked:")) {
        locked += Long.parseLong(line.replaceAll("\\D", "")) * 1024;
      }
    }
    return locked;
  }

  private static long allocatedBytesByDu(Path dir) throws Exception {
    Process p = new ProcessBuilder("du", "-s", "-B1", dir.toString()).start();
    String out = new String(p.getInputStream().readAllBytes()).trim();
    assertThat(p.waitFor()).isZero();
    return Long.parseLong(out.split("\\s+")[0]);
  }

  @Test
  void aStateFileThatCannotBeWrittenIsAStoreIoErrorNamingTheArtifactAndTheFile() throws Exception {
    PinnedStore store = store(MIB, LockPolicy.DISABLED, PAGE);
    StoredArtifact a = store.allocate("m", List.of(new StoreFile("a.bin", 100)));
    byte[] data = pattern(6, 100);
    a.write("a.bin", 0, ByteBuffer.wrap(data));
    // The state file is written through a temporary sibling: a directory there fails the write.
    Path blocker = Files.createDirectories(root.resolve(".tensorcast/.m.json.tmp"));

    StoreException e = catchThrowableOfType(StoreException.class, () -> a.markComplete("a.bin"));

    assertThat(e.reason()).isEqualTo(Reason.StoreIoError);
    assertThat(e.getMessage())
        .startsWith("artifact m: cannot write " + root.resolve(".tensorcast/m.json") + ": ");
    assertThat(e.getCause()).isInstanceOf(IOException.class);
    assertThat(a.isComplete("a.bin")).isFalse();
    Files.delete(blocker);
    assertThat(a.markComplete("a.bin")).isEqualTo(sha256(data));
  }

  @Test
  void completeFilesAreVerifiedRecordedAndReadOnly() throws Exception {
    PinnedStore store = store(MIB, LockPolicy.DISABLED, PAGE);
    StoredArtifact a =
        store.allocate("m", List.of(new StoreFile("a.bin", 5000), new StoreFile("b.bin", 10)));
    byte[] data = pattern(5, 5000);
    a.write("a.bin", 0, ByteBuffer.wrap(data));
    String good = sha256(data);
    String bad = sha256(new byte[] {1});

    StoreException mismatch =
        catchThrowableOfType(StoreException.class, () -> a.markComplete("a.bin", bad));
    assertThat(mismatch.reason()).isEqualTo(Reason.ChecksumMismatch);
    assertThat(mismatch.getMessage())
        .contains("file 'a.bin' has sha256 " + good + " but " + bad + " was expected");
    assertThat(a.isComplete("a.bin")).isFalse();

    assertThat(a.markComplete("a.bin", good.toUpperCase())).isEqualTo(good);
    assertThat(a.isComplete("a.bin")).isTrue();
    assertThat(a.isComplete()).isFalse();
    assertThat(a.completedDigest("a.bin")).contains(good);
    assertThat(a.markComplete("a.bin")).isEqualTo(good);
    assertThatThrownBy(() -> a.writable("a.bin", 0, 1))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("complete files are read-only");

    String state = Files.readString(root.resolve(".tensorcast/m.json"));
    assertThat(state)
        .contains("\"formatVersion\" : 1")
        .contains("\"path\" : \"a.bin\"", "\"sha256\" : \"" + good + "\"")
        .contains("\"path\" : \"b.bin\"", "\"sha256\" : null");
    assertThat(ShmRoot.listTree(root.resolve(".tensorcast")))
        .containsExactly("m.json", "store.lock"); // no temporary file left behind
  }

  @Test
  void rangesOutsideTheFileAndUnknownFilesAreRefused() throws Exception {
    PinnedStore store = store(MIB, LockPolicy.DISABLED, PAGE);
    StoredArtifact a = store.allocate("m", List.of(new StoreFile("a.bin", 100)));
    assertThatThrownBy(() -> a.writable("a.bin", 90, 11))
        .isInstanceOf(IndexOutOfBoundsException.class)
        .hasMessage("range [90, 101) is outside file 'a.bin' of artifact m, which has 100 bytes");
    assertThatThrownBy(() -> a.readOnly("a.bin", -1, 1))
        .isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> a.writable("a.bin", Long.MAX_VALUE, 10))
        .isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> a.sha256("b.bin"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("artifact m has no file 'b.bin'");
    assertThat(a.writable("a.bin", 100, 0).remaining()).isZero();

    StoreException dup =
        catchThrowableOfType(
            StoreException.class, () -> store.allocate("m", List.of(new StoreFile("x", 1))));
    assertThat(dup.reason()).isEqualTo(Reason.ArtifactExists);
  }

  @Test
  void aDirectoryTheStoreDoesNotHoldIsNeverTakenOverOrDeleted() throws Exception {
    PinnedStore store = store(MIB, LockPolicy.DISABLED, PAGE);
    Files.createDirectories(root.resolve("intruder"));
    Files.writeString(root.resolve("intruder/theirs.txt"), "keep me");
    StoreException e =
        catchThrowableOfType(
            StoreException.class, () -> store.allocate("intruder", List.of(new StoreFile("x", 1))));
    assertThat(e.reason()).isEqualTo(Reason.ArtifactExists);
    assertThat(e.getMessage()).contains("exists but is not held by this store");
    assertThat(root.resolve("intruder/theirs.txt")).hasContent("keep me");
    assertThat(root.resolve(".tensorcast/intruder.json")).doesNotExist();
    assertThat(store.bytesInUse()).isZero();
  }

  @Test
  void concurrentWritersOfDisjointRangesAllLand() throws Exception {
    PinnedStore store = store(8 * MIB, LockPolicy.BEST_EFFORT, 64 * KIB);
    int size = 4 * (int) MIB;
    StoredArtifact a = store.allocate("m", List.of(new StoreFile("w.bin", size)));
    byte[] data = pattern(11, size);
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try {
      List<Future<?>> fs = new ArrayList<>();
      int piece = 100_000; // not a divisor of the window size
      for (int off = 0; off < size; off += piece) {
        int o = off;
        int len = Math.min(piece, size - off);
        fs.add(pool.submit(() -> a.write("w.bin", o, ByteBuffer.wrap(data, o, len))));
      }
      for (Future<?> f : fs) {
        f.get();
      }
    } finally {
      pool.shutdownNow();
    }
    assertThat(Files.readAllBytes(a.directory().resolve("w.bin"))).isEqualTo(data);
  }

  @Test
  void oneStorePerRootButSeveralRootsPerProcess() throws Exception {
    PinnedStore first = store(MIB, LockPolicy.DISABLED, PAGE);
    StoreException inUse =
        catchThrowableOfType(
            StoreException.class, () -> new PinnedStore(root, MIB, LockPolicy.DISABLED));
    assertThat(inUse.reason()).isEqualTo(Reason.StoreInUse);
    assertThat(inUse.getMessage()).contains("another store holds " + root);

    PinnedStore other = new PinnedStore(shm.dir.resolve("other"), MIB, LockPolicy.DISABLED);
    stores.add(other);
    first.allocate("same-id", List.of(new StoreFile("x", 10)));
    other.allocate("same-id", List.of(new StoreFile("x", 20)));
    assertThat(Files.size(root.resolve("same-id/x"))).isEqualTo(10);
    assertThat(Files.size(shm.dir.resolve("other/same-id/x"))).isEqualTo(20);

    first.close();
    StoreException closed =
        catchThrowableOfType(StoreException.class, () -> first.unload("same-id"));
    assertThat(closed.reason()).isEqualTo(Reason.StoreClosed);
    assertThat(root.resolve("same-id/x")).exists(); // closing keeps the files

    PinnedStore reopened = store(MIB, LockPolicy.DISABLED, PAGE);
    assertThat(reopened.root()).isEqualTo(root);
    assertThat(reopened.recovery())
        .extracting(RecoveryAction::name, RecoveryAction::reason)
        .containsExactly(org.assertj.core.groups.Tuple.tuple("same-id", "IncompleteFiles"));
  }

  @Test
  void reopeningAdoptsCompleteArtifactsAndRemovesEverythingElseOfTheStores() throws Exception {
    PinnedStore first = store(MIB, LockPolicy.REQUIRED, PAGE);
    byte[] w = pattern(21, 10_000);
    byte[] c = pattern(22, 300);
    StoredArtifact done =
        first.allocate(
            "done", List.of(new StoreFile("w.bin", 10_000), new StoreFile("cfg/c.json", 300)));
    done.write("w.bin", 0, ByteBuffer.wrap(w));
    done.write("cfg/c.json", 0, ByteBuffer.wrap(c));
    done.markComplete("w.bin");
    done.markComplete("cfg/c.json");
    StoredArtifact half =
        first.allocate("half", List.of(new StoreFile("a", 10), new StoreFile("b", 10)));
    half.markComplete("a");
    for (String id : List.of("tampered", "resized", "extra")) {
      StoredArtifact t = first.allocate(id, List.of(new StoreFile("t.bin", 100)));
      t.write("t.bin", 0, ByteBuffer.wrap(pattern(23, 100)));
      t.markComplete("t.bin");
    }
    first.close();

    // what a crash or a person could leave behind
    try (FileChannel ch =
        FileChannel.open(root.resolve("tampered/t.bin"), StandardOpenOption.WRITE)) {
      ch.write(ByteBuffer.wrap(new byte[] {42}), 50);
    }
    try (FileChannel ch =
        FileChannel.open(root.resolve("resized/t.bin"), StandardOpenOption.WRITE)) {
      ch.truncate(99);
    }
    Files.writeString(root.resolve("extra/unlisted.txt"), "x");
    Files.createDirectories(root.resolve("orphan/sub"));
    Files.writeString(root.resolve("orphan/sub/f"), "x");
    Files.writeString(root.resolve(".tensorcast/ghost.json"), "{}");
    Files.writeString(root.resolve(".tensorcast/.done.json.tmp"), "{");
    Files.writeString(root.resolve("README.txt"), "not the store's");
    Files.createDirectories(root.resolve("Not_An_Id"));

    PinnedStore second = store(MIB, LockPolicy.REQUIRED, PAGE);
    Map<String, String> decisions =
        second.recovery().stream()
            .collect(Collectors.toMap(RecoveryAction::name, r -> r.action() + " " + r.reason()));
    assertThat(decisions)
        .containsExactlyInAnyOrderEntriesOf(
            Map.of(
                "done", "ADOPTED Complete",
                "half", "REMOVED IncompleteFiles",
                "tampered", "REMOVED ChecksumMismatch",
                "resized", "REMOVED FilesChanged",
                "extra", "REMOVED FilesChanged",
                "orphan", "REMOVED NoStateFile",
                "ghost", "REMOVED NoArtifactDirectory",
                ".done.json.tmp", "REMOVED StrayStateFile",
                "README.txt", "IGNORED NotAnArtifact",
                "Not_An_Id", "IGNORED NotAnArtifact"));
    assertThat(ShmRoot.listTree(root))
        .containsExactly(
            ".tensorcast",
            ".tensorcast/done.json",
            ".tensorcast/store.lock",
            "Not_An_Id",
            "README.txt",
            "done",
            "done/cfg",
            "done/cfg/c.json",
            "done/w.bin");

    StoredArtifact adopted = second.get("done").orElseThrow();
    assertThat(adopted.isComplete()).isTrue();
    assertThat(adopted.completedDigest("w.bin")).contains(sha256(w));
    byte[] back = new byte[300];
    adopted.readOnly("cfg/c.json", 0, 300).get(back);
    assertThat(back).isEqualTo(c);
    assertThat(adopted.lockStatus().locked()).isTrue();
    assertThat(adopted.lockStatus().lockedBytes()).isEqualTo(10_300);
    assertThat(second.bytesInUse()).isEqualTo(3 * PAGE + PAGE);
    assertThat(second.artifacts()).containsOnlyKeys("done");
  }

  @Test
  void aFileCompletedWithItsSourcesDigestIsRecordedAndAdoptedByThatDigest() throws Exception {
    PinnedStore first = store(MIB, LockPolicy.DISABLED, PAGE);
    byte[] w = pattern(31, 10_000);
    byte[] t = pattern(32, 100);
    byte[] l = pattern(33, 100);
    String crc64 = "crc64nvme:" + hex(Algorithm.CRC64NVME, w);
    StoredArtifact a = first.allocate("crc", List.of(new StoreFile("w.bin", 10_000)));
    a.write("w.bin", 0, ByteBuffer.wrap(w));
    assertThatThrownBy(() -> a.markCompleteHashed("w.bin", "crc64nvme:12"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not a crc64nvme value (16 hex digits): '12' for file 'w.bin'");
    assertThatThrownBy(() -> a.markCompleteHashed("w.bin", "crc65:00"))
        .hasMessageContaining("unknown digest algorithm 'crc65'");
    assertThat(a.isComplete("w.bin")).isFalse();
    assertThat(
            a.markCompleteHashed(
                "w.bin", crc64.toUpperCase(Locale.ROOT).replace("CRC64NVME", "crc64nvme")))
        .isEqualTo(crc64);
    assertThat(a.completedDigest("w.bin")).contains(crc64);
    // marking it complete again keeps its record and still answers with its SHA-256
    assertThat(a.markComplete("w.bin")).isEqualTo(sha256(w));
    assertThat(a.completedDigest("w.bin")).contains(crc64);
    assertThat(Files.readString(root.resolve(".tensorcast/crc.json")))
        .contains("\"formatVersion\" : 2", "\"digest\" : \"" + crc64 + "\"")
        .doesNotContain("sha256");
    StoredArtifact b = first.allocate("crc-tampered", List.of(new StoreFile("t.bin", 100)));
    b.write("t.bin", 0, ByteBuffer.wrap(t));
    b.markCompleteHashed("t.bin", "crc32c:" + hex(Algorithm.CRC32C, t));
    StoredArtifact c = first.allocate("legacy", List.of(new StoreFile("l.bin", 100)));
    c.write("l.bin", 0, ByteBuffer.wrap(l));
    c.markComplete("l.bin");
    first.close();

    try (FileChannel ch =
        FileChannel.open(root.resolve("crc-tampered/t.bin"), StandardOpenOption.WRITE)) {
      ch.write(ByteBuffer.wrap(new byte[] {(byte) (t[50] ^ 1)}), 50);
    }
    // what a store of the state file's format 1 wrote
    Files.writeString(
        root.resolve(".tensorcast/legacy.json"),
        "{\"formatVersion\": 1, \"artifactId\": \"legacy\", \"files\": [{\"path\": \"l.bin\","
            + " \"size\": 100, \"sha256\": \""
            + sha256(l)
            + "\"}]}");

    PinnedStore second = store(MIB, LockPolicy.DISABLED, PAGE);
    Map<String, RecoveryAction> decisions =
        second.recovery().stream().collect(Collectors.toMap(RecoveryAction::name, r -> r));
    assertThat(decisions.get("crc").action()).isEqualTo(RecoveryAction.Action.ADOPTED);
    assertThat(decisions.get("legacy").action()).isEqualTo(RecoveryAction.Action.ADOPTED);
    assertThat(decisions.get("crc-tampered").action()).isEqualTo(RecoveryAction.Action.REMOVED);
    assertThat(decisions.get("crc-tampered").reason()).isEqualTo("ChecksumMismatch");
    assertThat(decisions.get("crc-tampered").message())
        .contains(
            "file 't.bin' has crc32c "
                + hex(Algorithm.CRC32C, tampered(t))
                + " but was completed with "
                + hex(Algorithm.CRC32C, t));
    assertThat(second.get("crc").orElseThrow().completedDigest("w.bin")).contains(crc64);
    assertThat(second.get("legacy").orElseThrow().completedDigest("l.bin")).contains(sha256(l));
  }

  private static byte[] tampered(byte[] t) {
    byte[] x = t.clone();
    x[50] ^= 1;
    return x;
  }

  private static String hex(Algorithm algorithm, byte[] bytes) {
    DigestHasher h = DigestHasher.of(algorithm, bytes.length);
    h.update(ByteBuffer.wrap(bytes));
    return HexFormat.of().formatHex(h.finish());
  }

  @Test
  void aCompleteArtifactThatNoLongerFitsAFixedBudgetIsRemoved() throws Exception {
    PinnedStore first = store(MIB, LockPolicy.DISABLED, PAGE);
    StoredArtifact a = first.allocate("m", List.of(new StoreFile("x", 3 * PAGE)));
    a.markComplete("x");
    first.close();

    PinnedStore second = store(2 * PAGE, LockPolicy.DISABLED, PAGE);
    assertThat(second.recovery())
        .singleElement()
        .satisfies(
            r -> {
              assertThat(r.reason()).isEqualTo("OverBudget");
              assertThat(r.message()).contains("12288 bytes do not fit the budget of 8192 bytes");
            });
    assertThat(root.resolve("m")).doesNotExist();
  }

  @Test
  void openMeasuresTheBudgetAfterAdoption() throws Exception {
    PinnedStore first = store(MIB, LockPolicy.DISABLED, PAGE);
    first.allocate("m", List.of(new StoreFile("x", PAGE))).markComplete("x");
    first.close();

    PinnedStore opened = PinnedStore.open(root, LockPolicy.DISABLED);
    stores.add(opened);
    MemoryBudget measured = opened.detectedBudget().orElseThrow();
    assertThat(opened.get("m")).isPresent();
    assertThat(opened.budgetBytes()).isEqualTo(PAGE + measured.bytes());
    assertThat(opened.bytesFree()).isEqualTo(measured.bytes());
  }
}
