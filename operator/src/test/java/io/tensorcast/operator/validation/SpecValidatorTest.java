package io.tensorcast.operator.validation;

import static io.tensorcast.operator.testing.Fixtures.artifact;
import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.TolerationBuilder;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class SpecValidatorTest {

  private static ModelArtifact valid() {
    ModelArtifact a = artifact("ns", "qwen", 1, "s3://models/qwen/");
    a.getSpec().getSource().setInclude(List.of("*.safetensors", "{config,tokenizer}.json", "**/x"));
    a.getSpec().getSource().setExclude(List.of("original/", "/top/[!a-c]*.bin"));
    a.getSpec().getMemory().setLimit(new Quantity("40Gi"));
    a.getSpec().getDistribution().setPieceSize(new Quantity("64Mi"));
    a.getSpec().getPlacement().setNodeSelector(Map.of("node.kubernetes.io/instance-type", "gpu"));
    a.getSpec()
        .getPlacement()
        .setTolerations(
            List.of(
                new TolerationBuilder()
                    .withKey("nvidia.com/gpu")
                    .withOperator("Exists")
                    .withEffect("NoSchedule")
                    .build()));
    return a;
  }

  @Test
  void aValidSpecHasNoViolations() {
    assertThat(SpecValidator.validate(valid())).isEmpty();
    assertThat(SpecValidator.validate(artifact("ns", "m", 1, "hf://Qwen/Qwen2.5-7B/sub")))
        .isEmpty();
    assertThat(SpecValidator.validate(artifact("ns", "m", 1, "file:///models/m/"))).isEmpty();
    assertThat(SpecValidator.validate(artifact("ns", "m", 1, "oss://my-bucket/p"))).isEmpty();
  }

  static Stream<Arguments> invalid() {
    return Stream.of(
        bad(
            "spec.source.uri",
            "is not one of s3://",
            a -> a.getSpec().getSource().setUri("gs://b/x")),
        bad(
            "spec.source.uri",
            "must not contain two adjacent periods",
            a -> a.getSpec().getSource().setUri("s3://my..bucket/x")),
        bad(
            "spec.source.uri",
            "must not be formatted as an IP address",
            a -> a.getSpec().getSource().setUri("s3://192.168.10.1/x")),
        bad(
            "spec.source.uri",
            "reserved prefixes",
            a -> a.getSpec().getSource().setUri("s3://xn--bucket/x")),
        bad(
            "spec.source.uri",
            "must not contain '--' or '..'",
            a -> a.getSpec().getSource().setUri("hf://org/repo--x")),
        bad(
            "spec.source.uri",
            "must not end with '.git'",
            a -> a.getSpec().getSource().setUri("hf://org/repo.git")),
        bad(
            "spec.source.include[1]",
            "'**' must be a whole path segment",
            a -> a.getSpec().getSource().setInclude(List.of("*.json", "a**"))),
        bad(
            "spec.source.exclude[0]",
            "'[' without a closing ']'",
            a -> a.getSpec().getSource().setExclude(List.of("model[0-9.bin"))),
        bad(
            "spec.source.include[0]",
            "'{' without a closing '}'",
            a -> a.getSpec().getSource().setInclude(List.of("*.{json,bin"))),
        bad(
            "spec.source.include[0]",
            "empty segment",
            a -> a.getSpec().getSource().setInclude(List.of("a//b"))),
        bad(
            "spec.source.include[0]",
            "'..' segment",
            a -> a.getSpec().getSource().setInclude(List.of("../etc/passwd"))),
        bad(
            "spec.source.include[0]",
            "glob is empty",
            a -> a.getSpec().getSource().setInclude(List.of(""))),
        bad(
            "spec.source.revision",
            "without white space",
            a -> a.getSpec().getSource().setRevision("main branch")),
        bad(
            "spec.memory.limit",
            "must be more than 0 bytes",
            a -> a.getSpec().getMemory().setLimit(new Quantity("0"))),
        bad(
            "spec.memory.limit",
            "must be more than 0 bytes",
            a -> a.getSpec().getMemory().setLimit(new Quantity("-1Gi"))),
        bad(
            "spec.memory.limit",
            "is not a Kubernetes quantity",
            a -> a.getSpec().getMemory().setLimit(new Quantity("forty gigs"))),
        bad(
            "spec.memory.limit",
            "is not a whole number of bytes",
            a -> a.getSpec().getMemory().setLimit(new Quantity("100m"))),
        bad(
            "spec.distribution.pieceSize",
            "is not a Kubernetes quantity",
            a -> a.getSpec().getDistribution().setPieceSize(new Quantity("64MB"))),
        bad(
            "spec.distribution.pieceSize",
            "is 255Ki (261120 bytes); must be from 256Ki (262144) to 64Mi (67108864) bytes",
            a -> a.getSpec().getDistribution().setPieceSize(new Quantity("255Ki"))),
        bad(
            "spec.distribution.pieceSize",
            "is 1025Mi (1074790400 bytes); must be from 256Ki",
            a -> a.getSpec().getDistribution().setPieceSize(new Quantity("1025Mi"))),
        // The data plane refuses pieces over 64 MiB (--piece-size): the operator must not create
        // pods that exit at once.
        bad(
            "spec.distribution.pieceSize",
            "is 65Mi (68157440 bytes); must be from 256Ki (262144) to 64Mi (67108864) bytes",
            a -> a.getSpec().getDistribution().setPieceSize(new Quantity("65Mi"))),
        bad(
            "spec.distribution.sourceConnections",
            "at least 1",
            a -> a.getSpec().getDistribution().setSourceConnections(0)),
        bad(
            "spec.placement.replicas",
            "at least 1",
            a -> a.getSpec().getPlacement().setReplicas(0)),
        bad(
            "spec.placement.nodeSelector[bad key!]",
            "is not a label name",
            a -> a.getSpec().getPlacement().setNodeSelector(Map.of("bad key!", "x"))),
        bad(
            "spec.placement.nodeSelector[pool]",
            "is not a label value",
            a -> a.getSpec().getPlacement().setNodeSelector(Map.of("pool", "-gpu"))),
        bad(
            "spec.placement.tolerations[0].value",
            "must be empty when operator is Exists",
            a ->
                a.getSpec()
                    .getPlacement()
                    .setTolerations(
                        List.of(
                            new TolerationBuilder()
                                .withKey("k")
                                .withOperator("Exists")
                                .withValue("v")
                                .build()))),
        bad(
            "spec.placement.tolerations[0].effect",
            "is not NoSchedule, PreferNoSchedule or NoExecute",
            a ->
                a.getSpec()
                    .getPlacement()
                    .setTolerations(
                        List.of(new TolerationBuilder().withKey("k").withEffect("Never").build()))),
        bad(
            "spec.placement.tolerations[0].operator",
            "must be Exists when key is empty",
            a ->
                a.getSpec()
                    .getPlacement()
                    .setTolerations(List.of(new TolerationBuilder().withValue("v").build()))),
        bad("metadata.name", "at most 63", a -> a.getMetadata().setName("n".repeat(64))));
  }

  private static Arguments bad(String field, String rulePart, Consumer<ModelArtifact> change) {
    return Arguments.of(field, rulePart, change);
  }

  @ParameterizedTest(name = "{0}: {1}")
  @MethodSource("invalid")
  void eachBrokenRuleIsNamedWithItsField(
      String field, String rulePart, Consumer<ModelArtifact> change) {
    ModelArtifact a = valid();
    change.accept(a);

    List<Violation> v = SpecValidator.validate(a);

    assertThat(v).hasSize(1);
    assertThat(v.get(0).field()).isEqualTo(field);
    assertThat(v.get(0).rule()).contains(rulePart);
    assertThat(SpecValidator.describe(v)).startsWith("invalid spec: " + field + ": ");
  }

  @Test
  void everyViolationIsReported() {
    ModelArtifact a = valid();
    a.getSpec().getSource().setInclude(List.of("a**"));
    a.getSpec().getMemory().setLimit(new Quantity("0"));

    assertThat(SpecValidator.validate(a))
        .extracting(Violation::field)
        .containsExactly("spec.source.include[0]", "spec.memory.limit");
  }
}
