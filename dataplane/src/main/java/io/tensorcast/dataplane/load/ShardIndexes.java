package io.tensorcast.dataplane.load;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.format.FormatLimits;
import io.tensorcast.dataplane.format.index.IndexCheck;
import io.tensorcast.dataplane.format.index.IndexFormatException;
import io.tensorcast.dataplane.format.index.ShardIndex;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.format.torch.TorchCheckpoint;
import io.tensorcast.dataplane.format.torch.TorchStorage;
import io.tensorcast.dataplane.format.torch.TorchTensor;
import io.tensorcast.dataplane.source.PathFilter;
import io.tensorcast.dataplane.source.SourceFile;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Validates the index files of an artifact ({@code model.safetensors.index.json}, {@code
 * pytorch_model.bin.index.json}, ...; see {@link ShardIndex#isIndexPath}) against its listing and
 * the headers already read: a broken index fails the load with {@code InvalidIndex}, whose message
 * names the index, the position or the missing name, and how to load without the index.
 */
public final class ShardIndexes {

  /** Reads one listed file's bytes whole (from the source, or from the store's copy). */
  @FunctionalInterface
  public interface FileBytes {
    byte[] read(SourceFile f) throws LoadFailure;
  }

  private ShardIndexes() {}

  /**
   * @param files the listed (filtered) files
   * @param filter the include/exclude filter the listing applied
   * @param headers the validated safetensors headers by path
   * @param checkpoints the validated torch checkpoints by path
   * @param read reads an index file's bytes
   * @throws LoadFailure {@code InvalidIndex}, or the reason reading the index failed with
   */
  public static void validate(
      List<SourceFile> files,
      PathFilter filter,
      Map<String, SafetensorsHeader> headers,
      Map<String, TorchCheckpoint> checkpoints,
      FormatLimits limits,
      FileBytes read)
      throws LoadFailure {
    Set<String> listed = new HashSet<>();
    files.forEach(f -> listed.add(f.path()));
    Map<String, IndexCheck.Shard> shards = new LinkedHashMap<>();
    headers.forEach((path, h) -> shards.put(path, shard(h)));
    checkpoints.forEach((path, c) -> shards.put(path, shard(c)));
    Map<String, String> declaredBy = new HashMap<>();
    IndexCheck.Artifact artifact =
        new IndexCheck.Artifact(
            listed::contains,
            p -> !filter.accepts(p),
            filter.toString(),
            shards::get,
            name -> {
              if (declaredBy.isEmpty()) {
                shards.forEach(
                    (path, s) ->
                        s.tensorBytes().keySet().forEach(t -> declaredBy.putIfAbsent(t, path)));
              }
              return declaredBy.get(name);
            });
    for (SourceFile f : files) {
      if (!ShardIndex.isIndexPath(f.path())) {
        continue;
      }
      try {
        ShardIndex.checkSize(f.path(), f.size(), limits.maxIndexBytes());
        ShardIndex index = ShardIndex.parse(f.path(), read.read(f), limits.maxTensors());
        IndexCheck.check(index, artifact);
      } catch (IndexFormatException e) {
        throw new LoadFailure(
            Reason.InvalidIndex,
            e.getMessage()
                + "; to load the files without this index, leave it out with spec.source.exclude"
                + " (CLI --exclude) '/"
                + f.path().replaceAll("([*?\\[\\]{}\\\\])", "\\\\$1")
                + "'",
            e);
      }
    }
  }

  private static IndexCheck.Shard shard(SafetensorsHeader h) {
    Map<String, Long> bytes = new LinkedHashMap<>();
    long total = 0;
    for (TensorInfo t : h.tensors()) {
      bytes.put(t.name(), t.byteLength());
      total += t.byteLength();
    }
    return new IndexCheck.Shard(bytes, total);
  }

  private static IndexCheck.Shard shard(TorchCheckpoint c) {
    Map<String, Long> bytes = new LinkedHashMap<>();
    for (TorchTensor t : c.tensors()) {
      bytes.put(t.name(), t.byteLength());
    }
    long total = c.storages().values().stream().mapToLong(TorchStorage::byteLength).sum();
    return new IndexCheck.Shard(bytes, total);
  }
}
