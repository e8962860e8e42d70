package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.Reason;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class SourceUriTest {

  @Test
  void parsesFileUrisAndPlainPaths() throws Exception {
    SourceUri file = SourceUri.parse("file:///models/llama/../llama-3");
    assertThat(file.scheme()).isEqualTo(SourceUri.Scheme.FILE);
    assertThat(file.localPath()).isEqualTo(Path.of("/models/llama-3"));
    assertThat(SourceUri.parse("file:/models/x").localPath()).isEqualTo(Path.of("/models/x"));
    assertThat(SourceUri.parse("file://localhost/models/x").localPath())
        .isEqualTo(Path.of("/models/x"));
    assertThat(SourceUri.parse("file:///models/with%20space").localPath())
        .isEqualTo(Path.of("/models/with space"));
    assertThat(SourceUri.parse("/abs/dir").localPath()).isEqualTo(Path.of("/abs/dir"));
    assertThat(SourceUri.parse("rel/dir").localPath())
        .isEqualTo(Path.of("rel/dir").toAbsolutePath().normalize());
  }

  @Test
  void parsesBucketUrisTreatingThePrefixAsADirectory() throws Exception {
    SourceUri s3 = SourceUri.parse("s3://my-bucket/models/llama");
    assertThat(s3.scheme()).isEqualTo(SourceUri.Scheme.S3);
    assertThat(s3.bucket()).isEqualTo("my-bucket");
    assertThat(s3.prefix()).isEqualTo("models/llama/");
    assertThat(s3).hasToString("s3://my-bucket/models/llama/");
    assertThat(SourceUri.parse("s3://my-bucket/models/llama/").prefix()).isEqualTo("models/llama/");
    assertThat(SourceUri.parse("s3://my-bucket").prefix()).isEmpty();
    assertThat(SourceUri.parse("s3://my-bucket/").prefix()).isEmpty();
    assertThat(SourceUri.parse("S3://my.bucket_1/a").bucket()).isEqualTo("my.bucket_1");

    SourceUri oss = SourceUri.parse("oss://bucket-x/p/");
    assertThat(oss.scheme()).isEqualTo(SourceUri.Scheme.OSS);
    assertThat(oss.bucket()).isEqualTo("bucket-x");

    SourceUri hf = SourceUri.parse("hf://meta-llama/Llama-3.1-8B/original");
    assertThat(hf.scheme()).isEqualTo(SourceUri.Scheme.HF);
    assertThat(hf.repository()).isEqualTo("meta-llama/Llama-3.1-8B");
    assertThat(hf.prefix()).isEqualTo("original/");
    assertThat(SourceUri.parse("hf://org/repo").prefix()).isEmpty();
  }

  @ParameterizedTest(name = "[{index}] {0}")
  @CsvSource(
      delimiter = '|',
      value = {
        "'' | is empty",
        "' /models' | whitespace",
        "gs://bucket/x | scheme 'gs'; supported are file://, s3://, oss:// and hf://",
        "https://host/x | scheme 'https'",
        "s3:/bucket/x | must start with s3://",
        "s3:// | has no bucket name",
        "s3:///x | has no bucket name",
        "s3://ab/x | bucket name 'ab'",
        "s3://Bucket/x | bucket name 'Bucket'",
        "s3://-bucket/x | bucket name '-bucket'",
        "s3://bucket/a/../b | has a '..' segment",
        "s3://bucket/a//b | empty segment",
        "s3://bucket/a\\b | backslash",
        "s3://bucket/x?versionId=1 | has '?' or '#'",
        "oss://b/x | bucket name 'b'",
        "hf://org | must name a repository",
        "hf://org/repo@main | repository name part 'repo@main'",
        "hf://org/re--po | repository name part 're--po'",
        "hf://org/repo/../x | has a '..' segment",
        "file://server/share | names the host 'server'",
        "file:relative/dir | relative file URI",
        "file:///x?y | query or fragment",
      })
  void refusesBadUrisNamingTheRule(String uri, String expected) {
    assertThatThrownBy(() -> SourceUri.parse(uri))
        .isInstanceOfSatisfying(
            SourceException.class,
            e -> {
              assertThat(e.reason()).isEqualTo(Reason.InvalidSourceUri);
              assertThat(e.retryable()).isFalse();
            })
        .hasMessageContaining(expected)
        .hasMessageContaining("source URI '");
  }

  @Test
  void ossAndHubOpenTheirSources() throws Exception {
    try (ArtifactSource hf = Sources.open("hf://org/repo", SourceOptions.defaults())) {
      assertThat(hf).isInstanceOf(HfSource.class);
      assertThat(hf.describe()).isEqualTo("hf://org/repo/ (revision main)");
    }
    try (ArtifactSource oss =
        Sources.open("oss://bucket-x/p/", SourceOptions.builder().region("cn-hangzhou").build())) {
      assertThat(oss).isInstanceOf(S3Source.class);
      assertThat(oss.describe()).isEqualTo("oss://bucket-x/p/");
    }
    // without a region or endpoint an oss:// source cannot know where to go
    assertThatThrownBy(() -> Sources.open("oss://bucket-x/p/", SourceOptions.defaults()))
        .isInstanceOfSatisfying(
            SourceException.class,
            e -> assertThat(e.reason()).isEqualTo(Reason.InvalidSourceOptions));
  }

  @Test
  void accessorsOfOtherSchemesFail() throws Exception {
    assertThatThrownBy(() -> SourceUri.parse("s3://bucket/x").localPath())
        .isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> SourceUri.parse("/x").bucket())
        .isInstanceOf(IllegalStateException.class);
  }
}
