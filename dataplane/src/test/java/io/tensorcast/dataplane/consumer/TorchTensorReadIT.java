package io.tensorcast.dataplane.consumer;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.format.torch.ByteSource;
import io.tensorcast.dataplane.format.torch.TorchCheckpoint;
import io.tensorcast.dataplane.format.torch.TorchCheckpointReader;
import io.tensorcast.dataplane.format.torch.TorchTensor;
import io.tensorcast.dataplane.http.BodyStreaming;
import io.tensorcast.dataplane.http.ControlServer;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.LoadMetrics;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.testing.Corpus;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code /v1/tensors} serves the tensors of torch checkpoints (a Hub-style {@code
 * pytorch_model-00001-of-00001.bin} written by torch 1.13): listed with file, dtype, shape and
 * offset, read as stored, as a tp shard and in full, each body equal to the bytes torch's {@code
 * t.contiguous()} holds, sliced in the test.
 */
@Timeout(60)
class TorchTensorReadIT {
  @TempDir Path src;

  @Test
  void torchStateDictTensorsAreListedAndReadWithEveryTarget() throws Exception {
    Path pt = Corpus.dir().resolve("torch/generated-by-torch-1.13/torch113_state_dict_dtypes.pt");
    Files.copy(pt, src.resolve("pytorch_model-00001-of-00001.bin"));
    TorchCheckpoint c = TorchCheckpointReader.read(pt);
    byte[] file = Files.readAllBytes(pt);
    Path root = Files.createTempDirectory(Path.of("/dev/shm"), "torch-read-");
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    HttpClient http = HttpClient.newHttpClient();
    try (PinnedStore store = new PinnedStore(root, 64L << 20, LockPolicy.BEST_EFFORT);
        ArtifactSource source = Sources.open("file://" + src, SourceOptions.builder().build())) {
      ArtifactLoader loader =
          new ArtifactLoader(
              source,
              store,
              new ArtifactLoader.Options("torch", 0, ReadOptions.DEFAULTS),
              new LoadMetrics(registry));
      assertThat(loader.load().phase()).isEqualTo(Phase.Ready);
      try (ControlServer control =
          ControlServer.start(
              new InetSocketAddress("127.0.0.1", 0),
              loader::status,
              registry,
              null,
              new TensorEndpoint(
                  "torch",
                  () -> loader.status().phase(),
                  () -> store.get("torch"),
                  new DefaultTensorReadPlanner()),
              null,
              BodyStreaming.DEFAULTS)) {
        String base = "http://127.0.0.1:" + control.address().getPort();
        JsonNode list =
            new ObjectMapper()
                .readTree(
                    http.send(
                            HttpRequest.newBuilder(URI.create(base + "/v1/tensors")).build(),
                            HttpResponse.BodyHandlers.ofString())
                        .body());
        Set<String> listed = new HashSet<>();
        list.get("tensors").forEach(t -> listed.add(t.get("name").asText()));
        int checked = 0;
        for (TorchTensor t : c.tensors()) {
          if (t.safetensorsDtype().isEmpty()) {
            assertThat(listed).doesNotContain(t.name());
            continue;
          }
          assertThat(listed).contains(t.name());
          byte[] full = t.contiguousBytes(ByteSource.of(file));
          String path = base + TensorReadIT.tensorPath(t.name());
          assertThat(body(http, path + "?target=as_stored")).as(t.name()).isEqualTo(full);
          assertThat(body(http, path + "?target=full")).as(t.name()).isEqualTo(full);
          long[] shape = t.shape();
          if (shape.length > 0 && shape[0] % 2 == 0) {
            int half = full.length / 2;
            assertThat(body(http, path + "?target=shard&parallelism=tp:1/2@0"))
                .as(t.name())
                .isEqualTo(Arrays.copyOfRange(full, half, full.length));
            checked++;
          }
        }
        assertThat(checked).isGreaterThan(3);
      }
    } finally {
      try (var walk = Files.walk(root)) {
        walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  private static byte[] body(HttpClient http, String url) throws Exception {
    HttpResponse<byte[]> r =
        http.send(
            HttpRequest.newBuilder(URI.create(url)).build(),
            HttpResponse.BodyHandlers.ofByteArray());
    assertThat(r.statusCode()).as(url + ": " + new String(r.body())).isEqualTo(200);
    return r.body();
  }
}
