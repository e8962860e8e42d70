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
}
