package io.tensorcast.dataplane.write;

import com.fasterxml.jackson.annotation.JsonIgnore;
import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.tensorcast.dataplane.p2p.PieceMap;
import io.tensorcast.dataplane.store.StoreFile;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * What a writer's data plane sealed: the version's files with their sizes and SHA-256, the SHA-256
 * of every piece, and the safetensors headers, so that readers on other nodes can plan what to
 * fetch and check every piece against the writer's own hash. The writer is the authority for these
 * hashes; {@link #digest()} binds the record into the peer handshake, so a record that differs from
 * the writer's (tampered on the way, or another version) never meets its pieces.
 *
 * <p>JSON (the body of {@code GET /v1/writes/{name}} once sealed); unknown fields are refused.
 *
 * @param name the version's name (its store artifact id)
 * @param kind {@code ModelWeights}, {@code KVCache} or {@code RLCheckpoint}
 * @param metadata the writer's metadata (also in every safetensors file's {@code __metadata__})
 * @param layout {@code plain} (one {@code model.safetensors}) or {@code shards} ({@code
 *     manifest.json} + {@code rank_NNNNN.safetensors})
 * @param tpSize tp size of a shard layout, 1 for plain
 * @param ranks the tp ranks whose rank files this writer holds (empty for plain)
 * @param files the files, sorted by path
 * @param pieceSize bytes per piece ({@link PieceMap})
 * @param pieces lowercase hex SHA-256 of every piece of {@link #pieceMap()}, in piece order
 * @param sealedAt RFC 3339 time of the seal
 * @param writer the writer data plane's member id
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public record SealRecord(
    String name,
    String kind,
    Map<String, String> metadata,
    String layout,
    int tpSize,
    List<Integer> ranks,
    List<FileEntry> files,
    int pieceSize,
    List<String> pieces,
    String sealedAt,
    String writer) {

  /** {@code layout} of plain safetensors files. */
  public static final String PLAIN = "plain";

  /** {@code layout} of the TP shard layout. */
  public static final String SHARDS = "shards";

  private static final Pattern SHA256_HEX = Pattern.compile("[0-9a-f]{64}");

  static final ObjectMapper JSON =
      new ObjectMapper()
          .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
          .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
          .enable(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES);

  /**
   * One file.
   *
   * @param path path in the version ({@code manifest.json}, {@code rank_00000.safetensors}, ...)
   * @param size bytes
   * @param sha256 lowercase hex SHA-256 of the whole file
   * @param head base64 of the file's first bytes: for a safetensors file its header (the 8-byte
   *     length and the JSON), for {@code manifest.json} the whole file; null for others. Readers
   *     plan from it which pieces they need
   */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  public record FileEntry(String path, long size, String sha256, String head) {
    public FileEntry {
      Objects.requireNonNull(path, "path");
      Objects.requireNonNull(sha256, "sha256");
    }
  }

  public SealRecord {
    Objects.requireNonNull(name, "name");
    metadata = metadata == null ? Map.of() : Map.copyOf(metadata);
    ranks = ranks == null ? List.of() : List.copyOf(ranks);
    files = List.copyOf(files);
    pieces = List.copyOf(pieces);
  }

  /**
   * Checks the record's own consistency: sizes, hash syntax, and that {@link #pieces} has one hash
   * per piece of {@link #pieceMap()}.
   *
   * @throws IllegalArgumentException naming the field and the rule broken
   */
  public SealRecord checked() {
    if (files.isEmpty()) {
      throw new IllegalArgumentException("seal record of " + name + " lists no files");
    }
    for (FileEntry f : files) {
      if (f.size() < 0) {
        throw new IllegalArgumentException("file '" + f.path() + "': negative size " + f.size());
      }
      if (!SHA256_HEX.matcher(f.sha256()).matches()) {
        throw new IllegalArgumentException(
            "file '" + f.path() + "': sha256 is not 64 lowercase hex digits");
      }
    }
    PieceMap map = pieceMap();
    if (map.size() != pieces.size()) {
      throw new IllegalArgumentException(
          "seal record of "
              + name
              + " lists "
              + pieces.size()
              + " piece hashes but its files make "
              + map.size()
              + " pieces of "
              + pieceSize
              + " bytes");
    }
    for (int i = 0; i < pieces.size(); i++) {
      if (!SHA256_HEX.matcher(pieces.get(i)).matches()) {
        throw new IllegalArgumentException("piece " + i + ": sha256 is not 64 lowercase hex");
      }
    }
    return this;
  }

  /** The pieces of the files in record order. */
  public PieceMap pieceMap() {
    return new PieceMap(
        files.stream().map(f -> new StoreFile(f.path(), f.size())).toList(), pieceSize);
  }

  /** The store files (path, size) in record order. */
  @JsonIgnore
  public List<StoreFile> storeFiles() {
    return files.stream().map(f -> new StoreFile(f.path(), f.size())).toList();
  }

  /** The entry of {@code path}, or null. */
  public FileEntry file(String path) {
    for (FileEntry f : files) {
      if (f.path().equals(path)) {
        return f;
      }
    }
    return null;
  }

  /** Piece hashes as bytes, in piece order. */
  public byte[][] pieceHashes() {
    byte[][] out = new byte[pieces.size()][];
    HexFormat hex = HexFormat.of();
    for (int i = 0; i < out.length; i++) {
      out[i] = hex.parseHex(pieces.get(i));
    }
    return out;
  }

  /**
   * SHA-256 over the name, piece size, every file's path, size and SHA-256, and every piece hash:
   * what a member of the version's swarm proves it agrees on in the handshake.
   */
  public byte[] digest() {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      md.update(("tensorcast-sealed-v1\n" + name + "\n" + pieceSize + "\n").getBytes(UTF8));
      for (FileEntry f : files) {
        md.update((f.path() + "\0" + f.size() + "\0" + f.sha256() + "\n").getBytes(UTF8));
      }
      for (String p : pieces) {
        md.update(p.getBytes(UTF8));
      }
      return md.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static final java.nio.charset.Charset UTF8 = StandardCharsets.UTF_8;

  /** Total bytes of the files. */
  @JsonIgnore
  public long totalBytes() {
    return files.stream().mapToLong(FileEntry::size).sum();
  }

  public byte[] toJson() {
    try {
      return JSON.writeValueAsBytes(this);
    } catch (IOException e) {
      throw new IllegalStateException("cannot serialise the seal record", e);
    }
  }

  /**
   * Parses and checks a record.
   *
   * @throws IllegalArgumentException naming what is wrong
   */
  public static SealRecord parse(byte[] json) {
    try {
      return JSON.readValue(json, SealRecord.class).checked();
    } catch (IOException e) {
      throw new IllegalArgumentException("not a valid seal record: " + e.getMessage(), e);
    }
  }
}
