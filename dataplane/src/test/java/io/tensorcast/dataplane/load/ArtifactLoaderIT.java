package io.tensorcast.dataplane.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.api.Reason;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.format.index.ShardIndex;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.torch.ByteSource;
import io.tensorcast.dataplane.format.torch.TorchCheckpoint;
import io.tensorcast.dataplane.format.torch.TorchCheckpointReader;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.ForwardingArtifactSource;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.MemoryLockSupport;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.RecoveryAction;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.dataplane.testing.S3Options;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.FaultInjectingProxy.RecordedRequest;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The loader end to end against real parts: an S3-compatible server (S3Mock, its own process)
 * holding real corpus files, a fault-injecting proxy on a real socket in front of it, and a {@link
 * PinnedStore} on a fresh directory under {@code /dev/shm}. What lands in the store is compared
 * byte for byte with the corpus files; counts in the status are computed here from the corpus
 * files, not taken from MANIFEST.tsv.
 */
class ArtifactLoaderIT {
  private static final String BUCKET = "loader-it";
  private static final String MODEL = "model/";
  private static final String WITH_BROKEN = "with-broken/";
  private static final String BROKEN =
      "broken/safetensors-cpp__safetensors_abuse_attempt_1.safetensors";
  private static final String MNIST =
      "safetensors/burn__examples_import-model-weights_mnist.safetensors";
  private static final String CONFIG = "index/falcon-180b-chat/config.json";
  private static final int RANGE = 256 * 1024;
  private static final ReadOptions FAST =
      ReadOptions.DEFAULTS
          .withBackoff(Duration.ofMillis(2), Duration.ofMillis(20))
          .withRangeSize(RANGE)
          .withConcurrency(4);
  private static final long BUDGET = 256L << 20;

  private static S3MockServer s3;
  private static Path corpus;

  /** Path in the artifact → the corpus file it was uploaded from, for {@value #MODEL}. */
  private static final Map<String, Path> model = new TreeMap<>();

  private static long modelBytes;
  private static long modelTensors;

  /** Each model file's MD5: what S3 publishes for a single-part object as its ETag. */
  private static final Map<String, String> modelMd5 = new TreeMap<>();

  private static final String TORCH = "torch-model/";
  private static final String TORCH_NEEDS_CODE = "torch-needs-code/";
  private static final List<String> TORCH_FILES =
      List.of(
          "torch/torchtune__tiny_llama2_checkpoint.pt",
          "torch/burn__legacy_uncloned_views.pt",
          "torch/generated-by-torch-1.13/torch113_training_checkpoint.pt");
  private static final String TORCH_MODULE = "torch/burn__import_data_mnist_full_module.pt";

  private Path root;
  private FaultInjectingProxy proxy;
  private final List<AutoCloseable> toClose = new ArrayList<>();

  @BeforeAll
  static void seed() throws Exception {
    corpus = Corpus.dir();
    s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    // Every well-formed safetensors file of the corpus (loose files, per-rank files and the tiny
    // sharded model with its index), under their corpus paths, and a config.json at the top.
    for (Path f : Corpus.safetensorsFiles()) {
      String rel = corpus.relativize(f).toString();
      if (!rel.startsWith("broken/")) {
        model.put(rel, f);
      }
    }
    Path sharded = corpus.resolve("index/safetensorsjl-tiny-sharded");
    model.put(
        "index/safetensorsjl-tiny-sharded/model.safetensors.index.json",
        sharded.resolve("model.safetensors.index.json"));
    model.put("config.json", corpus.resolve(CONFIG));
    assertThat(model).containsKey(MNIST);
    for (Map.Entry<String, Path> e : model.entrySet()) {
      s3.putFile(BUCKET, MODEL + e.getKey(), e.getValue());
      modelBytes += Files.size(e.getValue());
      modelMd5.put(e.getKey(), md5(e.getValue()));
      if (e.getKey().endsWith(".safetensors")) {
        modelTensors += SafetensorsHeader.read(e.getValue()).tensors().size();
      }
    }
    // Torch checkpoints: zip (prefix differs from the name), legacy, floats in the pickle; and one
    // whose pickle needs code (a whole nn.Module of class __main__.Net).
    for (String t : TORCH_FILES) {
      s3.putFile(BUCKET, TORCH + t, corpus.resolve(t));
    }
    s3.putFile(BUCKET, TORCH + "config.json", corpus.resolve(CONFIG));
    s3.putFile(BUCKET, TORCH_NEEDS_CODE + TORCH_MODULE, corpus.resolve(TORCH_MODULE));
    s3.putFile(BUCKET, TORCH_NEEDS_CODE + "config.json", corpus.resolve(CONFIG));
    // A small artifact with the corpus's broken file among good ones.
    s3.putFile(BUCKET, WITH_BROKEN + BROKEN, corpus.resolve(BROKEN));
    s3.putFile(BUCKET, WITH_BROKEN + MNIST, corpus.resolve(MNIST));
    s3.putFile(BUCKET, WITH_BROKEN + "config.json", corpus.resolve(CONFIG));
  }

  @BeforeEach
  void setUp() throws Exception {
    Path shm = Path.of("/dev/shm");
    assumeTrue(Files.isDirectory(shm), "/dev/shm is needed for the page-locked store");
    root = Files.createTempDirectory(shm, "tensorcast-loader-it-");
    proxy = new FaultInjectingProxy(s3.endpoint());
  }

  @AfterEach
  void tearDown() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    proxy.close();
    TestFiles.deleteTree(root);
  }

  // ------------------------------------------------------------------ the happy path

  @Test
  void loadsEveryFileByteIdenticalAndReportsCountsTheBytesBack() throws Exception {
    MeterRegistry registry = new SimpleMeterRegistry();
    PinnedStore store = store(BUDGET);
    ArtifactLoader loader = loader(source(MODEL, proxy), store, "model", 0, FAST, registry);
    boolean mayLock = MemoryLockSupport.facts().allows(pageRounded(model.values()));

    DataPlaneStatus s = loader.load();

    assertThat(s.phase()).isEqualTo(Phase.Ready);
    assertThat(s.reason()).isNull();
    assertThat(s.artifactId()).isEqualTo("model");
    assertThat(s.source()).isEqualTo("s3://" + BUCKET + "/" + MODEL);
    assertThat(s.resolvedRevision()).startsWith("listing-sha256:");
    assertThat(s.readyTime()).isNotNull();
    assertThat(s.files()).isEqualTo(model.size());
    assertThat(s.filesComplete()).isEqualTo(model.size());
    assertThat(s.tensors()).isEqualTo(modelTensors);
    assertThat(s.bytesTotal()).isEqualTo(modelBytes);
    assertThat(s.bytesLoaded()).isEqualTo(modelBytes);
    assertThat(s.bytesFromSource()).isEqualTo(modelBytes);
    assertThat(s.bytesFromPeers()).isZero();
    Path dir = root.resolve("model");
    assertThat(s.storeDirectory()).isEqualTo(dir.toString());
    assertThat(s.fileStatuses())
        .extracting(
            f -> f.path(),
            f -> f.size(),
            f -> f.complete(),
            f -> f.verification(),
            f -> f.contentDigest(),
            f -> f.sha256())
        .containsExactlyElementsOf(
            model.keySet().stream()
                .map(
                    p ->
                        org.assertj.core.groups.Tuple.tuple(
                            p,
                            size(model.get(p)),
                            true,
                            DataPlaneStatus.Verification.SourceDigest,
                            "md5:" + modelMd5.get(p),
                            null))
                .toList());
    assertRecordedMd5(store.get("model").orElseThrow());
    assertByteIdentical(dir);

    assertThat(store.bytesInUse()).isEqualTo(pageRounded(model.values()));
    if (mayLock) {
      assertThat(s.lock().locked()).as(s.lock().message()).isTrue();
      assertThat(s.lock().lockedBytes()).isEqualTo(modelBytes);
    } else {
      assertThat(s.lock().locked()).isFalse();
      assertThat(s.lock().reason()).isEqualTo("MemlockLimitTooLow");
    }

    assertThat(gauge(registry, "tensorcast.dataplane.artifact.loaded")).isEqualTo(modelBytes);
    assertThat(gauge(registry, "tensorcast.dataplane.artifact")).isEqualTo(modelBytes);
    assertThat(gauge(registry, "tensorcast.dataplane.artifact.ready")).isEqualTo(1);
    assertThat(retries(registry)).isZero();
    // every GET of an object was a ranged GET carrying the listed ETag in If-Match
    assertThat(objectGets(MODEL))
        .isNotEmpty()
        .allSatisfy(
            r -> {
              assertThat(r.range()).isPresent();
              assertThat(r.ifMatch()).isPresent();
            });
  }

  @Test
  void aFastOriginGetsAdjacentRangesOfAFileInOneRequestAndTheCopyIsStillVerified()
      throws Exception {
    PinnedStore store = store(BUDGET);
    ArtifactLoader loader =
        loader(source(MODEL, proxy), store, "model", 0, FAST.withMaxRangeSize(4 * RANGE), null);

    DataPlaneStatus s = loader.load();

    assertThat(s.phase()).isEqualTo(Phase.Ready);
    assertByteIdentical(root.resolve("model"));
    assertThat(s.fileStatuses())
        .extracting(f -> f.path(), f -> f.verification())
        .containsExactlyElementsOf(
            modelMd5.keySet().stream()
                .map(
                    p ->
                        org.assertj.core.groups.Tuple.tuple(
                            p, DataPlaneStatus.Verification.SourceDigest))
                .toList());
    assertRecordedMd5(store.get("model").orElseThrow());
    // the loopback origin delivers far more than a range per connection in half a second: some
    // requests asked for several planned ranges, none for more than the largest
    List<Long> lengths =
        objectGets(MODEL).stream()
            .map(r -> r.range().orElseThrow())
            .map(
                range -> {
                  String[] ends = range.substring("bytes=".length()).split("-");
                  return Long.parseLong(ends[1]) - Long.parseLong(ends[0]) + 1;
                })
            .toList();
    assertThat(lengths)
        .allSatisfy(l -> assertThat(l).isLessThanOrEqualTo(4L * RANGE))
        .anySatisfy(l -> assertThat(l).isGreaterThan(RANGE));
  }

  // ------------------------------------------------------------------ retries

  @Test
  void bodiesCutMidwayAreResumedAndTheCopyIsStillByteIdentical() throws Exception {
    MeterRegistry registry = new SimpleMeterRegistry();
    AtomicBoolean armed = new AtomicBoolean();
    int cutAt = 100_000;
    // Cut the next 4 response bodies of the 1.5 MB file after 100,000 bytes, from its first data
    // GET on, once every header was read (they are read alongside the data, and their retries
    // use the fetcher's fixed back-off). Only that file's: a cut of any GET went, now and then,
    // to the other files' reads in flight alone, and this file had nothing to resume.
    java.util.concurrent.atomic.AtomicReference<ArtifactLoader> loading =
        new java.util.concurrent.atomic.AtomicReference<>();
    DataPhaseSource src =
        new DataPhaseSource(
            source(MODEL, proxy),
            file -> file.path().equals(MNIST),
            () -> {
              long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
              while (loading.get().status().tensors() != modelTensors
                  && System.nanoTime() < deadline) {
                java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
              }
              proxy.cutBodyAfterWhere(
                  cutAt, 4, r -> r.path().equals("/" + BUCKET + "/" + MODEL + MNIST));
              armed.set(true);
            });
    ArtifactLoader loader = loader(src, store(BUDGET), "model", 0, FAST, registry);
    loading.set(loader);
    src.phase = () -> loader.status().phase();

    DataPlaneStatus s = loader.load();

    assertThat(armed).isTrue();
    assertThat(s.phase()).isEqualTo(Phase.Ready);
    assertThat(s.bytesLoaded()).isEqualTo(modelBytes);
    assertByteIdentical(root.resolve("model"));
    assertThat(retries(registry)).isPositive();
    // the retries resumed where the bodies broke: they asked only for the bytes not yet received
    List<Long> resumed =
        proxy.gets("/" + BUCKET + "/" + MODEL + MNIST).stream()
            .map(r -> r.rangeStart().orElseThrow())
            .filter(start -> start != 8) // the header's JSON, read alongside the data
            .filter(start -> start % RANGE != 0)
            .toList();
    assertThat(resumed)
        .isNotEmpty()
        .allSatisfy(start -> assertThat(start % RANGE % cutAt).isZero());
  }

  @Test
  void aBurstOf503AnswersIsRetriedAndTheLoadIsReady() throws Exception {
    MeterRegistry registry = new SimpleMeterRegistry();
    DataPhaseSource src =
        new DataPhaseSource(
            source(MODEL, proxy), file -> true, () -> proxy.failRequests(503, 4, null));
    ArtifactLoader loader = loader(src, store(BUDGET), "model", 0, FAST, registry);
    src.phase = () -> loader.status().phase();

    DataPlaneStatus s = loader.load();

    assertThat(s.phase()).isEqualTo(Phase.Ready);
    assertThat(s.reason()).isNull();
    assertByteIdentical(root.resolve("model"));
    // each of the four 503 SlowDown answers cost exactly one retry
    assertThat(retries(registry)).isEqualTo(4);
  }

  @Test
  void theDataReadsStartWhileTheHeadersAreStillBeingRead() throws Exception {
    // Every header's JSON is held back until a data range was opened: the load reads the bytes
    // after the listing and the digests, with the headers read and validated alongside.
    HeldHeaderSource src = new HeldHeaderSource(source(MODEL, proxy), (f, offset) -> offset == 8);
    ArtifactLoader loader = loader(src, store(BUDGET), "model", 0, FAST, null);

    DataPlaneStatus s = loader.load();

    assertThat(src.dataFirst())
        .as("a data range was opened before a header's JSON was answered")
        .isTrue();
    assertThat(s.phase()).isEqualTo(Phase.Ready);
    assertThat(s.tensors()).isEqualTo(modelTensors);
    assertByteIdentical(root.resolve("model"));
  }

  @Test
  void aHeaderThatBreaksItsRulesAfterTheDataReadsBeganStillFailsTheLoadWithItsRule()
      throws Exception {
    // The broken file's length prefix is answered only once the data reads are under way: its
    // rule still fails the load, with the same message, and the copy is released.
    HeldHeaderSource src =
        new HeldHeaderSource(
            source(WITH_BROKEN, proxy), (f, offset) -> f.path().equals(BROKEN) && offset == 0);
    ArtifactLoader loader = loader(src, store(BUDGET), "broken-late", 0, FAST, null);

    assertThatThrownBy(loader::load)
        .isInstanceOfSatisfying(
            LoadFailure.class, f -> assertThat(f.reason()).isEqualTo(Reason.InvalidSafetensors))
        .hasMessageStartingWith(BROKEN + ": ")
        .hasMessageContaining("1000")
        .hasMessageEndingWith("[rule header-length-exceeds-file]");
    assertThat(src.dataFirst()).isTrue();
    DataPlaneStatus s = loader.status();
    assertThat(s.phase()).isEqualTo(Phase.Failed);
    assertThat(s.reason()).isEqualTo("InvalidSafetensors");
    assertThat(s.bytesLoaded()).isZero();
    assertStoreEmpty();
  }

  @Test
  void aHeaderThatBreaksItsRulesWhileThePeerSwarmFillsStopsTheFillWithItsRule() throws Exception {
    // A member of a swarm (alone: no peer secret, no peers) fills the store while the broken
    // file's length prefix is held back; its rule then stops the fill and fails the load.
    proxy.throttleBodies(200_000);
    HeldHeaderSource src =
        new HeldHeaderSource(
            source(WITH_BROKEN, proxy), (f, offset) -> f.path().equals(BROKEN) && offset == 0);
    io.tensorcast.dataplane.p2p.PeerSwarm swarm =
        new io.tensorcast.dataplane.p2p.PeerSwarm(
            "broken-fill",
            new io.tensorcast.dataplane.p2p.PeerSettings(
                "m0",
                new java.net.InetSocketAddress("127.0.0.1", 0),
                16 * 1024,
                null,
                Duration.ZERO,
                Duration.ofSeconds(5),
                io.tensorcast.dataplane.p2p.PeerSettings.DEFAULT_MAX_IN_FLIGHT,
                null),
            new SimpleMeterRegistry());
    toClose.add(swarm);
    ArtifactLoader loader =
        new ArtifactLoader(
            src,
            store(BUDGET),
            new ArtifactLoader.Options("broken-fill", 0, FAST),
            new LoadMetrics(new SimpleMeterRegistry()),
            swarm);

    assertThatThrownBy(loader::load)
        .isInstanceOfSatisfying(
            LoadFailure.class, f -> assertThat(f.reason()).isEqualTo(Reason.InvalidSafetensors))
        .hasMessageStartingWith(BROKEN + ": ")
        .hasMessageEndingWith("[rule header-length-exceeds-file]");
    assertThat(src.dataFirst()).isTrue();
    assertThat(Thread.interrupted()).as("no interrupt left on the loading thread").isFalse();
    // the fill stopped: the 1.5 MB file at 200 kB/s per connection was not read whole
    assertThat(proxy.getBodyBytes()).isLessThan(Files.size(corpus.resolve(MNIST)));
    assertThat(loader.status().reason()).isEqualTo("InvalidSafetensors");
    assertStoreEmpty();
  }

  @Test
  void aPeerSwarmFillStartsBeforeThePublishedDigestsAreReadAndEndsCheckedAgainstThem()
      throws Exception {
    // Every file's published digest (S3: a HEAD) is answered only once a data range was opened:
    // a swarm member reads its share without waiting for them; the files are checked against
    // them once they are in (before, the fill waited for them and the digests waited 20 s).
    HeldDigestSource src = new HeldDigestSource(source(MODEL, proxy), f -> null);
    io.tensorcast.dataplane.p2p.PeerSwarm swarm = aloneInASwarm("digests-later");
    ArtifactLoader loader =
        new ArtifactLoader(
            src,
            store(BUDGET),
            new ArtifactLoader.Options("digests-later", 0, FAST),
            new LoadMetrics(new SimpleMeterRegistry()),
            swarm);

    DataPlaneStatus st = loader.load();

    assertThat(src.dataFirst()).as("a data range was read before any digest was answered").isTrue();
    assertThat(st.phase()).isEqualTo(Phase.Ready);
    assertThat(st.bytesFromSource()).isEqualTo(modelBytes);
    assertByteIdentical(root.resolve("digests-later"));
  }

  @Test
  void aPublishedDigestTheBytesDoNotMatchFailsAFillThatStartedWithoutItAndLeavesTheStoreEmpty()
      throws Exception {
    // The digests arrive after the fill began; MNIST's says SHA-256 = 0…0. The load fails on it
    // as before and releases the store.
    HeldDigestSource src =
        new HeldDigestSource(
            source(MODEL, proxy),
            f ->
                f.path().equals(MNIST)
                    ? io.tensorcast.dataplane.source.PublishedDigest.hex(
                        io.tensorcast.dataplane.source.PublishedDigest.Algorithm.SHA256,
                        "00".repeat(32),
                        "SHA256 (a wrong one)")
                    : null);
    io.tensorcast.dataplane.p2p.PeerSwarm swarm = aloneInASwarm("bad-digest");
    ArtifactLoader loader =
        new ArtifactLoader(
            src,
            store(BUDGET),
            new ArtifactLoader.Options("bad-digest", 0, FAST),
            new LoadMetrics(new SimpleMeterRegistry()),
            swarm);

    assertThatThrownBy(loader::load)
        .isInstanceOfSatisfying(
            LoadFailure.class, f -> assertThat(f.reason()).isEqualTo(Reason.DigestMismatch))
        .hasMessageContaining(MNIST);
    assertThat(src.dataFirst()).isTrue();
    assertThat(Thread.interrupted()).as("no interrupt left on the loading thread").isFalse();
    assertStoreEmpty();
  }

  @Test
  void aDigestThatCannotBeReadFailsAFillThatStartedWithoutItAndLeavesTheStoreEmpty()
      throws Exception {
    // The digest's HEAD is refused (403) while the fill already runs: the fill is stopped and the
    // load fails as it did when it waited for the digests. (A transient or ObjectChanged failure
    // keeps the verified ranges for the next load instead, as any failure during a fill does.)
    HeldDigestSource src =
        new HeldDigestSource(
            source(MODEL, proxy),
            f -> {
              if (f.path().equals(MNIST)) {
                throw new SourceException(
                    Reason.AccessDenied, MNIST + ": HEAD refused (403, test)", false);
              }
              return null;
            });
    io.tensorcast.dataplane.p2p.PeerSwarm swarm = aloneInASwarm("digest-fails");
    proxy.throttleBodies(200_000); // the fill is still running when the digest fails
    ArtifactLoader loader =
        new ArtifactLoader(
            src,
            store(BUDGET),
            new ArtifactLoader.Options("digest-fails", 0, FAST),
            new LoadMetrics(new SimpleMeterRegistry()),
            swarm);

    assertThatThrownBy(loader::load).isInstanceOf(LoadFailure.class).hasMessageContaining(MNIST);
    assertThat(src.dataFirst()).isTrue();
    assertThat(proxy.getBodyBytes()).as("the fill stopped before the end").isLessThan(modelBytes);
    assertThat(Thread.interrupted()).as("no interrupt left on the loading thread").isFalse();
    assertStoreEmpty();
  }

  /** A peer swarm of one member (no peer secret, no peers): a {@link StoreFiller} over sockets. */
  private io.tensorcast.dataplane.p2p.PeerSwarm aloneInASwarm(String id) {
    io.tensorcast.dataplane.p2p.PeerSwarm swarm =
        new io.tensorcast.dataplane.p2p.PeerSwarm(
            id,
            new io.tensorcast.dataplane.p2p.PeerSettings(
                "m0",
                new java.net.InetSocketAddress("127.0.0.1", 0),
                16 * 1024,
                null,
                Duration.ZERO,
                Duration.ofSeconds(5),
                io.tensorcast.dataplane.p2p.PeerSettings.DEFAULT_MAX_IN_FLIGHT,
                null),
            new SimpleMeterRegistry());
    toClose.add(swarm);
    return swarm;
  }

  @Test
  void aFillThatTheHeadersInterruptIntoAnUncheckedFailureLeavesNoInterruptAndFailsWithTheRule()
      throws Exception {
    // The broken file's rule interrupts the thread filling while it reads the store's file
    // through an interruptible channel: the fill throws the channel's ClosedByInterruptException
    // (unchecked, the interrupt still set), not InterruptedException nor a LoadFailure. The load
    // fails with the header's rule and leaves no interrupt on the calling thread.
    HeldHeaderSource src =
        new HeldHeaderSource(
            source(WITH_BROKEN, proxy), (f, offset) -> f.path().equals(BROKEN) && offset == 0);
    AtomicBoolean interruptedInFill = new AtomicBoolean();
    StoreFiller readsTheStoreUntilInterrupted =
        (source, stored, files, read, gate, progress) -> {
          SourceFile data = files.stream().filter(f -> f.path().equals(MNIST)).findFirst().get();
          try (InputStream in = source.openRange(data, RANGE, 4096)) {
            in.readAllBytes(); // a data range: the broken file's length prefix is answered now
          } catch (IOException | SourceException e) {
            if (!interruptedBy(e)) {
              throw new LoadFailure(Reason.SourceUnavailable, e.toString(), e);
            }
            // The header's failure can come while this range is still read: the interrupt lands
            // in the source's read. Keep it set so that it lands in the store's channel below.
            Thread.currentThread().interrupt();
          }
          java.nio.ByteBuffer chunk = java.nio.ByteBuffer.allocateDirect(4096);
          long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
          while (System.nanoTime() < deadline) {
            try {
              stored.consumeFromFile(data.path(), 0, 4096, chunk, b -> {});
            } catch (java.io.UncheckedIOException e) {
              interruptedInFill.set(Thread.currentThread().isInterrupted());
              throw e;
            }
          }
        };
    ArtifactLoader loader =
        new ArtifactLoader(
            src,
            store(BUDGET),
            new ArtifactLoader.Options("broken-unchecked", 0, FAST),
            new LoadMetrics(new SimpleMeterRegistry()),
            readsTheStoreUntilInterrupted);

    assertThatThrownBy(loader::load)
        .isInstanceOfSatisfying(
            LoadFailure.class, f -> assertThat(f.reason()).isEqualTo(Reason.InvalidSafetensors))
        .hasMessageStartingWith(BROKEN + ": ")
        .hasMessageEndingWith("[rule header-length-exceeds-file]");
    assertThat(interruptedInFill).as("the header's failure interrupted the fill").isTrue();
    assertThat(Thread.interrupted()).as("no interrupt left on the loading thread").isFalse();
    assertThat(loader.status().reason()).isEqualTo("InvalidSafetensors");
    assertStoreEmpty();
  }

  /** Whether {@code e} is an interrupt surfacing through a read (the flag set or in its causes). */
  private static boolean interruptedBy(Throwable e) {
    if (Thread.currentThread().isInterrupted()) {
      return true;
    }
    for (Throwable c = e; c != null; c = c.getCause()) {
      if (c instanceof InterruptedException
          || c instanceof java.io.InterruptedIOException
          || c instanceof java.nio.channels.ClosedByInterruptException
          || c.getClass().getSimpleName().equals("AbortedException")) {
        return true;
      }
    }
    return false;
  }

  // ------------------------------------------------------------------ refusals

  @Test
  void aBudgetTooSmallIsInsufficientMemoryBeforeAnyDataIsRead() throws Exception {
    PinnedStore store = store(64 * 1024);
    ArtifactLoader loader = loader(source(MODEL, proxy), store, "model", 0, FAST, null);

    assertThatThrownBy(loader::load)
        .isInstanceOfSatisfying(
            LoadFailure.class, f -> assertThat(f.reason()).isEqualTo(Reason.InsufficientMemory))
        .hasMessageContaining("artifact model needs ")
        .hasMessageContaining("budget is 65536 bytes");
    assertThat(loader.status().phase()).isEqualTo(Phase.Failed);
    assertThat(loader.status().reason()).isEqualTo("InsufficientMemory");
    assertThat(loader.status().bytesLoaded()).isZero();
    assertStoreEmpty();
    assertOnlyHeadersWereRead(MODEL, model);
  }

  @Test
  void aLoadInterruptedWhileItsFailedAllocationWaitsForTheHeadersStopsAtOnce() throws Exception {
    // The allocation fails (budget too small) while a header's JSON is held back (no data range is
    // ever opened, so it would be answered after 20 s): the load waits for the headers to report
    // a broken one first, but an interrupt (the load cancelled) ends that wait at once.
    HeldHeaderSource src = new HeldHeaderSource(source(MODEL, proxy), (f, offset) -> offset == 8);
    ArtifactLoader loader = loader(src, store(64 * 1024), "model", 0, FAST, null);
    java.util.concurrent.atomic.AtomicReference<Throwable> thrown =
        new java.util.concurrent.atomic.AtomicReference<>();
    Thread loading =
        new Thread(
            () -> {
              try {
                loader.load();
              } catch (Throwable t) {
                thrown.set(t);
              }
            },
            "interrupted-load");
    loading.start();
    long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    while (Stream.of(loading.getStackTrace()).noneMatch(e -> e.getMethodName().equals("failureOr"))
        && loading.isAlive()
        && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    assertThat(Stream.of(loading.getStackTrace()).map(StackTraceElement::getMethodName))
        .as("the load waits for the headers after its allocation failed")
        .contains("failureOr");
    loading.interrupt();
    loading.join();

    assertThat(src.timedOut).as("the load returned before the held header was answered").isFalse();
    assertThat(thrown.get())
        .isInstanceOfSatisfying(
            LoadFailure.class, f -> assertThat(f.reason()).isEqualTo(Reason.Interrupted));
    assertThat(loader.status().phase()).isEqualTo(Phase.Failed);
    assertStoreEmpty();
  }

  @Test
  void anArtifactOverTheMemoryLimitIsArtifactTooLarge() throws Exception {
    ArtifactLoader loader =
        loader(source(MODEL, proxy), store(BUDGET), "model", modelBytes - 1, FAST, null);

    assertThatThrownBy(loader::load)
        .isInstanceOfSatisfying(
            LoadFailure.class, f -> assertThat(f.reason()).isEqualTo(Reason.ArtifactTooLarge))
        .hasMessage(
            "artifact is "
                + modelBytes
                + " bytes, over the memory limit of "
                + (modelBytes - 1)
                + " bytes (spec.memory.limit)");
    assertThat(loader.status().phase()).isEqualTo(Phase.Failed);
    assertThat(loader.status().reason()).isEqualTo("ArtifactTooLarge");
    assertThat(loader.status().bytesTotal()).isEqualTo(modelBytes);
    assertStoreEmpty();
    assertOnlyHeadersWereRead(MODEL, model);
  }

  @Test
  void torchCheckpointsAreValidatedAndTheirTensorsServedFromTheStore() throws Exception {
    PinnedStore store = store(BUDGET);
    ArtifactLoader loader = loader(source(TORCH, proxy), store, "torch", 0, FAST, null);

    DataPlaneStatus s = loader.load();

    assertThat(s.phase()).isEqualTo(Phase.Ready);
    long expectedTensors = 0;
    for (String t : TORCH_FILES) {
      expectedTensors += TorchCheckpointReader.read(corpus.resolve(t)).tensors().size();
    }
    assertThat(s.tensors()).isEqualTo(expectedTensors).isGreaterThan(20);
    StoredArtifact stored = store.get("torch").orElseThrow();
    for (String t : TORCH_FILES) {
      TorchCheckpoint fromFile = TorchCheckpointReader.read(corpus.resolve(t));
      long size = Files.size(corpus.resolve(t));
      ByteSource inStore =
          new ByteSource() {
            @Override
            public long size() {
              return size;
            }

            @Override
            public void read(long offset, java.nio.ByteBuffer dst) {
              stored.read(t, offset, dst);
            }
          };
      TorchCheckpoint fromStore =
          TorchCheckpointReader.read(
              t, inStore, io.tensorcast.dataplane.format.torch.TorchLimits.DEFAULT);
      assertThat(fromStore.tensors()).hasSameSizeAs(fromFile.tensors());
      try (ByteSource.FileByteSource file = ByteSource.open(corpus.resolve(t))) {
        for (int i = 0; i < fromFile.tensors().size(); i++) {
          assertThat(fromStore.tensors().get(i).contiguousBytes(inStore))
              .as(t + " " + fromFile.tensors().get(i).name())
              .isEqualTo(fromFile.tensors().get(i).contiguousBytes(file));
        }
      }
    }
  }

  @Test
  void aTorchCheckpointWhosePickleNeedsCodeIsRefusedNamingTheGlobal() throws Exception {
    ArtifactLoader loader =
        loader(source(TORCH_NEEDS_CODE, proxy), store(BUDGET), "needs-code", 0, FAST, null);

    assertThatThrownBy(loader::load)
        .isInstanceOfSatisfying(
            LoadFailure.class, f -> assertThat(f.reason()).isEqualTo(Reason.InvalidTorchCheckpoint))
        .hasMessageStartingWith(TORCH_MODULE + ": ")
        .hasMessageContaining("global __main__.Net is not allowed")
        .hasMessageContaining("[rule disallowed-global]")
        .hasMessageEndingWith(
            "leave it out with spec.source.exclude (CLI --exclude) '" + TORCH_MODULE + "'");
    assertThat(loader.status().phase()).isEqualTo(Phase.Failed);
    assertThat(loader.status().bytesLoaded()).isZero();
    assertStoreEmpty();
  }

  @Test
  void theBrokenCorpusFileIsInvalidSafetensorsNamingItAndTheStoreStaysEmpty() throws Exception {
    ArtifactLoader loader =
        loader(source(WITH_BROKEN, proxy), store(BUDGET), "broken", 0, FAST, null);

    assertThatThrownBy(loader::load)
        .isInstanceOfSatisfying(
            LoadFailure.class, f -> assertThat(f.reason()).isEqualTo(Reason.InvalidSafetensors))
        .hasMessageStartingWith(BROKEN + ": ")
        .hasMessageContaining("1000")
        .hasMessageEndingWith("[rule header-length-exceeds-file]");
    DataPlaneStatus s = loader.status();
    assertThat(s.phase()).isEqualTo(Phase.Failed);
    assertThat(s.reason()).isEqualTo("InvalidSafetensors");
    assertThat(s.message()).contains(BROKEN);
    assertThat(s.bytesLoaded()).isZero();
    assertStoreEmpty();
  }

  @Test
  void aBrokenHeaderIsReportedBeforeTheMemoryLimitThatTheSameArtifactAlsoExceeds()
      throws Exception {
    // The files are allocated (and the memory limit checked) while the headers are read: the
    // header's failure still wins, as when allocation followed the header reads.
    ArtifactLoader loader =
        loader(source(WITH_BROKEN, proxy), store(BUDGET), "broken-and-large", 1, FAST, null);

    assertThatThrownBy(loader::load)
        .isInstanceOfSatisfying(
            LoadFailure.class, f -> assertThat(f.reason()).isEqualTo(Reason.InvalidSafetensors))
        .hasMessageStartingWith(BROKEN + ": ")
        .hasMessageEndingWith("[rule header-length-exceeds-file]");
    assertThat(loader.status().reason()).isEqualTo("InvalidSafetensors");
    assertStoreEmpty();
  }

  @Test
  void aMissingBucketIsBucketNotFound() throws Exception {
    ArtifactSource missing =
        open("s3://no-such-bucket-loader-it/" + MODEL, S3Options.via(proxy.endpoint()));
    ArtifactLoader loader = loader(missing, store(BUDGET), "model", 0, FAST, null);

    assertThatThrownBy(loader::load)
        .isInstanceOfSatisfying(
            LoadFailure.class, f -> assertThat(f.reason()).isEqualTo(Reason.BucketNotFound))
        .hasMessageContaining("s3://no-such-bucket-loader-it/" + MODEL)
        .hasMessageContaining("the bucket does not exist");
    assertThat(loader.status().phase()).isEqualTo(Phase.Failed);
    assertThat(loader.status().reason()).isEqualTo("BucketNotFound");
    assertStoreEmpty();
  }

  // ------------------------------------------------------------------ bounds and restarts

  @Test
  void noMoreThanTheConfiguredConcurrencyOfRequestsIsInFlight() throws Exception {
    int concurrency = 3;
    proxy.delay(Duration.ofMillis(15));
    ArtifactSource src =
        open(
            "s3://" + BUCKET + "/" + MODEL,
            S3Options.via(proxy.endpoint()).maxConnections(concurrency));
    ArtifactLoader loader =
        loader(
            src,
            store(BUDGET),
            "model",
            0,
            FAST.withConcurrency(concurrency).withRangeSize(128 * 1024),
            null);

    assertThat(loader.load().phase()).isEqualTo(Phase.Ready);
    assertByteIdentical(root.resolve("model"));
    // parallel, but never more than `concurrency` GETs at once (header reads included)
    assertThat(proxy.maxInFlightGets()).isBetween(2, concurrency);
  }

  @Test
  void afterARestartTheCompleteCopyIsAdoptedWithoutReadingTheSource() throws Exception {
    PinnedStore first = store(BUDGET);
    ArtifactLoader before = loader(source(MODEL, proxy), first, "model", 0, FAST, null);
    DataPlaneStatus loaded = before.load();
    assertThat(loaded.phase()).isEqualTo(Phase.Ready);
    first.close(); // the data plane stops; the files stay in tmpfs

    PinnedStore second = store(BUDGET);
    assertThat(second.recovery())
        .singleElement()
        .satisfies(
            a -> {
              assertThat(a.name()).isEqualTo("model");
              assertThat(a.action()).isEqualTo(RecoveryAction.Action.ADOPTED);
            });
    proxy.reset();
    MeterRegistry registry = new SimpleMeterRegistry();
    ArtifactLoader after = loader(source(MODEL, proxy), second, "model", 0, FAST, registry);

    DataPlaneStatus s = after.load();

    assertThat(s.phase()).isEqualTo(Phase.Ready);
    assertThat(s.files()).isEqualTo(model.size());
    assertThat(s.filesComplete()).isEqualTo(model.size());
    assertThat(s.tensors()).isEqualTo(modelTensors);
    assertThat(s.bytesLoaded()).isEqualTo(modelBytes);
    assertThat(s.bytesFromSource()).isZero();
    assertThat(s.resolvedRevision()).isEqualTo(loaded.resolvedRevision());
    assertThat(s.fileStatuses()).isEqualTo(loaded.fileStatuses());
    assertByteIdentical(root.resolve("model"));
    // only the listing went to the source: no object was read, not even a header
    assertThat(proxy.requests()).isNotEmpty();
    assertThat(objectGets(MODEL)).isEmpty();
    assertThat(proxy.requests()).allSatisfy(r -> assertThat(r.range()).isEmpty());
  }

  // ------------------------------------------------------------------ helpers

  private PinnedStore store(long budget) throws Exception {
    PinnedStore store = new PinnedStore(root, budget, LockPolicy.BEST_EFFORT);
    toClose.add(store);
    return store;
  }

  private ArtifactSource source(String prefix, FaultInjectingProxy via) throws SourceException {
    return open(
        "s3://" + BUCKET + "/" + prefix,
        S3Options.via(via.endpoint()).readTimeout(Duration.ofSeconds(10)));
  }

  private ArtifactSource open(String uri, SourceOptions.Builder options) throws SourceException {
    ArtifactSource src = Sources.open(uri, options.build());
    toClose.add(src);
    return src;
  }

  private static ArtifactLoader loader(
      ArtifactSource src,
      PinnedStore store,
      String id,
      long memoryLimit,
      ReadOptions read,
      MeterRegistry registry) {
    return new ArtifactLoader(
        src,
        store,
        new ArtifactLoader.Options(id, memoryLimit, read),
        new LoadMetrics(registry != null ? registry : new SimpleMeterRegistry()));
  }

  /** The store directory holds exactly the artifact's files, each byte-identical to the corpus. */
  private static void assertByteIdentical(Path dir) throws IOException {
    Set<String> found = new TreeSet<>();
    try (Stream<Path> walk = Files.walk(dir)) {
      walk.filter(Files::isRegularFile).forEach(p -> found.add(dir.relativize(p).toString()));
    }
    assertThat(found).containsExactlyElementsOf(model.keySet());
    for (Map.Entry<String, Path> e : model.entrySet()) {
      assertThat(Files.mismatch(dir.resolve(e.getKey()), e.getValue()))
          .as("first differing byte of %s", e.getKey())
          .isEqualTo(-1L);
    }
  }

  /** Nothing of any artifact under the root: only the store's lock file. */
  private void assertStoreEmpty() throws IOException {
    List<String> tree = new ArrayList<>();
    try (Stream<Path> walk = Files.walk(root)) {
      walk.filter(p -> !p.equals(root)).forEach(p -> tree.add(root.relativize(p).toString()));
    }
    assertThat(tree).containsExactlyInAnyOrder(".tensorcast", ".tensorcast/store.lock");
  }

  /**
   * Every GET of an object under {@code prefix} read a safetensors header: its 8-byte length prefix
   * ({@code bytes=0-7}) or its JSON ({@code bytes=8-(8+N-1)}), or an index file whole (to check it
   * against the headers); no other file was read.
   */
  private void assertOnlyHeadersWereRead(String prefix, Map<String, Path> files) throws Exception {
    Map<String, Set<String>> allowed = new TreeMap<>();
    for (Map.Entry<String, Path> e : files.entrySet()) {
      Set<String> ranges = new TreeSet<>();
      if (e.getKey().endsWith(".safetensors")) {
        ranges.add("bytes=0-7");
        if (!e.getKey().equals(BROKEN)) {
          long n = SafetensorsHeader.read(e.getValue()).headerLength();
          ranges.add("bytes=8-" + (8 + n - 1));
        }
      }
      if (ShardIndex.isIndexPath(e.getKey())) {
        ranges.add("bytes=0-" + (Files.size(e.getValue()) - 1));
      }
      allowed.put("/" + BUCKET + "/" + prefix + e.getKey(), ranges);
    }
    List<RecordedRequest> gets = objectGets(prefix);
    assertThat(gets).isNotEmpty();
    for (RecordedRequest r : gets) {
      assertThat(allowed).containsKey(r.path());
      assertThat(r.range())
          .as("GET %s", r.path())
          .hasValueSatisfying(range -> assertThat(allowed.get(r.path())).contains(range));
    }
  }

  private List<RecordedRequest> objectGets(String prefix) {
    return proxy.requests().stream()
        .filter(r -> r.method().equals("GET") && r.path().startsWith("/" + BUCKET + "/" + prefix))
        .toList();
  }

  private static double gauge(MeterRegistry registry, String name) {
    return registry.get(name).gauge().value();
  }

  private static double retries(MeterRegistry registry) {
    FunctionCounter c = registry.get("tensorcast.dataplane.source.retries").functionCounter();
    return c.count();
  }

  /** What the store charges: every file's size rounded up to whole pages. */
  private static long pageRounded(java.util.Collection<Path> files) {
    long page = MemoryLockSupport.pageSize();
    return files.stream().mapToLong(f -> (size(f) + page - 1) / page * page).sum();
  }

  private static long size(Path p) {
    try {
      return Files.size(p);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  private static String md5(Path p) throws Exception {
    MessageDigest md = MessageDigest.getInstance("MD5");
    return HexFormat.of().formatHex(md.digest(Files.readAllBytes(p)));
  }

  /**
   * Each model file was verified by its single-part ETag's MD5 and the store recorded that MD5 for
   * it, computed over its bytes in the store, in place of a SHA-256 (which nothing computed).
   */
  private static void assertRecordedMd5(StoredArtifact held) {
    assertThat(modelMd5)
        .allSatisfy((p, md5) -> assertThat(held.completedDigest(p)).contains("md5:" + md5));
  }

  /**
   * A source whose header reads that {@code held} names (by file and offset: 0 the length prefix, 8
   * the JSON) wait until a data range — a read at neither offset — was opened, for at most 20 s;
   * {@link #dataFirst} says whether one was.
   */
  private static final class HeldHeaderSource extends ForwardingArtifactSource {
    private final java.util.function.BiPredicate<SourceFile, Long> held;
    private final java.util.concurrent.CountDownLatch data =
        new java.util.concurrent.CountDownLatch(1);
    private final AtomicBoolean timedOut = new AtomicBoolean();

    HeldHeaderSource(
        ArtifactSource delegate, java.util.function.BiPredicate<SourceFile, Long> held) {
      super(delegate);
      this.held = held;
    }

    boolean dataFirst() {
      return data.getCount() == 0 && !timedOut.get();
    }

    @Override
    public InputStream openRange(SourceFile file, long offset, long length) throws SourceException {
      boolean header =
          file.path().endsWith(".safetensors") && ((offset == 0 && length == 8) || offset == 8);
      if (!header) {
        data.countDown();
      } else if (held.test(file, offset)) {
        try {
          if (!data.await(20, java.util.concurrent.TimeUnit.SECONDS)) {
            timedOut.set(true);
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      return delegate().openRange(file, offset, length);
    }
  }

  /**
   * A source whose published digests are answered only once a data range (not a safetensors header
   * read) was opened, for at most 20 s ({@link #dataFirst} says whether one was); {@code answer}
   * replaces a file's digest (or throws), null keeps the source's.
   */
  private static final class HeldDigestSource extends ForwardingArtifactSource {
    private final DigestAnswer answer;
    private final java.util.concurrent.CountDownLatch data =
        new java.util.concurrent.CountDownLatch(1);
    private final AtomicBoolean timedOut = new AtomicBoolean();

    @FunctionalInterface
    interface DigestAnswer {
      io.tensorcast.dataplane.source.PublishedDigest of(SourceFile f) throws SourceException;
    }

    HeldDigestSource(ArtifactSource delegate, DigestAnswer answer) {
      super(delegate);
      this.answer = answer;
    }

    boolean dataFirst() {
      return data.getCount() == 0 && !timedOut.get();
    }

    @Override
    public InputStream openRange(SourceFile file, long offset, long length) throws SourceException {
      boolean header =
          file.path().endsWith(".safetensors") && ((offset == 0 && length == 8) || offset == 8);
      if (!header && !file.path().endsWith(".json")) {
        data.countDown();
      }
      return delegate().openRange(file, offset, length);
    }

    @Override
    public io.tensorcast.dataplane.source.PublishedDigest publishedDigest(SourceFile file)
        throws SourceException {
      try {
        if (!data.await(20, java.util.concurrent.TimeUnit.SECONDS)) {
          timedOut.set(true);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      io.tensorcast.dataplane.source.PublishedDigest d = answer.of(file);
      return d != null ? d : delegate().publishedDigest(file);
    }
  }

  /**
   * A source that runs {@code action} once, just before the first ranged read of a matching file's
   * data (not of a safetensors header: its length prefix or JSON) while the loader is {@link
   * Phase#Loading}: faults injected then hit the data path, not the header reads, which run
   * alongside it.
   */
  private static final class DataPhaseSource extends ForwardingArtifactSource {
    private final java.util.function.Predicate<SourceFile> which;
    private final Runnable action;
    private final AtomicBoolean fired = new AtomicBoolean();
    volatile Supplier<Phase> phase = () -> Phase.Pending;

    DataPhaseSource(
        ArtifactSource delegate, java.util.function.Predicate<SourceFile> which, Runnable action) {
      super(delegate);
      this.which = which;
      this.action = action;
    }

    @Override
    public InputStream openRange(SourceFile file, long offset, long length) throws SourceException {
      boolean header =
          file.path().endsWith(".safetensors") && ((offset == 0 && length == 8) || offset == 8);
      if (phase.get() == Phase.Loading
          && !header
          && which.test(file)
          && fired.compareAndSet(false, true)) {
        action.run();
      }
      return delegate().openRange(file, offset, length);
    }
  }
}
