package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.api.Reason;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.FileStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Verification;
import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.LoadFailure;
import io.tensorcast.dataplane.load.LoadMetrics;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.testing.S3Options;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.Base64;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;

/**
 * Source digests of S3 objects against a real S3-compatible server (S3Mock): full-object checksums
 * given at upload (SHA-256, CRC-64/NVME, CRC-32C) and a plain single-part object's ETag MD5 are
 * checked against the bytes in the store before a file counts as complete, and each file's status
 * says which digest verified it.
 */
class S3DigestIT {
  private static final String BUCKET = "s3digest-it";
  private static S3MockServer s3;
  private static byte[] weights;
  private static byte[] config;
  private Path storeRoot;

  @BeforeAll
  static void seed() throws Exception {
    Path corpus = Corpus.dir();
    weights =
        Files.readAllBytes(
            corpus.resolve("safetensors/burn__examples_import-model-weights_mnist.safetensors"));
    config = Files.readAllBytes(corpus.resolve("index/falcon-180b-chat/config.json"));
    s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    put("m/crc64.bin", weights, b -> b.checksumCRC64NVME(crc64(weights)));
    put("m/crc32c.bin", weights, b -> b.checksumCRC32C(crc32c(weights)));
    put("m/sha256.bin", config, b -> b.checksumSHA256(sha256(config)));
    put("m/plain.json", config, b -> b);
  }

  private static void put(
      String key, byte[] bytes, Function<PutObjectRequest.Builder, PutObjectRequest.Builder> with) {
    s3.client()
        .putObject(
            with.apply(PutObjectRequest.builder().bucket(BUCKET).key(key)).build(),
            RequestBody.fromBytes(bytes));
  }

  @BeforeEach
  void store() throws Exception {
    storeRoot = Files.createTempDirectory(Path.of("/dev/shm"), "s3digest-it-");
  }

  @AfterEach
  void clean() throws Exception {
    TestFiles.deleteTree(storeRoot);
  }

  @Test
  void eachFileIsCheckedAgainstItsFullObjectChecksumOrItsSinglePartEtag() throws Exception {
    try (ArtifactSource source =
        Sources.open("s3://" + BUCKET + "/m/", S3Options.direct(s3).build())) {
      Map<String, PublishedDigest> digests =
          source.list().stream()
              .collect(Collectors.toMap(SourceFile::path, f -> digest(source, f)));
      assertThat(digests.get("crc64.bin").algorithm())
          .isEqualTo(PublishedDigest.Algorithm.CRC64NVME);
      assertThat(digests.get("crc32c.bin").algorithm()).isEqualTo(PublishedDigest.Algorithm.CRC32C);
      assertThat(digests.get("sha256.bin").algorithm()).isEqualTo(PublishedDigest.Algorithm.SHA256);
      assertThat(digests.get("plain.json").algorithm()).isEqualTo(PublishedDigest.Algorithm.MD5);

      DataPlaneStatus status = load(source, "digests");
      assertThat(status.phase()).isEqualTo(DataPlaneStatus.Phase.Ready);
      Map<String, FileStatus> byPath =
          status.fileStatuses().stream().collect(Collectors.toMap(FileStatus::path, f -> f));
      assertThat(byPath.values())
          .allSatisfy(f -> assertThat(f.verification()).isEqualTo(Verification.SourceDigest));
      assertThat(byPath.get("crc64.bin").digest()).isEqualTo("CRC64NVME (full-object checksum)");
      assertThat(byPath.get("crc32c.bin").digest()).isEqualTo("CRC32C (full-object checksum)");
      assertThat(byPath.get("sha256.bin").digest()).isEqualTo("SHA256 (full-object checksum)");
      assertThat(byPath.get("plain.json").digest()).isEqualTo("MD5 (single-part ETag)");
    }
  }

  @Test
  void bytesAlteredBetweenTheSourceAndTheStoreFailTheLoadWithDigestMismatch() throws Exception {
    // Every read of crc64.bin comes back with one byte changed (a faulty cache or proxy on the
    // path): the ranges and sizes are right, only the full-object checksum can tell.
    try (ArtifactSource real =
            Sources.open("s3://" + BUCKET + "/m/", S3Options.direct(s3).build());
        ArtifactSource altered = alteringReadsOf(real, "crc64.bin")) {
      assertThatThrownBy(() -> load(altered, "altered"))
          .isInstanceOfSatisfying(
              LoadFailure.class, e -> assertThat(e.reason()).isEqualTo(Reason.DigestMismatch))
          .hasMessageStartingWith("crc64.bin: the bytes in the store have crc64nvme ")
          .hasMessageContaining("but the source publishes " + hex(crc64Bytes(weights)))
          .hasMessageEndingWith("(CRC64NVME (full-object checksum)); the file stays incomplete");
    }
  }

  private DataPlaneStatus load(ArtifactSource source, String id) throws Exception {
    try (PinnedStore store = new PinnedStore(storeRoot, 64L << 20, LockPolicy.DISABLED)) {
      return new ArtifactLoader(
              source,
              store,
              new ArtifactLoader.Options(id, 0, ReadOptions.DEFAULTS.withConcurrency(2)),
              new LoadMetrics(new SimpleMeterRegistry()))
          .load();
    }
  }

  private static PublishedDigest digest(ArtifactSource source, SourceFile f) {
    try {
      return source.publishedDigest(f);
    } catch (SourceException e) {
      throw new IllegalStateException(e);
    }
  }

  /** {@code real}, except that every range read of {@code path} has its first byte inverted. */
  private static ArtifactSource alteringReadsOf(ArtifactSource real, String path) {
    return new ForwardingArtifactSource(real) {

      @Override
      public InputStream openRange(SourceFile file, long offset, long length)
          throws SourceException {
        InputStream in = real.openRange(file, offset, length);
        if (!file.path().equals(path) || length == 0) {
          return in;
        }
        try (in) {
          byte[] b = in.readAllBytes();
          b[0] = (byte) ~b[0];
          return new ByteArrayInputStream(b);
        } catch (java.io.IOException e) {
          throw new SourceException(Reason.SourceUnavailable, e.toString(), true, e);
        }
      }

      @Override
      public void close() {}
    };
  }

  private static String crc64(byte[] b) {
    return Base64.getEncoder().encodeToString(crc64Bytes(b));
  }

  private static byte[] crc64Bytes(byte[] b) {
    Crc64Nvme c = new Crc64Nvme();
    c.update(b, 0, b.length);
    return ByteBuffer.allocate(8).putLong(c.getValue()).array();
  }

  private static String crc32c(byte[] b) {
    CRC32C c = new CRC32C();
    c.update(b);
    return Base64.getEncoder()
        .encodeToString(
            Arrays.copyOfRange(ByteBuffer.allocate(8).putLong(c.getValue()).array(), 4, 8));
  }

  private static String sha256(byte[] b) {
    try {
      return Base64.getEncoder().encodeToString(MessageDigest.getInstance("SHA-256").digest(b));
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static String hex(byte[] b) {
    return java.util.HexFormat.of().formatHex(b);
  }
}
