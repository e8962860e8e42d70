package io.tensorcast.dataplane.shards;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.ShardReport;
import io.tensorcast.dataplane.format.FormatLimits;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.http.ControlAuth;
import io.tensorcast.dataplane.http.ControlToken;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.pod.LoadRetry;
import io.tensorcast.dataplane.pod.ServeSettings;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.tensor.ShardManifest;
import io.tensorcast.dataplane.testing.ScaledModel;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A TensorShardSet pod reads slices from a ModelArtifact's copy only with that artifact's read
 * token: a real data-plane server holds the artifact (its control endpoint with read and admin
 * tokens, on a real socket), and shard loaders read ranks from it with the artifact's read token,
 * with no token and with a token of their own. Without the artifact's token the copy refuses (401)
 * and the loader reads every slice from the source instead: the rank files are the same, nothing
 * came from the copy.
 */
@Timeout(120)
class ShardSetCopyTokenIT {
  static final String ARTIFACT_READ_TOKEN = "artifact-read-token-0123456789abcdef";
  static final String SET_READ_TOKEN = "set-own-read-token-0123456789abcdef0";

  @TempDir static Path tmp;
  static Path shm;
  static ScaledModel.Model llama;
  static String uri;
  static DataPlaneServer artifact;

  @BeforeAll
  static void start() throws Exception {
    llama = ScaledModel.write("reflection-llama-3-1-70b", 2, tmp.resolve("llama"));
    uri = "file://" + llama.dir().toAbsolutePath() + "/";
    shm = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-copy-token-it-");
    Files.writeString(tmp.resolve("artifact-read"), ARTIFACT_READ_TOKEN + "\n");
    Files.writeString(tmp.resolve("set-read"), SET_READ_TOKEN + "\n");
    artifact =
        DataPlaneServer.start(
            new ServeSettings(
                "ma-llama-g1",
                new InetSocketAddress("127.0.0.1", 0),
                uri,
                List.of(),
                List.of(),
                null,
                null,
                false,
                Optional.empty(),
                ReadOptions.DEFAULTS,
                Files.createDirectories(shm.resolve("artifact")),
                "512Mi",
                0,
                LockPolicy.BEST_EFFORT,
                new ControlAuth(ControlToken.of(ARTIFACT_READ_TOKEN), ControlToken.random()),
                null,
                LoadRetry.DEFAULTS,
                false,
                null,
                FormatLimits.DEFAULT));
    await("the artifact's copy Ready")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(20))
        .until(
            () ->
                artifact.status().phase() == DataPlaneStatus.Phase.Ready
                    || artifact.status().phase() == DataPlaneStatus.Phase.Failed);
    assertThat(artifact.status().phase())
        .as(artifact.status().message())
        .isEqualTo(DataPlaneStatus.Phase.Ready);
  }

  @AfterAll
  static void stop() throws IOException {
    if (artifact != null) {
      artifact.close();
    }
    if (shm != null) {
      try (var walk = Files.walk(shm)) {
        walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  @Test
  void withTheArtifactsReadTokenEverySliceComesFromTheCopy() throws Exception {
    DataPlaneStatus s = load("with", tmp.resolve("artifact-read"));
    long needed = s.shards().ranks().stream().mapToLong(ShardReport.Rank::bytesNeeded).sum();
    long fromCopy = s.shards().ranks().stream().mapToLong(ShardReport.Rank::bytesFromPeers).sum();
    assertThat(needed).isPositive();
    assertThat(fromCopy).isEqualTo(needed);
    assertRankFilesAreTheSlices(shm.resolve("with-out"));
  }

  @Test
  void withoutATokenTheCopyRefusesAndEverySliceComesFromTheSource() throws Exception {
    // The copy's control endpoint itself, on its real socket: 401 without a token.
    HttpResponse<String> refused =
        HttpClient.newHttpClient()
            .send(
                HttpRequest.newBuilder(
                        URI.create(
                            "http://127.0.0.1:" + artifact.address().getPort() + "/v1/tensors"))
                    .timeout(Duration.ofSeconds(10))
                    .build(),
                HttpResponse.BodyHandlers.ofString());
    assertThat(refused.statusCode()).as(refused.body()).isEqualTo(401);

    DataPlaneStatus s = load("without", null);
    assertThat(s.shards().ranks()).allSatisfy(r -> assertThat(r.bytesFromPeers()).isZero());
    assertThat(s.shards().ranks()).allSatisfy(r -> assertThat(r.bytesFetched()).isPositive());
    assertRankFilesAreTheSlices(shm.resolve("without-out"));
  }

  @Test
  void theSetsOwnTokenIsNotTheArtifactsAndIsRefusedToo() throws Exception {
    DataPlaneStatus s = load("own", tmp.resolve("set-read"));
    assertThat(s.shards().ranks()).allSatisfy(r -> assertThat(r.bytesFromPeers()).isZero());
    assertRankFilesAreTheSlices(shm.resolve("own-out"));
  }

  /** Ranks 0 and 1 of TP=4 with the built-in Llama rules, the copy known from the start. */
  private DataPlaneStatus load(String name, Path tokenFile) throws Exception {
    Path root = Files.createDirectories(shm.resolve(name));
    List<InetSocketAddress> copies = List.of(artifact.address());
    try (ArtifactSource source = Sources.open(uri, SourceOptions.builder().build());
        PinnedStore store = new PinnedStore(root, 256L << 20, LockPolicy.BEST_EFFORT)) {
      ShardSetLoader loader =
          new ShardSetLoader(
              source,
              store,
              "tss-g1",
              0,
              ReadOptions.DEFAULTS.withConcurrency(4),
              new ShardSettings(
                  new Parallelism(1, 1, 1, 4),
                  List.of(0, 1),
                  List.of(),
                  FetchPlanner.Costs.DEFAULTS,
                  copies,
                  tokenFile,
                  Duration.ZERO),
              () -> copies);
      DataPlaneStatus s = loader.load();
      assertThat(s.phase()).as(s.message()).isEqualTo(DataPlaneStatus.Phase.Ready);
      ShardSetLoaderIT.copyOut(root.resolve("tss-g1"), shm.resolve(name + "-out"));
      return s;
    }
  }

  private static void assertRankFilesAreTheSlices(Path dir) throws Exception {
    for (int r = 0; r < 2; r++) {
      Path file = dir.resolve(ShardManifest.rankFileName(r));
      SafetensorsHeader h = SafetensorsHeader.read(file);
      byte[] all = Files.readAllBytes(file);
      for (TensorInfo t : h.tensors()) {
        byte[] expected =
            ScaledModel.slice(
                llama.tensors().get(t.name()), ShardSetLoaderIT.llamaDim(t.name()), r, 4);
        ByteBuffer got =
            ByteBuffer.wrap(
                Arrays.copyOfRange(
                    all, (int) (h.dataOffset() + t.begin()), (int) (h.dataOffset() + t.end())));
        assertThat(got.array()).as("rank %d tensor %s", r, t.name()).isEqualTo(expected);
      }
    }
  }
}
