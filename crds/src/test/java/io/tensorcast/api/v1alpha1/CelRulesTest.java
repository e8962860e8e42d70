package io.tensorcast.api.v1alpha1;

import static org.assertj.core.api.Assertions.assertThat;

import dev.cel.bundle.Cel;
import dev.cel.bundle.CelFactory;
import dev.cel.common.CelAbstractSyntaxTree;
import dev.cel.common.types.SimpleType;
import dev.cel.parser.CelStandardMacro;
import io.fabric8.kubernetes.api.model.apiextensions.v1.CustomResourceDefinition;
import io.fabric8.kubernetes.api.model.apiextensions.v1.JSONSchemaProps;
import io.fabric8.kubernetes.api.model.apiextensions.v1.ValidationRule;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The CRD's CEL rules ({@code x-kubernetes-validations}), compiled and evaluated with Google's CEL
 * for Java against objects shaped as the API server gives them to a rule ({@code self} = the object
 * at the rule's place, absent fields absent). The rules use only standard CEL (no Kubernetes
 * extension library), so this evaluator and the API server agree. Every rule is refused by at least
 * one case here.
 */
class CelRulesTest {

  /** A rule with the schema path it sits at ({@code ""} for the root). */
  record PlacedRule(String path, ValidationRule rule) {}

  static final Cel CEL =
      CelFactory.standardCelBuilder()
          .setStandardMacros(CelStandardMacro.STANDARD_MACROS)
          .addVar("self", SimpleType.DYN)
          .build();
  static List<PlacedRule> rules;

  @BeforeAll
  static void load() throws IOException {
    CustomResourceDefinition crd = CrdFiles.generatedCrd();
    rules = new ArrayList<>();
    collect(crd.getSpec().getVersions().get(0).getSchema().getOpenAPIV3Schema(), "", rules);
  }

  private static void collect(JSONSchemaProps s, String path, List<PlacedRule> out) {
    if (s.getXKubernetesValidations() != null) {
      s.getXKubernetesValidations().forEach(r -> out.add(new PlacedRule(path, r)));
    }
    if (s.getProperties() != null) {
      s.getProperties().forEach((k, v) -> collect(v, path + "." + k, out));
    }
    if (s.getItems() != null && s.getItems().getSchema() != null) {
      collect(s.getItems().getSchema(), path + "[]", out);
    }
  }

  @Test
  void everyRuleCompilesToABoolean() throws Exception {
    assertThat(rules).hasSize(9);
    for (PlacedRule r : rules) {
      CelAbstractSyntaxTree ast = CEL.compile(r.rule().getRule()).getAst();
      assertThat(ast.getResultType()).as(r.rule().getRule()).isIn(SimpleType.BOOL, SimpleType.DYN);
      assertThat(r.rule().getMessage()).as("message of " + r.rule().getRule()).isNotBlank();
    }
  }

  static Stream<Arguments> tolerations() {
    return Stream.of(
        Arguments.of(Map.of("key", "gpu", "operator", "Exists", "effect", "NoSchedule"), null),
        Arguments.of(Map.of("key", "gpu", "operator", "Equal", "value", "a100"), null),
        Arguments.of(Map.of("key", "gpu", "value", "a100"), null),
        Arguments.of(Map.of("operator", "Exists"), null),
        Arguments.of(Map.of("key", "n", "effect", "NoExecute", "tolerationSeconds", 30L), null),
        Arguments.of(Map.of("value", "x"), "operator must be Exists when key is empty"),
        Arguments.of(
            Map.of("key", "", "operator", "Equal"), "operator must be Exists when key is empty"),
        Arguments.of(
            Map.of("key", "gpu", "operator", "Exists", "value", "a100"),
            "value must be empty when operator is Exists"),
        Arguments.of(
            Map.of("key", "gpu", "tolerationSeconds", 30L),
            "tolerationSeconds is allowed only with effect NoExecute"),
        Arguments.of(
            Map.of("key", "gpu", "effect", "NoSchedule", "tolerationSeconds", 30L),
            "tolerationSeconds is allowed only with effect NoExecute"));
  }

  @ParameterizedTest
  @MethodSource("tolerations")
  void tolerationRules(Map<String, Object> toleration, String refusedWith) throws Exception {
    List<String> failed = failures(".spec.placement.tolerations[]", toleration);
    if (refusedWith == null) {
      assertThat(failed).as("%s", toleration).isEmpty();
    } else {
      assertThat(failed).as("%s", toleration).singleElement().asString().startsWith(refusedWith);
    }
  }

  @Test
  void nameLengthRuleAtTheRoot() throws Exception {
    Map<String, Object> ok = Map.of("metadata", Map.of("name", "a".repeat(63)));
    Map<String, Object> tooLong = Map.of("metadata", Map.of("name", "a".repeat(64)));
    assertThat(failures("", ok)).isEmpty();
    assertThat(failures("", tooLong))
        .singleElement()
        .asString()
        .startsWith("metadata.name must be at most 63 characters");
  }

  @Test
  void sourceIsEitherAUriOrItsWriters() throws Exception {
    Map<String, Object> writers = Map.of("podSelector", Map.of("matchLabels", Map.of("a", "b")));
    assertThat(failures(".spec.source", Map.of("uri", "s3://b/p/"))).isEmpty();
    assertThat(failures(".spec.source", Map.of("writers", writers))).isEmpty();
    String rule = "exactly one of uri (the artifact is loaded from it) and writers";
    assertThat(failures(".spec.source", Map.of("uri", "s3://b/p/", "writers", writers)))
        .singleElement()
        .asString()
        .startsWith(rule);
    assertThat(failures(".spec.source", Map.of("region", "us-east-1")))
        .singleElement()
        .asString()
        .startsWith(rule);
  }

  static Stream<Arguments> uris() {
    String s3Bucket = "the bucket of an s3:// uri has 3-63 characters";
    String ossBucket = "the bucket of an oss:// uri has 3-63 characters";
    String segments = "the path of a uri has no empty, '.' or '..' segments";
    String hf = "an hf:// uri is hf://org/repo or hf://org/repo/subdir";
    return Stream.of(
        Arguments.of("s3://models/llama/", null),
        Arguments.of("s3://my.bucket-1", null),
        Arguments.of("s3://bkt/.cache/x", null),
        Arguments.of("oss://models/x/", null),
        Arguments.of("hf://meta-llama/Llama-3.1-8B", null),
        Arguments.of("hf://org/repo/sub/dir/", null),
        Arguments.of("file:///models/llama/", null),
        Arguments.of("s3://My_Bucket/x", s3Bucket),
        Arguments.of("s3://ab/x", s3Bucket),
        Arguments.of("s3://-bucket/x", s3Bucket),
        Arguments.of("oss://my.bucket/x", ossBucket),
        Arguments.of("hf://org", hf),
        Arguments.of("hf://-org/repo", hf),
        Arguments.of("s3://models//x", segments),
        Arguments.of("s3://models/../x", segments),
        Arguments.of("file:///models/./x", segments),
        Arguments.of("hf://org/repo/..", segments));
  }

  /** One short message per broken rule of a source URI, and none for the URIs the rules allow. */
  @ParameterizedTest
  @MethodSource("uris")
  void uriRules(String uri, String refusedWith) throws Exception {
    List<String> failed = failures(".spec.source.uri", uri);
    if (refusedWith == null) {
      assertThat(failed).as(uri).isEmpty();
      assertThat(GoRegex.accepts(SourceSpec.URI_PATTERN, uri)).as(uri).isTrue();
    } else {
      assertThat(failed).as(uri).singleElement().asString().startsWith(refusedWith);
      assertThat(failed.get(0).length()).as("message length").isLessThan(120);
      assertThat(GoRegex.accepts(SourceSpec.URI_PATTERN, uri)).as(uri).isFalse();
    }
  }

  /** Messages of the rules at {@code path} that {@code self} fails (in the CRD's order). */
  private static List<String> failures(String path, Object self) throws Exception {
    List<String> out = new ArrayList<>();
    Map<String, Object> vars = new LinkedHashMap<>();
    vars.put("self", self);
    for (PlacedRule r : rules) {
      if (!r.path().equals(path)) {
        continue;
      }
      Object result = CEL.createProgram(CEL.compile(r.rule().getRule()).getAst()).eval(vars);
      if (!Boolean.TRUE.equals(result)) {
        out.add(r.rule().getMessage());
      }
    }
    return out;
  }
}
