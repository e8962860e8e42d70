package io.tensorcast.dataplane.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.Reason;
import org.junit.jupiter.api.Test;

class SourcePathsTest {

  @Test
  void acceptsOrdinaryRelativePaths() {
    assertThat(SourcePaths.problem("model.safetensors")).isEmpty();
    assertThat(SourcePaths.problem("unet/diffusion_pytorch_model.fp16.safetensors")).isEmpty();
    assertThat(SourcePaths.problem(".gitattributes")).isEmpty();
    assertThat(SourcePaths.problem("a..b/c")).isEmpty();
  }

  @Test
  void refusesPathsThatCouldLeaveTheRoot() {
    assertThat(SourcePaths.problem("")).contains("is empty");
    assertThat(SourcePaths.problem("/etc/passwd")).contains("is absolute (starts with '/')");
    assertThat(SourcePaths.problem("../x")).contains("has a '..' segment");
    assertThat(SourcePaths.problem("a/../../x")).contains("has a '..' segment");
    assertThat(SourcePaths.problem("a/./x")).contains("has a '.' segment");
    assertThat(SourcePaths.problem("a//x"))
        .hasValueSatisfying(p -> assertThat(p).contains("empty"));
    assertThat(SourcePaths.problem("a/")).hasValueSatisfying(p -> assertThat(p).contains("empty"));
    assertThat(SourcePaths.problem("..\\x")).contains("contains a backslash");
    assertThat(SourcePaths.problem("a\u0000b")).contains("contains the control character U+0000");
  }

  @Test
  void requireSafeGivesAnUnsafePathReasonNamingWhere() {
    assertThatThrownBy(() -> SourcePaths.requireSafe("../secret", "s3://bucket/p/"))
        .isInstanceOfSatisfying(
            SourceException.class,
            e -> {
              assertThat(e.reason()).isEqualTo(Reason.UnsafePath);
              assertThat(e.retryable()).isFalse();
            })
        .hasMessage(
            "refusing file '../secret' listed under s3://bucket/p/: the path has a '..' segment;"
                + " artifact paths must be relative, '/'-separated, without '.', '..' or empty"
                + " segments");
  }
}
