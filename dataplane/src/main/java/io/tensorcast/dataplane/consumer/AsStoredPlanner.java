package io.tensorcast.dataplane.consumer;

import java.util.List;

/**
 * {@code target=as_stored}: the tensor's bytes exactly as the one stored file that declares it
 * holds them, a single segment {@code [dataOffset + begin, dataOffset + end)} of that file.
 */
public final class AsStoredPlanner implements TensorReadPlanner {

  /**
   * @throws TensorReadException 404 {@code UnknownTensor} when no stored file declares the name;
   *     409 {@code AmbiguousTensor} naming the files when several do (TP rank files: read a shard
   *     or the full tensor instead)
   */
  @Override
  public ReadPlan plan(TensorCatalog catalog, String name, TensorQuery query)
      throws TensorReadException {
    List<TensorCatalog.Entry> found = catalog.lookup(name);
    if (found.isEmpty()) {
      throw unknown(catalog, name);
    }
    if (found.size() > 1) {
      throw new TensorReadException(
          409,
          "AmbiguousTensor",
          "artifact "
              + catalog.artifactId()
              + ": tensor \""
              + name
              + "\" occurs in "
              + found.size()
              + " files ('"
              + found.get(0).file()
              + "' and '"
              + found.get(1).file()
              + "'"
              + (found.size() > 2 ? ", ..." : "")
              + "); target=as_stored needs a name held by one file (for TP rank files read"
              + " target=shard or target=full)");
    }
    TensorCatalog.Entry e = found.get(0);
    return new ReadPlan(
        name,
        e.info().dtype(),
        e.info().shape(),
        List.of(new Segment(e.file(), e.fileOffset(), e.length())));
  }

  /** 404 naming the tensor and the artifact. */
  static TensorReadException unknown(TensorCatalog catalog, String name) {
    return new TensorReadException(
        404,
        "UnknownTensor",
        "artifact "
            + catalog.artifactId()
            + " has no tensor \""
            + name
            + "\" (it has "
            + catalog.names()
            + " tensor names; GET /v1/tensors lists them)");
  }
}
