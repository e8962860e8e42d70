package io.tensorcast.api.v1alpha1;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The rule of {@code spec.source.uri} ({@link SourceSpec#URI_PATTERN}), applied as the API server
 * applies an OpenAPI pattern (Go RE2, searched anywhere in the value, so the anchors must do the
 * work).
 */
class SourceUriPatternTest {

  private static boolean accepted(String uri) {
    return GoRegex.accepts(SourceSpec.URI_PATTERN, uri);
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "s3://models",
        "s3://models/",
        "s3://models/qwen/Qwen2-7B-Instruct/",
        "s3://models/qwen/Qwen2-7B-Instruct",
        "s3://my.bucket-01/prefix/with_underscores",
        "s3://abc/a/.hidden/b",
        "s3://abc/a/..b/c",
        "s3://abc/v1.0/model.safetensors",
        "oss://my-bucket/llama/",
        "oss://abc",
        "hf://meta-llama/Llama-3.1-8B",
        "hf://meta-llama/Llama-3.1-8B/",
        "hf://Qwen/Qwen2.5-0.5B-Instruct/onnx/fp16",
        "hf://a/b",
        "hf://stabilityai/stable-diffusion-xl-base-1.0/unet",
        "file:///models/llama",
        "file:///models/llama/",
        "file:///mnt/nvme0/ckpt/step_00100",
      })
  void accepts(String uri) {
    assertThat(accepted(uri)).as(uri).isTrue();
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "",
        "models/qwen",
        "/models/qwen",
        "https://example.com/model",
        "gs://bucket/prefix",
        "S3://models/",
        "s3://",
        "s3:///models",
        "s3://ab",
        "s3://Models/upper",
        "s3://-models/",
        "s3://models-/",
        "s3://models//double",
        "s3://models/../escape",
        "s3://models/a/./b",
        "s3://models/a/..",
        "s3://models/with space",
        "s3://models/tab\there",
        "s3://models/\n",
        "oss://my.bucket/dots-not-allowed-in-oss",
        "oss://ab/",
        "hf://",
        "hf://gpt2",
        "hf://org/",
        "hf://-org/repo",
        "hf://org/repo-",
        "hf://org/.repo",
        "hf://org/repo/../other",
        "hf://org/repo//x",
        "hf://org/repo@main",
        "file://",
        "file:///",
        "file://relative/path",
        "file:///models/../etc",
        "file:////models",
        " s3://models/",
        "s3://models/ ",
        "xs3://models/",
        "s3://models/\ns3://other/",
      })
  void refuses(String uri) {
    assertThat(accepted(uri)).as("'%s'", uri).isFalse();
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "http://minio.storage.svc:9000",
        "https://oss-cn-hangzhou.aliyuncs.com",
        "https://s3.example.com/base/"
      })
  void endpointAccepts(String endpoint) {
    assertThat(GoRegex.accepts(SourceSpec.ENDPOINT_PATTERN, endpoint)).isTrue();
  }

  @ParameterizedTest
  @ValueSource(
      strings = {"minio:9000", "ftp://host", "http://", "http://host/a b", "http://host?x=1"})
  void endpointRefuses(String endpoint) {
    assertThat(GoRegex.accepts(SourceSpec.ENDPOINT_PATTERN, endpoint)).isFalse();
  }
}
