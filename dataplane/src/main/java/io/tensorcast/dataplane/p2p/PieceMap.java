package io.tensorcast.dataplane.p2p;

import io.tensorcast.dataplane.store.StoreFile;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;

/**
 * An artifact's files, in the loader's order, cut into pieces of {@code pieceSize} bytes: piece
 * {@code k} of a file covers bytes {@code [k × pieceSize, min((k+1) × pieceSize, size))}. Pieces do
 * not cross files (the last piece of a file is shorter); empty files have no pieces. Pieces are
 * numbered from 0 across the files in order.
 *
 * <p>Every member of a swarm must build the same map: {@link #digest()} (exchanged in HELLO, with
 * every file's ETag added by {@code PeerSwarm.helloDigest}) is a SHA-256 over the piece size and
 * every file's path and size, so peers with a different listing or piece size refuse each other.
 */
public final class PieceMap {
  /** Largest piece size accepted: one piece must fit in one frame. */
  public static final int MAX_PIECE_SIZE = 64 * 1024 * 1024;

  /**
   * One piece.
   *
   * @param index piece number, 0-based across the artifact
   * @param path file the piece belongs to (relative to the artifact root)
   * @param offset first byte of the piece in the file
   * @param length bytes in the piece, 1 ≤ length ≤ piece size
   */
  public record Piece(int index, String path, long offset, int length) {}

  private final int pieceSize;
  private final List<StoreFile> files;
  private final List<Piece> pieces;
  private final long totalBytes;
  private final byte[] digest;

  /**
   * @param files the artifact's files in the loader's order (each path once)
   * @param pieceSize bytes per piece, 1 to {@link #MAX_PIECE_SIZE}
   * @throws IllegalArgumentException on a bad piece size, a repeated path, or more than {@code
   *     Integer.MAX_VALUE} pieces
   */
  public PieceMap(List<StoreFile> files, int pieceSize) {
    if (pieceSize < 1 || pieceSize > MAX_PIECE_SIZE) {
      throw new IllegalArgumentException(
          "piece size must be between 1 and " + MAX_PIECE_SIZE + " bytes, got " + pieceSize);
    }
    this.pieceSize = pieceSize;
    this.files = List.copyOf(files);
    List<Piece> out = new ArrayList<>();
    long total = 0;
    java.util.Set<String> seen = new java.util.HashSet<>();
    for (StoreFile f : this.files) {
      if (!seen.add(f.path())) {
        throw new IllegalArgumentException("file " + f.path() + " is listed twice");
      }
      for (long off = 0; off < f.size(); off += pieceSize) {
        if (out.size() == Integer.MAX_VALUE) {
          throw new IllegalArgumentException("more than 2^31-1 pieces; use a larger piece size");
        }
        out.add(new Piece(out.size(), f.path(), off, (int) Math.min(pieceSize, f.size() - off)));
      }
      total += f.size();
    }
    this.pieces = List.copyOf(out);
    this.totalBytes = total;
    this.digest = computeDigest(pieceSize, this.files);
  }

  private static byte[] computeDigest(int pieceSize, List<StoreFile> files) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      md.update(("tensorcast-pieces-v1\n" + pieceSize + "\n").getBytes(StandardCharsets.UTF_8));
      for (StoreFile f : files) {
        md.update((f.path() + "\0" + f.size() + "\n").getBytes(StandardCharsets.UTF_8));
      }
      return md.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  public int pieceSize() {
    return pieceSize;
  }

  /** Number of pieces. */
  public int size() {
    return pieces.size();
  }

  public Piece piece(int index) {
    Objects.checkIndex(index, pieces.size());
    return pieces.get(index);
  }

  public List<Piece> pieces() {
    return pieces;
  }

  public List<StoreFile> files() {
    return files;
  }

  /** Sum of the files' sizes in bytes. */
  public long totalBytes() {
    return totalBytes;
  }

  /** SHA-256 (32 bytes) over the piece size and the files' paths and sizes. */
  public byte[] digest() {
    return digest.clone();
  }

  /** {@link #digest()} as lowercase hex. */
  public String digestHex() {
    return HexFormat.of().formatHex(digest);
  }
}
