package io.tensorcast.dataplane.consumer;

import io.tensorcast.dataplane.format.safetensors.SafetensorsFormatException;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.SafetensorsLimits;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The tensors of one stored artifact, as the safetensors headers of its stored files declare them:
 * the source of truth for {@code GET /v1/tensors} and for read planning. Built once per artifact
 * generation (one {@link StoredArtifact} instance) by parsing each {@code *.safetensors} file's
 * header and each torch checkpoint's structure ({@code .pt}, {@code .pth}, torch {@code .bin}, read
 * by the restricted unpickler) from its bytes in the page-locked store; other files (configs,
 * indexes, tokenizers) are not tensors and are left out. Immutable.
 *
 * <p><b>Names in several files.</b> A tensor name should occur in one file only. The exception is
 * the TP shard layout ({@code manifest.json} next to {@code rank_NNNNN.safetensors} files), where
 * every rank file holds its shard of the same names; there {@link #conflict()} stays empty and
 * {@code target=as_stored} of such a name is ambiguous (409) while {@code shard}/{@code full} are
 * what the layout is for. Anywhere else a repeated name is a {@link #conflict()} naming both files.
 */
public final class TensorCatalog {
  private static final Pattern RANK_FILE = Pattern.compile("(?:.*/)?rank_[0-9]{5}\\.safetensors");

  /**
   * One tensor in one stored file.
   *
   * @param file artifact-relative path of the file
   * @param fileOffset file offset of the tensor's first byte: the header's data offset ({@code 8 +
   *     N}) plus the tensor's {@code begin}
   * @param info the tensor as the header declares it
   */
  public record Entry(String file, long fileOffset, TensorInfo info) {
    public Entry {
      Objects.requireNonNull(file, "file");
      Objects.requireNonNull(info, "info");
    }

    /** Bytes of the tensor: {@code info.byteLength()}. */
    public long length() {
      return info.byteLength();
    }
  }

  private final StoredArtifact artifact;
  private final Map<String, List<Entry>> torchFiles;
  private final Map<String, SafetensorsHeader> headers;
  private final List<Entry> entries;
  private final Map<String, List<Entry>> byName;
  private final String conflict;

  private TensorCatalog(
      StoredArtifact artifact,
      Map<String, SafetensorsHeader> headers,
      Map<String, List<Entry>> torchFiles,
      List<Entry> entries,
      Map<String, List<Entry>> byName,
      String conflict) {
    this.artifact = artifact;
    this.torchFiles = torchFiles;
    this.headers = headers;
    this.entries = entries;
    this.byName = byName;
    this.conflict = conflict;
  }

  /**
   * Parses the header of every {@code *.safetensors} file of the artifact from the store.
   *
   * @throws TensorReadException 500 {@code InvalidSafetensors} naming the file and the rule broken
   *     (the loader validated the same bytes, so this means the store changed under it); 503 {@code
   *     ArtifactUnloaded} if the artifact was unloaded meanwhile
   */
  public static TensorCatalog build(StoredArtifact artifact) throws TensorReadException {
    Map<String, SafetensorsHeader> headers = new LinkedHashMap<>();
    Map<String, List<Entry>> torchFiles = new LinkedHashMap<>();
    List<Entry> entries = new ArrayList<>();
    Map<String, List<Entry>> byName = new HashMap<>();
    try {
      for (StoreFile f : artifact.files()) {
        if (io.tensorcast.dataplane.load.HeaderFetcher.isTorchPath(f.path())) {
          List<Entry> torch = torchEntries(artifact, f);
          if (!torch.isEmpty()) {
            torchFiles.put(f.path(), torch);
            for (Entry e : torch) {
              entries.add(e);
              byName.computeIfAbsent(e.info().name(), k -> new ArrayList<>(1)).add(e);
            }
          }
          continue;
        }
        if (!f.path().endsWith(".safetensors")) {
          continue;
        }
        SafetensorsHeader h = header(artifact, f);
        headers.put(f.path(), h);
        for (TensorInfo t : h.tensors()) {
          Entry e = new Entry(f.path(), h.dataOffset() + t.begin(), t);
          entries.add(e);
          byName.computeIfAbsent(t.name(), k -> new ArrayList<>(1)).add(e);
        }
      }
    } catch (SafetensorsFormatException e) {
      throw new TensorReadException(
          500,
          "InvalidSafetensors",
          "artifact " + artifact.artifactId() + ": stored file " + e.getMessage());
    } catch (IllegalStateException e) {
      throw new TensorReadException(503, "ArtifactUnloaded", e.getMessage());
    }
    Map<String, List<Entry>> frozen = new HashMap<>(byName.size() * 2);
    byName.forEach((k, v) -> frozen.put(k, List.copyOf(v)));
    return new TensorCatalog(
        artifact,
        Collections.unmodifiableMap(headers),
        Collections.unmodifiableMap(torchFiles),
        List.copyOf(entries),
        Collections.unmodifiableMap(frozen),
        findConflict(artifact, entries, byName));
  }

  /**
   * The tensors of a stored torch checkpoint that are one contiguous little-endian run of a
   * safetensors dtype (every tensor of a Hub state dict): each an entry at its first element's file
   * offset. Others (non-contiguous views, big-endian storages, complex128) are not listed. A {@code
   * .bin} that is not a torch container has none.
   *
   * @throws TensorReadException 500 {@code InvalidTorchCheckpoint} if the stored structure is
   *     refused (the loader validated the same bytes)
   */
  private static List<Entry> torchEntries(StoredArtifact a, StoreFile f)
      throws TensorReadException {
    io.tensorcast.dataplane.format.torch.ByteSource bytes =
        new io.tensorcast.dataplane.format.torch.ByteSource() {
          @Override
          public long size() {
            return f.size();
          }

          @Override
          public void read(long offset, ByteBuffer dst) throws java.io.IOException {
            if (offset < 0 || offset + dst.remaining() > f.size()) {
              throw new java.io.EOFException(f.path() + ": range outside the file");
            }
            a.read(f.path(), offset, dst);
          }
        };
    List<Entry> out = new ArrayList<>();
    try {
      if (f.path().endsWith(".bin")
          && !io.tensorcast.dataplane.format.torch.TorchCheckpointReader.looksLikeCheckpoint(
              bytes.read(0, (int) Math.min(16, f.size())))) {
        return out;
      }
      io.tensorcast.dataplane.format.torch.TorchCheckpoint c =
          io.tensorcast.dataplane.format.torch.TorchCheckpointReader.read(
              f.path(), bytes, io.tensorcast.dataplane.format.torch.TorchLimits.DEFAULT);
      for (io.tensorcast.dataplane.format.torch.TorchTensor t : c.tensors()) {
        if (t.safetensorsDtype().isEmpty() || t.storage().bigEndian() || !t.isContiguous()) {
          continue;
        }
        long offset = t.storageFileOffset() + t.storageOffset() * t.dtype().elementSize();
        out.add(
            new Entry(
                f.path(),
                offset,
                new TensorInfo(
                    t.name(),
                    t.safetensorsDtype().get(),
                    t.shape(),
                    offset,
                    offset + t.byteLength())));
      }
      return out;
    } catch (io.tensorcast.dataplane.format.torch.TorchFormatException | java.io.IOException e) {
      throw new TensorReadException(
          500,
          "InvalidTorchCheckpoint",
          "artifact " + a.artifactId() + ": stored file " + f.path() + ": " + e.getMessage());
    }
  }

  /**
   * The listed tensors of each stored torch checkpoint, by file (see {@link #build}): contiguous
   * little-endian tensors of a safetensors dtype.
   */
  public Map<String, List<Entry>> torchFiles() {
    return torchFiles;
  }

  /** The header of a stored file; the load validated it within its limits, so none apply here. */
  private static SafetensorsHeader header(StoredArtifact a, StoreFile f)
      throws SafetensorsFormatException {
    int prefix = SafetensorsHeader.LENGTH_PREFIX_BYTES;
    SafetensorsLimits limits = SafetensorsLimits.WIDEST;
    if (f.size() < prefix) {
      return SafetensorsHeader.parse(f.path(), f.size(), bytes(a, f, 0, (int) f.size()), limits);
    }
    long n = SafetensorsHeader.readHeaderLength(f.path(), bytes(a, f, 0, prefix), f.size(), limits);
    return SafetensorsHeader.parse(
        f.path(), f.size(), bytes(a, f, prefix, Math.toIntExact(n)), limits);
  }

  private static byte[] bytes(StoredArtifact a, StoreFile f, long offset, int length) {
    byte[] b = new byte[length];
    a.read(f.path(), offset, ByteBuffer.wrap(b));
    return b;
  }

  /** The first name held by two files outside a TP shard layout, as a message naming both. */
  private static String findConflict(
      StoredArtifact artifact, List<Entry> entries, Map<String, List<Entry>> byName) {
    Set<String> paths = new HashSet<>();
    artifact.files().forEach(f -> paths.add(f.path()));
    for (Entry e : entries) {
      List<Entry> same = byName.get(e.info().name());
      if (same.size() < 2) {
        continue;
      }
      for (Entry other : same) {
        if (other != e
            && !(isRankFile(e.file(), paths)
                && isRankFile(other.file(), paths)
                && directory(e.file()).equals(directory(other.file())))) {
          return "artifact "
              + artifact.artifactId()
              + ": tensor \""
              + e.info().name()
              + "\" occurs in both '"
              + e.file()
              + "' and '"
              + other.file()
              + "'; a tensor name must be unique across the artifact's files (outside a TP shard"
              + " layout of manifest.json + rank_NNNNN.safetensors)";
        }
      }
    }
    return null;
  }

  private static boolean isRankFile(String path, Set<String> paths) {
    return RANK_FILE.matcher(path).matches() && paths.contains(directory(path) + "manifest.json");
  }

  /** The directory part of a path including its trailing '/', or "" at the root. */
  private static String directory(String path) {
    return path.substring(0, path.lastIndexOf('/') + 1);
  }

  /** The artifact the catalog describes (one generation). */
  public StoredArtifact artifact() {
    return artifact;
  }

  /** The artifact id. */
  public String artifactId() {
    return artifact.artifactId();
  }

  /** The validated header of every stored {@code *.safetensors} file, in store order. */
  public Map<String, SafetensorsHeader> headers() {
    return headers;
  }

  /** Every tensor of every file: files in store order, tensors in data-offset order. */
  public List<Entry> entries() {
    return entries;
  }

  /** Every stored tensor named {@code name}: one, none, or one per TP rank file. */
  public List<Entry> lookup(String name) {
    return byName.getOrDefault(name, List.of());
  }

  /** Number of distinct tensor names. */
  public int names() {
    return byName.size();
  }

  /**
   * A message naming a tensor and the two files that both hold it, if any name repeats outside a TP
   * shard layout.
   */
  public Optional<String> conflict() {
    return Optional.ofNullable(conflict);
  }
}
