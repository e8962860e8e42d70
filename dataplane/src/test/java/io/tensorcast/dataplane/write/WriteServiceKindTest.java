package io.tensorcast.dataplane.write;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.tensor.NaiveSlicer;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** What kind a written version is recorded as: the artifact's, never silently another. */
class WriteServiceKindTest {
  private Path root;
  private PinnedStore store;
  private WriteService service;

  @BeforeEach
  void openStore() throws Exception {
    root = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-write-kind-");
    store = new PinnedStore(root, 64L << 20, LockPolicy.BEST_EFFORT);
  }

  @AfterEach
  void close() throws Exception {
    if (service != null) {
      service.close();
    }
    store.close();
    try (Stream<Path> s = Files.walk(root)) {
      s.sorted((a, b) -> b.compareTo(a)).forEach(p -> p.toFile().delete());
    }
  }

  private WriteService service(String artifactKind) throws Exception {
    service =
        new WriteService(
            store,
            new WriteService.Settings("writer", 1 << 20, Duration.ofMinutes(5), 8, artifactKind));
    return service;
  }

  private static SealRecord writeAndSeal(WritableVersion v) throws Exception {
    long[] shape = {4, 8};
    VersionWrite w =
        v.begin(
            BatchPlan.of(List.of(new TensorPut("w", Dtype.F32, shape, null, null))), false, false);
    BatchWriter bw = w.writer();
    bw.accept(ByteBuffer.wrap(NaiveSlicer.data(Dtype.F32, shape, 1)));
    bw.finish();
    v.commit(w, Map.of());
    return v.seal();
  }

  @Test
  void aVersionWithoutAKindIsRecordedAsTheArtifactsKind() throws Exception {
    WritableVersion v = service("RLCheckpoint").create("step-1", null, Map.of("step", "1"));

    assertThat(v.kind()).isEqualTo("RLCheckpoint");
    assertThat(writeAndSeal(v).kind()).isEqualTo("RLCheckpoint");
    assertThat(WriteJson.summary(v).get("kind").asText()).isEqualTo("RLCheckpoint");
  }

  @Test
  void aVersionOfAnotherKindThanTheArtifactsIsRefusedAndNothingIsCreated() throws Exception {
    WriteService s = service("RLCheckpoint");

    WriteException e =
        catchThrowableOfType(
            WriteException.class, () -> s.create("step-1", "ModelWeights", Map.of()));

    assertThat(e.status()).isEqualTo(400);
    assertThat(e.reason()).isEqualTo("KindMismatch");
    assertThat(e.getMessage())
        .isEqualTo(
            "version step-1: kind 'ModelWeights' differs from the artifact's kind RLCheckpoint"
                + " (spec.kind): leave kind out, or send RLCheckpoint");
    assertThat(Files.exists(s.writesDirectory().resolve("step-1"))).isFalse();
    assertThat(s.create("step-1", "RLCheckpoint", Map.of()).kind()).isEqualTo("RLCheckpoint");
  }

  @Test
  void withoutAnArtifactAVersionWithoutAKindIsModelWeightsAndAnyKindIsAccepted() throws Exception {
    WriteService s = service(null);

    assertThat(s.create("a", null, Map.of()).kind()).isEqualTo("ModelWeights");
    assertThat(s.create("b", "KVCache", Map.of()).kind()).isEqualTo("KVCache");
  }

  @Test
  void anArtifactKindThatIsNoKindIsRefusedAtStart() {
    assertThatThrownBy(
            () -> new WriteService.Settings("writer", 1 << 20, Duration.ofMinutes(5), 8, "Weights"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("artifact kind 'Weights' is not one of ModelWeights, KVCache, RLCheckpoint");
  }
}
