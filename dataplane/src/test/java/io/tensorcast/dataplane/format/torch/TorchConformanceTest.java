package io.tensorcast.dataplane.format.torch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.tensorcast.testing.Corpus;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Every torch file of the corpus against what the reference recorded for it ({@code
 * hack/torch/record-conformance.py} with Debian python3-torch 1.13, output in {@code
 * src/test/resources/torch/conformance.json}): tensor names, dtypes, shapes, strides, storage
 * offsets, shared storages and the SHA-256 of each tensor's contiguous bytes; and the same
 * refusals, naming the same global. Needs only the recorded JSON and the corpus, not torch.
 */
class TorchConformanceTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @TestFactory
  Stream<DynamicTest> everyCorpusFileMatchesTheReference() throws IOException {
    JsonNode recorded;
    try (InputStream in = getClass().getResourceAsStream("/torch/conformance.json")) {
      recorded = JSON.readTree(in);
    }
    Path corpus = Corpus.dir();
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode f : recorded.get("files")) {
      String rel = f.get("path").asText();
      tests.add(DynamicTest.dynamicTest(rel, () -> check(corpus.resolve(rel), f)));
    }
    assertThat(tests).hasSizeGreaterThanOrEqualTo(30);
    return tests.stream();
  }

  private static void check(Path file, JsonNode rec) throws Exception {
    assertThat(file).exists();
    assertThat(sha256(Files.readAllBytes(file)))
        .as(
            "corpus file changed since conformance.json was recorded; re-record (hack/torch/README.md)")
        .isEqualTo(rec.get("sha256").asText());
    if (rec.path("torchscript").asBoolean(false)
        || file.getFileName().toString().contains("torchscript")) {
      TorchFormatException e =
          catchThrowableOfType(() -> TorchCheckpointReader.read(file), TorchFormatException.class);
      assertThat(e.rule()).isEqualTo(TorchFormatException.TORCHSCRIPT);
      assertThat(e)
          .hasMessageContaining("TorchScript archive")
          .hasMessageContaining(file.toString());
      return;
    }
    if (!rec.has("tensors")) {
      // The reference refused it; so must we, naming the same global when it named one.
      TorchFormatException e =
          catchThrowableOfType(() -> TorchCheckpointReader.read(file), TorchFormatException.class);
      assertThat(e).as("torch refused %s (%s)", file, rec.get("torch_1_13")).isNotNull();
      JsonNode global = rec.get("torch_1_13").get("global");
      if (global != null && !global.isNull()) {
        assertThat(e.global()).contains(global.asText());
        assertThat(e).hasMessageContaining(global.asText()).hasMessageContaining(file.toString());
      }
      return;
    }
    TorchCheckpoint c = TorchCheckpointReader.read(file);
    JsonNode expected = rec.get("tensors");
    assertThat(c.tensors()).hasSize(expected.size());
    Map<Long, TorchStorage> byGroup = new HashMap<>();
    Map<TorchStorage, Long> groupOf = new java.util.IdentityHashMap<>();
    try (ByteSource.FileByteSource src = ByteSource.open(file)) {
      for (int i = 0; i < expected.size(); i++) {
        JsonNode x = expected.get(i);
        TorchTensor t = c.tensors().get(i);
        String what = file.getFileName() + " " + x.get("name").asText();
        assertThat(t.name()).as(what).isEqualTo(x.get("name").asText());
        assertThat(t.dtype().torchName()).as(what).isEqualTo(x.get("dtype").asText());
        assertThat(t.shape()).as(what).containsExactly(longs(x.get("shape")));
        assertThat(t.stride()).as(what).containsExactly(longs(x.get("stride")));
        assertThat(t.storageOffset()).as(what).isEqualTo(x.get("storage_offset").asLong());
        assertThat(t.parameter()).as(what).isEqualTo(x.get("parameter").asBoolean());
        assertThat(sha256(t.contiguousBytes(src))).as(what).isEqualTo(x.get("sha256").asText());
        JsonNode g = x.get("storage_group");
        if (!g.isNull()) {
          // Same storage in torch <=> the same storage record here.
          TorchStorage prev = byGroup.putIfAbsent(g.asLong(), t.storage());
          assertThat(prev == null || prev == t.storage()).as(what + " shares its storage").isTrue();
          Long prevGroup = groupOf.putIfAbsent(t.storage(), g.asLong());
          assertThat(prevGroup == null || prevGroup == g.asLong())
              .as(what + " storage not shared with another group")
              .isTrue();
        }
      }
    }
  }

  @TestFactory
  Stream<DynamicTest> recordedRefusalsAreTheDocumentedOnes() throws IOException {
    JsonNode recorded;
    try (InputStream in = getClass().getResourceAsStream("/torch/conformance.json")) {
      recorded = JSON.readTree(in);
    }
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode f : recorded.get("files")) {
      if (!"torch-1.13+binfloat".equals(f.path("reference").asText())) {
        continue;
      }
      // The one deliberate divergence: torch 1.13 refuses Python floats (opcode 71, BINFLOAT),
      // torch >= 2.0 reads them; we follow 2.x (docs/DECISIONS.md, "Torch checkpoints").
      tests.add(
          DynamicTest.dynamicTest(
              f.get("path").asText(),
              () -> assertThat(f.get("torch_1_13").get("opcode").asInt()).isEqualTo(71)));
    }
    assertThat(tests).isNotEmpty();
    return tests.stream();
  }

  private static long[] longs(JsonNode a) {
    long[] r = new long[a.size()];
    for (int i = 0; i < r.length; i++) {
      r[i] = a.get(i).asLong();
    }
    return r;
  }

  static String sha256(byte[] b) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
  }
}
