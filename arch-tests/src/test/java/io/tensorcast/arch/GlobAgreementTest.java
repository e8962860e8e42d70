package io.tensorcast.arch;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.ObjectMetaBuilder;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.dataplane.source.PathFilter;
import io.tensorcast.operator.validation.SpecValidator;
import io.tensorcast.operator.validation.Violation;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The operator accepts an include/exclude glob exactly when the data plane can compile it: the
 * operator's {@link SpecValidator} against the data plane's {@link PathFilter}, on a table of
 * ordinary and hostile patterns. Both sides are asked the same question through their own entry
 * points, so a check added on one side only fails here.
 */
class GlobAgreementTest {

  static Stream<String> patterns() {
    return Stream.of(
        "*.safetensors",
        "config.json",
        "/config.json",
        "vae/",
        "/vae/",
        "unet/*.safetensors",
        "**",
        "**/",
        "/**",
        "**/**",
        "**/x.bin",
        "a/**/b",
        "a**",
        "x/**b",
        "***",
        "*",
        "?",
        "[",
        "]",
        "[]",
        "[]]",
        "[!]",
        "[!]]",
        "[^a]",
        "[z-a]",
        "[a-z]",
        "[\\d]",
        "[\\]",
        "[\\]]",
        "[\\Q]",
        "[\\E]",
        "[a&&b]",
        "[[:alpha:]]",
        "\\",
        "a\\",
        "\\\\",
        "\\*",
        "\\/",
        "a\\/b",
        "{",
        "}",
        "{}",
        "{a,b}",
        "{a,{b}}",
        "{a,b",
        "(a|b)",
        "$^.+()|",
        "\\Q.*\\E",
        "../x",
        "a/../b",
        "./a",
        "..",
        ".",
        "/",
        "//",
        "a//b",
        "/a/",
        "é*.bin",
        "\u0000",
        "a".repeat(SourceSpec.MAX_GLOB_LENGTH),
        "a".repeat(SourceSpec.MAX_GLOB_LENGTH + 1),
        "*/".repeat(SourceSpec.MAX_GLOB_LENGTH / 2),
        "[" + "a-".repeat(600));
  }

  @ParameterizedTest(name = "[{index}] {0}")
  @MethodSource("patterns")
  void theOperatorAcceptsAGlobExactlyWhenTheDataPlaneCompilesIt(String glob) {
    boolean operatorAcceptsInclude = globViolations(List.of(glob), List.of()).isEmpty();
    boolean operatorAcceptsExclude = globViolations(List.of(), List.of(glob)).isEmpty();
    boolean dataPlaneCompiles;
    try {
      PathFilter.of(List.of(glob), List.of(glob));
      dataPlaneCompiles = true;
    } catch (IllegalArgumentException e) {
      dataPlaneCompiles = false;
    }

    assertThat(operatorAcceptsInclude).isEqualTo(dataPlaneCompiles);
    assertThat(operatorAcceptsExclude).isEqualTo(dataPlaneCompiles);
  }

  private static List<Violation> globViolations(List<String> include, List<String> exclude) {
    ModelArtifact a = new ModelArtifact();
    a.setMetadata(new ObjectMetaBuilder().withNamespace("ns").withName("m").build());
    ModelArtifactSpec spec = new ModelArtifactSpec();
    SourceSpec source = new SourceSpec();
    source.setUri("hf://Qwen/Qwen2.5-7B");
    source.setInclude(include);
    source.setExclude(exclude);
    spec.setSource(source);
    a.setSpec(spec);
    return SpecValidator.validate(a).stream()
        .filter(
            v ->
                v.field().startsWith("spec.source.include")
                    || v.field().startsWith("spec.source.exclude"))
        .toList();
  }
}
