package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.testing.S3Options;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** S3Source against a real S3-compatible server (S3Mock) holding real corpus files. */
class S3SourceIT {
  private static final String BUCKET = "s3source-it";
  private static S3MockServer s3;
  private static Path corpusDir;

  /** relative path under "corpus/" → local file */
  private static final Map<String, Path> uploaded = new TreeMap<>();

  @BeforeAll
  static void seed() throws Exception {
    corpusDir = Corpus.dir().resolve("safetensors");
    s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    try (Stream<Path> files = Files.list(corpusDir)) {
      for (Path f : files.sorted().toList()) {
        String rel = f.getFileName().toString();
        s3.putFile(BUCKET, "corpus/" + rel, f);
        uploaded.put(rel, f);
      }
    }
    // a 1-byte file cut from a real one, in a sub-directory
    Path oneByte = Files.createTempFile("one-byte", ".bin");
    Files.write(oneByte, Arrays.copyOf(Files.readAllBytes(uploaded.values().iterator().next()), 1));
    s3.putFile(BUCKET, "corpus/tiny/one-byte.bin", oneByte);
    uploaded.put("tiny/one-byte.bin", oneByte);
    // directory markers and a sibling prefix that must not be listed
    s3.putBytes(BUCKET, "corpus/", new byte[0]);
    s3.putBytes(BUCKET, "corpus/tiny/", new byte[0]);
    s3.putBytes(BUCKET, "corpus-other/not-mine.bin", new byte[] {1, 2, 3});
  }

  private static ArtifactSource open(String uri) throws SourceException {
    return Sources.open(uri, S3Options.direct(s3).build());
  }

  @Test
  void listsThePrefixWithSizesAndEtagsSkippingMarkersAndSiblings() throws Exception {
    try (ArtifactSource source = open("s3://" + BUCKET + "/corpus")) {
      List<SourceFile> files = source.list();
      assertThat(files).extracting(SourceFile::path).containsExactlyElementsOf(uploaded.keySet());
      for (SourceFile f : files) {
        Path local = uploaded.get(f.path());
        assertThat(f.size()).as(f.path()).isEqualTo(Files.size(local));
        // a single-part upload's ETag is the MD5 of its bytes, listed without quotes
        assertThat(f.etag()).as(f.path()).isEqualTo(md5(local));
        assertThat(f.sha256()).isEmpty();
      }
    }
  }

  @Test
  void withoutAnyCredentialsTheErrorSaysWhereToPutThem() throws Exception {
    org.junit.jupiter.api.Assumptions.assumeTrue(
        System.getenv("AWS_ACCESS_KEY_ID") == null
            && System.getenv("AWS_WEB_IDENTITY_TOKEN_FILE") == null
            && System.getenv("AWS_PROFILE") == null,
        "the environment has AWS credentials");
    Map<String, String> saved = new TreeMap<>();
    Map<String, String> isolate =
        Map.of(
            "aws.disableEc2Metadata", "true",
            "aws.sharedCredentialsFile", "/nonexistent/credentials",
            "aws.configFile", "/nonexistent/config");
    isolate.forEach((k, v) -> saved.put(k, System.setProperty(k, v)));
    try {
      SourceOptions noCredentials =
          SourceOptions.builder()
              .endpoint(s3.endpoint())
              .region(S3MockServer.REGION)
              .pathStyle(true)
              .allowInsecureEndpoint(true)
              .build();
      try (ArtifactSource source = Sources.open("s3://" + BUCKET + "/corpus", noCredentials)) {
        assertThatThrownBy(source::list)
            .isInstanceOfSatisfying(
                SourceException.class,
                e -> assertThat(e.reason()).isEqualTo(Reason.CredentialsNotFound))
            .hasMessageContaining("no credentials found")
            .hasMessageContaining("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
            .hasMessageContaining("spec.source.credentialsSecretRef");
      }
    } finally {
      saved.forEach(
          (k, v) -> {
            if (v == null) {
              System.clearProperty(k);
            } else {
              System.setProperty(k, v);
            }
          });
    }
  }

  @Test
  void includeAndExcludeApplyToPathsRelativeToThePrefix() throws Exception {
    SourceOptions options =
        S3Options.direct(s3)
            .include(List.of("*.safetensors", "tiny/"))
            .exclude(List.of("hf-*", "burn__*"))
            .build();
    try (ArtifactSource source = Sources.open("s3://" + BUCKET + "/corpus/", options)) {
      List<String> expected =
          uploaded.keySet().stream()
              .filter(p -> !p.startsWith("hf-") && !p.startsWith("burn__"))
              .toList();
      assertThat(source.list()).extracting(SourceFile::path).containsExactlyElementsOf(expected);
    }
  }

  @Test
  @Timeout(120)
  void aPlainHttpEndpointReadsWithoutLoadingTheTrustStore() throws Exception {
    Path classLog = Files.createTempFile("plain-http-classes", ".log");
    List<String> cmd =
        List.of(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-Xlog:class+load=info:file=" + classLog,
            "-cp",
            System.getProperty("java.class.path"),
            PlainHttpChild.class.getName(),
            s3.endpoint().toString(),
            "s3://" + BUCKET + "/corpus/tiny/");
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    String classes = Files.readString(classLog);
    Files.delete(classLog);

    assertThat(out)
        .contains(
            "@@ file:one-byte.bin=" + sha256(Files.readAllBytes(uploaded.get("tiny/one-byte.bin"))))
        .contains("@@ done=ok");
    // The JDK's default TLS context reads the CA trust store through TrustStoreManager; the SDK's
    // Apache client builds it when the client is built unless its https socket factory is given.
    assertThat(classes)
        .contains("io.tensorcast.dataplane.source.PlainHttpEndpoint ")
        .doesNotContain("sun.security.ssl.TrustStoreManager ")
        .doesNotContain("sun.security.ssl.SSLContextImpl ");
  }

  @Test
  void rangedReadsAreByteEqualForSeveralRangeSizesIncludingEof() throws Exception {
    try (ArtifactSource source = open("s3://" + BUCKET + "/corpus/")) {
      Map<String, SourceFile> listed = new TreeMap<>();
      source.list().forEach(f -> listed.put(f.path(), f));
      for (String name :
          List.of(
              "tiny/one-byte.bin",
              "tl-lang__empty_model.safetensors",
              "hf-safetensors-samples__B_u8.safetensors",
              "burn__import_complex_nested.safetensors",
              "connect4-ai__candle_varmap.safetensors")) {
        SourceFile file = listed.get(name);
        byte[] expected = Files.readAllBytes(uploaded.get(name));
        for (int rangeSize : new int[] {1, 7, 4096, 65536, (int) file.size()}) {
          if (file.size() / rangeSize > 200) {
            continue; // keep the request count small
          }
          for (long offset = 0; offset < file.size(); offset += rangeSize) {
            int length = (int) Math.min(rangeSize, file.size() - offset);
            try (InputStream in = source.openRange(file, offset, length)) {
              assertThat(in.readAllBytes())
                  .as("%s range size %d at %d", name, rangeSize, offset)
                  .isEqualTo(Arrays.copyOfRange(expected, (int) offset, (int) offset + length));
            }
          }
        }
        // the last byte alone, a range ending exactly at EOF
        try (InputStream in = source.openRange(file, file.size() - 1, 1)) {
          assertThat(in.readAllBytes()).containsExactly(expected[expected.length - 1]);
        }
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      value = {
        "unsafe-dotdot | %2E%2E/evil.bin | '../evil.bin' listed under s3://s3source-it/unsafe-dotdot/: the path has a '..' segment",
        "unsafe-abs | /abs.bin | '/abs.bin' listed under s3://s3source-it/unsafe-abs/: the path is absolute",
        "unsafe-empty | a//b.bin | 'a//b.bin' listed under s3://s3source-it/unsafe-empty/: the path has an empty segment",
        "unsafe-dot | ./x.bin | './x.bin' listed under s3://s3source-it/unsafe-dot/: the path has a '.' segment",
      })
  void aKeyThatCouldEscapeTheRootFailsTheListing(String prefix, String rawKey, String expected)
      throws Exception {
    s3.putBytes(BUCKET, prefix + "/ok.bin", new byte[] {1});
    s3.putRawPath(BUCKET, prefix + "/" + rawKey, new byte[] {2});
    try (ArtifactSource source = open("s3://" + BUCKET + "/" + prefix + "/")) {
      assertThatThrownBy(source::list)
          .isInstanceOfSatisfying(
              SourceException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.UnsafePath);
                assertThat(e.retryable()).isFalse();
              })
          .hasMessageContaining("refusing file " + expected);
    }
  }

  @Test
  void aMissingBucketIsBucketNotFound() throws Exception {
    try (ArtifactSource source = open("s3://no-such-bucket-here/models/")) {
      assertThatThrownBy(source::list)
          .isInstanceOfSatisfying(
              SourceException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.BucketNotFound);
                assertThat(e.retryable()).isFalse();
              })
          .hasMessageContaining("listing s3://no-such-bucket-here/models/")
          .hasMessageContaining("NoSuchBucket");
      SourceFile ghost = new SourceFile("model.safetensors", 10, "", Optional.empty());
      assertThatThrownBy(() -> source.openRange(ghost, 0, 10))
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.BucketNotFound));
    }
  }

  @Test
  void aMissingObjectIsObjectNotFound() throws Exception {
    try (ArtifactSource source = open("s3://" + BUCKET + "/corpus/")) {
      SourceFile ghost = new SourceFile("gone.safetensors", 10, "", Optional.empty());
      assertThatThrownBy(() -> source.openRange(ghost, 0, 10))
          .isInstanceOfSatisfying(
              SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.ObjectNotFound))
          .hasMessageContaining("s3://" + BUCKET + "/corpus/gone.safetensors");
    }
  }

  @Test
  void anObjectReplacedAfterListingIsObjectChanged() throws Exception {
    Path first = corpusDir.resolve("bogoai__dummy_param.safetensors");
    Path second = corpusDir.resolve("burn__import_integer.safetensors");
    s3.putFile(BUCKET, "changing/model.safetensors", first);
    try (ArtifactSource source = open("s3://" + BUCKET + "/changing/")) {
      SourceFile listed = source.list().get(0);
      assertThat(listed.etag()).isEqualTo(md5(first));
      s3.putFile(BUCKET, "changing/model.safetensors", second);
      assertThatThrownBy(() -> source.openRange(listed, 0, 10))
          .isInstanceOfSatisfying(
              SourceException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.ObjectChanged);
                assertThat(e.retryable()).isFalse();
              })
          .hasMessageContaining("s3://" + BUCKET + "/changing/model.safetensors")
          .hasMessageContaining("resolve the artifact again");
    }
  }

  @Test
  void statusCodesMapToReasonsThroughAProxy() throws Exception {
    try (FaultInjectingProxy proxy = new FaultInjectingProxy(s3.endpoint());
        ArtifactSource source =
            Sources.open(
                "s3://" + BUCKET + "/corpus/",
                S3Options.via(proxy.endpoint()).listMaxAttempts(1).build())) {
      SourceFile file = source.list().get(0);

      proxy.failRequests(403, 1, null);
      assertThatThrownBy(() -> source.openRange(file, 0, 1))
          .isInstanceOfSatisfying(
              SourceException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.AccessDenied);
                assertThat(e.retryable()).isFalse();
              })
          .hasMessageContaining("HTTP 403");

      proxy.failRequests(503, 1, java.time.Duration.ofSeconds(7));
      assertThatThrownBy(() -> source.openRange(file, 0, 1))
          .isInstanceOfSatisfying(
              SourceException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.Throttled);
                assertThat(e.retryable()).isTrue();
                assertThat(e.retryAfter()).contains(java.time.Duration.ofSeconds(7));
              });

      proxy.failRequests(500, 1, null);
      assertThatThrownBy(source::list)
          .isInstanceOfSatisfying(
              SourceException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.SourceUnavailable);
                assertThat(e.retryable()).isTrue();
              });

      proxy.ignoreRange(true);
      assertThatThrownBy(() -> source.openRange(file, 1, 2))
          .isInstanceOfSatisfying(
              SourceException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.RangeNotHonored);
                assertThat(e.retryable()).isFalse();
              })
          .hasMessageContaining("asked for bytes=1-2")
          .hasMessageContaining("answered 200 with the whole object");
      // the whole object asked as one range: a 200 carries exactly the bytes asked
      try (InputStream in = source.openRange(file, 0, file.size())) {
        assertThat(in.readAllBytes()).isEqualTo(Files.readAllBytes(uploaded.get(file.path())));
      }
    }
  }

  static String md5(Path file) throws Exception {
    return HexFormat.of()
        .formatHex(MessageDigest.getInstance("MD5").digest(Files.readAllBytes(file)));
  }

  private static String sha256(byte[] bytes) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
  }
}
