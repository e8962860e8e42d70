package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import org.junit.jupiter.api.Test;

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
}
