package io.tensorcast.dataplane.consumer;

import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.dataplane.tensor.ParallelAxis;
import io.tensorcast.dataplane.tensor.RangeCopy;
import io.tensorcast.dataplane.tensor.ReadTarget;
import io.tensorcast.dataplane.tensor.ShardLayoutException;
import io.tensorcast.dataplane.tensor.ShardManifest;
import io.tensorcast.dataplane.tensor.StoredLayout;
import io.tensorcast.dataplane.tensor.StoredTensor;
import io.tensorcast.dataplane.tensor.TensorIoException;
import io.tensorcast.dataplane.tensor.TensorParallelism;
import io.tensorcast.dataplane.tensor.TensorReadPlan;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The planner the data plane serves with: maps each {@link TensorQuery.Target} to the planner that
 * answers it. {@code as_stored} is {@link AsStoredPlanner}; {@code shard} and {@code full} are the
 * parallel-tensor-IO planner ({@link io.tensorcast.dataplane.tensor.TensorReadPlanner}) over the
 * artifact's {@link StoredLayout}s, its byte-range copies becoming the body's {@link Segment}s
 * (both are absolute file offsets, so no conversion).
 *
 * <p><b>Layouts of an artifact.</b> Every directory of the artifact that holds a {@code
 * manifest.json} is one TP shard layout ({@link StoredLayout#ofShards}: the manifest read from the
 * store, the rank files' headers from the {@link TensorCatalog}); every other stored {@code
 * *.safetensors} file (plain files, the files of a Hugging Face index) is a plain layout of its own
 * ({@link StoredLayout#ofFiles}). They are built on the first {@code shard}/{@code full} read of a
 * catalog (one artifact generation) and cached for it.
 *
 * <p><b>Query to {@link ReadTarget}.</b> {@code full} is {@link ReadTarget#full()}. {@code shard}
 * needs a {@code tp} axis (else 400 {@code BadParameter}); its scope axes must equal a shard
 * layout's {@code layout_axes} (seed: exact-match identity). A {@code tp} axis without {@code @DIM}
 * takes the split dim from {@code manifest.json}; for a tensor the manifest stores replicated
 * ({@code split_dim} null) every TP rank holds the whole tensor, so the shard is the whole tensor.
 * A plain file has no split dim: there {@code @DIM} is required.
 *
 * <p><b>Errors</b> ({@link TensorIoException} reasons): {@code UNKNOWN_TENSOR} → 404 {@code
 * UnknownTensor}; {@code INVALID_TARGET}, {@code NOT_DIVISIBLE}, {@code MISALIGNED_SUB_BYTE} → 400
 * ({@code InvalidTarget}, {@code NotDivisible}, {@code MisalignedSubByte}: the query cannot be
 * satisfied by this tensor whatever is stored); {@code IDENTITY_MISMATCH} → 409 {@code
 * IdentityMismatch} (the query conflicts with the identity the layout was stored for). Messages
 * name the artifact, the tensor and the numbers. A manifest that disagrees with its rank files is
 * 500 {@code InvalidLayout} naming the file.
 */
public final class DefaultTensorReadPlanner implements TensorReadPlanner {
  private static final String MANIFEST = ShardManifest.FILE_NAME;

  /** Largest {@code manifest.json} read from the store. */
  private static final long MAX_MANIFEST_BYTES = 64L << 20;

  private final TensorReadPlanner asStored = new AsStoredPlanner();
  private final boolean partialLayouts;
  private volatile Layouts cached;

  /** A planner that requires every rank file of a shard layout. */
  public DefaultTensorReadPlanner() {
    this(false);
  }

  /**
   * @param partialLayouts accept a shard layout of which some rank files are not stored (a node
   *     that holds only its own ranks' shards of a written artifact); reads that need a missing
   *     rank file are 409 {@code NotHeldHere}
   */
  public DefaultTensorReadPlanner(boolean partialLayouts) {
    this.partialLayouts = partialLayouts;
  }

  /**
   * The layouts of one catalog.
   *
   * @param catalog the catalog they were built from
   * @param byFile artifact-relative file path to the layout it belongs to
   */
  private record Layouts(TensorCatalog catalog, Map<String, Group> byFile) {}

  /**
   * One layout and the directory its file names are relative to.
   *
   * @param prefix artifact-relative directory with trailing '/', or "" at the root
   * @param layout the layout, file names relative to {@code prefix}
   */
  private record Group(String prefix, StoredLayout layout) {}

  @Override
  public ReadPlan plan(TensorCatalog catalog, String name, TensorQuery query)
      throws TensorReadException {
    return switch (query.target()) {
      case AS_STORED -> asStored.plan(catalog, name, query);
      case SHARD, FULL -> planLayout(catalog, name, query);
    };
  }

  private ReadPlan planLayout(TensorCatalog catalog, String name, TensorQuery query)
      throws TensorReadException {
    List<TensorCatalog.Entry> found = catalog.lookup(name);
    if (found.isEmpty()) {
      throw AsStoredPlanner.unknown(catalog, name);
    }
    Layouts layouts = layouts(catalog);
    Group group = layouts.byFile().get(found.get(0).file());
    for (TensorCatalog.Entry e : found) {
      if (layouts.byFile().get(e.file()) != group) {
        throw new TensorReadException(
            409,
            "AmbiguousTensor",
            "artifact "
                + catalog.artifactId()
                + ": tensor \""
                + name
                + "\" occurs in '"
                + found.get(0).file()
                + "' and in '"
                + e.file()
                + "', which belong to different layouts; a name must be unique outside one TP"
                + " shard layout (manifest.json + rank_NNNNN.safetensors)");
      }
    }
    StoredLayout layout = group.layout();
    StoredTensor tensor = layout.tensor(name).orElseThrow(); // the catalog lists it in this layout
    TensorReadPlan p;
    try {
      ReadTarget target = target(catalog, layout, tensor, query);
      p = io.tensorcast.dataplane.tensor.TensorReadPlanner.plan(layout, name, target);
    } catch (TensorIoException e) {
      throw translate(catalog, e);
    }
    List<Segment> segments = new ArrayList<>(p.copies().size());
    for (RangeCopy c : p.copies()) {
      segments.add(new Segment(group.prefix() + c.file(), c.sourceOffset(), c.length()));
    }
    return new ReadPlan(name, p.dtype(), p.shape(), segments);
  }

  /** The read target of a {@code shard} or {@code full} query of {@code tensor}. */
  private static ReadTarget target(
      TensorCatalog catalog, StoredLayout layout, StoredTensor tensor, TensorQuery query)
      throws TensorReadException {
    if (query.target() == TensorQuery.Target.FULL) {
      return ReadTarget.full();
    }
    List<ParallelAxis> scope = new ArrayList<>();
    TensorQuery.Axis tp = null;
    for (TensorQuery.Axis a : query.parallelism()) {
      if (a.kind() == ParallelAxis.Kind.TP) {
        tp = a;
      } else {
        scope.add(a.toParallelAxis(0));
      }
    }
    if (tp == null) {
      throw new TensorReadException(
          400,
          "BadParameter",
          "artifact "
              + catalog.artifactId()
              + ": tensor \""
              + tensor.name()
              + "\": target=shard with parallelism="
              + TensorParallelism.of(scope.toArray(ParallelAxis[]::new))
              + " has no tp axis; only tp names a shard (dp, pp, ep scope it): add tp:RANK/SIZE,"
              + " or read target=full");
    }
    if (tp.splitDim().isEmpty()) {
      if (layout.kind() != StoredLayout.Kind.TP_SHARDS) {
        throw new TensorReadException(
            400,
            "BadParameter",
            "artifact "
                + catalog.artifactId()
                + ": tensor \""
                + tensor.name()
                + "\" is stored whole in a plain file, which has no split dimension: give it as"
                + " tp:"
                + tp.rank()
                + "/"
                + tp.size()
                + "@DIM (DIM in [0, "
                + tensor.globalShape().length
                + "))");
      }
      if (tensor.splitDim() == null) {
        // Replicated in the layout: every TP rank holds the whole tensor. The scope axes are
        // still checked against the layout's identity.
        return scope.isEmpty() ? ReadTarget.full() : ReadTarget.full(new TensorParallelism(scope));
      }
    }
    int dim = tensor.splitDim() == null ? 0 : tensor.splitDim();
    scope.add(tp.toParallelAxis(dim));
    return ReadTarget.shard(new TensorParallelism(scope));
  }

  private static TensorReadException translate(TensorCatalog catalog, TensorIoException e) {
    String message = "artifact " + catalog.artifactId() + ": " + e.getMessage();
    return switch (e.reason()) {
      case UNKNOWN_TENSOR -> new TensorReadException(404, "UnknownTensor", message);
      case INVALID_TARGET -> new TensorReadException(400, "InvalidTarget", message);
      case NOT_DIVISIBLE -> new TensorReadException(400, "NotDivisible", message);
      case MISALIGNED_SUB_BYTE -> new TensorReadException(400, "MisalignedSubByte", message);
      case IDENTITY_MISMATCH -> new TensorReadException(409, "IdentityMismatch", message);
      case NOT_HELD -> new TensorReadException(409, "NotHeldHere", message);
    };
  }

  /** The layouts of {@code catalog}, built once per catalog (one artifact generation). */
  private Layouts layouts(TensorCatalog catalog) throws TensorReadException {
    Layouts l = cached;
    if (l != null && l.catalog() == catalog) {
      return l;
    }
    synchronized (this) {
      l = cached;
      if (l == null || l.catalog() != catalog) {
        l = build(catalog);
        cached = l;
      }
      return l;
    }
  }

  private Layouts build(TensorCatalog catalog) throws TensorReadException {
    StoredArtifact artifact = catalog.artifact();
    Map<String, Group> byFile = new HashMap<>();
    Map<String, StoreFile> files = new LinkedHashMap<>();
    artifact.files().forEach(f -> files.put(f.path(), f));
    for (StoreFile f : files.values()) {
      if (!(f.path().equals(MANIFEST) || f.path().endsWith("/" + MANIFEST))) {
        continue;
      }
      String prefix = f.path().substring(0, f.path().length() - MANIFEST.length());
      try {
        ShardManifest m = ShardManifest.parse(f.path(), manifestBytes(artifact, f));
        Map<Integer, SafetensorsHeader> headers = new java.util.TreeMap<>();
        for (int r = 0; r < m.tpSize(); r++) {
          String rank = prefix + ShardManifest.rankFileName(r);
          SafetensorsHeader h = catalog.headers().get(rank);
          if (h == null && !partialLayouts) {
            throw new ShardLayoutException(
                f.path() + " says tp_size " + m.tpSize() + " but " + rank + " is not stored");
          }
          if (h != null) {
            headers.put(r, h);
          }
        }
        String extra = prefix + ShardManifest.rankFileName(m.tpSize());
        if (files.containsKey(extra)) {
          throw new ShardLayoutException(
              f.path()
                  + " says tp_size "
                  + m.tpSize()
                  + " but "
                  + extra
                  + " is stored too: the rank files and the manifest disagree");
        }
        Group g =
            new Group(
                prefix,
                headers.size() == m.tpSize()
                    ? StoredLayout.ofShards(m, List.copyOf(headers.values()))
                    : StoredLayout.ofShardsPart(m, headers));
        for (String file : g.layout().files()) {
          byFile.put(prefix + file, g);
        }
      } catch (ShardLayoutException e) {
        throw new TensorReadException(
            500, "InvalidLayout", "artifact " + artifact.artifactId() + ": " + e.getMessage());
      } catch (IllegalStateException e) {
        throw new TensorReadException(503, "ArtifactUnloaded", e.getMessage());
      }
    }
    for (Map.Entry<String, List<TensorCatalog.Entry>> e : catalog.torchFiles().entrySet()) {
      List<StoredTensor> tensors = new ArrayList<>();
      for (TensorCatalog.Entry t : e.getValue()) {
        long[] shape = t.info().shape();
        tensors.add(
            new StoredTensor(
                t.info().name(),
                t.info().dtype(),
                shape,
                null,
                List.of(
                    new StoredTensor.Piece(
                        e.getKey(), t.fileOffset(), new long[shape.length], shape))));
      }
      try {
        byFile.put(e.getKey(), new Group("", StoredLayout.ofTensors(tensors)));
      } catch (ShardLayoutException x) {
        throw new TensorReadException(
            500, "InvalidLayout", "artifact " + artifact.artifactId() + ": " + x.getMessage());
      }
    }
    for (Map.Entry<String, SafetensorsHeader> e : catalog.headers().entrySet()) {
      if (!byFile.containsKey(e.getKey())) {
        try {
          byFile.put(
              e.getKey(), new Group("", StoredLayout.ofFiles(Map.of(e.getKey(), e.getValue()))));
        } catch (ShardLayoutException x) { // one header cannot declare a name twice
          throw new TensorReadException(
              500, "InvalidLayout", "artifact " + artifact.artifactId() + ": " + x.getMessage());
        }
      }
    }
    return new Layouts(catalog, Map.copyOf(byFile));
  }

  private static byte[] manifestBytes(StoredArtifact artifact, StoreFile f)
      throws ShardLayoutException {
    if (f.size() > MAX_MANIFEST_BYTES) {
      throw new ShardLayoutException(
          f.path() + " has " + f.size() + " bytes, above the limit of " + MAX_MANIFEST_BYTES);
    }
    byte[] b = new byte[(int) f.size()];
    artifact.read(f.path(), 0, ByteBuffer.wrap(b));
    return b;
  }
}
