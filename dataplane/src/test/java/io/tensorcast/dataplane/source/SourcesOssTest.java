package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.Reason;
import java.net.URI;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The OSS settings {@link Sources#ossOptions} derives, and the Hub source's small rules. */
class SourcesOssTest {
  private static final SourceUri OSS = parse("oss://my-bucket/models/");

  private static SourceUri parse(String uri) {
    try {
      return SourceUri.parse(uri);
    } catch (SourceException e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void theRegionGivesTheS3CompatibleEndpointAndSigningRegion() throws Exception {
    for (String region : new String[] {"cn-hangzhou", "oss-cn-hangzhou"}) {
      SourceOptions o =
          Sources.ossOptions(
              OSS, SourceOptions.builder().region(region).build(), Map.<String, String>of()::get);
      assertThat(o.endpoint()).contains(URI.create("https://s3.oss-cn-hangzhou.aliyuncs.com"));
      assertThat(o.region()).contains("cn-hangzhou");
      assertThat(o.pathStyle()).isFalse();
      assertThat(o.credentialsMode()).isEqualTo(SourceOptions.CredentialsMode.DEFAULT_CHAIN);
    }
  }

  @Test
  void ossVariablesComeBeforeAlibabaCloudOnesAndExplicitCredentialsWin() throws Exception {
    Map<String, String> env =
        Map.of(
            "OSS_ACCESS_KEY_ID", "oss-id",
            "OSS_ACCESS_KEY_SECRET", "oss-secret",
            "ALIBABA_CLOUD_ACCESS_KEY_ID", "ali-id",
            "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ali-secret");
    SourceOptions base = SourceOptions.builder().region("cn-beijing").build();
    assertThat(Sources.ossOptions(OSS, base, env::get).credentials().orElseThrow().accessKeyId())
        .isEqualTo("oss-id");
    Map<String, String> alibabaOnly =
        Map.of(
            "ALIBABA_CLOUD_ACCESS_KEY_ID", "ali-id",
            "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ali-secret",
            "ALIBABA_CLOUD_SECURITY_TOKEN", "sts");
    SourceOptions.StaticCredentials c =
        Sources.ossOptions(OSS, base, alibabaOnly::get).credentials().orElseThrow();
    assertThat(c.accessKeyId()).isEqualTo("ali-id");
    assertThat(c.sessionToken()).contains("sts");
    SourceOptions explicit =
        base.toBuilder()
            .credentials(
                new SourceOptions.StaticCredentials("mine", "s", java.util.Optional.empty()))
            .build();
    assertThat(
            Sources.ossOptions(OSS, explicit, env::get).credentials().orElseThrow().accessKeyId())
        .isEqualTo("mine");
  }

  @Test
  void pathStyleOrNoEndpointIsRefusedNamingTheFix() {
    assertThatThrownBy(
            () ->
                Sources.ossOptions(
                    OSS,
                    SourceOptions.builder().region("cn-hangzhou").pathStyle(true).build(),
                    k -> null))
        .isInstanceOfSatisfying(
            SourceException.class,
            e -> assertThat(e.reason()).isEqualTo(Reason.InvalidSourceOptions))
        .hasMessageContaining("SecondLevelDomainForbidden");
    assertThatThrownBy(() -> Sources.ossOptions(OSS, SourceOptions.defaults(), k -> null))
        .isInstanceOfSatisfying(
            SourceException.class,
            e -> assertThat(e.reason()).isEqualTo(Reason.InvalidSourceOptions))
        .hasMessageContaining("needs a region");
  }

  @Test
  void hubRevisionsAreOneEncodedSegmentAndPathsKeepTheirSlashes() {
    assertThat(HfSource.encodeSegment("refs/pr/1")).isEqualTo("refs%2Fpr%2F1");
    assertThat(HfSource.encodeSegment("v1.0 final")).isEqualTo("v1.0%20final");
    assertThat(HfSource.encodePath("sub dir/model+1.safetensors"))
        .isEqualTo("sub%20dir/model%2B1.safetensors");
  }

  @Test
  void theTokenGoesOnlyToTheSameOrigin() {
    URI hub = URI.create("https://huggingface.co");
    assertThat(HfSource.sameOrigin(URI.create("https://huggingface.co:443/x/resolve/a/b"), hub))
        .isTrue();
    assertThat(HfSource.sameOrigin(URI.create("https://cdn-lfs.huggingface.co/x"), hub)).isFalse();
    assertThat(HfSource.sameOrigin(URI.create("http://huggingface.co/x"), hub)).isFalse();
  }

  @Test
  void hubSettingsComeFromTheEnvironmentAndTheTokenIsNeverPrinted() throws Exception {
    Map<String, String> env =
        Map.of("HF_ENDPOINT", "http://mirror.internal:8080", "HF_TOKEN", "hf_x");
    // A token goes to a plain-http mirror only when that is allowed explicitly.
    assertThatThrownBy(
            () -> HfSource.open(parse("hf://org/repo"), SourceOptions.defaults(), env::get))
        .isInstanceOfSatisfying(
            SourceException.class, e -> assertThat(e.reason()).isEqualTo(Reason.InsecureEndpoint))
        .hasMessageStartingWith("Hub endpoint 'http://mirror.internal:8080' is plain http");
    HfSource s =
        HfSource.open(
            parse("hf://org/repo"),
            SourceOptions.builder().allowInsecureEndpoint(true).build(),
            env::get);
    assertThat(s.endpoint()).isEqualTo(URI.create("http://mirror.internal:8080"));
    assertThat(s.revision()).isEqualTo("main");
    assertThat(s.describe()).doesNotContain("hf_x");
    assertThat(SourceOptions.builder().token("hf_secret").build().toString())
        .doesNotContain("hf_secret")
        .contains("token=***");
    assertThatThrownBy(
            () ->
                HfSource.open(
                    parse("hf://org/repo"),
                    SourceOptions.defaults(),
                    Map.of("HF_ENDPOINT", "ftp://x")::get))
        .isInstanceOfSatisfying(
            SourceException.class,
            e -> assertThat(e.reason()).isEqualTo(Reason.InvalidSourceOptions))
        .hasMessageContaining("HF_ENDPOINT");
    assertThatThrownBy(() -> SourceOptions.builder().revision(" main").build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("revision");
  }
}
