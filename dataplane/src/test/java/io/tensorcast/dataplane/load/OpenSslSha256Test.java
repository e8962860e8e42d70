package io.tensorcast.dataplane.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

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
      SourceDigests.Hasher direct = OpenSslSha256.create();
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
      SourceDigests.Hasher heap = OpenSslSha256.create();
      byte[] padded = new byte[bytes.length + 3];
      System.arraycopy(bytes, 0, padded, 3, bytes.length);
      ByteBuffer wrapped = ByteBuffer.wrap(padded, 3, bytes.length).slice();
      heap.update(wrapped);
      assertThat(wrapped.hasRemaining()).isFalse();
      assertThat(HexFormat.of().formatHex(heap.finish())).isEqualTo(expected);

      // A read-only view of a mapping, as SourceDigests.compute passes it.
      SourceDigests.Hasher mapped = OpenSslSha256.create();
      try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
        mapped.update(ch.map(FileChannel.MapMode.READ_ONLY, 0, bytes.length).asReadOnlyBuffer());
      }
      assertThat(HexFormat.of().formatHex(mapped.finish())).isEqualTo(expected);
      checked++;
    }
    assertThat(checked).isPositive();
  }

  @Test
  void emptyInputAndFinishedHashers() {
    assumeTrue(OpenSslSha256.available());
    SourceDigests.Hasher h = OpenSslSha256.create();
    h.update(ByteBuffer.allocateDirect(0));
    assertThat(HexFormat.of().formatHex(h.finish()))
        .isEqualTo("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assertThatThrownBy(() -> h.update(ByteBuffer.allocate(1)))
        .isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(h::finish).isInstanceOf(IllegalStateException.class);
  }
}
