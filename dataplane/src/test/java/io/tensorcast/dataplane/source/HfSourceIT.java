package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.api.Reason;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.LoadFailure;
import io.tensorcast.dataplane.load.LoadMetrics;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.HubStandIn;
import io.tensorcast.testing.HubStandIn.Target;
import io.tensorcast.testing.TestFiles;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * HfSource against {@link HubStandIn} (a real HTTP Hub on 127.0.0.1 and LFS CDN on 127.0.0.2)
 * serving real corpus files: a sharded model (6 safetensors shards in LFS + its index JSON as a git
 * file), listed through the paginated tree API and read through resolve → CDN redirects.
 */
class HfSourceIT {
  private static final String TOKEN = "hf_test_token_0123456789";
  private static final Function<String, String> NO_ENV = name -> null;

  private static HubStandIn hub;
  private static Path sharded;

  /** repo path → local corpus file */
  private static final Map<String, Path> files = new TreeMap<>();

  private static String commitA;
  private Path storeRoot;

  @BeforeAll
  static void startHub() throws Exception {
    sharded = Corpus.dir().resolve("index/safetensorsjl-tiny-sharded");
    try (Stream<Path> s = Files.list(sharded)) {
      s.sorted().forEach(p -> files.put(p.getFileName().toString(), p));
    }
    hub = HubStandIn.start();
    HubStandIn.Repo repo = hub.repo("jl/tiny-sharded");
    commitA = repo.commit(files);
    repo.ref("v1.0", commitA).ref("refs/pr/1", commitA);
  }

  @AfterAll
  static void stopHub() {
    if (hub != null) {
      hub.close();
    }
  }

  @BeforeEach
  void fresh() throws Exception {
    hub.reset();
    storeRoot = Files.createTempDirectory(Path.of("/dev/shm"), "hf-it-");
  }

  @AfterEach
  void cleanStore() throws Exception {
    TestFiles.deleteTree(storeRoot);
  }

  private static SourceOptions.Builder options() {
    // the stand-in speaks plain http on loopback; a token may go there only when allowed
    return SourceOptions.builder()
        .endpoint(hub.endpoint())
        .listMaxAttempts(3)
        .allowInsecureEndpoint(true);
  }

  private static HfSource open(String uri, SourceOptions options) throws SourceException {
    return HfSource.open(SourceUri.parse(uri), options, NO_ENV);
  }

  private DataPlaneStatus load(ArtifactSource source, String id) throws Exception {
    return load(source, id, 256);
  }

  private DataPlaneStatus load(ArtifactSource source, String id, int rangeSize) throws Exception {
    try (PinnedStore store = new PinnedStore(storeRoot, 64L << 20, LockPolicy.DISABLED)) {
      ReadOptions read =
          ReadOptions.DEFAULTS
              .withRangeSize(rangeSize)
              .withConcurrency(4)
              .withBackoff(Duration.ofMillis(10), Duration.ofSeconds(2));
      ArtifactLoader loader =
          new ArtifactLoader(
              source,
              store,
              new ArtifactLoader.Options(id, 0, read),
              new LoadMetrics(new SimpleMeterRegistry()));
      DataPlaneStatus status = loader.load();
      StoredArtifact stored = store.get(id).orElseThrow();
      for (SourceFile f : source.list()) {
        ByteBuffer inStore = stored.readOnly(f.path(), 0, Math.toIntExact(f.size()));
        byte[] bytes = new byte[inStore.remaining()];
        inStore.get(bytes);
        assertThat(bytes).as(f.path()).isEqualTo(Files.readAllBytes(files.get(f.path())));
      }
      return status;
    }
  }

  @Test
  void listsEveryPageWithSizesAndLfsSha256PinnedToTheCommit() throws Exception {
    Map<String, Corpus.Entry> manifest = Corpus.manifest();
    try (HfSource source = open("hf://jl/tiny-sharded", options().build())) {
      List<SourceFile> listed = source.list();
      assertThat(listed).extracting(SourceFile::path).containsExactlyElementsOf(files.keySet());
      for (SourceFile f : listed) {
        Corpus.Entry entry = manifest.get("index/safetensorsjl-tiny-sharded/" + f.path());
        assertThat(f.size()).as(f.path()).isEqualTo(entry.bytes());
        if (f.path().endsWith(".safetensors")) {
          assertThat(f.sha256()).as(f.path()).contains(entry.sha256());
          assertThat(f.etag()).isEqualTo(entry.sha256());
        } else {
          // a git file: its id is the git blob sha1, never offered as a sha256
          assertThat(f.sha256()).as(f.path()).isEmpty();
          assertThat(f.etag()).hasSize(40);
        }
      }
      assertThat(source.resolvedRevision()).contains(commitA);
    }
    List<HubStandIn.Request> api = hub.requests(Target.API);
    assertThat(api.get(0).path()).isEqualTo("/api/models/jl/tiny-sharded/revision/main");
    // 7 files at 3 entries a page: 3 tree pages, all at the commit, not at "main"
    assertThat(api.subList(1, api.size()))
        .hasSize(3)
        .allSatisfy(
            r -> assertThat(r.path()).startsWith("/api/models/jl/tiny-sharded/tree/" + commitA));
  }

  @Test
  void loadsIntoThePinnedStoreByteForByteAndReportsTheCommit() throws Exception {
    try (HfSource source = open("hf://jl/tiny-sharded", options().build())) {
      DataPlaneStatus status = load(source, "hf-e2e");
      assertThat(status.phase()).isEqualTo(DataPlaneStatus.Phase.Ready);
      assertThat(status.resolvedRevision()).isEqualTo(commitA);
      assertThat(status.bytesLoaded()).isEqualTo(status.bytesTotal());
      // every file checked against a digest the Hub publishes: LFS sha256, git blob sha1
      assertThat(status.fileStatuses())
          .allSatisfy(
              f -> {
                assertThat(f.verification()).isEqualTo(DataPlaneStatus.Verification.SourceDigest);
                assertThat(f.digest())
                    .isEqualTo(
                        f.path().endsWith(".safetensors")
                            ? "sha256 (Hub LFS oid)"
                            : "git blob sha1 (Hub oid)");
              });
    }
    // LFS files came from the CDN, the JSON file from the Hub itself
    assertThat(hub.requests(Target.CDN)).isNotEmpty();
    assertThat(hub.requests(Target.RESOLVE))
        .allSatisfy(r -> assertThat(r.path()).contains("/resolve/" + commitA + "/"));
  }

  @Test
  void tagsPullRequestRefsAndShasResolveToTheSameCommit() throws Exception {
    for (String rev : List.of("v1.0", "refs/pr/1", commitA)) {
      try (HfSource source = open("hf://jl/tiny-sharded", options().revision(rev).build())) {
        assertThat(source.list()).hasSize(files.size());
        assertThat(source.resolvedRevision()).as(rev).contains(commitA);
      }
    }
    assertThat(hub.requests(Target.API))
        .extracting(HubStandIn.Request::path)
        .contains("/api/models/jl/tiny-sharded/revision/refs%2Fpr%2F1");
  }

  @Test
  void aSubdirectoryListsPathsRelativeToIt() throws Exception {
    HubStandIn.Repo repo = hub.repo("jl/nested");
    Map<String, Path> nested = new LinkedHashMap<>();
    nested.put(
        "weights/a/model-00001-of-00006.safetensors",
        files.get("model-00001-of-00006.safetensors"));
    nested.put("weights/b.json", files.get("model.safetensors.index.json"));
    nested.put("other.json", files.get("model.safetensors.index.json"));
    repo.commit(nested);
    try (HfSource source = open("hf://jl/nested/weights", options().build())) {
      List<SourceFile> listed = source.list();
      assertThat(listed)
          .extracting(SourceFile::path)
          .containsExactly("a/model-00001-of-00006.safetensors", "b.json");
      try (InputStream in = source.openRange(listed.get(1), 0, listed.get(1).size())) {
        assertThat(in.readAllBytes())
            .isEqualTo(Files.readAllBytes(files.get("model.safetensors.index.json")));
      }
    }
  }

  @Test
  void aBranchThatMovesAfterListingKeepsServingTheResolvedCommit() throws Exception {
    HubStandIn.Repo repo = hub.repo("jl/moving");
    Map<String, Path> first =
        Map.of("model.safetensors", files.get("model-00002-of-00006.safetensors"));
    Map<String, Path> second =
        Map.of("model.safetensors", files.get("model-00003-of-00006.safetensors"));
    String a = repo.commit(first);
    try (HfSource source = open("hf://jl/moving", options().build())) {
      SourceFile listed = source.list().get(0);
      String b = repo.commit(second); // main moves to b
      assertThat(b).isNotEqualTo(a);
      byte[] expected = Files.readAllBytes(first.get("model.safetensors"));
      byte[] got = new byte[expected.length];
      for (int off = 0; off < expected.length; off += 100) {
        int len = Math.min(100, expected.length - off);
        try (InputStream in = source.openRange(listed, off, len)) {
          System.arraycopy(in.readAllBytes(), 0, got, off, len);
        }
      }
      assertThat(got).isEqualTo(expected);
      assertThat(source.resolvedRevision()).contains(a);
    }
    assertThat(hub.requests(Target.RESOLVE))
        .allSatisfy(r -> assertThat(r.path()).startsWith("/jl/moving/resolve/" + a + "/"));
  }

  @Test
  void theTokenGoesToTheHubButNeverToTheCdn() throws Exception {
    hub.repo("jl/private").privateWithToken(TOKEN).commit(files);
    try (HfSource source = open("hf://jl/private", options().token(TOKEN).build())) {
      DataPlaneStatus status = load(source, "hf-private");
      assertThat(status.phase()).isEqualTo(DataPlaneStatus.Phase.Ready);
    }
    assertThat(hub.requests(Target.CDN))
        .isNotEmpty()
        .allSatisfy(r -> assertThat(r.authorization()).isEmpty());
    assertThat(hub.requests(Target.RESOLVE))
        .isNotEmpty()
        .allSatisfy(r -> assertThat(r.authorization()).contains("Bearer " + TOKEN));
  }

  @Test
  void theTokenIsReadFromHfTokenAndTheEndpointFromHfEndpoint() throws Exception {
    hub.repo("jl/private-env").privateWithToken(TOKEN).commit(files);
    Map<String, String> env = Map.of("HF_TOKEN", TOKEN, "HF_ENDPOINT", hub.endpoint().toString());
    try (HfSource source =
        HfSource.open(
            SourceUri.parse("hf://jl/private-env"),
            SourceOptions.builder().allowInsecureEndpoint(true).build(),
            env::get)) {
      assertThat(source.endpoint()).isEqualTo(hub.endpoint());
      assertThat(source.list()).hasSize(files.size());
    }
  }

  @Test
  void aRenamedRepositoryIsFollowedWithTheTokenOnTheSameHost() throws Exception {
    hub.repo("jl/old-name").privateWithToken(TOKEN).commit(files);
    hub.rename("jl/old-name", "jl/new-name");
    try (HfSource source = open("hf://jl/old-name", options().token(TOKEN).build())) {
      List<SourceFile> listed = source.list();
      SourceFile json = listed.stream().filter(f -> f.path().endsWith(".json")).findFirst().get();
      try (InputStream in = source.openRange(json, 5, 20)) {
        byte[] all = Files.readAllBytes(files.get(json.path()));
        assertThat(in.readAllBytes()).isEqualTo(Arrays.copyOfRange(all, 5, 25));
      }
    }
    List<HubStandIn.Request> resolves = hub.requests(Target.RESOLVE);
    assertThat(resolves).anySatisfy(r -> assertThat(r.path()).startsWith("/jl/old-name/"));
    assertThat(resolves).anySatisfy(r -> assertThat(r.path()).startsWith("/jl/new-name/"));
    assertThat(resolves).allSatisfy(r -> assertThat(r.authorization()).contains("Bearer " + TOKEN));
  }

  @Test
  void aPrivateRepositoryWithoutATokenIsUnauthorizedAndSaysToSetOne() throws Exception {
    hub.repo("jl/secret").privateWithToken(TOKEN).commit(files);
    try (HfSource source = open("hf://jl/secret", options().build())) {
      assertThatThrownBy(source::list)
          .isInstanceOfSatisfying(
              SourceException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.Unauthorized);
                assertThat(e.retryable()).isFalse();
              })
          .hasMessageContaining("no token was sent: set HF_TOKEN")
          .hasMessageContaining("HTTP 401 RepoNotFound");
    }
  }

  @Test
  void hubErrorCodesBecomeReasons() throws Exception {
    hub.repo("jl/gated").gated().commit(files);
    try (HfSource source = open("hf://jl/gated", options().token(TOKEN).build())) {
      SourceFile f = source.list().get(0);
      assertThatThrownBy(() -> source.openRange(f, 0, 10))
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.GatedRepo))
          .hasMessageContaining("accept its conditions");
    }
    try (HfSource source =
        open("hf://jl/tiny-sharded", options().revision("no-such-branch").build())) {
      assertThatThrownBy(source::list)
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.RevisionNotFound))
          .hasMessageContaining("'no-such-branch'");
    }
    try (HfSource source = open("hf://jl/does-not-exist", options().token(TOKEN).build())) {
      assertThatThrownBy(source::list)
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.RepoNotFound));
    }
    try (HfSource source = open("hf://jl/tiny-sharded", options().build())) {
      source.list();
      SourceFile ghost = new SourceFile("ghost.safetensors", 10, "", Optional.empty());
      assertThatThrownBy(() -> source.openRange(ghost, 0, 10))
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.EntryNotFound))
          .hasMessageContaining("ghost.safetensors");
    }
  }

  @Test
  void aThrottledListingWaitsForRetryAfterThenSucceeds() throws Exception {
    hub.fail(Target.API, 429, 1, Duration.ofSeconds(1));
    try (HfSource source = open("hf://jl/tiny-sharded", options().build())) {
      long start = System.nanoTime();
      assertThat(source.list()).hasSize(files.size());
      assertThat(Duration.ofNanos(System.nanoTime() - start))
          .isGreaterThanOrEqualTo(Duration.ofSeconds(1));
    }
    // the 429 plus the successful revision call
    assertThat(hub.requests(Target.API).stream().filter(r -> r.path().contains("/revision/")))
        .hasSize(2);
  }

  @Test
  void listingGivesUpAfterTheBoundedAttemptsWithARetryableReason() throws Exception {
    hub.fail(Target.API, 500, 10, null);
    try (HfSource source = open("hf://jl/tiny-sharded", options().listMaxAttempts(2).build())) {
      assertThatThrownBy(source::list)
          .isInstanceOfSatisfying(
              SourceException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.SourceUnavailable);
                assertThat(e.retryable()).isTrue();
              })
          .hasMessageContaining("HTTP 500");
    }
    assertThat(hub.requests(Target.API)).hasSize(2);
  }

  @Test
  void aThrottledRangeCarriesRetryAfterAndTheLoadRetries() throws Exception {
    try (HfSource source = open("hf://jl/tiny-sharded", options().build())) {
      SourceFile f = source.list().get(0);
      hub.fail(Target.RESOLVE, 429, 1, Duration.ofSeconds(2));
      assertThatThrownBy(() -> source.openRange(f, 0, 10))
          .isInstanceOfSatisfying(
              SourceException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.Throttled);
                assertThat(e.retryable()).isTrue();
                assertThat(e.retryAfter()).contains(Duration.ofSeconds(2));
              });
      hub.fail(Target.CDN, 503, 2, Duration.ofSeconds(0));
      DataPlaneStatus status = load(source, "hf-throttled");
      assertThat(status.phase()).isEqualTo(DataPlaneStatus.Phase.Ready);
    }
  }

  @Test
  void aBodyCutMidwayIsResumedFromTheByteWhereItBroke() throws Exception {
    try (HfSource source = open("hf://jl/tiny-sharded", options().build())) {
      // whole-file ranges; only the two shards over 1300 bytes have longer bodies than the cut
      // (safetensors header reads are at most 1272 bytes here), so a data read is cut
      hub.cutBodyAfter(Target.CDN, 1300, 1);
      DataPlaneStatus status = load(source, "hf-cut", 4096);
      assertThat(status.phase()).isEqualTo(DataPlaneStatus.Phase.Ready);
    }
    assertThat(hub.requests(Target.CDN))
        .extracting(r -> r.range().orElse(""))
        .containsAnyOf("bytes=1300-2047", "bytes=1300-1463");
  }

  @Test
  void aBodyThatStallsIsAbandonedAfterTheReadTimeoutAndResumed() throws Exception {
    try (HfSource source =
        open("hf://jl/tiny-sharded", options().readTimeout(Duration.ofMillis(500)).build())) {
      SourceFile f =
          source.list().stream()
              .filter(x -> x.path().endsWith("00005-of-00006.safetensors"))
              .findFirst()
              .get();
      hub.stallBodyAfter(Target.CDN, 50, 1, Duration.ofSeconds(20));
      try (InputStream in = source.openRange(f, 0, 200)) {
        byte[] head = in.readNBytes(50);
        assertThat(head).isEqualTo(Arrays.copyOf(Files.readAllBytes(files.get(f.path())), 50));
        assertThatThrownBy(in::read)
            .isInstanceOf(java.io.IOException.class)
            .hasMessageContaining("read timeout");
      }
      DataPlaneStatus status = load(source, "hf-stall");
      assertThat(status.phase()).isEqualTo(DataPlaneStatus.Phase.Ready);
    }
  }

  @Test
  void aWrongAdvertisedSha256FailsTheLoadWithDigestMismatch() throws Exception {
    hub.advertiseWrongSha256("model-00004-of-00006.safetensors");
    try (HfSource source = open("hf://jl/tiny-sharded", options().build())) {
      assertThatThrownBy(() -> load(source, "hf-wrong-oid"))
          .isInstanceOfSatisfying(
              LoadFailure.class, e -> assertThat(e.reason()).isEqualTo(Reason.DigestMismatch))
          .hasMessageContaining("model-00004-of-00006.safetensors");
    }
  }

  @Test
  void aGitFileWhoseBytesAreNotItsListedBlobIdFailsTheLoadWithDigestMismatch() throws Exception {
    // config.json, tokenizers, code: plain git files without an LFS sha256. Their git blob id
    // (sha1 of "blob <size>\0" and the content) is checked like an LFS file's sha256.
    String json =
        files.keySet().stream().filter(p -> p.endsWith(".json")).findFirst().orElseThrow();
    hub.advertiseWrongGitOid(json);
    try (HfSource source = open("hf://jl/tiny-sharded", options().build())) {
      assertThatThrownBy(() -> load(source, "hf-wrong-git-oid"))
          .isInstanceOfSatisfying(
              LoadFailure.class, e -> assertThat(e.reason()).isEqualTo(Reason.DigestMismatch))
          .hasMessageStartingWith(json + ": the bytes in the store have git blob sha1 ")
          .hasMessageEndingWith("(git blob sha1 (Hub oid)); the file stays incomplete");
    }
  }

  @Test
  void aLinkedEtagThatContradictsTheListingIsObjectChanged() throws Exception {
    try (HfSource source = open("hf://jl/tiny-sharded", options().build())) {
      SourceFile f = source.list().get(0);
      hub.wrongLinkedEtag(f.path());
      assertThatThrownBy(() -> source.openRange(f, 0, 10))
          .isInstanceOfSatisfying(
              SourceException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.ObjectChanged);
                assertThat(e.retryable()).isFalse();
              })
          .hasMessageContaining("X-Linked-Etag");
    }
  }
}
