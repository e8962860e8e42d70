package io.tensorcast.dataplane.write;

import io.tensorcast.dataplane.format.safetensors.SafetensorsFormatException;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.p2p.PieceMap;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.dataplane.tensor.ParallelAxis;
import io.tensorcast.dataplane.tensor.RangeCopy;
import io.tensorcast.dataplane.tensor.ReadTarget;
import io.tensorcast.dataplane.tensor.ShardLayoutException;
import io.tensorcast.dataplane.tensor.ShardManifest;
import io.tensorcast.dataplane.tensor.StoredLayout;
import io.tensorcast.dataplane.tensor.TensorIoException;
import io.tensorcast.dataplane.tensor.TensorParallelism;
import io.tensorcast.dataplane.tensor.TensorReadPlan;
import io.tensorcast.dataplane.tensor.TensorReadPlanner;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Base64;
import java.util.BitSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * What a node that serves tensor-parallel ranks of another TP size than the writers' keeps of a
 * written version, and how it gets it: the shard layout for tp size {@code S'} (a {@code
 * manifest.json} for {@code S'} and the rank files of its ranks only), each rank file filled by
 * byte ranges cut from the writers' rank files as their pieces arrive. Only the pieces that overlap
 * those ranges are fetched (a TP=2 rank 0 needs the pieces of TP=8 ranks 0-3 and one copy of each
 * replicated tensor, never the rest), and a piece is dropped once its ranges are copied.
 *
 * <p>The ranges come from the same planner that answers consumer reads ({@link TensorReadPlanner}),
 * over the writers' layout as their seal records describe it.
 */
public final class ShardShare {
  /** A range of a writer piece to copy into one of this node's files. */
  private record Cut(long sourceOffset, long length, String file, long destination) {}

  private final int tpSize;
  private final SortedSet<Integer> ranks;
  private final List<StoreFile> files;
  private final Map<String, byte[]> heads;
  private final BitSet wanted;
  private final Map<Integer, List<Cut>> byPiece;
  private final long bytes;

  private ShardShare(
      int tpSize,
      SortedSet<Integer> ranks,
      List<StoreFile> files,
      Map<String, byte[]> heads,
      BitSet wanted,
      Map<Integer, List<Cut>> byPiece,
      long bytes) {
    this.tpSize = tpSize;
    this.ranks = ranks;
    this.files = files;
    this.heads = heads;
    this.wanted = wanted;
    this.byPiece = byPiece;
    this.bytes = bytes;
  }

  /**
   * Plans the share of ranks {@code ranks} of tp size {@code tpSize} of a version.
   *
   * @throws WriteException 409 {@code NotAShardLayout} for a plain version (it has no split dims to
   *     re-shard by), {@code NotDivisible} when a split dimension does not divide by {@code tpSize}
   *     (naming the tensor and the numbers), {@code InvalidLayout} when the seal record's manifest
   *     or headers are not valid
   */
  public static ShardShare plan(SealRecord union, int tpSize, SortedSet<Integer> ranks)
      throws WriteException {
    if (!SealRecord.SHARDS.equals(union.layout())) {
      throw WriteException.conflict(
          "NotAShardLayout",
          "version "
              + union.name()
              + " is plain safetensors without parallelism; a node keeping tp ranks needs a shard"
              + " layout (or keep a full copy)");
    }
    for (int r : ranks) {
      if (r < 0 || r >= tpSize) {
        throw WriteException.bad("BadRequest", "rank " + r + " is outside tp size " + tpSize);
      }
    }
    ShardManifest writerManifest;
    StoredLayout writers;
    try {
      writerManifest =
          ShardManifest.parse(ShardManifest.FILE_NAME, head(union, ShardManifest.FILE_NAME));
      List<SafetensorsHeader> headers = new ArrayList<>();
      for (int r = 0; r < writerManifest.tpSize(); r++) {
        String f = ShardManifest.rankFileName(r);
        byte[] head = head(union, f);
        byte[] json = new byte[head.length - SafetensorsHeader.LENGTH_PREFIX_BYTES];
        System.arraycopy(head, SafetensorsHeader.LENGTH_PREFIX_BYTES, json, 0, json.length);
        headers.add(SafetensorsHeader.parse(f, union.file(f).size(), json));
      }
      writers = StoredLayout.ofShards(writerManifest, headers);
    } catch (ShardLayoutException | SafetensorsFormatException | IllegalArgumentException e) {
      throw WriteException.conflict(
          "InvalidLayout", "version " + union.name() + ": " + e.getMessage());
    }
    Map<String, ShardManifest.Entry> entries = new LinkedHashMap<>();
    for (String key : writerManifest.keys()) {
      ShardManifest.Entry e = writerManifest.entry(key);
      if (e.splitDim() == null) {
        entries.put(key, e);
        continue;
      }
      long g = e.globalShape()[e.splitDim()];
      if (g % tpSize != 0) {
        throw WriteException.conflict(
            "NotDivisible",
            "version "
                + union.name()
                + ": tensor \""
                + key
                + "\" "
                + java.util.Arrays.toString(e.globalShape())
                + ": dimension "
                + e.splitDim()
                + " = "
                + g
                + " does not split uniformly into tp size "
                + tpSize
                + " ("
                + g
                + " = "
                + tpSize
                + " × "
                + g / tpSize
                + " + "
                + g % tpSize
                + ")");
      }
      entries.put(key, new ShardManifest.Entry(e.globalShape(), e.dtype(), e.splitDim(), tpSize));
    }
    ShardManifest mine =
        new ShardManifest(
            tpSize,
            ShardManifest.FORMAT_SAFETENSORS,
            writerManifest.keys(),
            entries,
            writerManifest.layoutAxes());
    byte[] manifestJson = mine.toJson();
    List<StoreFile> files = new ArrayList<>();
    Map<String, byte[]> heads = new LinkedHashMap<>();
    files.add(new StoreFile(ShardManifest.FILE_NAME, manifestJson.length));
    heads.put(ShardManifest.FILE_NAME, manifestJson);
    PieceMap map = union.pieceMap();
    Map<String, Integer> firstPiece = new HashMap<>();
    for (PieceMap.Piece p : map.pieces()) {
      firstPiece.putIfAbsent(p.path(), p.index());
    }
    BitSet wanted = new BitSet(map.size());
    Map<Integer, List<Cut>> byPiece = new TreeMap<>();
    long bytes = 0;
    for (int r : ranks) {
      String file = ShardManifest.rankFileName(r);
      List<TensorDeclaration> decls = new ArrayList<>();
      for (String key : mine.keys()) {
        ShardManifest.Entry e = mine.entry(key);
        decls.add(new TensorDeclaration(key, e.dtype(), e.localShape()));
      }
      Map<String, String> meta = new LinkedHashMap<>();
      meta.put("tp_rank", Integer.toString(r));
      meta.put("tp_size", Integer.toString(tpSize));
      new TreeMap<>(union.metadata()).forEach(meta::put);
      SafetensorsHeader h = SafetensorsWriter.layout(decls, meta);
      heads.put(file, SafetensorsWriter.headerBytes(decls, meta));
      files.add(new StoreFile(file, h.fileSize()));
      bytes += h.fileSize();
      for (TensorInfo t : h.tensors()) {
        ShardManifest.Entry e = mine.entry(t.name());
        ReadTarget target;
        if (e.splitDim() == null) {
          target = ReadTarget.full();
        } else {
          List<ParallelAxis> axes = new ArrayList<>(mine.layoutAxes());
          axes.add(ParallelAxis.tp(r, tpSize, e.splitDim()));
          target = ReadTarget.shard(new TensorParallelism(axes));
        }
        TensorReadPlan plan;
        try {
          plan = TensorReadPlanner.plan(writers, t.name(), target);
        } catch (TensorIoException x) {
          throw WriteException.conflict(
              "InvalidLayout", "version " + union.name() + ": " + x.getMessage());
        }
        long base = h.dataOffset() + t.begin();
        for (RangeCopy c : plan.copies()) {
          long dest = base + c.destinationOffset();
          int first = firstPiece.get(c.file());
          long from = c.sourceOffset();
          long end = c.sourceEnd();
          while (from < end) {
            int idx = first + (int) (from / map.pieceSize());
            PieceMap.Piece p = map.piece(idx);
            long upto = Math.min(end, p.offset() + p.length());
            wanted.set(idx);
            byPiece
                .computeIfAbsent(idx, k -> new ArrayList<>())
                .add(
                    new Cut(
                        from - p.offset(), upto - from, file, dest + (from - c.sourceOffset())));
            from = upto;
          }
        }
      }
    }
    return new ShardShare(
        tpSize,
        new TreeSet<>(ranks),
        List.copyOf(files),
        heads,
        wanted,
        byPiece,
        bytes + manifestJson.length);
  }

  private static byte[] head(SealRecord union, String path) {
    SealRecord.FileEntry f = union.file(path);
    if (f == null || f.head() == null) {
      throw new IllegalArgumentException("the seal record has no head for '" + path + "'");
    }
    return Base64.getDecoder().decode(f.head());
  }

  /** This node's files: {@code manifest.json} for tp size {@code S'} and its ranks' rank files. */
  public List<StoreFile> files() {
    return files;
  }

  /** The pieces of the version this node needs. */
  public BitSet wanted() {
    return (BitSet) wanted.clone();
  }

  /** Bytes this node keeps. */
  public long bytes() {
    return bytes;
  }

  public int tpSize() {
    return tpSize;
  }

  public SortedSet<Integer> ranks() {
    return ranks;
  }

  /** Writes the manifest and every rank file's header into the allocated files. */
  public void writeHeads(StoredArtifact stored) {
    heads.forEach((path, bytes) -> stored.write(path, 0, ByteBuffer.wrap(bytes)));
  }

  /** Copies the ranges this node needs from a verified piece of the version into its files. */
  public void cut(PieceMap.Piece piece, ByteBuffer bytes, StoredArtifact stored) {
    List<Cut> cuts = byPiece.getOrDefault(piece.index(), List.of());
    for (Cut c : cuts) {
      ByteBuffer part = bytes.duplicate();
      part.position(bytes.position() + (int) c.sourceOffset());
      part.limit(part.position() + (int) c.length());
      stored.write(c.file(), c.destination(), part);
    }
  }
}
