package io.tensorcast.dataplane.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.tensorcast.api.Reason;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

class StorePathsTest {

  static Stream<Arguments> hostilePaths() {
    return Stream.of(
        Arguments.of("", "is empty"),
        Arguments.of("/etc/passwd", "is absolute"),
        Arguments.of("../escape.bin", "has a '..' segment"),
        Arguments.of("a/../../escape.bin", "has a '..' segment"),
        Arguments.of("a/..", "has a '..' segment"),
        Arguments.of("..", "has a '..' segment"),
        Arguments.of("a\\..\\b", "contains a backslash"),
        Arguments.of("C:\\model.bin", "contains a backslash"),
        Arguments.of("a\0b", "contains a NUL character"),
        Arguments.of("a\nb", "contains the control character U+000A"),
        Arguments.of("a\u007fb", "contains the control character U+007F"),
        Arguments.of("a//b", "empty segment"),
        Arguments.of("dir/", "empty segment"),
        Arguments.of("./a", "has a '.' segment"),
        Arguments.of("a/./b", "has a '.' segment"),
        Arguments.of("x".repeat(256), "longer than 255 bytes (NAME_MAX)"),
        Arguments.of("é".repeat(128), "longer than 255 bytes (NAME_MAX)"),
        Arguments.of("a/".repeat(2048) + "b", "longer than 4095 bytes (PATH_MAX)"));
  }

  @ParameterizedTest
  @MethodSource("hostilePaths")
  void hostilePathIsRefusedWithTheRule(String path, String rule) {
    StoreException e =
        catchThrowableOfType(
            StoreException.class,
            () -> StorePaths.checkFiles("llama", List.of(new StoreFile(path, 1))));
    assertThat(e.reason()).isEqualTo(Reason.InvalidPath);
    assertThat(e.getMessage()).startsWith("artifact llama: path '").contains(rule);
    // the offending text is shown escaped, never raw
    assertThat(e.getMessage()).doesNotContain("\0").doesNotContain("\n");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "model.safetensors",
        "sub/dir/rank_00000.safetensors",
        ".hidden",
        "a..b",
        "...",
        "weights v2.bin",
        "модель.bin"
      })
  void ordinaryPathsPass(String path) {
    assertThat(StorePaths.brokenRule(path)).isNull();
  }

  @Test
  void duplicatePathIsRefused() {
    StoreException e =
        catchThrowableOfType(
            StoreException.class,
            () ->
                StorePaths.checkFiles(
                    "m",
                    List.of(
                        new StoreFile("config.json", 1),
                        new StoreFile("x", 1),
                        new StoreFile("config.json", 2))));
    assertThat(e.reason()).isEqualTo(Reason.DuplicatePath);
    assertThat(e.getMessage()).isEqualTo("artifact m: path 'config.json' is listed more than once");
  }

  @Test
  void fileThatMustAlsoBeADirectoryIsRefusedInEitherOrder() {
    for (List<StoreFile> files :
        List.of(
            List.of(new StoreFile("a/b", 1), new StoreFile("a/b/c.bin", 1)),
            List.of(new StoreFile("a/b/c.bin", 1), new StoreFile("a/b", 1)))) {
      StoreException e =
          catchThrowableOfType(StoreException.class, () -> StorePaths.checkFiles("m", files));
      assertThat(e.reason()).isEqualTo(Reason.PathConflict);
      assertThat(e.getMessage())
          .isEqualTo(
              "artifact m: 'a/b' is listed as a file but 'a/b/c.bin' needs it to be a directory");
    }
  }

  @Test
  void siblingWithCommonPrefixIsNoConflict() {
    assertThatCode(
            () ->
                StorePaths.checkFiles(
                    "m", List.of(new StoreFile("a/b", 1), new StoreFile("a/bc/d", 1))))
        .doesNotThrowAnyException();
  }

  @Test
  void negativeSizeAndEmptyListAreRefused() {
    StoreException neg =
        catchThrowableOfType(
            StoreException.class,
            () -> StorePaths.checkFiles("m", List.of(new StoreFile("x.bin", -5))));
    assertThat(neg.reason()).isEqualTo(Reason.InvalidSize);
    assertThat(neg.getMessage()).contains("'x.bin' has negative size -5");

    StoreException none =
        catchThrowableOfType(StoreException.class, () -> StorePaths.checkFiles("m", List.of()));
    assertThat(none.reason()).isEqualTo(Reason.NoFiles);
  }

  @ParameterizedTest
  @ValueSource(strings = {"", "Llama", "-a", "a-", "a_b", "a.b", "..", ".tensorcast", "a/b", "a b"})
  void invalidArtifactIdsAreRefused(String id) {
    StoreException e =
        catchThrowableOfType(StoreException.class, () -> StorePaths.checkArtifactId(id));
    assertThat(e.reason()).isEqualTo(Reason.InvalidArtifactId);
    assertThat(e.getMessage()).contains("is not a DNS-1123 label");
  }

  @Test
  void artifactIdLengthLimitIs63() {
    assertThat(StorePaths.isValidArtifactId("a".repeat(63))).isTrue();
    assertThat(StorePaths.isValidArtifactId("a".repeat(64))).isFalse();
    assertThat(StorePaths.isValidArtifactId("0f767c95-81e9-98cd-dc57-c25924358653")).isTrue();
  }
}
