package io.tensorcast.dataplane.write;

import io.tensorcast.dataplane.p2p.PieceMap;
import io.tensorcast.dataplane.tensor.ShardManifest;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A version as a whole: the union of what each of its writers sealed (a writer node holds the rank
 * files of its own ranks; every writer of a shard layout writes the same {@code manifest.json}),
 * and for every file the writer that is the authority for its bytes.
 *
 * @param record the version's files (sorted by path) with their SHA-256, every piece hash taken
 *     from the writer of the piece's file, {@code writer} the writers' ids joined by ','
 * @param origins per file path, the id of the writer whose seal record gives its hashes (the lowest
 *     id when several writers sealed identical bytes)
 */
public record VersionUnion(SealRecord record, Map<String, String> origins) {

  /**
   * Merges the writers' seal records of one version.
   *
   * @param byWriter every writer's seal record, by writer id
   * @throws WriteException 409 {@code InconsistentVersion} when records disagree (name, kind,
   *     layout, tp size, piece size, or two writers sealed different bytes under one path) and
   *     {@code IncompleteVersion} when a shard layout lacks its manifest or a rank file; the
   *     message names the writers, the file and what differs
   */
  public static VersionUnion merge(Map<String, SealRecord> byWriter) throws WriteException {
    if (byWriter.isEmpty()) {
      throw WriteException.conflict("IncompleteVersion", "no writer sealed the version");
    }
    TreeMap<String, SealRecord> sorted = new TreeMap<>(byWriter);
    String firstId = sorted.firstKey();
    SealRecord first = sorted.firstEntry().getValue();
    TreeMap<String, SealRecord.FileEntry> files = new TreeMap<>();
    TreeMap<String, String> origins = new TreeMap<>();
    Map<String, List<String>> pieceHashes = new TreeMap<>();
    String sealedAt = first.sealedAt();
    for (Map.Entry<String, SealRecord> e : sorted.entrySet()) {
      String w = e.getKey();
      SealRecord r = e.getValue();
      String what = null;
      if (!r.name().equals(first.name())) {
        what = "name " + r.name() + " vs " + first.name();
      } else if (!r.layout().equals(first.layout())) {
        what = "layout " + r.layout() + " vs " + first.layout();
      } else if (r.tpSize() != first.tpSize()) {
        what = "tp size " + r.tpSize() + " vs " + first.tpSize();
      } else if (r.pieceSize() != first.pieceSize()) {
        what = "piece size " + r.pieceSize() + " vs " + first.pieceSize();
      } else if (!String.valueOf(r.kind()).equals(String.valueOf(first.kind()))) {
        what = "kind " + r.kind() + " vs " + first.kind();
      }
      if (what != null) {
        throw WriteException.conflict(
            "InconsistentVersion",
            "version "
                + first.name()
                + ": writers "
                + firstId
                + " and "
                + w
                + " sealed it differently ("
                + what
                + ")");
      }
      if (r.sealedAt() != null && (sealedAt == null || r.sealedAt().compareTo(sealedAt) > 0)) {
        sealedAt = r.sealedAt();
      }
      PieceMap map = r.pieceMap();
      for (SealRecord.FileEntry f : r.files()) {
        SealRecord.FileEntry before = files.get(f.path());
        if (before != null) {
          if (!before.sha256().equals(f.sha256()) || before.size() != f.size()) {
            throw WriteException.conflict(
                "InconsistentVersion",
                "version "
                    + first.name()
                    + ": writers "
                    + origins.get(f.path())
                    + " and "
                    + w
                    + " both sealed '"
                    + f.path()
                    + "' but with different bytes (sha256 "
                    + before.sha256()
                    + " vs "
                    + f.sha256()
                    + ")");
          }
          continue;
        }
        files.put(f.path(), f);
        origins.put(f.path(), w);
        List<String> hashes = new ArrayList<>();
        for (PieceMap.Piece p : map.pieces()) {
          if (p.path().equals(f.path())) {
            hashes.add(r.pieces().get(p.index()));
          }
        }
        pieceHashes.put(f.path(), hashes);
      }
    }
    if (SealRecord.SHARDS.equals(first.layout())) {
      List<String> missing = new ArrayList<>();
      if (!files.containsKey(ShardManifest.FILE_NAME)) {
        missing.add(ShardManifest.FILE_NAME);
      }
      for (int r = 0; r < first.tpSize(); r++) {
        if (!files.containsKey(ShardManifest.rankFileName(r))) {
          missing.add(ShardManifest.rankFileName(r));
        }
      }
      if (!missing.isEmpty()) {
        throw WriteException.conflict(
            "IncompleteVersion",
            "version "
                + first.name()
                + ": no writer of "
                + sorted.keySet()
                + " sealed "
                + missing
                + " (tp_size "
                + first.tpSize()
                + ")");
      }
    }
    List<String> pieces = new ArrayList<>();
    for (String path : files.keySet()) {
      pieces.addAll(pieceHashes.get(path));
    }
    List<Integer> ranks = new ArrayList<>();
    for (SealRecord r : sorted.values()) {
      for (int x : r.ranks()) {
        if (!ranks.contains(x)) {
          ranks.add(x);
        }
      }
    }
    ranks.sort(Integer::compare);
    SealRecord union =
        new SealRecord(
                first.name(),
                first.kind(),
                first.metadata(),
                first.layout(),
                first.tpSize(),
                ranks,
                List.copyOf(files.values()),
                first.pieceSize(),
                pieces,
                sealedAt,
                String.join(",", sorted.keySet()))
            .checked();
    return new VersionUnion(union, Map.copyOf(origins));
  }
}
