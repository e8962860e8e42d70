package io.tensorcast.operator.validation;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

class GlobSyntaxTest {

  @ParameterizedTest
  @ValueSource(
      strings = {
        "*.safetensors",
        "config.json",
        "/config.json",
        "vae/",
        "/vae/",
        "unet/*.safetensors",
        "**/x.bin",
        "a/**",
        "a/**/b",
        "model-0000[1-9]-of-*.safetensors",
        "[!.]*",
        "[]]x",
        "*.{json,txt}",
        "a\\*b",
        "a\\{b"
      })
  void acceptsTheDataPlaneSyntax(String glob) {
    assertThat(GlobSyntax.check(glob)).isEmpty();
  }

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "/|names only the root",
        "a//b|empty segment",
        "./a|'.' segment",
        "a/../b|'..' segment",
        "a**|'**' must be a whole path segment",
        "x/**b|'**' must be a whole path segment",
        "[abc|'[' without a closing ']'",
        "{a,b|'{' without a closing '}'",
        "{a,{b}}|nested '{'",
        "a}|'}' without an opening '{'",
        "a\\|ends with a lone '\\'"
      })
  void refusesBrokenGlobsSayingWhy(String glob, String why) {
    assertThat(GlobSyntax.check(glob)).hasValueSatisfying(m -> assertThat(m).contains(why));
  }
}
