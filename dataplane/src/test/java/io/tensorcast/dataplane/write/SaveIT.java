package io.tensorcast.dataplane.write;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.LoadFailure;
import io.tensorcast.dataplane.load.LoadMetrics;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.dataplane.tensor.NaiveSlicer;
import io.tensorcast.dataplane.tensor.TensorParallelism;
import io.tensorcast.dataplane.tensor.WriterPartition;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.HubStandIn;
import io.tensorcast.testing.S3MockServer;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import software.amazon.awssdk.core.ResponseBytes;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;
import software.amazon.awssdk.services.s3.model.HeadObjectResponse;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;

/**
 * Saving sealed versions for real: to S3Mock (multipart with Content-MD5, the SHA-256 recorded,
 * manifest last; a failure mid-upload leaves no manifest and no open multipart upload, and a retry
 * resumes), to a directory, and to the Hub stand-in through the upload protocol of the {@code
 * huggingface_hub} client (LFS multipart, one commit); destinations without credentials refused
 * before anything is sent.
 */
@Timeout(180)
class SaveIT {
  private static final String BUCKET = "save-it";
  private static final Function<String, String> AWS_ENV =
      Map.of(
              "AWS_ACCESS_KEY_ID", S3MockServer.ACCESS_KEY,
              "AWS_SECRET_ACCESS_KEY", S3MockServer.SECRET_KEY)
          ::get;

  private static S3MockServer s3;
  private static Path root;
  private static PinnedStore store;
  private static WriteService service;
  private static SealRecord shards;
  private static SealRecord shards2;
  private static SealRecord plain;

  @BeforeAll
  static void seal() throws Exception {
    assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "/dev/shm is needed for the store");
    s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    root = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-save-it-");
    store = new PinnedStore(root, 1L << 30, LockPolicy.BEST_EFFORT);
    service =
        new WriteService(
            store, new WriteService.Settings("writer", 1 << 20, Duration.ofMinutes(5), 8));
    shards = shardVersion("step-1", 1);
    shards2 = shardVersion("step-2", 2);
    WritableVersion v = service.create("kv-0a1b2c3d", "KVCache", Map.of("prefix", "0a1b2c3d"));
    long[] shape = {4, 256, 1024};
    List<TensorPut> puts =
        List.of(
            new TensorPut("k", Dtype.F16, shape, null, null),
            new TensorPut("v", Dtype.F16, shape, null, null));
    write(
        v,
        puts,
        List.of(NaiveSlicer.data(Dtype.F16, shape, 7), NaiveSlicer.data(Dtype.F16, shape, 8)));
    plain = v.seal();
  }

  /** A TP=2 version of two 6 MiB rank files (two 5 MiB parts each) and a manifest. */
  private static SealRecord shardVersion(String name, int seed) throws Exception {
    WritableVersion v = service.create(name, "RLCheckpoint", Map.of("step", "" + seed));
    long[] w = {3072, 2048};
    byte[] full = NaiveSlicer.data(Dtype.BF16, w, seed);
    byte[] bias = NaiveSlicer.data(Dtype.F32, new long[] {2048}, seed + 100);
    for (int r = 0; r < 2; r++) {
      write(
          v,
          List.of(
              new TensorPut(
                  "w", Dtype.BF16, w, null, new WriterPartition(TensorParallelism.tp(r, 2, 0))),
              new TensorPut("b", Dtype.F32, new long[] {2048}, null, null)),
          List.of(full, bias));
    }
    return v.seal();
  }

  private static void write(WritableVersion v, List<TensorPut> puts, List<byte[]> data)
      throws Exception {
    VersionWrite w = v.begin(BatchPlan.of(puts), false, false);
    BatchWriter bw = w.writer();
    for (byte[] d : data) {
      bw.accept(ByteBuffer.wrap(d));
    }
    bw.finish();
    v.commit(w, Map.of());
  }

  @AfterAll
  static void stop() throws Exception {
    if (service != null) {
      service.close();
    }
    if (store != null) {
      store.close();
    }
    if (root != null) {
      try (Stream<Path> s = Files.walk(root)) {
        s.sorted((a, b) -> b.compareTo(a)).forEach(p -> p.toFile().delete());
      }
    }
  }

  private static StoredArtifact stored(SealRecord r) {
    return store.get(r.name()).orElseThrow();
  }

  private static ObjectNode target(String uri, java.net.URI endpoint) {
    ObjectNode t = WriteJson.JSON.createObjectNode().put("uri", uri);
    if (endpoint != null) {
      t.put("endpoint", endpoint.toString()).put("pathStyle", true).put("insecureEndpoint", true);
    }
    return t.put("partSize", 5L << 20);
  }

  private static ObjectNode save(SealRecord r, ObjectNode target, Function<String, String> env)
      throws WriteException {
    try (VersionSaver saver = VersionSaver.prepare(SaveTarget.parse(target), env)) {
      return saver.save(r, stored(r));
    }
  }

  private static byte[] object(S3Client c, String key) {
    ResponseBytes<GetObjectResponse> b = c.getObjectAsBytes(g -> g.bucket(BUCKET).key(key));
    return b.asByteArray();
  }

  private static byte[] file(SealRecord r, String path) throws Exception {
    return Files.readAllBytes(stored(r).directory().resolve(path));
  }

  @Test
  void s3SaveUploadsInPartsWithDigestsRecordsSha256AndWritesTheManifestLast() throws Exception {
    try (FaultInjectingProxy proxy = new FaultInjectingProxy(s3.endpoint())) {
      JsonNode result = save(shards, target("s3://" + BUCKET + "/rl/", proxy.endpoint()), AWS_ENV);
      S3Client c = s3.client();
      for (SealRecord.FileEntry f : shards.files()) {
        assertThat(object(c, "rl/" + f.path())).as(f.path()).isEqualTo(file(shards, f.path()));
        HeadObjectResponse h = c.headObject(b -> b.bucket(BUCKET).key("rl/" + f.path()));
        assertThat(h.metadata()).containsEntry("tensorcast-sha256", f.sha256());
      }
      List<String> writes = new ArrayList<>();
      for (FaultInjectingProxy.RecordedRequest q : proxy.requests()) {
        if (q.method().equals("PUT")
            || (q.method().equals("POST") && q.target().contains("uploadId="))) {
          writes.add(q.method() + " " + q.path());
        }
      }
      assertThat(writes).last().isEqualTo("PUT /" + BUCKET + "/rl/manifest.json");
      long partPuts =
          proxy.requests().stream().filter(q -> q.target().contains("partNumber=")).count();
      assertThat(partPuts).as("two rank files of 6 MiB in 5 MiB parts").isEqualTo(4);
      assertThat(result.path("files").get(1).path("parts").asInt()).isEqualTo(2);
      assertThat(c.listMultipartUploads(b -> b.bucket(BUCKET)).uploads()).isEmpty();
    }
  }

  @Test
  void aFailureMidUploadLeavesNoManifestNorOpenUploadAndARetryResumes() throws Exception {
    String prefix = "resume/";
    S3Client c = s3.client();
    save(shards, target("s3://" + BUCKET + "/" + prefix, s3.endpoint()), AWS_ENV);
    assertThat(object(c, prefix + "manifest.json")).isEqualTo(file(shards, "manifest.json"));
    try (FaultInjectingProxy proxy = new FaultInjectingProxy(s3.endpoint())) {
      // The second version's second rank file fails at its second part, every retry of it too.
      proxy.failRequestsMatching(
          (m, t) -> m.equals("PUT") && t.contains("rank_00001") && t.contains("partNumber=2"),
          500,
          100);
      assertThatThrownBy(
              () ->
                  save(shards2, target("s3://" + BUCKET + "/" + prefix, proxy.endpoint()), AWS_ENV))
          .isInstanceOf(WriteException.class)
          .hasMessageContaining("HTTP 500")
          .hasMessageContaining("no manifest written")
          .extracting(e -> ((WriteException) e).reason())
          .isEqualTo("DestinationUnavailable");
      // Nothing readable: the first version's manifest is gone (its rank files are not its any
      // more), the second's not written; the failed multipart upload was aborted.
      assertThatThrownBy(() -> object(c, prefix + "manifest.json"))
          .isInstanceOf(NoSuchKeyException.class);
      assertThat(c.listMultipartUploads(b -> b.bucket(BUCKET).prefix(prefix)).uploads()).isEmpty();
      assertThat(object(c, prefix + "rank_00000.safetensors"))
          .as("the rank file finished before the failure")
          .isEqualTo(file(shards2, "rank_00000.safetensors"));
      // A loader that reads the prefix now finds rank files without their manifest: refused (and
      // retried later), never served as plain files.
      SourceOptions options =
          SourceOptions.builder()
              .endpoint(s3.endpoint())
              .pathStyle(true)
              .allowInsecureEndpoint(true)
              .credentials(
                  new SourceOptions.StaticCredentials(
                      S3MockServer.ACCESS_KEY, S3MockServer.SECRET_KEY, Optional.empty()))
              .build();
      try (var source = Sources.open("s3://" + BUCKET + "/" + prefix, options)) {
        var loader =
            new ArtifactLoader(
                source,
                store,
                new ArtifactLoader.Options("half-saved", 0, ReadOptions.DEFAULTS),
                new LoadMetrics(new SimpleMeterRegistry()));
        assertThatThrownBy(loader::load)
            .isInstanceOf(LoadFailure.class)
            .hasMessageContaining("manifest.json is missing")
            .extracting(e -> ((LoadFailure) e).reason())
            .isEqualTo(Reason.IncompleteArtifact);
        assertThat(store.get("half-saved")).isEmpty();
      }

      proxy.reset();
      JsonNode retry =
          save(shards2, target("s3://" + BUCKET + "/" + prefix, proxy.endpoint()), AWS_ENV);
      Map<String, JsonNode> byPath = new TreeMap<>();
      retry.path("files").forEach(f -> byPath.put(f.path("path").asText(), f));
      assertThat(byPath.get("rank_00000.safetensors").path("resumed").asBoolean()).isTrue();
      assertThat(byPath.get("rank_00001.safetensors").path("resumed").asBoolean()).isFalse();
      assertThat(
              proxy.requests().stream()
                  .filter(q -> q.method().equals("PUT") && q.target().contains("rank_00000")))
          .as("resumed: nothing of rank 0 is sent again")
          .isEmpty();
      for (SealRecord.FileEntry f : shards2.files()) {
        assertThat(object(c, prefix + f.path())).as(f.path()).isEqualTo(file(shards2, f.path()));
      }
    }
  }

  @Test
  void aDirectorySaveRenamesEachFileIntoPlaceAndResumes() throws Exception {
    Path dir = Files.createTempDirectory("tensorcast-save-dir-");
    JsonNode first = save(plain, target(dir.toUri().toString(), null), k -> null);
    assertThat(Files.readAllBytes(dir.resolve("model.safetensors")))
        .isEqualTo(file(plain, "model.safetensors"));
    assertThat(first.path("bytesUploaded").asLong()).isEqualTo(plain.totalBytes());
    JsonNode again = save(plain, target(dir.toUri().toString(), null), k -> null);
    assertThat(again.path("files").get(0).path("resumed").asBoolean()).isTrue();
    assertThat(again.path("bytesUploaded").asLong()).isZero();
    // A directory in the way of the manifest's temporary file: the save fails, no manifest.
    Path shardsDir = Files.createTempDirectory("tensorcast-save-dir-");
    Files.createDirectories(shardsDir.resolve(".manifest.json.tensorcast-tmp/blocker"));
    assertThatThrownBy(() -> save(shards, target(shardsDir.toUri().toString(), null), k -> null))
        .isInstanceOf(WriteException.class)
        .hasMessageContaining("no manifest written");
    assertThat(shardsDir.resolve("manifest.json")).doesNotExist();
    try (Stream<Path> s = Files.walk(shardsDir.resolve(".manifest.json.tensorcast-tmp"))) {
      s.sorted((a, b) -> b.compareTo(a)).forEach(p -> p.toFile().delete());
    }
    save(shards, target(shardsDir.toUri().toString(), null), k -> null);
    for (SealRecord.FileEntry f : shards.files()) {
      assertThat(Files.readAllBytes(shardsDir.resolve(f.path()))).isEqualTo(file(shards, f.path()));
    }
  }

  @Test
  void aHubSaveUsesLfsMultipartAndOneCommitAndAReadOnlyTokenIsRefused() throws Exception {
    try (HubStandIn hub = HubStandIn.start()) {
      hub.multipart(4L << 20, 2L << 20);
      HubStandIn.Repo repo = hub.repo("org/policy").writableWithToken("hf_write_token");
      repo.commit(Map.of());
      int before = repo.commits();
      ObjectNode t =
          WriteJson.JSON
              .createObjectNode()
              .put("uri", "hf://org/policy/step-1")
              .put("endpoint", hub.endpoint().toString())
              .put("insecureEndpoint", true);
      JsonNode result = save(shards, t, Map.of("HF_TOKEN", "hf_write_token")::get);
      assertThat(repo.commits()).as("one commit for every file").isEqualTo(before + 1);
      for (SealRecord.FileEntry f : shards.files()) {
        assertThat(repo.file("main", "step-1/" + f.path()))
            .as(f.path())
            .isEqualTo(file(shards, f.path()));
      }
      assertThat(
              hub.requests(HubStandIn.Target.CDN).stream()
                  .filter(
                      r ->
                          r.path().contains("/upload/")
                              && r.path().split("\\?")[0].split("/").length == 4))
          .as("rank files over 4 MiB go in 2 MiB chunks")
          .hasSizeGreaterThan(6);
      assertThat(
              hub.requests().stream()
                  .filter(
                      r -> r.authorization().isPresent() && r.target() == HubStandIn.Target.CDN))
          .as("presigned URLs get no Authorization header")
          .isEmpty();
      assertThat(result.path("commitOid").asText()).hasSize(40);

      long uploaded = hub.uploadedBytes();
      JsonNode again = save(shards, t, Map.of("HF_TOKEN", "hf_write_token")::get);
      assertThat(hub.uploadedBytes())
          .as("objects the Hub has are not sent again")
          .isEqualTo(uploaded);
      assertThat(again.path("files").get(1).path("resumed").asBoolean()).isTrue();

      assertThatThrownBy(() -> save(shards, t, Map.of("HF_TOKEN", "hf_read_only")::get))
          .isInstanceOf(WriteException.class)
          .hasMessageContaining("may not write to org/policy")
          .extracting(e -> ((WriteException) e).reason())
          .isEqualTo("AccessDenied");
    }
  }

  @Test
  void aDestinationWithoutCredentialsIsRefusedBeforeAnythingIsSent() throws Exception {
    try (FaultInjectingProxy proxy = new FaultInjectingProxy(s3.endpoint())) {
      assertThatThrownBy(
              () ->
                  VersionSaver.prepare(
                      SaveTarget.parse(target("s3://" + BUCKET + "/x/", proxy.endpoint())),
                      k -> null))
          .isInstanceOf(WriteException.class)
          .hasMessageContaining("AWS_ACCESS_KEY_ID")
          .hasMessageContaining("nothing was sent")
          .extracting(e -> ((WriteException) e).reason())
          .isEqualTo("NoCredentials");
      assertThat(proxy.requests()).isEmpty();
    }
    assertThatThrownBy(
            () ->
                VersionSaver.prepare(
                    SaveTarget.parse(WriteJson.JSON.createObjectNode().put("uri", "hf://org/repo")),
                    k -> null))
        .hasMessageContaining("HF_TOKEN");
    assertThatThrownBy(
            () ->
                SaveTarget.parse(
                    WriteJson.JSON
                        .createObjectNode()
                        .put("uri", "s3://bucket/p/")
                        .put("endpoint", "http://minio:9000")))
        .hasMessageContaining("insecureEndpoint");
  }
}
