package io.tensorcast.dataplane.write;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;

/**
 * Saves to a directory ({@code file:///dir}): each file written to a hidden temporary name in the
 * directory, flushed to disk, then renamed to its final name (atomic on one file system); the
 * manifest last, after an earlier one is removed; the directory itself flushed after each rename.
 * Resume: a file already there with the same size and SHA-256 is kept.
 */
final class FileDestination implements VersionSaver.Destination {
  private static final String TMP = ".tensorcast-tmp";

  private final Path dir;

  FileDestination(Path dir) {
    this.dir = dir;
  }

  @Override
  public ObjectNode save(
      SealRecord record,
      StoredArtifact stored,
      List<SealRecord.FileEntry> data,
      SealRecord.FileEntry commitFile)
      throws WriteException {
    ObjectNode result = WriteJson.JSON.createObjectNode();
    ArrayNode files = result.putArray("files");
    long uploaded = 0;
    try {
      Files.createDirectories(dir);
      if (commitFile != null) {
        Files.deleteIfExists(dir.resolve(commitFile.path()));
      }
      try (Stream<Path> left = Files.list(dir)) {
        for (Path p : (Iterable<Path>) left::iterator) {
          if (p.getFileName().toString().endsWith(TMP)) {
            Files.deleteIfExists(p);
          }
        }
      }
      List<SealRecord.FileEntry> order = new java.util.ArrayList<>(data);
      if (commitFile != null) {
        order.add(commitFile);
      }
      for (SealRecord.FileEntry f : order) {
        ObjectNode r = files.addObject().put("path", f.path()).put("size", f.size());
        r.put("sha256", f.sha256());
        Path target = dir.resolve(f.path());
        if (Files.isRegularFile(target)
            && Files.size(target) == f.size()
            && f.sha256().equals(sha256(target))) {
          r.put("resumed", true);
          continue;
        }
        Path tmp = dir.resolve("." + f.path() + TMP);
        try (FileChannel ch =
            FileChannel.open(
                tmp,
                StandardOpenOption.CREATE,
                StandardOpenOption.TRUNCATE_EXISTING,
                StandardOpenOption.WRITE)) {
          for (long off = 0; off < f.size(); off += 1 << 26) {
            ByteBuffer b = stored.readOnly(f.path(), off, (int) Math.min(1 << 26, f.size() - off));
            while (b.hasRemaining()) {
              ch.write(b);
            }
          }
          ch.force(true);
        } catch (IOException e) {
          Files.deleteIfExists(tmp);
          throw e;
        }
        Files.move(
            tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        syncDirectory();
        uploaded += f.size();
      }
    } catch (IOException e) {
      throw new WriteException(
          500,
          "DestinationUnavailable",
          "saving to "
              + dir
              + " failed: "
              + e
              + "; nothing of this save is readable there (no manifest written)",
          e);
    }
    result.put("bytesUploaded", uploaded);
    return result;
  }

  private void syncDirectory() {
    try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
      d.force(true);
    } catch (IOException ignored) {
      // not every file system lets a directory be opened for fsync
    }
  }

  private static String sha256(Path file) throws IOException {
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      ByteBuffer b = ByteBuffer.allocateDirect(1 << 20);
      while (ch.read(b) >= 0) {
        b.flip();
        md.update(b);
        b.clear();
      }
      return HexFormat.of().formatHex(md.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public void close() {}
}
