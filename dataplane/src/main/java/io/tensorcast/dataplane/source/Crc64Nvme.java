package io.tensorcast.dataplane.source;

import java.nio.ByteBuffer;
import java.util.zip.Checksum;

/**
 * CRC-64/NVME, the checksum S3 computes by default for new objects ({@code
 * x-amz-checksum-crc64nvme}): reflected polynomial {@code 0x9A6C9329AC4BC9B5}, initial value and
 * final XOR all ones (the NVM Express base specification's CRC; check value of {@code "123456789"}
 * is {@code 0xAE8B14860A799888}). Table-driven, eight bytes per step ("slicing-by-8"). The AWS
 * SDK's own implementation needs the native CRT library, which the data plane does not ship.
 */
public final class Crc64Nvme implements Checksum {
  private static final long POLY = 0x9A6C9329AC4BC9B5L;
  private static final long[][] TABLES = tables();

  private long crc = -1L;

  private static long[][] tables() {
    long[][] t = new long[8][256];
    for (int i = 0; i < 256; i++) {
      long c = i;
      for (int k = 0; k < 8; k++) {
        c = (c & 1) != 0 ? (c >>> 1) ^ POLY : c >>> 1;
      }
      t[0][i] = c;
    }
    for (int i = 0; i < 256; i++) {
      for (int s = 1; s < 8; s++) {
        long prev = t[s - 1][i];
        t[s][i] = (prev >>> 8) ^ t[0][(int) (prev & 0xff)];
      }
    }
    return t;
  }

  @Override
  public void update(int b) {
    crc = (crc >>> 8) ^ TABLES[0][(int) ((crc ^ b) & 0xff)];
  }

  @Override
  public void update(byte[] b, int off, int len) {
    update(ByteBuffer.wrap(b, off, len));
  }

  @Override
  public void update(ByteBuffer buffer) {
    ByteBuffer b =
        buffer.order() == java.nio.ByteOrder.LITTLE_ENDIAN
            ? buffer
            : buffer.duplicate().order(java.nio.ByteOrder.LITTLE_ENDIAN);
    long c = crc;
    long[][] t = TABLES;
    while (b.remaining() >= 8) {
      long v = b.getLong() ^ c;
      c =
          t[7][(int) (v & 0xff)]
              ^ t[6][(int) ((v >>> 8) & 0xff)]
              ^ t[5][(int) ((v >>> 16) & 0xff)]
              ^ t[4][(int) ((v >>> 24) & 0xff)]
              ^ t[3][(int) ((v >>> 32) & 0xff)]
              ^ t[2][(int) ((v >>> 40) & 0xff)]
              ^ t[1][(int) ((v >>> 48) & 0xff)]
              ^ t[0][(int) (v >>> 56)];
    }
    while (b.hasRemaining()) {
      c = (c >>> 8) ^ t[0][(int) ((c ^ b.get()) & 0xff)];
    }
    if (b != buffer) {
      buffer.position(b.position());
    }
    crc = c;
  }

  /** The CRC of the bytes so far. */
  @Override
  public long getValue() {
    return ~crc;
  }

  @Override
  public void reset() {
    crc = -1L;
  }
}
