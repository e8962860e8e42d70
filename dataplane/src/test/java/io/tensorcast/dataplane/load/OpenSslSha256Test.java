package io.tensorcast.dataplane.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tensorcast.dataplane.source.DigestHasher;
import io.tensorcast.dataplane.source.PublishedDigest.Algorithm;
import io.tensorcast.testing.Corpus;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** libcrypto's SHA-256 against the JDK's over real files, fed as the digests feed it. */
class OpenSslSha256Test {
  @Test
  void libcryptoLoadsOnThisSystem() {
    // The build machine and the image (eclipse-temurin, Ubuntu: libssl3) have libcrypto.so.3;
    // when it stops loading, the loads fall back to MessageDigest silently, so say it here.
    assertThat(OpenSslSha256.unusable()).isNull();
    assertThat(OpenSslSha256.available()).isTrue();
    assertThat(SourceDigests.hasher(Algorithm.SHA256, 0)).isInstanceOf(OpenSslSha256.class);
  }

  @Test
  void thePieceChecksHashWithLibcryptoAndAgreeWithTheJdkOnDirectAndHeapPieces() throws Exception {
    // Sha256.of is what the peer swarms verify every piece with (PeerSwarm, OriginSwarm).
    assertThat(Sha256.isNative()).isTrue();
    Path file = Corpus.safetensorsFiles().get(0);
    byte[] bytes = Files.readAllBytes(file);
    byte[] expected = MessageDigest.getInstance("SHA-256").digest(bytes);
    ByteBuffer direct = ByteBuffer.allocateDirect(bytes.length).put(bytes).flip();
    assertThat(Sha256.of(direct)).isEqualTo(expected);
    assertThat(direct.hasRemaining()).as("consumed").isFalse();
    assertThat(Sha256.of(ByteBuffer.wrap(bytes))).isEqualTo(expected);
  }

  @Test
  void digestsOfCorpusFilesMatchTheJdkThroughDirectHeapAndMappedBuffers() throws Exception {
    assumeTrue(OpenSslSha256.available());
    List<Path> files = Corpus.safetensorsFiles();
    assertThat(files).isNotEmpty();
    Random random = new Random(17);
    int checked = 0;
    for (Path file : files) {
      if (Files.size(file) > (64 << 20)) {
        continue;
      }
      byte[] bytes = Files.readAllBytes(file);
      String expected =
          HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));

      // Direct buffers of random sizes, each at a random position of a larger buffer.
      DigestHasher direct = OpenSslSha256.create();
      int at = 0;
      while (at < bytes.length) {
        int n = Math.min(bytes.length - at, 1 + random.nextInt(3 << 20));
        int pad = random.nextInt(64);
        ByteBuffer b = ByteBuffer.allocateDirect(pad + n + 7);
        b.position(pad).put(bytes, at, n).flip().position(pad);
        direct.update(b);
        assertThat(b.hasRemaining()).isFalse();
        at += n;
      }
      assertThat(HexFormat.of().formatHex(direct.finish())).as(file.toString()).isEqualTo(expected);

      // Heap buffers larger than the native chunk, with an array offset.
      DigestHasher heap = OpenSslSha256.create();
      byte[] padded = new byte[bytes.length + 3];
      System.arraycopy(bytes, 0, padded, 3, bytes.length);
      ByteBuffer wrapped = ByteBuffer.wrap(padded, 3, bytes.length).slice();
      heap.update(wrapped);
      assertThat(wrapped.hasRemaining()).isFalse();
      assertThat(HexFormat.of().formatHex(heap.finish())).isEqualTo(expected);

      // A read-only view of a mapping, as SourceDigests.compute passes it.
      DigestHasher mapped = OpenSslSha256.create();
      try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
        mapped.update(ch.map(FileChannel.MapMode.READ_ONLY, 0, bytes.length).asReadOnlyBuffer());
      }
      assertThat(HexFormat.of().formatHex(mapped.finish())).isEqualTo(expected);
      checked++;
    }
    assertThat(checked).isPositive();
  }

  @Test
  void slicedReadOnlyAndOffsetBuffersHashExactlyTheirRemainingBytes() throws Exception {
    // Each buffer's bytes outside [position, limit) are a marker that must not be hashed: the
    // native side gets the slice's own address plus the position, never the backing buffer's.
    assumeTrue(OpenSslSha256.available());
    Path file =
        Corpus.safetensorsFiles().stream()
            .filter(p -> size(p) >= (2 << 20))
            .min(java.util.Comparator.comparingLong(OpenSslSha256Test::size))
            .orElseThrow();
    byte[] bytes = Files.readAllBytes(file);
    MessageDigest jdk = MessageDigest.getInstance("SHA-256");
    DigestHasher h = OpenSslSha256.create();
    Random random = new Random(23);
    int at = 0;
    int shape = 0;
    while (at < bytes.length) {
      int n = Math.min(bytes.length - at, random.nextInt(3 * OpenSslSha256.CHUNK / 2));
      int before = 1 + random.nextInt(100);
      int after = 1 + random.nextInt(100);
      boolean direct = (shape & 1) == 0;
      ByteBuffer whole =
          direct
              ? ByteBuffer.allocateDirect(before + n + after)
              : ByteBuffer.allocate(before + n + after);
      while (whole.hasRemaining()) {
        whole.put((byte) 0x5a);
      }
      whole.put(before, bytes, at, n);
      ByteBuffer b =
          switch ((shape >> 1) % 3) {
            case 0 -> whole.position(before).limit(before + n); // position and limit inside
            case 1 -> whole.slice(before - 1, n + 2).position(1).limit(n + 1); // a slice's slice
            default -> whole.asReadOnlyBuffer().position(before).limit(before + n).slice();
          };
      int limit = b.limit();
      h.update(b);
      jdk.update(bytes, at, n);
      assertThat(b.position()).as("shape %d consumed its bytes", shape).isEqualTo(limit);
      assertThat(b.limit()).isEqualTo(limit);
      at += n;
      shape++;
    }
    assertThat(shape).isGreaterThanOrEqualTo(6);
    assertThat(HexFormat.of().formatHex(h.finish()))
        .isEqualTo(HexFormat.of().formatHex(jdk.digest()));
  }

  @Test
  void hashersInParallelThreadsAndAbandonedOnesGiveTheJdksDigest() throws Exception {
    // Hashers are per file and per lane, created and finished on many threads; the ones a failed
    // load abandons are freed by the Cleaner while others still hash.
    assumeTrue(OpenSslSha256.available());
    byte[] bytes = new byte[3 << 20];
    new Random(5).nextBytes(bytes);
    String expected = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
    List<java.util.concurrent.Future<String>> results = new java.util.ArrayList<>();
    java.util.concurrent.ExecutorService pool =
        java.util.concurrent.Executors.newFixedThreadPool(8);
    try {
      for (int t = 0; t < 16; t++) {
        results.add(
            pool.submit(
                () -> {
                  for (int i = 0; i < 200; i++) {
                    OpenSslSha256.create().update(ByteBuffer.wrap(bytes, 0, 1000)); // abandoned
                  }
                  DigestHasher h = OpenSslSha256.create();
                  ByteBuffer direct = ByteBuffer.allocateDirect(bytes.length).put(bytes).flip();
                  while (direct.hasRemaining()) {
                    h.update(direct.slice(direct.position(), Math.min(65_537, direct.remaining())));
                    direct.position(Math.min(direct.limit(), direct.position() + 65_537));
                    if (direct.position() % (1 << 20) < 65_537) {
                      System.gc(); // the Cleaner frees the abandoned contexts meanwhile
                    }
                  }
                  return HexFormat.of().formatHex(h.finish());
                }));
      }
      for (var r : results) {
        assertThat(r.get()).isEqualTo(expected);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  private static long size(Path p) {
    try {
      return Files.size(p);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  @Test
  void emptyInputAndFinishedHashers() {
    assumeTrue(OpenSslSha256.available());
    DigestHasher h = OpenSslSha256.create();
    h.update(ByteBuffer.allocateDirect(0));
    assertThat(HexFormat.of().formatHex(h.finish()))
        .isEqualTo("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assertThatThrownBy(() -> h.update(ByteBuffer.allocate(1)))
        .isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(h::finish).isInstanceOf(IllegalStateException.class);
  }
}
