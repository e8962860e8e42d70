package io.tensorcast.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class PathGlobTest {

  @ParameterizedTest(name = "{0} ~ {1} -> {2}")
  @CsvSource({
    // no '/': the file name at any depth
    "*.safetensors, model.safetensors, true",
    "*.safetensors, unet/diffusion_pytorch_model.safetensors, true",
    "*.safetensors, model.safetensors.index.json, false",
    "*.json, tokenizer/vocab.json, true",
    "config.json, text_encoder/config.json, true",
    "config.json, xconfig.json, false",
    // anchored
    "/config.json, config.json, true",
    "/config.json, text_encoder/config.json, false",
    "unet/*.safetensors, unet/a.safetensors, true",
    "unet/*.safetensors, unet/sub/a.safetensors, false",
    "unet/*.safetensors, x/unet/a.safetensors, false",
    // ** as whole segments
    "**/*.bin, pytorch_model.bin, true",
    "**/*.bin, a/b/c/pytorch_model.bin, true",
    "a/**/b.txt, a/b.txt, true",
    "a/**/b.txt, a/x/y/b.txt, true",
    "a/**/b.txt, ab.txt, false",
    "unet/**, unet/a, true",
    "unet/**, unet/x/y, true",
    "unet/**, unet, false",
    "**, anything/at/all, true",
    // trailing '/' = directory
    "vae/, vae/model.safetensors, true",
    "vae/, sub/vae/x.bin, true",
    "vae/, vae.bin, false",
    "/vae/, sub/vae/x.bin, false",
    // ? [..] {..}
    "model-0000?-of-00006.safetensors, model-00003-of-00006.safetensors, true",
    "model-0000?-of-00006.safetensors, model-0000/-of-00006.safetensors, false",
    "rank_[0-9]*.safetensors, rank_00001.safetensors, true",
    "rank_[!0-9]*.safetensors, rank_00001.safetensors, false",
    "rank_[!0-9]*.safetensors, rank_x.safetensors, true",
    "'*.{safetensors,json}', a/config.json, true",
    "'*.{safetensors,json}', model.safetensors, true",
    "'*.{safetensors,json}', model.bin, false",
    // escapes and regex metacharacters are literal
    "\\*.bin, *.bin, true",
    "\\*.bin, a.bin, false",
    "a+b(1).bin, a+b(1).bin, true",
    "a.bin, axbin, false",
    // case-sensitive
    "*.JSON, config.json, false",
    // inside [...] every character is literal, escaped or not
    "'[\\d]x', dx, true",
    "'[\\d]x', 1x, false",
    "'[\\]]x', ]x, true",
    "'[.+]x', +x, true",
    "'[.+]x', ax, false",
    "'[\\Q]x', Qx, true",
    "'[a\\-z]', -, true",
    "'[a\\-z]', b, false",
    "'[-a]', -, true",
    "'[a-]', -, true",
    "'[!a]', /, false",
    // alternatives holding wildcards, an empty alternative
    "'{a*,b}.bin', axx.bin, true",
    "'{a*,b}.bin', b.bin, true",
    "'{a*,b}.bin', c.bin, false",
    "'x{,y}.bin', x.bin, true",
    "'x{,y}.bin', xy.bin, true",
    "'x{,y}.bin', xz.bin, false",
    "'a,b', 'a/a,b', true",
  })
  void matches(String glob, String path, boolean expected) {
    assertThat(PathGlob.compile(glob).matches(path)).isEqualTo(expected);
  }

  @ParameterizedTest(name = "[{index}] {0}")
  @CsvSource(
      delimiter = '|',
      value = {
        "a**/b | '**' must be a whole path segment",
        "[abc | '[' without a closing ']'",
        "*.{json | '{' without a closing '}'",
        "a}.bin | '}' without an opening '{'",
        "{a,{b}}.bin | nested '{'",
        "a//b | empty segment",
        "../x | '..' segment",
        "/ | names only the root",
        "abc\\ | lone '\\'",
        "[z-a] | range 'z-a' in '[...]' is reversed",
        "x[9-0].bin | range '9-0' in '[...]' is reversed",
        "[!] | '[' without a closing ']'",
        "[\\] | '[' without a closing ']'",
      })
  void rejectsMalformedGlobsNamingTheRule(String glob, String expected) {
    assertThatThrownBy(() -> PathGlob.compile(glob))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(expected);
  }

  @org.junit.jupiter.api.Test
  @org.junit.jupiter.api.Timeout(10)
  void aHostileGlobMatchesInStepsBoundedByPathTimesGlobLength() {
    String path = "a".repeat(1000);
    String dirs = "a/".repeat(500) + "c";

    // a backtracking regular expression takes exponential time on each of these
    assertThat(PathGlob.compile("*a".repeat(40) + "b").matches(path)).isFalse();
    assertThat(PathGlob.compile("*a".repeat(40)).matches(path)).isTrue();
    assertThat(PathGlob.compile("/" + "**/".repeat(100) + "b").matches(dirs)).isFalse();
    assertThat(PathGlob.compile("/" + "**/".repeat(100) + "c").matches(dirs)).isTrue();
    assertThat(PathGlob.compile("{*a,a*}".repeat(100) + "b").matches(path)).isFalse();
  }

  @org.junit.jupiter.api.Test
  void aGlobLongerThanTheApiAllowsIsRefusedWithBothLengths() {
    String longest = "a".repeat(io.tensorcast.api.v1alpha1.SourceSpec.MAX_GLOB_LENGTH);

    assertThat(PathGlob.compile(longest).matches(longest)).isTrue();
    assertThatThrownBy(() -> PathGlob.compile(longest + "a"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("is 1025 characters long; at most 1024");
  }
}
