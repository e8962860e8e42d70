package io.tensorcast.dataplane.tensor;

import io.tensorcast.dataplane.format.FormatLimits;
import io.tensorcast.dataplane.format.index.IndexFormatException;
import io.tensorcast.dataplane.format.index.ShardIndex;
import io.tensorcast.dataplane.format.safetensors.SafetensorsFormatException;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;

/**
 * What tensors a stored artifact holds and where their bytes are: either plain safetensors files
 * ({@link Kind#SAFETENSORS_FILES}, e.g. a Hugging Face checkpoint) or a TP shard layout ({@link
 * Kind#TP_SHARDS}: {@code manifest.json} + {@code rank_NNNNN.safetensors}). Immutable; file names
 * are paths relative to the layout's directory, as a store names an artifact's files.
 */
public final class StoredLayout {

  /** The index file of a sharded Hugging Face checkpoint. */
  public static final String HF_INDEX = "model.safetensors.index.json";

  /** How the tensors are stored. */
  public enum Kind {
    /** Full tensors in plain safetensors files (with or without an HF index). */
    SAFETENSORS_FILES,
    /** TP shards per {@code manifest.json}. */
    TP_SHARDS
  }

  private final Kind kind;
  private final ShardManifest manifest;
  private final List<String> files;
  private final Map<String, StoredTensor> tensors;
  private final boolean partial;

  private StoredLayout(
      Kind kind, ShardManifest manifest, List<String> files, Map<String, StoredTensor> tensors) {
    this(kind, manifest, files, tensors, false);
  }

  private StoredLayout(
      Kind kind,
      ShardManifest manifest,
      List<String> files,
      Map<String, StoredTensor> tensors,
      boolean partial) {
    this.kind = kind;
    this.manifest = manifest;
    this.files = List.copyOf(files);
    this.tensors = Collections.unmodifiableMap(tensors);
    this.partial = partial;
  }

  /**
   * Opens the layout stored in {@code dir}, reading only headers: {@code manifest.json} and its
   * rank files if present; else the files named by {@code model.safetensors.index.json}; else every
   * {@code *.safetensors} file directly in {@code dir} (sorted by name).
   *
   * @throws ShardLayoutException if the layout breaks a rule (invalid manifest, rank file missing
   *     or disagreeing with it, tensor in two files, no safetensors files, invalid header); the
   *     message names the file and the numbers
   * @throws IOException if a file cannot be read
   */
  public static StoredLayout open(Path dir) throws IOException {
    if (!Files.isDirectory(dir)) {
      throw new ShardLayoutException(dir + ": not a directory");
    }
    Path manifestFile = dir.resolve(ShardManifest.FILE_NAME);
    if (Files.isRegularFile(manifestFile)) {
      ShardManifest m = ShardManifest.read(manifestFile);
      List<SafetensorsHeader> headers = new ArrayList<>();
      for (int r = 0; r < m.tpSize(); r++) {
        Path f = dir.resolve(ShardManifest.rankFileName(r));
        if (!Files.isRegularFile(f)) {
          throw new ShardLayoutException(
              manifestFile
                  + " says tp_size "
                  + m.tpSize()
                  + " but "
                  + ShardManifest.rankFileName(r)
                  + " is missing from "
                  + dir);
        }
        headers.add(readHeader(f));
      }
      Path extra = dir.resolve(ShardManifest.rankFileName(m.tpSize()));
      if (Files.exists(extra)) {
        throw new ShardLayoutException(
            manifestFile
                + " says tp_size "
                + m.tpSize()
                + " but "
                + extra.getFileName()
                + " exists too: the rank files and the manifest disagree");
      }
      return ofShards(m, headers);
    }
    Map<String, SafetensorsHeader> headers = new LinkedHashMap<>();
    Path index = dir.resolve(HF_INDEX);
    if (Files.isRegularFile(index)) {
      Map<String, String> weightMap = readWeightMap(index);
      for (String file : new LinkedHashSet<>(weightMap.values())) {
        Path f = dir.resolve(file).normalize();
        if (!f.startsWith(dir.normalize())) {
          throw new ShardLayoutException(
              index + ": weight_map file \"" + file + "\" is outside " + dir);
        }
        if (!Files.isRegularFile(f)) {
          throw new ShardLayoutException(
              index + " maps tensors to \"" + file + "\", which is missing from " + dir);
        }
        headers.put(file, readHeader(f));
      }
      StoredLayout layout = ofFiles(headers);
      for (Map.Entry<String, String> e : weightMap.entrySet()) {
        StoredTensor t = layout.tensors.get(e.getKey());
        String actual = t == null ? null : t.pieces().get(0).file();
        if (!e.getValue().equals(actual)) {
          throw new ShardLayoutException(
              index
                  + " maps \""
                  + e.getKey()
                  + "\" to "
                  + e.getValue()
                  + " but "
                  + (actual == null ? "no file declares it" : "it is in " + actual));
        }
      }
      for (String name : layout.tensors.keySet()) {
        if (!weightMap.containsKey(name)) {
          throw new ShardLayoutException(
              index
                  + ": tensor \""
                  + name
                  + "\" of "
                  + layout.tensors.get(name).pieces().get(0).file()
                  + " is not in weight_map");
        }
      }
      return layout;
    }
    List<Path> found;
    try (Stream<Path> s = Files.list(dir)) {
      found =
          s.filter(p -> p.getFileName().toString().endsWith(".safetensors"))
              .filter(Files::isRegularFile)
              .sorted()
              .toList();
    }
    if (found.isEmpty()) {
      throw new ShardLayoutException(
          dir
              + ": no "
              + ShardManifest.FILE_NAME
              + ", no "
              + HF_INDEX
              + " and no *.safetensors files: nothing to read tensors from");
    }
    for (Path f : found) {
      headers.put(f.getFileName().toString(), readHeader(f));
    }
    return ofFiles(headers);
  }

  private static Map<String, String> readWeightMap(Path index) throws IOException {
    try {
      ShardIndex.checkSize(
          index.toString(), Files.size(index), FormatLimits.DEFAULT.maxIndexBytes());
      return ShardIndex.parse(
              index.toString(), Files.readAllBytes(index), FormatLimits.DEFAULT.maxTensors())
          .weightMap();
    } catch (IndexFormatException e) {
      throw new ShardLayoutException(e.getMessage(), e);
    }
  }

  private static SafetensorsHeader readHeader(Path f) throws IOException {
    try {
      return SafetensorsHeader.read(f);
    } catch (SafetensorsFormatException e) {
      throw new ShardLayoutException(e.getMessage(), e);
    }
  }

  /**
   * A layout of plain safetensors files from their headers (no file is read).
   *
   * @param headers file name (relative path) to header, in order
   * @throws ShardLayoutException if two files declare the same tensor
   */
  public static StoredLayout ofFiles(Map<String, SafetensorsHeader> headers)
      throws ShardLayoutException {
    Map<String, StoredTensor> tensors = new LinkedHashMap<>();
    for (Map.Entry<String, SafetensorsHeader> e : headers.entrySet()) {
      SafetensorsHeader h = e.getValue();
      for (TensorInfo t : h.tensors()) {
        long[] shape = t.shape();
        StoredTensor st =
            new StoredTensor(
                t.name(),
                t.dtype(),
                shape,
                null,
                List.of(
                    new StoredTensor.Piece(
                        e.getKey(), h.dataOffset() + t.begin(), new long[shape.length], shape)));
        StoredTensor before = tensors.put(t.name(), st);
        if (before != null) {
          throw new ShardLayoutException(
              "tensor \""
                  + t.name()
                  + "\" is declared in both "
                  + before.pieces().get(0).file()
                  + " and "
                  + e.getKey());
        }
      }
    }
    return new StoredLayout(Kind.SAFETENSORS_FILES, null, List.copyOf(headers.keySet()), tensors);
  }

  /**
   * A layout of whole tensors stored anywhere (plain safetensors or torch checkpoint files), one
   * piece each, in the given order.
   *
   * @throws ShardLayoutException if a name repeats or a tensor is split
   */
  public static StoredLayout ofTensors(List<StoredTensor> stored) throws ShardLayoutException {
    Map<String, StoredTensor> tensors = new LinkedHashMap<>();
    Set<String> files = new LinkedHashSet<>();
    for (StoredTensor t : stored) {
      if (!t.whole() || t.pieces().size() != 1) {
        throw new ShardLayoutException(
            "tensor \"" + t.name() + "\" is not stored whole in one piece");
      }
      StoredTensor before = tensors.put(t.name(), t);
      if (before != null) {
        throw new ShardLayoutException(
            "tensor \""
                + t.name()
                + "\" is declared in both "
                + before.pieces().get(0).file()
                + " and "
                + t.pieces().get(0).file());
      }
      files.add(t.pieces().get(0).file());
    }
    return new StoredLayout(Kind.SAFETENSORS_FILES, null, List.copyOf(files), tensors);
  }

  /**
   * A TP shard layout from its manifest and the headers of its rank files (no file is read).
   *
   * @param rankHeaders header of {@code rank_00000.safetensors}, {@code rank_00001...}, one per
   *     rank
   * @throws ShardLayoutException if the count differs from {@code tp_size}, a rank file lacks a
   *     key, declares one the manifest does not list, or disagrees on dtype or local shape, or its
   *     {@code tp_rank}/{@code tp_size} metadata disagree
   */
  public static StoredLayout ofShards(ShardManifest manifest, List<SafetensorsHeader> rankHeaders)
      throws ShardLayoutException {
    Objects.requireNonNull(manifest, "manifest");
    int s = manifest.tpSize();
    if (rankHeaders.size() != s) {
      throw new ShardLayoutException(
          "manifest.json says tp_size "
              + s
              + " but "
              + rankHeaders.size()
              + " rank files were given");
    }
    Map<Integer, SafetensorsHeader> byRank = new java.util.TreeMap<>();
    for (int r = 0; r < s; r++) {
      byRank.put(r, rankHeaders.get(r));
    }
    return shards(manifest, byRank, false);
  }

  /**
   * A part of a TP shard layout: its manifest and the rank files of some ranks only, as a node
   * holds that serves only its own ranks' shards. Reads that need a rank file it lacks are refused
   * by the planner ({@code NOT_HELD}), never answered from other bytes.
   *
   * @param rankHeaders header per rank held (at least one), each checked as in {@link #ofShards}
   * @throws ShardLayoutException as {@link #ofShards}, or when a rank is outside the manifest's
   *     tp_size or none is given
   */
  public static StoredLayout ofShardsPart(
      ShardManifest manifest, Map<Integer, SafetensorsHeader> rankHeaders)
      throws ShardLayoutException {
    Objects.requireNonNull(manifest, "manifest");
    if (rankHeaders.isEmpty()) {
      throw new ShardLayoutException("a part of a shard layout holds at least one rank file");
    }
    for (int r : rankHeaders.keySet()) {
      if (r < 0 || r >= manifest.tpSize()) {
        throw new ShardLayoutException(
            "rank " + r + " is outside the manifest's tp_size " + manifest.tpSize());
      }
    }
    return shards(
        manifest, new java.util.TreeMap<>(rankHeaders), rankHeaders.size() < manifest.tpSize());
  }

  private static StoredLayout shards(
      ShardManifest manifest, Map<Integer, SafetensorsHeader> rankHeaders, boolean partial)
      throws ShardLayoutException {
    int s = manifest.tpSize();
    List<String> files = new ArrayList<>();
    for (Map.Entry<Integer, SafetensorsHeader> rh : rankHeaders.entrySet()) {
      int r = rh.getKey();
      String file = ShardManifest.rankFileName(r);
      files.add(file);
      SafetensorsHeader h = rh.getValue();
      checkRankMetadata(file, h, "tp_rank", r);
      checkRankMetadata(file, h, "tp_size", s);
      Set<String> keys = new LinkedHashSet<>(manifest.keys());
      for (TensorInfo t : h.tensors()) {
        if (!keys.contains(t.name())) {
          throw new ShardLayoutException(
              file
                  + " declares tensor \""
                  + t.name()
                  + "\" that manifest.json does not list in keys");
        }
      }
    }
    Map<String, StoredTensor> tensors = new LinkedHashMap<>();
    for (String key : manifest.keys()) {
      ShardManifest.Entry e = manifest.entry(key);
      long[] global = e.globalShape();
      long[] local = e.localShape();
      List<StoredTensor.Piece> pieces = new ArrayList<>(rankHeaders.size());
      for (Map.Entry<Integer, SafetensorsHeader> rh : rankHeaders.entrySet()) {
        int r = rh.getKey();
        String file = ShardManifest.rankFileName(r);
        SafetensorsHeader h = rh.getValue();
        TensorInfo t =
            h.tensor(key)
                .orElseThrow(
                    () ->
                        new ShardLayoutException(
                            file + " lacks tensor \"" + key + "\" that manifest.json lists"));
        if (t.dtype() != e.dtype()) {
          throw new ShardLayoutException(
              file
                  + ": tensor \""
                  + key
                  + "\" is "
                  + t.dtype()
                  + " but manifest.json says "
                  + e.dtype());
        }
        if (!Arrays.equals(t.shape(), local)) {
          throw new ShardLayoutException(
              file
                  + ": tensor \""
                  + key
                  + "\" has shape "
                  + Arrays.toString(t.shape())
                  + " but manifest.json (global_shape "
                  + Arrays.toString(global)
                  + ", split_dim "
                  + e.splitDim()
                  + ", shard_count "
                  + e.shardCount()
                  + ") implies "
                  + Arrays.toString(local));
        }
        long[] origin = new long[global.length];
        if (e.splitDim() != null) {
          origin[e.splitDim()] = r * local[e.splitDim()];
        }
        pieces.add(new StoredTensor.Piece(file, h.dataOffset() + t.begin(), origin, local));
      }
      tensors.put(key, new StoredTensor(key, e.dtype(), global, e.splitDim(), pieces));
    }
    return new StoredLayout(Kind.TP_SHARDS, manifest, files, tensors, partial);
  }

  /** Whether this is a part of a shard layout: some rank files are not held. */
  public boolean partial() {
    return partial;
  }

  private static void checkRankMetadata(
      String file, SafetensorsHeader h, String field, int expected) throws ShardLayoutException {
    String v = h.metadata().get(field);
    if (v != null && !v.equals(Integer.toString(expected))) {
      throw new ShardLayoutException(
          file
              + ": __metadata__ "
              + field
              + " is \""
              + v
              + "\" but the layout expects "
              + expected);
    }
  }

  /** How the tensors are stored. */
  public Kind kind() {
    return kind;
  }

  /** The manifest of a TP shard layout; empty for plain files. */
  public Optional<ShardManifest> manifest() {
    return Optional.ofNullable(manifest);
  }

  /** Stored TP size: {@code tp_size} of the manifest, 1 for plain files. */
  public int tpSize() {
    return manifest == null ? 1 : manifest.tpSize();
  }

  /** Scope axes of the layout identity ({@code layout_axes}); empty for plain files. */
  public List<ParallelAxis> layoutAxes() {
    return manifest == null ? List.of() : manifest.layoutAxes();
  }

  /** The files the layout reads, relative to its directory. */
  public List<String> files() {
    return files;
  }

  /** Tensor names: manifest key order, or file order then header (data) order. */
  public List<String> tensorNames() {
    return List.copyOf(tensors.keySet());
  }

  /** The tensor named {@code name}, if stored. */
  public Optional<StoredTensor> tensor(String name) {
    return Optional.ofNullable(tensors.get(name));
  }

  /** All tensors, in {@link #tensorNames()} order. */
  public List<StoredTensor> tensors() {
    return List.copyOf(tensors.values());
  }

  @Override
  public String toString() {
    return "StoredLayout["
        + kind
        + ", tp_size "
        + tpSize()
        + ", "
        + files.size()
        + " files, "
        + tensors.size()
        + " tensors]";
  }
}
