package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import java.util.zip.Checksum;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledOnOs;
import org.junit.jupiter.api.condition.OS;

class Crc64NvmeTest {
  @Test
  void theCheckValueOfTheNvmeCrcIsMatched() {
    Crc64Nvme c = new Crc64Nvme();
    c.update("123456789".getBytes(StandardCharsets.US_ASCII));
    // CRC-64/NVME's catalogued check value.
    assertThat(c.getValue()).isEqualTo(0xAE8B14860A799888L);
    c.reset();
    assertThat(c.getValue()).as("the CRC of nothing").isZero();
  }

  @Test
  void slicingByEightEqualsByteByByteForEveryLengthAndAlignment() {
    byte[] data = new byte[4099];
    new Random(12).nextBytes(data);
    for (int off = 0; off < 9; off++) {
      for (int len : new int[] {0, 1, 7, 8, 9, 63, 64, 65, 4000}) {
        Crc64Nvme fast = new Crc64Nvme();
        fast.update(ByteBuffer.wrap(data, off, len));
        Crc64Nvme slow = new Crc64Nvme();
        for (int i = off; i < off + len; i++) {
          slow.update(data[i]);
        }
        assertThat(fast.getValue()).as("offset %d length %d", off, len).isEqualTo(slow.getValue());
      }
    }
    // Direct buffers (mappings) and split updates give the same value.
    ByteBuffer direct = ByteBuffer.allocateDirect(data.length).put(data).flip();
    Crc64Nvme d = new Crc64Nvme();
    d.update(direct.slice(0, 1000));
    d.update(direct.slice(1000, data.length - 1000));
    Crc64Nvme h = new Crc64Nvme();
    h.update(data, 0, data.length);
    assertThat(d.getValue()).isEqualTo(h.getValue());
  }

  @Test
  void aDirectBufferLongerThanOneChunkGivesTheValueOfItsBytesInOneArray() {
    byte[] data = new byte[3 * Crc64Nvme.CHUNK + 17];
    new Random(5).nextBytes(data);
    ByteBuffer direct = ByteBuffer.allocateDirect(data.length).put(data).flip();
    Crc64Nvme d = new Crc64Nvme();
    d.update(direct.asReadOnlyBuffer());
    Crc64Nvme slow = new Crc64Nvme();
    for (byte b : data) {
      slow.update(b);
    }
    assertThat(d.getValue()).isEqualTo(slow.getValue());
    assertThat(direct.position()).as("the caller's buffer is not moved").isZero();
  }

  @Test
  @EnabledOnOs(
      value = OS.LINUX,
      architectures = {"amd64", "x86_64", "aarch64"})
  void theNativeCrcLoadsOnTheImagesPlatformsAndIsWhatCreateReturns() {
    assertThat(Crc64Nvme.nativeUnusable()).isNull();
    assertThat(Crc64Nvme.nativeInUse()).isTrue();
    Checksum c = Crc64Nvme.create();
    assertThat(c).isInstanceOf(CrtCrc64Nvme.class);
    c.update("123456789".getBytes(StandardCharsets.US_ASCII));
    assertThat(c.getValue()).isEqualTo(0xAE8B14860A799888L);
    c.reset();
    assertThat(c.getValue()).as("the CRC of nothing").isZero();
  }

  @Test
  @EnabledOnOs(
      value = OS.LINUX,
      architectures = {"amd64", "x86_64", "aarch64"})
  void theNativeCrcEqualsTheTableOnRandomDataForEveryLengthAlignmentAndBufferKind() {
    Random random = new Random(17);
    byte[] data = new byte[2 * CrtCrc64Nvme.CHUNK + 4099];
    random.nextBytes(data);
    for (int off = 0; off < 17; off += 3) {
      for (int len :
          new int[] {0, 1, 7, 15, 16, 17, 255, 256, 4096, 65_537, 2 * CrtCrc64Nvme.CHUNK}) {
        Crc64Nvme table = new Crc64Nvme();
        table.update(data, off, len);
        CrtCrc64Nvme heap = new CrtCrc64Nvme();
        heap.update(ByteBuffer.wrap(data, off, len));
        ByteBuffer direct = ByteBuffer.allocateDirect(len).put(data, off, len).flip();
        CrtCrc64Nvme fromDirect = new CrtCrc64Nvme();
        fromDirect.update(direct);
        assertThat(heap.getValue())
            .as("heap, offset %d length %d", off, len)
            .isEqualTo(table.getValue());
        assertThat(fromDirect.getValue())
            .as("direct, offset %d length %d", off, len)
            .isEqualTo(table.getValue());
        assertThat(direct.hasRemaining()).as("the buffer is consumed").isFalse();
      }
    }
    // A direct buffer longer than a chunk, fed in uneven pieces, as the digest threads do.
    ByteBuffer all = ByteBuffer.allocateDirect(data.length).put(data).flip();
    CrtCrc64Nvme pieces = new CrtCrc64Nvme();
    int at = 0;
    while (at < data.length) {
      int n = Math.min(data.length - at, 1 + random.nextInt(CrtCrc64Nvme.CHUNK + 1000));
      pieces.update(all.slice(at, n));
      at += n;
    }
    Crc64Nvme table = new Crc64Nvme();
    table.update(data, 0, data.length);
    assertThat(pieces.getValue()).isEqualTo(table.getValue());
  }

  @Test
  void theCLibraryIsNamedToTheCommonRuntimeFromTheMappedLibraries(
      @org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp) throws Exception {
    java.nio.file.Path glibc = tmp.resolve("glibc");
    java.nio.file.Files.writeString(
        glibc,
        "7f1c2e200000-7f1c2e228000 r--p 00000000 00:17 1234 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
            + "7f1c2e400000-7f1c2e401000 r--p 00000000 00:00 0 \n"
            + "7ffd5a1e6000-7ffd5a207000 rw-p 00000000 00:00 0 [stack]\n");
    java.nio.file.Path musl = tmp.resolve("musl");
    java.nio.file.Files.writeString(
        musl,
        "7f0e6d9a2000-7f0e6d9b6000 r--p 00000000 00:30 99 /lib/ld-musl-x86_64.so.1\n"
            + "7f0e6d000000-7f0e6d010000 r--p 00000000 00:30 98 /usr/lib/libgcompat.so.0\n");
    java.nio.file.Path neither = tmp.resolve("neither");
    java.nio.file.Files.writeString(neither, "7ffd5a1e6000-7ffd5a207000 rw-p 0 00:00 0 [stack]\n");

    assertThat(Crc64Nvme.mappedCRuntime(glibc)).isEqualTo("glibc");
    assertThat(Crc64Nvme.mappedCRuntime(musl)).isEqualTo("musl");
    assertThat(Crc64Nvme.mappedCRuntime(neither)).isNull();
    assertThat(Crc64Nvme.mappedCRuntime(tmp.resolve("missing"))).isNull();
  }

  @Test
  @EnabledOnOs(OS.LINUX)
  void creatingACrcNamesThisJvmsCLibraryToTheCommonRuntime() {
    String mapped = Crc64Nvme.mappedCRuntime(java.nio.file.Path.of("/proc/self/maps"));
    assertThat(mapped).as("this JVM maps glibc or musl").isIn("glibc", "musl");
    Crc64Nvme.create();
    // The Common Runtime only reads the property: without Crc64Nvme setting it, it stays unset.
    assertThat(System.getProperty(Crc64Nvme.LIBC_PROPERTY)).isEqualTo(mapped);
  }
}
