package io.tensorcast.dataplane.format.torch;

import static io.tensorcast.dataplane.format.torch.TorchFormatException.INVALID_ARCHIVE;
import static io.tensorcast.dataplane.format.torch.TorchFormatException.LIMIT_EXCEEDED;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SeekableByteChannel;

/**
 * Counts the records of a zip archive's central directory (APPNOTE.TXT §4.3.12) before the zip
 * library reads them into memory, walking them the way the library does: from the directory's
 * offset in the end of central directory record (the zip64 one when present), one record after the
 * other while the record signature matches. Keeps nothing but the count, so a directory of millions
 * of tiny records is refused at the bound, not after it was read.
 *
 * <p>Only the count is decided here; an archive this walk cannot make sense of (no end record, an
 * offset outside the file) is left to the zip library, which refuses it with its own message.
 */
final class ZipDirectory {
  private static final int EOCD_SIG = 0x06054b50;
  private static final int EOCD_MIN = 22;
  private static final int ZIP64_LOCATOR_SIG = 0x07064b50;
  private static final int ZIP64_EOCD_SIG = 0x06064b50;
  private static final int CFH_SIG = 0x02014b50;
  private static final int CFH_LEN = 46;

  /** Longest entry name accepted, in bytes: torch's are a prefix, "data/" and a storage key. */
  static final int MAX_NAME_BYTES = 4096;

  private ZipDirectory() {}

  /**
   * @throws TorchFormatException {@code limit-exceeded} when the directory holds more than {@link
   *     TorchLimits#maxZipEntries()} records, {@code invalid-archive} for a record whose name is
   *     longer than {@value #MAX_NAME_BYTES} bytes
   */
  static void checkRecords(String fileName, SeekableByteChannel ch, TorchLimits limits)
      throws TorchFormatException, IOException {
    long size = ch.size();
    if (size < EOCD_MIN) {
      return;
    }
    int tailLength = (int) Math.min(size, EOCD_MIN + 0xffff);
    ByteBuffer tail = read(ch, size - tailLength, tailLength);
    int eocd = -1;
    for (int i = tailLength - EOCD_MIN; i >= 0; i--) {
      if (tail.getInt(i) == EOCD_SIG) {
        eocd = i;
        break;
      }
    }
    if (eocd < 0) {
      return;
    }
    long eocdAt = size - tailLength + eocd;
    long directory = tail.getInt(eocd + 16) & 0xffffffffL;
    if (eocdAt >= 20) {
      ByteBuffer locator = read(ch, eocdAt - 20, 20);
      if (locator.getInt(0) == ZIP64_LOCATOR_SIG) {
        long zip64At = locator.getLong(8);
        if (zip64At < 0 || zip64At > size - 56) {
          return;
        }
        ByteBuffer zip64 = read(ch, zip64At, 56);
        if (zip64.getInt(0) != ZIP64_EOCD_SIG) {
          return;
        }
        directory = zip64.getLong(48);
      }
    }
    long at = directory;
    long records = 0;
    while (at >= 0 && at <= size - 4 && read(ch, at, 4).getInt(0) == CFH_SIG) {
      if (at > size - CFH_LEN) {
        return;
      }
      if (++records > limits.maxZipEntries()) {
        throw new TorchFormatException(
            fileName,
            LIMIT_EXCEEDED,
            "zip central directory holds more than "
                + limits.maxZipEntries()
                + " entries (--max-zip-entries); a torch checkpoint has one per storage and a few"
                + " more");
      }
      ByteBuffer h = read(ch, at, CFH_LEN);
      int nameLength = h.getShort(28) & 0xffff;
      int extraLength = h.getShort(30) & 0xffff;
      int commentLength = h.getShort(32) & 0xffff;
      if (nameLength > MAX_NAME_BYTES) {
        throw new TorchFormatException(
            fileName,
            INVALID_ARCHIVE,
            "zip central directory record "
                + records
                + " has a name of "
                + nameLength
                + " bytes, longer than "
                + MAX_NAME_BYTES);
      }
      at += CFH_LEN + nameLength + extraLength + commentLength;
    }
  }

  private static ByteBuffer read(SeekableByteChannel ch, long at, int length) throws IOException {
    ByteBuffer b = ByteBuffer.allocate(length).order(ByteOrder.LITTLE_ENDIAN);
    ch.position(at);
    while (b.hasRemaining()) {
      if (ch.read(b) < 0) {
        throw new EOFException("zip ended at " + ch.position());
      }
    }
    return b.flip();
  }
}
