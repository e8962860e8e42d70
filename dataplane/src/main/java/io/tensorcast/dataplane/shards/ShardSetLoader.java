package io.tensorcast.dataplane.shards;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.tensorcast.api.Reason;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.api.wire.ShardReport;
import io.tensorcast.dataplane.format.safetensors.SafetensorsFormatException;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.format.torch.TorchCheckpoint;
import io.tensorcast.dataplane.format.torch.TorchTensor;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.HeaderFetcher;
import io.tensorcast.dataplane.load.LoadFailure;
import io.tensorcast.dataplane.load.Loader;
import io.tensorcast.dataplane.load.ParallelRangeReader;
import io.tensorcast.dataplane.load.RangeReadException;
import io.tensorcast.dataplane.load.RangeSink;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.load.ReadProgressListener;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.ForwardingArtifactSource;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.store.LockStatus;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoreException;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.dataplane.tensor.StoredTensor;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Materialises the rank files of a TensorShardSet's ranks on one node: resolve (list the source,
 * read safetensors headers, torch checkpoint structures and {@code config.json}) → plan the whole
 * layout and check every rule against every rank ({@link ShardSetPlan}; a misfit fails before any
 * byte is stored) → admit (this node's bytes against the limit and the store's budget) → write each
 * layout's {@code manifest.json} and each rank file's header → fill the tensors: from ModelArtifact
 * copies' {@code /v1/tensors} where copies are known ({@link CopyReader}), else by ranged reads of
 * the source chosen by the cost model ({@link FetchPlanner}), straight into the store when a read
 * is exactly one slice, through a staging buffer otherwise → verify (each rank file's header in the
 * store is the planned one, the source objects did not change) → Ready.
 *
 * <p>Only contiguous, little-endian torch tensors with a safetensors dtype can be cut by ranges;
 * any other tensor in a torch file fails the load ({@code UnsupportedTensor}) naming it.
 *
 * <p>Counting: {@code bytesFetched} are tensor bytes read for the ranks (from the source, counted
 * on the response streams, or from copies); the headers, torch structures and {@code config.json}
 * read to plan are {@code metadataBytes}. A read that fills several ranks of this node counts for
 * each in proportion to the bytes it gives it.
 */
public final class ShardSetLoader implements Loader {
  private static final Logger log = LoggerFactory.getLogger(ShardSetLoader.class);

  /** Largest {@code config.json} read. */
  static final int MAX_CONFIG_BYTES = 4 << 20;

  private static final ObjectMapper JSON = new ObjectMapper();

  private final ArtifactSource source;
  private final io.tensorcast.dataplane.format.FormatLimits limits;
  private final PinnedStore store;
  private final String artifactId;
  private final long memoryLimitBytes;
  private final ReadOptions read;
  private final ShardSettings settings;
  private final Supplier<List<InetSocketAddress>> copies;
  private final CountingSource counting;
  private final State state;

  /**
   * @param copies the ModelArtifact copies known now (called once, after resolving)
   */
  public ShardSetLoader(
      ArtifactSource source,
      PinnedStore store,
      String artifactId,
      long memoryLimitBytes,
      ReadOptions read,
      ShardSettings settings,
      Supplier<List<InetSocketAddress>> copies) {
    this(
        source,
        store,
        artifactId,
        memoryLimitBytes,
        read,
        settings,
        copies,
        io.tensorcast.dataplane.format.FormatLimits.DEFAULT);
  }

  /** As above, the source's headers read within {@code limits} ({@code --max-…} flags). */
  public ShardSetLoader(
      ArtifactSource source,
      PinnedStore store,
      String artifactId,
      long memoryLimitBytes,
      ReadOptions read,
      ShardSettings settings,
      Supplier<List<InetSocketAddress>> copies,
      io.tensorcast.dataplane.format.FormatLimits limits) {
    this.limits = Objects.requireNonNull(limits, "limits");
    this.source = Objects.requireNonNull(source, "source");
    this.counting = new CountingSource(source);
    this.store = Objects.requireNonNull(store, "store");
    this.artifactId = Objects.requireNonNull(artifactId, "artifactId");
    this.memoryLimitBytes = memoryLimitBytes;
    this.read = Objects.requireNonNull(read, "read");
    this.settings = Objects.requireNonNull(settings, "settings");
    this.copies = Objects.requireNonNull(copies, "copies");
    this.state = new State(artifactId, source.describe(), settings);
  }

  @Override
  public DataPlaneStatus status() {
    return state.snapshot();
  }

  @Override
  public DataPlaneStatus load() throws LoadFailure {
    StoredArtifact stored = null;
    try {
      state.phase(Phase.Resolving);
      List<SourceFile> files = list();
      Map<String, SourceFile> byPath = new LinkedHashMap<>();
      files.forEach(f -> byPath.put(f.path(), f));
      List<StoredTensor> tensors = tensors(files);
      ShardRules rules = rules(byPath);
      ShardSetPlan plan;
      try {
        plan = ShardSetPlan.plan(tensors, rules, settings.parallelism());
      } catch (ShardPlanException e) {
        throw new LoadFailure(e.reason(), e.getMessage(), e);
      }
      List<ShardSetPlan.RankFile> mine = new ArrayList<>();
      for (int r : settings.ranks()) {
        mine.add(rankFile(plan, r));
      }
      state.resolved(
          plan,
          mine,
          source.resolvedRevision().orElse(null),
          counting.bytes.getAndSet(0),
          tensors.size());

      Map<String, Long> storeFiles = new LinkedHashMap<>();
      for (ShardSetPlan.RankFile f : mine) {
        storeFiles.put(f.manifestFile(), (long) f.manifestBytes().length);
        storeFiles.put(f.file(), f.fileBytes());
      }
      long total = storeFiles.values().stream().mapToLong(Long::longValue).sum();
      if (memoryLimitBytes > 0 && total > memoryLimitBytes) {
        throw new LoadFailure(
            Reason.ArtifactTooLarge,
            "ranks "
                + settings.ranks()
                + " need "
                + total
                + " bytes on this node, over the memory limit of "
                + memoryLimitBytes
                + " bytes (spec.memory.limit)");
      }
      discardStale();
      stored = allocate(storeFiles);
      state.locked(stored.lockStatus(), stored.directory().toString());
      Set<String> manifests = new LinkedHashSet<>();
      for (ShardSetPlan.RankFile f : mine) {
        if (manifests.add(f.manifestFile())) {
          stored.write(f.manifestFile(), 0, ByteBuffer.wrap(f.manifestBytes()));
          stored.markComplete(f.manifestFile());
        }
        stored.write(f.file(), 0, ByteBuffer.wrap(f.header()));
      }

      state.phase(Phase.Loading);
      List<ShardSetPlan.Need> fromSource = fromCopies(plan, mine, stored);
      fetch(fromSource, byPath, stored);

      state.phase(Phase.Verifying);
      verify(mine, stored, fromSource, byPath);
      state.ready(Instant.now());
      log.info(
          "shard set {}: ranks {} ready in {} ({} tensor bytes, {} fetched)",
          artifactId,
          settings.ranks(),
          stored.directory(),
          state.needed(),
          state.fetched());
      return state.snapshot();
    } catch (LoadFailure f) {
      fail(stored, f);
      throw f;
    } catch (StoreException e) {
      LoadFailure f = new LoadFailure(e.reason(), e.getMessage(), e);
      fail(stored, f);
      throw f;
    } catch (RuntimeException e) {
      LoadFailure f = new LoadFailure(Reason.InternalError, String.valueOf(e), e);
      fail(stored, f);
      throw f;
    }
  }

  private static ShardSetPlan.RankFile rankFile(ShardSetPlan plan, int r) throws LoadFailure {
    try {
      return plan.rankFile(r);
    } catch (ShardPlanException e) {
      throw new LoadFailure(e.reason(), e.getMessage(), e);
    }
  }

  private List<SourceFile> list() throws LoadFailure {
    try {
      List<SourceFile> files = source.list();
      if (files.isEmpty()) {
        throw new LoadFailure(
            Reason.EmptyArtifact,
            source.describe() + " has no files (after include/exclude filters)");
      }
      return files;
    } catch (SourceException e) {
      throw new LoadFailure(e.reason(), source.describe() + ": " + e.getMessage(), e);
    }
  }

  /** Every tensor of the safetensors and torch files, in file order, each one whole piece. */
  private List<StoredTensor> tensors(List<SourceFile> files) throws LoadFailure {
    List<StoredTensor> out = new ArrayList<>();
    Map<String, String> seen = new HashMap<>();
    for (SourceFile f : files) {
      if (f.path().endsWith(".safetensors")) {
        SafetensorsHeader h =
            HeaderFetcher.fetch(counting, f, limits.safetensors(), read.maxAttempts(), () -> {});
        for (TensorInfo t : h.tensors()) {
          add(out, seen, f, t.name(), t.dtype(), t.shape(), h.dataOffset() + t.begin());
        }
      } else if (HeaderFetcher.isTorchPath(f.path())) {
        Optional<TorchCheckpoint> c =
            HeaderFetcher.fetchTorch(counting, f, limits.torch(), read.maxAttempts(), () -> {});
        if (c.isEmpty()) {
          continue;
        }
        for (TorchTensor t : c.get().tensors()) {
          if (t.safetensorsDtype().isEmpty() || t.storage().bigEndian() || !t.isContiguous()) {
            throw new LoadFailure(
                Reason.UnsupportedTensor,
                f.path()
                    + ": tensor \""
                    + t.name()
                    + "\" ("
                    + t
                    + ") cannot be cut by byte ranges: only contiguous little-endian tensors of a"
                    + " safetensors dtype can; convert the checkpoint to safetensors or exclude"
                    + " the file");
          }
          long offset = t.storageFileOffset() + t.storageOffset() * t.dtype().elementSize();
          add(out, seen, f, t.name(), t.safetensorsDtype().get(), t.shape(), offset);
        }
      }
    }
    return out;
  }

  private static void add(
      List<StoredTensor> out,
      Map<String, String> seen,
      SourceFile f,
      String name,
      io.tensorcast.dataplane.format.safetensors.Dtype dtype,
      long[] shape,
      long offset)
      throws LoadFailure {
    String before = seen.put(name, f.path());
    if (before != null) {
      throw new LoadFailure(
          Reason.InvalidArtifact,
          "tensor \""
              + name
              + "\" is in both "
              + before
              + " and "
              + f.path()
              + "; names must be"
              + " unique across the artifact's files");
    }
    out.add(
        new StoredTensor(
            name,
            dtype,
            shape,
            null,
            List.of(new StoredTensor.Piece(f.path(), offset, new long[shape.length], shape))));
  }

  /** Explicit rules, or the built-in set of config.json's architectures. */
  private ShardRules rules(Map<String, SourceFile> files) throws LoadFailure {
    if (!settings.rules().isEmpty()) {
      try {
        return ShardRules.explicit(settings.rules());
      } catch (IllegalArgumentException e) {
        throw new LoadFailure(Reason.InvalidShardRules, e.getMessage(), e);
      }
    }
    SourceFile config = files.get("config.json");
    if (config == null) {
      throw new LoadFailure(
          Reason.NoRuleSet,
          source.describe()
              + " has no config.json to choose built-in rules from; give spec.rules, or include"
              + " config.json in the source");
    }
    if (config.size() > MAX_CONFIG_BYTES) {
      throw new LoadFailure(
          Reason.InvalidArtifact,
          "config.json has " + config.size() + " bytes, over the limit of " + MAX_CONFIG_BYTES);
    }
    List<String> architectures = new ArrayList<>();
    try (InputStream in = counting.openRange(config, 0, config.size())) {
      JsonNode root = JSON.readTree(in.readNBytes((int) config.size()));
      JsonNode a = root == null ? null : root.get("architectures");
      if (a != null && a.isArray()) {
        a.forEach(x -> architectures.add(x.asText()));
      }
    } catch (SourceException e) {
      throw new LoadFailure(e.reason(), "config.json: " + e.getMessage(), e);
    } catch (IOException e) {
      throw new LoadFailure(
          Reason.InvalidArtifact, "config.json is not valid JSON: " + e.getMessage());
    }
    return BuiltinRules.forArchitectures(architectures)
        .orElseThrow(
            () ->
                new LoadFailure(
                    Reason.NoRuleSet,
                    "config.json names architectures "
                        + architectures
                        + ", for which there is no built-in rule set (built-in: "
                        + String.join(", ", BuiltinRules.supported())
                        + "); give spec.rules"));
  }

  private void discardStale() throws StoreException {
    if (store.get(artifactId).isPresent()) {
      store.unload(artifactId);
    }
  }

  private StoredArtifact allocate(Map<String, Long> files) throws LoadFailure {
    List<StoreFile> entries = new ArrayList<>();
    files.forEach((p, size) -> entries.add(new StoreFile(p, size)));
    try {
      return store.allocate(artifactId, entries);
    } catch (StoreException e) {
      throw new LoadFailure(e.reason(), e.getMessage(), e);
    }
  }

  /** Reads every slice it can from ModelArtifact copies; returns the needs left for the source. */
  private List<ShardSetPlan.Need> fromCopies(
      ShardSetPlan plan, List<ShardSetPlan.RankFile> mine, StoredArtifact stored)
      throws LoadFailure {
    List<ShardSetPlan.Need> rest = new ArrayList<>();
    List<InetSocketAddress> known = copies.get();
    if (known.isEmpty()) {
      for (ShardSetPlan.RankFile f : mine) {
        rest.addAll(needs(plan, f.rank()));
      }
      return rest;
    }
    CopyReader reader = new CopyReader(settings.copyTokenFile());
    ExecutorService pool =
        Executors.newFixedThreadPool(
            Math.max(1, Math.min(read.concurrency(), 8)),
            r -> {
              Thread t = new Thread(r, "tensorcast-copy-read");
              t.setDaemon(true);
              return t;
            });
    AtomicReference<String> lastFailure = new AtomicReference<>();
    try {
      record Job(ShardSetPlan.RankFile file, ShardSetPlan.Slice slice, Future<Boolean> done) {}
      List<Job> jobs = new ArrayList<>();
      int i = 0;
      for (ShardSetPlan.RankFile f : mine) {
        for (ShardSetPlan.Slice s : f.slices()) {
          InetSocketAddress copy = known.get(i++ % known.size());
          long length = s.info().byteLength();
          if (length == 0) {
            continue;
          }
          jobs.add(
              new Job(
                  f,
                  s,
                  pool.submit(
                      () -> {
                        long at = f.header().length + s.info().begin();
                        ByteBuffer dst = stored.writable(f.file(), at, Math.toIntExact(length));
                        try {
                          reader.read(
                              copy,
                              s.info().name(),
                              plan.target(f, s),
                              s.info().dtype().name(),
                              s.info().shape(),
                              dst);
                          state.fetched(f.rank(), length, length, 1, true);
                          return true;
                        } catch (IOException e) {
                          lastFailure.set(e.getMessage());
                          return false;
                        }
                      })));
        }
      }
      Map<Integer, Set<String>> failed = new HashMap<>();
      for (Job j : jobs) {
        if (!j.done().get()) {
          failed
              .computeIfAbsent(j.file().rank(), k -> new LinkedHashSet<>())
              .add(j.slice().info().name());
        }
      }
      for (ShardSetPlan.RankFile f : mine) {
        Set<String> names = failed.getOrDefault(f.rank(), Set.of());
        if (!names.isEmpty()) {
          for (ShardSetPlan.Need n : needs(plan, f.rank())) {
            if (names.contains(n.tensor())) {
              rest.add(n);
            }
          }
        }
      }
      if (!rest.isEmpty()) {
        log.warn(
            "shard set {}: {} ranges not served by ModelArtifact copies {} (last: {}); reading"
                + " them from the source",
            artifactId,
            rest.size(),
            known,
            lastFailure.get());
      }
      return rest;
    } catch (java.util.concurrent.ExecutionException e) {
      throw new LoadFailure(Reason.InternalError, String.valueOf(e.getCause()), e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LoadFailure(Reason.Interrupted, "interrupted while reading from copies", e);
    } finally {
      pool.shutdownNow();
    }
  }

  private static List<ShardSetPlan.Need> needs(ShardSetPlan plan, int rank) throws LoadFailure {
    try {
      return plan.needs(rank);
    } catch (ShardPlanException e) {
      throw new LoadFailure(e.reason(), e.getMessage(), e);
    }
  }

  /** Reads {@code needs} from the source with the requests the cost model chooses. */
  private void fetch(
      List<ShardSetPlan.Need> needs, Map<String, SourceFile> files, StoredArtifact stored)
      throws LoadFailure {
    if (needs.isEmpty()) {
      return;
    }
    FetchPlanner.Plan plan = FetchPlanner.plan(needs, settings.costs());
    state.planned(plan);
    log.info(
        "shard set {}: {} ranges from the source as {} requests, {} of {} bytes"
            + " (amplification {}, gap threshold {} bytes, modelled {} s)",
        artifactId,
        needs.size(),
        plan.requests().size(),
        plan.bytesFetched(),
        plan.bytesNeeded(),
        String.format(java.util.Locale.ROOT, "%.3f", plan.amplification()),
        settings.costs().gapThreshold(),
        String.format(java.util.Locale.ROOT, "%.2f", plan.seconds()));
    Map<String, FetchPlanner.Request> byKey = new HashMap<>();
    List<ParallelRangeReader.FileRange> ranges = new ArrayList<>();
    for (FetchPlanner.Request r : plan.requests()) {
      byKey.put(r.sourceFile() + "@" + r.offset(), r);
      ranges.add(
          new ParallelRangeReader.FileRange(files.get(r.sourceFile()), r.offset(), r.length()));
    }
    Map<String, ByteBuffer> staging = new ConcurrentHashMap<>();
    RangeSink sink =
        new RangeSink() {
          @Override
          public ByteBuffer target(SourceFile file, long offset, int length) {
            FetchPlanner.Request r = byKey.get(file.path() + "@" + offset);
            if (r.direct()) {
              ShardSetPlan.Need n = r.needs().get(0);
              return stored.writable(n.file(), n.fileOffset(), length);
            }
            ByteBuffer b = ByteBuffer.allocate(length);
            staging.put(file.path() + "@" + offset, b);
            return b;
          }

          @Override
          public void rangeCompleted(SourceFile file, long offset, int length) {
            String key = file.path() + "@" + offset;
            FetchPlanner.Request r = byKey.get(key);
            ByteBuffer b = staging.remove(key);
            if (b != null) {
              for (ShardSetPlan.Need n : r.needs()) {
                ByteBuffer part =
                    b.duplicate()
                        .position((int) (n.sourceOffset() - offset))
                        .limit((int) (n.sourceOffset() - offset + n.length()));
                stored.write(n.file(), n.fileOffset(), part);
              }
            }
            long total = r.needs().stream().mapToLong(ShardSetPlan.Need::length).sum();
            Map<Integer, Long> perRank = new HashMap<>();
            r.needs().forEach(n -> perRank.merge(n.rank(), n.length(), Long::sum));
            perRank.forEach(
                (rank, bytes) ->
                    state.fetched(
                        rank,
                        bytes,
                        (double) bytes / total * length,
                        (double) bytes / total,
                        false));
          }
        };
    try {
      new ParallelRangeReader(read).readRanges(counting, ranges, sink, ReadProgressListener.NONE);
    } catch (RangeReadException e) {
      throw new LoadFailure(e.reason(), e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LoadFailure(Reason.Interrupted, "interrupted while loading", e);
    }
  }

  private void verify(
      List<ShardSetPlan.RankFile> mine,
      StoredArtifact stored,
      List<ShardSetPlan.Need> fromSource,
      Map<String, SourceFile> files)
      throws LoadFailure, StoreException {
    Set<String> used = new LinkedHashSet<>();
    fromSource.forEach(n -> used.add(n.sourceFile()));
    for (String path : used) {
      try {
        source.checkUnchanged(files.get(path));
      } catch (SourceException e) {
        throw new LoadFailure(e.reason(), e.getMessage(), e);
      }
    }
    for (ShardSetPlan.RankFile f : mine) {
      byte[] prefix = new byte[SafetensorsHeader.LENGTH_PREFIX_BYTES];
      stored.read(f.file(), 0, ByteBuffer.wrap(prefix));
      long n = ByteBuffer.wrap(prefix).order(ByteOrder.LITTLE_ENDIAN).getLong();
      byte[] expected =
          Arrays.copyOfRange(f.header(), SafetensorsHeader.LENGTH_PREFIX_BYTES, f.header().length);
      if (n != expected.length) {
        throw new LoadFailure(
            Reason.VerificationFailed,
            f.file() + ": header length in the store differs from the plan");
      }
      byte[] json = new byte[expected.length];
      stored.read(f.file(), SafetensorsHeader.LENGTH_PREFIX_BYTES, ByteBuffer.wrap(json));
      try {
        SafetensorsHeader.parse(f.file(), f.fileBytes(), json);
      } catch (SafetensorsFormatException e) {
        throw new LoadFailure(Reason.VerificationFailed, e.getMessage(), e);
      }
      if (!Arrays.equals(json, expected)) {
        throw new LoadFailure(
            Reason.VerificationFailed, f.file() + ": header in the store differs from the plan");
      }
      state.complete(f.rank(), stored.markComplete(f.file()));
    }
  }

  private void fail(StoredArtifact stored, LoadFailure f) {
    if (stored != null) {
      try {
        store.unload(artifactId);
      } catch (StoreException | RuntimeException e) {
        f.addSuppressed(e);
      }
    }
    state.failed(f.reason(), f.getMessage());
    log.warn("shard set {} failed: {}: {}", artifactId, f.reason(), f.getMessage());
  }

  /** Counts the bytes read through {@link #openRange} (response bodies, as received). */
  static final class CountingSource extends ForwardingArtifactSource {
    final AtomicLong bytes = new AtomicLong();

    CountingSource(ArtifactSource inner) {
      super(inner);
    }

    @Override
    public InputStream openRange(SourceFile file, long offset, long length) throws SourceException {
      InputStream in = delegate().openRange(file, offset, length);
      return new java.io.FilterInputStream(in) {
        @Override
        public int read() throws IOException {
          int b = super.read();
          if (b >= 0) {
            bytes.incrementAndGet();
          }
          return b;
        }

        @Override
        public int read(byte[] buf, int off, int len) throws IOException {
          int n = super.read(buf, off, len);
          if (n > 0) {
            bytes.addAndGet(n);
          }
          return n;
        }
      };
    }

    @Override
    public void close() {
      // the loader does not own the source
    }
  }

  /** Progress of one load; counters per rank, consistent snapshots. */
  private static final class State {
    private final String artifactId;
    private final String source;
    private final ShardSettings settings;
    private Phase phase = Phase.Pending;
    private Reason reason;
    private String message;
    private String revision;
    private String ruleSet;
    private List<Long> rankFileBytes = List.of();
    private List<Long> rankTensorBytes = List.of();
    private long metadataBytes;
    private long tensors;
    private DataPlaneStatus.LockInfo lock;
    private String directory;
    private String readyTime;
    private final Map<Integer, ShardSetPlan.RankFile> files = new LinkedHashMap<>();
    private final Map<Integer, double[]> counters = new LinkedHashMap<>();
    private final Map<Integer, Boolean> complete = new LinkedHashMap<>();
    private final Map<String, String> sha256 = new LinkedHashMap<>();

    State(String artifactId, String source, ShardSettings settings) {
      this.artifactId = artifactId;
      this.source = source;
      this.settings = settings;
    }

    synchronized void phase(Phase p) {
      phase = p;
    }

    synchronized void resolved(
        ShardSetPlan plan,
        List<ShardSetPlan.RankFile> mine,
        String revision,
        long metadata,
        long tensors) {
      this.revision = revision;
      this.ruleSet = plan.rules().name();
      this.metadataBytes = metadata;
      this.tensors = tensors;
      try {
        this.rankFileBytes = plan.rankFileBytes();
        this.rankTensorBytes = plan.rankTensorBytes();
      } catch (ShardPlanException e) {
        throw new IllegalStateException(e); // plan() already built every rank
      }
      for (ShardSetPlan.RankFile f : mine) {
        files.put(f.rank(), f);
        // written, fetched, fromPeers, requests
        counters.put(f.rank(), new double[4]);
        complete.put(f.rank(), false);
      }
    }

    synchronized void locked(LockStatus s, String dir) {
      lock = ArtifactLoader.lockInfo(s);
      directory = dir;
    }

    synchronized void planned(FetchPlanner.Plan plan) {
      // nothing kept beyond the log line; counters move as reads complete
    }

    synchronized void fetched(
        int rank, long written, double fetched, double requests, boolean fromPeers) {
      double[] c = counters.get(rank);
      c[0] += written;
      c[1] += fetched;
      if (fromPeers) {
        c[2] += fetched;
      }
      c[3] += requests;
    }

    synchronized void complete(int rank, String sha) {
      complete.put(rank, true);
      sha256.put(files.get(rank).file(), sha);
    }

    synchronized long needed() {
      return files.values().stream().mapToLong(ShardSetPlan.RankFile::tensorBytes).sum();
    }

    synchronized long fetched() {
      return (long) counters.values().stream().mapToDouble(c -> c[1]).sum();
    }

    synchronized void ready(Instant at) {
      phase = Phase.Ready;
      readyTime = at.toString();
      reason = null;
      message = null;
    }

    synchronized void failed(Reason reason, String message) {
      phase = Phase.Failed;
      this.reason = reason;
      this.message = message;
      counters.values().forEach(c -> c[0] = 0);
      complete.replaceAll((k, v) -> false);
      if (lock != null) {
        lock = new DataPlaneStatus.LockInfo(false, 0, lock.reason(), lock.message());
      }
    }

    synchronized DataPlaneStatus snapshot() {
      List<ShardReport.Rank> ranks = new ArrayList<>();
      List<DataPlaneStatus.FileStatus> fileStatuses = new ArrayList<>();
      long total = 0;
      long loaded = 0;
      long fetched = 0;
      long fromPeers = 0;
      int done = 0;
      for (ShardSetPlan.RankFile f : files.values()) {
        double[] c = counters.get(f.rank());
        boolean ok = complete.get(f.rank());
        ranks.add(
            new ShardReport.Rank(
                f.rank(),
                settings.parallelism().describe(f.coordinates()),
                directory == null ? f.file() : directory + "/" + f.file(),
                f.fileBytes(),
                f.tensorBytes(),
                (long) c[0],
                Math.round(c[1]),
                Math.round(c[2]),
                (long) Math.ceil(c[3] - 1e-9),
                ok));
        fileStatuses.add(
            new DataPlaneStatus.FileStatus(f.file(), f.fileBytes(), ok, sha256.get(f.file())));
        total += f.tensorBytes();
        loaded += ok ? f.tensorBytes() : Math.min((long) c[0], f.tensorBytes());
        fetched += Math.round(c[1]);
        fromPeers += Math.round(c[2]);
        done += ok ? 1 : 0;
      }
      ShardReport report =
          new ShardReport(
              settings.parallelism().describe(),
              ruleSet,
              settings.parallelism().worldSize(),
              rankFileBytes,
              rankTensorBytes,
              metadataBytes,
              ranks);
      return DataPlaneStatus.builder(artifactId, phase)
          .reason(reason)
          .message(message)
          .source(source)
          .resolvedRevision(revision)
          .files(files.size())
          .filesComplete(done)
          .tensors(tensors)
          .bytesTotal(total)
          .bytesLoaded(loaded)
          .bytesFromSource(fetched - fromPeers)
          .bytesFromPeers(fromPeers)
          .lock(lock)
          .storeDirectory(directory)
          .readyTime(readyTime)
          .fileStatuses(fileStatuses)
          .shards(report)
          .build();
    }
  }

  static String utf8(byte[] b) {
    return new String(b, StandardCharsets.UTF_8);
  }
}
