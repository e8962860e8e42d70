package io.tensorcast.dataplane.consumer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpVersion;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.testing.TestFiles;
import java.net.URLEncoder;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class TensorEndpointTest {

  @Test
  void pathNamesArePercentDecodedAsUtf8KeepingPlus() throws Exception {
    assertThat(TensorEndpoint.decodePath("model.layers.0.mlp.weight"))
        .isEqualTo("model.layers.0.mlp.weight");
    assertThat(TensorEndpoint.decodePath("a%2Fb/c%20d+e%25")).isEqualTo("a/b/c d+e%");
    assertThat(TensorEndpoint.decodePath("%C3%BC%e2%82%ac")).isEqualTo("ü€");
    String name = "enc/ü layer+1%.w";
    assertThat(
            TensorEndpoint.decodePath(
                URLEncoder.encode(name, StandardCharsets.UTF_8).replace("+", "%20")))
        .isEqualTo(name);
  }

  @Test
  void badEscapesAreRejectedNamingThePath() {
    assertThatThrownBy(() -> TensorEndpoint.decodePath("a%2"))
        .isInstanceOfSatisfying(
            TensorReadException.class, e -> assertThat(e.status()).isEqualTo(400))
        .hasMessageContaining("'a%2' has a '%' at index 1 that is not followed by two hex digits");
    assertThatThrownBy(() -> TensorEndpoint.decodePath("a%zz"))
        .hasMessageContaining("not followed by two hex digits");
    assertThatThrownBy(() -> TensorEndpoint.decodePath("%C3%28"))
        .hasMessageContaining("does not decode to UTF-8");
  }

  @Test
  void headerNamesAreAsciiAndRoundTrip() throws Exception {
    assertThat(TensorEndpoint.encodeHeader("model.embed_tokens/weight~-"))
        .isEqualTo("model.embed_tokens/weight~-");
    assertThat(TensorEndpoint.encodeHeader("a b+ü%")).isEqualTo("a%20b%2B%C3%BC%25");
    String name = "x\u20ac/\ud83d\ude00 y";
    assertThat(TensorEndpoint.decodePath(TensorEndpoint.encodeHeader(name))).isEqualTo(name);
  }

  @Test
  void theETagFollowsEachFilesSourceVersionAndRecordedDigest() throws Exception {
    // Copies of the same bytes: the same ETag for the same source version and record; another
    // version of the object, or another record, gives another one (a 32-bit CRC record alone
    // does not tell two versions of a file apart)
    Path root = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-etag-test");
    try (PinnedStore store = new PinnedStore(root, 1L << 20, LockPolicy.DISABLED)) {
      String v1 = etagOf(store, "a", "etag-v1", "crc32c:00000001");
      assertThat(etagOf(store, "b", "etag-v1", "crc32c:00000001")).isEqualTo(v1);
      assertThat(etagOf(store, "c", "etag-v2", "crc32c:00000001")).isNotEqualTo(v1);
      assertThat(etagOf(store, "d", "etag-v1", "crc32c:00000002")).isNotEqualTo(v1);
    } finally {
      TestFiles.deleteTree(root);
    }
  }

  private static String etagOf(PinnedStore store, String id, String version, String digest)
      throws Exception {
    StoredArtifact a = store.allocate(id, List.of(new StoreFile("w.bin", 4)));
    a.write("w.bin", 0, ByteBuffer.wrap(new byte[] {1, 2, 3, 4}));
    a.recordStored("w.bin", version, 0, 4);
    a.markCompleteHashed("w.bin", digest);
    ReadPlan plan =
        new ReadPlan("t", Dtype.U8, new long[] {4}, List.of(new Segment("w.bin", 0, 4)));
    return TensorEndpoint.etag(a, plan, TensorQuery.AS_STORED);
  }

  @Test
  void entityTagsCompareStronglyOrWeakly() {
    String tag = "\"0123abcd\"";
    assertThat(EntityTags.matches("*", tag, true)).isTrue();
    assertThat(EntityTags.matches("\"x\", \"0123abcd\"", tag, true)).isTrue();
    assertThat(EntityTags.matches("W/\"0123abcd\"", tag, false)).isTrue();
    assertThat(EntityTags.matches("W/\"0123abcd\"", tag, true)).isFalse();
    assertThat(EntityTags.matches("\"0123abce\"", tag, false)).isFalse();
    assertThat(EntityTags.matches("0123abcd", tag, false)).isFalse();
    assertThat(EntityTags.strongEquals("W/\"0123abcd\"", tag)).isFalse();
  }

  @Test
  void aQueryWithABadPercentEscapeIsABadParameterNotAnInternalError() {
    TensorEndpoint endpoint =
        new TensorEndpoint(
            "a1",
            () -> DataPlaneStatus.Phase.Ready,
            Optional::empty,
            new DefaultTensorReadPlanner());
    for (String uri :
        new String[] {
          "/v1/tensors/w?target=%ZZ", "/v1/tensors/w?parallelism=tp:0/2%", "/v1/tensors?%E"
        }) {
      Reply r =
          endpoint.answer(new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.GET, uri));
      String body =
          r.response() instanceof io.netty.handler.codec.http.FullHttpResponse f
              ? f.content().toString(StandardCharsets.UTF_8)
              : "";
      assertThat(r.response().status().code()).as(uri + ": " + body).isEqualTo(400);
      assertThat(body)
          .contains("\"reason\":\"BadParameter\"")
          .contains("query string of '" + uri + "' is not valid percent-encoding");
    }
  }
}
