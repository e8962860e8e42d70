package io.tensorcast.dataplane.source;

import java.nio.ByteBuffer;
import java.util.zip.Checksum;
import software.amazon.awssdk.crt.checksums.CRC64NVME;

/**
 * CRC-64/NVME by the AWS Common Runtime's native code (carry-less multiply: PCLMULQDQ/VPCLMULQDQ on
 * x86_64, PMULL on aarch64), same values as {@link Crc64Nvme}. The native call takes heap arrays
 * only, so a direct buffer (a mapping of the store) is copied through a heap chunk of {@link
 * #CHUNK} bytes. Obtain one through {@link Crc64Nvme#create()}, which checks that the library loads
 * and computes the check value first. Not thread-safe.
 */
final class CrtCrc64Nvme implements Checksum {
  /** Bytes of a direct buffer copied to the heap per native call. */
  static final int CHUNK = 256 * 1024;

  private final CRC64NVME crc = new CRC64NVME();
  private byte[] chunk;

  @Override
  public void update(int b) {
    crc.update(b);
  }

  @Override
  public void update(byte[] b, int off, int len) {
    java.util.Objects.checkFromIndexSize(off, len, b.length);
    crc.update(b, off, len);
  }

  @Override
  public void update(ByteBuffer buffer) {
    if (buffer.hasArray()) {
      int n = buffer.remaining();
      crc.update(buffer.array(), buffer.arrayOffset() + buffer.position(), n);
      buffer.position(buffer.limit());
      return;
    }
    if (chunk == null) {
      chunk = new byte[CHUNK];
    }
    while (buffer.hasRemaining()) {
      int k = Math.min(CHUNK, buffer.remaining());
      buffer.get(chunk, 0, k);
      crc.update(chunk, 0, k);
    }
  }

  @Override
  public long getValue() {
    return crc.getValue();
  }

  @Override
  public void reset() {
    crc.reset();
  }
}
