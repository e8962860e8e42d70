package io.tensorcast.dataplane.format.index;

import static io.tensorcast.dataplane.format.index.IndexFormatException.DUPLICATE_TENSOR;
import static io.tensorcast.dataplane.format.index.IndexFormatException.EXCLUDED_SHARD;
import static io.tensorcast.dataplane.format.index.IndexFormatException.MISSING_SHARD;
import static io.tensorcast.dataplane.format.index.IndexFormatException.TENSOR_NOT_IN_SHARD;
import static io.tensorcast.dataplane.format.index.IndexFormatException.TOTAL_SIZE_MISMATCH;
import static io.tensorcast.dataplane.format.index.IndexFormatException.UNREADABLE_SHARD;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * Checks an index against the artifact it came with: every shard it names is a listed file (and one
 * the include/exclude filters keep), every tensor it maps is declared by that shard's header, no
 * tensor is declared by two of its shards, and {@code metadata.total_size}, when given, equals the
 * bytes of the tensors it maps.
 */
public final class IndexCheck {
  /**
   * What one shard holds, from its header (safetensors) or object tree (torch).
   *
   * @param tensorBytes tensor name → bytes of the tensor (shape × dtype)
   * @param storageBytes bytes of the shard's distinct storages: the tensors' bytes for safetensors;
   *     for a torch checkpoint tied tensors share one storage, so this may be less
   */
  public record Shard(Map<String, Long> tensorBytes, long storageBytes) {
    public Shard {
      Objects.requireNonNull(tensorBytes, "tensorBytes");
    }
  }

  /**
   * The artifact's side of the check.
   *
   * @param listed whether an artifact-relative path is among the listed (filtered) files
   * @param excluded whether an artifact-relative path would be left out by the include/exclude
   *     filters
   * @param filters the filters as written, for messages ({@code include=[…] exclude=[…]})
   * @param shards a listed shard's contents, or null when it is neither a safetensors file nor a
   *     torch checkpoint
   * @param declaredBy the path of a listed file that declares a tensor name, or null (for messages)
   */
  public record Artifact(
      Predicate<String> listed,
      Predicate<String> excluded,
      String filters,
      Function<String, Shard> shards,
      Function<String, String> declaredBy) {}

  private IndexCheck() {}

  /**
   * @throws IndexFormatException naming the index, the shard or tensor at fault, and the rule
   */
  public static void check(ShardIndex index, Artifact artifact) throws IndexFormatException {
    String file = index.fileName();
    Map<String, Shard> shards = new LinkedHashMap<>();
    for (String path : index.shardPaths()) {
      if (!artifact.listed().test(path)) {
        if (artifact.excluded().test(path)) {
          throw new IndexFormatException(
              file,
              EXCLUDED_SHARD,
              "names shard \""
                  + path
                  + "\", which the include/exclude filters leave out ("
                  + artifact.filters()
                  + "); include the shard, or exclude the index too");
        }
        throw new IndexFormatException(
            file, MISSING_SHARD, "names shard \"" + path + "\", which the source does not hold");
      }
      Shard s = artifact.shards().apply(path);
      if (s == null) {
        throw new IndexFormatException(
            file,
            UNREADABLE_SHARD,
            "names shard \""
                + path
                + "\", which is neither a safetensors file nor a torch checkpoint");
      }
      shards.put(path, s);
    }
    Map<String, String> declaredIn = new HashMap<>();
    for (Map.Entry<String, Shard> e : shards.entrySet()) {
      for (String tensor : e.getValue().tensorBytes().keySet()) {
        String other = declaredIn.putIfAbsent(tensor, e.getKey());
        if (other != null) {
          throw new IndexFormatException(
              file,
              DUPLICATE_TENSOR,
              "its shards \""
                  + other
                  + "\" and \""
                  + e.getKey()
                  + "\" both declare tensor \""
                  + ShardIndex.abbreviate(tensor)
                  + "\"");
        }
      }
    }
    long mappedBytes = 0;
    for (Map.Entry<String, String> e : index.weightMap().entrySet()) {
      String path = index.shardPath(e.getValue());
      Long bytes = shards.get(path).tensorBytes().get(e.getKey());
      if (bytes == null) {
        String actual =
            declaredIn.getOrDefault(e.getKey(), artifact.declaredBy().apply(e.getKey()));
        throw new IndexFormatException(
            file,
            TENSOR_NOT_IN_SHARD,
            "maps tensor \""
                + ShardIndex.abbreviate(e.getKey())
                + "\" to \""
                + path
                + "\", which does not declare it"
                + (actual == null ? "; no file declares it" : "; it is in \"" + actual + "\""));
      }
      mappedBytes += bytes;
    }
    if (index.totalSize().isPresent()) {
      long total = index.totalSize().getAsLong();
      long storages = shards.values().stream().mapToLong(Shard::storageBytes).sum();
      boolean tensorsMatch = total == mappedBytes;
      boolean storagesMatch = total == storages;
      if (!tensorsMatch && !storagesMatch) {
        throw new IndexFormatException(
            file,
            TOTAL_SIZE_MISMATCH,
            "\"metadata\".\"total_size\" is "
                + total
                + " bytes but the "
                + index.weightMap().size()
                + " tensors it maps hold "
                + mappedBytes
                + " bytes by their shards' headers (a difference of "
                + (total - mappedBytes)
                + "); the index does not describe these shards");
      }
    }
  }
}
