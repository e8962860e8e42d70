package io.tensorcast.dataplane.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.tensorcast.dataplane.source.PublishedDigest.Algorithm;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Digests that follow the contiguous prefix of ranges stored in any order, over a real store. */
@Timeout(60)
class PrefixDigesterTest {
  private Path dir;
  private PinnedStore store;

  @BeforeEach
  void setUp() throws Exception {
    dir = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-prefix-digester-");
    store = new PinnedStore(dir.resolve("store"), 256L << 20, LockPolicy.BEST_EFFORT);
  }

  @AfterEach
  void tearDown() throws Exception {
    store.close();
    try (Stream<Path> s = Files.walk(dir)) {
      s.sorted(Collections.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  private static byte[] pattern(long seed, int n) {
    byte[] b = new byte[n];
    new Random(seed).nextBytes(b);
    return b;
  }

  private static SourceFile file(String path, long size) {
    return new SourceFile(path, size, "\"etag\"", Optional.empty());
  }

  @Test
  void rangesStoredOutOfOrderGiveTheDigestsOfTheWholeFile() throws Exception {
    // 20 MiB + 5 bytes: more than two hashing windows, a short last range
    int size = (20 << 20) + 5;
    int range = 3 << 20;
    byte[] bytes = pattern(7, size);
    byte[] small = pattern(8, 100);
    SourceFile big = file("model.safetensors", size);
    SourceFile tiny = file("config.json", small.length);
    SourceFile empty = file("empty.bin", 0);
    StoredArtifact a =
        store.allocate(
            "m",
            List.of(
                new StoreFile(big.path(), size),
                new StoreFile(tiny.path(), small.length),
                new StoreFile(empty.path(), 0)));
    Map<String, PrefixDigester.FileDigests> done = new ConcurrentHashMap<>();
    List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
    try (PrefixDigester d =
        new PrefixDigester(a, 2, f -> done.put(f.file().path(), f), (f, e) -> errors.add(e))) {
      d.track(big, EnumSet.of(Algorithm.MD5, Algorithm.CRC32C));
      d.track(tiny, Set.of());
      d.track(empty, Set.of(Algorithm.SHA1));

      List<Integer> offsets = new ArrayList<>();
      for (int off = 0; off < size; off += range) {
        offsets.add(off);
      }
      Collections.shuffle(offsets, new Random(3));
      // the first range last: nothing can be hashed before it
      offsets.remove(Integer.valueOf(0));
      offsets.add(0);
      for (int off : offsets) {
        int len = Math.min(range, size - off);
        a.writable(big.path(), off, len).put(bytes, off, len);
        assertThat(done).doesNotContainKey(big.path());
        d.stored(big, off, len);
        if (off != 0) {
          assertThat(d.contiguous(big)).isZero();
        }
      }
      // a range stored again (a retried read) changes nothing
      d.stored(big, range, range);
      a.write(tiny.path(), 0, ByteBuffer.wrap(small));
      d.stored(tiny, 0, small.length);

      await().atMost(Duration.ofSeconds(30)).until(() -> done.size() == 3);
      assertThat(errors).isEmpty();
      assertThat(d.contiguous(big)).isEqualTo(size);
    }

    Map<Algorithm, byte[]> bigDigests = done.get(big.path()).digests();
    // a file whose source publishes digests gets those and no SHA-256; the store records the
    // first in Algorithm's order
    assertThat(bigDigests.keySet()).containsExactlyInAnyOrder(Algorithm.MD5, Algorithm.CRC32C);
    assertThat(bigDigests.get(Algorithm.MD5))
        .isEqualTo(MessageDigest.getInstance("MD5").digest(bytes));
    CRC32C crc = new CRC32C();
    crc.update(bytes);
    assertThat(bigDigests.get(Algorithm.CRC32C))
        .isEqualTo(ByteBuffer.allocate(4).putInt((int) crc.getValue()).array());
    assertThat(done.get(big.path()).contentDigest())
        .isEqualTo(
            "md5:" + HexFormat.of().formatHex(MessageDigest.getInstance("MD5").digest(bytes)));
    // a file whose source publishes none gets a SHA-256, recorded as bare hex
    assertThat(done.get(tiny.path()).digests().keySet()).containsExactly(Algorithm.SHA256);
    assertThat(done.get(tiny.path()).digests().get(Algorithm.SHA256))
        .isEqualTo(MessageDigest.getInstance("SHA-256").digest(small));
    assertThat(done.get(tiny.path()).contentDigest()).isEqualTo(a.sha256(tiny.path()));
    assertThat(done.get(empty.path()).digests().keySet()).containsExactly(Algorithm.SHA1);
    assertThat(done.get(empty.path()).digests().get(Algorithm.SHA1))
        .isEqualTo(MessageDigest.getInstance("SHA-1").digest(new byte[0]));
  }

  @Test
  void aFileWithAGapIsNeverReportedDigested() throws Exception {
    int size = 4 << 20;
    byte[] bytes = pattern(9, size);
    SourceFile f = file("model.safetensors", size);
    StoredArtifact a = store.allocate("gap", List.of(new StoreFile(f.path(), size)));
    Map<String, PrefixDigester.FileDigests> done = new ConcurrentHashMap<>();
    try (PrefixDigester d =
        new PrefixDigester(a, 1, x -> done.put(x.file().path(), x), (x, e) -> {})) {
      d.track(f, Set.of());
      a.write(f.path(), 0, ByteBuffer.wrap(bytes, 0, 1 << 20));
      d.stored(f, 0, 1 << 20);
      a.write(f.path(), 2 << 20, ByteBuffer.wrap(bytes, 2 << 20, 2 << 20));
      d.stored(f, 2 << 20, 2 << 20);
      await().atMost(Duration.ofSeconds(10)).until(() -> d.contiguous(f) == 1 << 20);
      assertThat(done).isEmpty();
      a.write(f.path(), 1 << 20, ByteBuffer.wrap(bytes, 1 << 20, 1 << 20));
      d.stored(f, 1 << 20, 1 << 20);
      await().atMost(Duration.ofSeconds(10)).until(() -> done.size() == 1);
    }
    assertThat(done.get(f.path()).digests().get(Algorithm.SHA256))
        .isEqualTo(MessageDigest.getInstance("SHA-256").digest(bytes));
  }
}
