package io.tensorcast.dataplane.write;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.dataplane.tensor.ShardManifest;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * Saves a complete version from the page-locked store to {@code s3://}, {@code oss://}, {@code
 * hf://} or {@code file://}, in the layout of the unified artifact IO RFC: one {@code
 * model.safetensors}, or {@code manifest.json} + {@code rank_NNNNN.safetensors}, the bytes exactly
 * as sealed.
 *
 * <p>Rules every destination keeps:
 *
 * <ul>
 *   <li>Atomic finish: each file appears under its final name whole or not at all (a single PUT or
 *       a completed multipart upload; a renamed temporary file; a Hub commit), and the manifest
 *       goes last: before the first byte an earlier save's manifest at the destination is removed,
 *       so a reader never takes old and new rank files for one artifact, and the new manifest
 *       appears only once every rank file is there. The Hub commits all files in one commit.
 *   <li>Checksums: every request body carries its MD5 ({@code Content-MD5}, checked by the store;
 *       the Hub: the LFS object id is its SHA-256), and every file's SHA-256 is recorded (object
 *       metadata {@code tensorcast-sha256}, and in the result).
 *   <li>A failure leaves no readable artifact (no manifest; an unfinished multipart upload is
 *       aborted) and is reported with the store's reason; a retry skips files already there with
 *       the same SHA-256 (resume) and restarts the others cleanly.
 *   <li>Credentials come from the data plane's environment only and are checked before anything is
 *       sent; a destination that needs credentials the data plane lacks is refused ({@code
 *       NoCredentials}).
 * </ul>
 */
public final class VersionSaver implements AutoCloseable {

  /** One kind of destination. */
  interface Destination extends AutoCloseable {
    /**
     * Saves the files: the data files, then {@code commitFile} (null when there is none: a plain
     * version's single file is its own commit).
     *
     * @return per-file results and totals
     */
    ObjectNode save(
        SealRecord record,
        StoredArtifact stored,
        List<SealRecord.FileEntry> data,
        SealRecord.FileEntry commitFile)
        throws WriteException;

    @Override
    void close();
  }

  private final SaveTarget target;
  private final Destination destination;

  private VersionSaver(SaveTarget target, Destination destination) {
    this.target = target;
    this.destination = destination;
  }

  /**
   * Checks the target and the credentials it needs (nothing is sent yet).
   *
   * @param env the data plane's environment
   * @throws WriteException 400 {@code InvalidSaveTarget}, {@code NoCredentials}
   */
  public static VersionSaver prepare(SaveTarget target, Function<String, String> env)
      throws WriteException {
    Destination d =
        switch (target.parsed().scheme()) {
          case FILE -> new FileDestination(target.parsed().localPath());
          case S3, OSS -> S3Destination.open(target, env);
          case HF -> HubDestination.open(target, env);
        };
    return new VersionSaver(target, d);
  }

  /**
   * Saves {@code stored} (every file of {@code record}).
   *
   * @return {@code {"uri", "files": [{"path", "size", "sha256", "uploaded" | "resumed", ...}],
   *     "bytesUploaded", "seconds"}}
   * @throws WriteException with the destination's reason ({@code AccessDenied}, {@code
   *     BucketNotFound}, {@code DestinationUnavailable}, {@code DigestMismatch}, ...); nothing
   *     readable was left at the destination
   */
  public ObjectNode save(SealRecord record, StoredArtifact stored) throws WriteException {
    long t0 = System.nanoTime();
    List<SealRecord.FileEntry> data = new ArrayList<>();
    SealRecord.FileEntry commit = null;
    for (SealRecord.FileEntry f : record.files()) {
      if (SealRecord.SHARDS.equals(record.layout()) && f.path().equals(ShardManifest.FILE_NAME)) {
        commit = f;
      } else {
        data.add(f);
      }
    }
    ObjectNode result = destination.save(record, stored, data, commit);
    result.put("uri", target.uri());
    result.put("seconds", (System.nanoTime() - t0) / 1e9);
    return result;
  }

  @Override
  public void close() {
    destination.close();
  }

  /** Reads {@code [offset, offset + length)} of a stored file as a stream over its mapping. */
  static InputStream stream(StoredArtifact stored, String path, long offset, long length) {
    return new InputStream() {
      private long at = offset;
      private final long end = offset + length;
      private ByteBuffer window;

      private boolean fill() {
        if (window != null && window.hasRemaining()) {
          return true;
        }
        if (at >= end) {
          return false;
        }
        int n = (int) Math.min(1 << 20, end - at);
        window = stored.readOnly(path, at, n);
        at += n;
        return true;
      }

      @Override
      public int read() {
        return fill() ? window.get() & 0xff : -1;
      }

      @Override
      public int read(byte[] b, int off, int len) {
        if (len == 0) {
          return 0;
        }
        if (!fill()) {
          return -1;
        }
        int n = Math.min(len, window.remaining());
        window.get(b, off, n);
        return n;
      }

      @Override
      public long skip(long n) {
        long skipped = 0;
        while (skipped < n && fill()) {
          int k = (int) Math.min(n - skipped, window.remaining());
          window.position(window.position() + k);
          skipped += k;
        }
        return skipped;
      }
    };
  }

  /** MD5 (base64, for {@code Content-MD5}) of a range of a stored file. */
  static String md5Base64(StoredArtifact stored, String path, long offset, long length) {
    try {
      java.security.MessageDigest md = java.security.MessageDigest.getInstance("MD5");
      for (long done = 0; done < length; done += 1 << 26) {
        md.update(stored.readOnly(path, offset + done, (int) Math.min(1 << 26, length - done)));
      }
      return java.util.Base64.getEncoder().encodeToString(md.digest());
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
