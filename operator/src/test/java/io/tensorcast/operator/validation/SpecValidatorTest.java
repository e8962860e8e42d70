package io.tensorcast.operator.validation;

import static io.tensorcast.operator.testing.Fixtures.artifact;
import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.TolerationBuilder;
import io.tensorcast.api.v1alpha1.CredentialsSecretRef;
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

  // ------------------------------------------------------------------------------ trust rules

  private static ModelArtifact source(String uri, String endpoint, String secret) {
    ModelArtifact a = artifact("ns", "m", 1, uri);
    a.getSpec().getSource().setEndpoint(endpoint);
    if (secret != null) {
      a.getSpec().getSource().setCredentialsSecretRef(new CredentialsSecretRef(secret));
    }
    return a;
  }

  private static List<String> violations(ModelArtifact a, SourcePolicy policy) {
    return SpecValidator.validate(a, policy).stream().map(Violation::toString).toList();
  }

  static Stream<Arguments> fileSourcesReachingTheStore() {
    return Stream.of(
        Arguments.of(
            "file:///dev/shm/tensorcast/other-ns.their-model/other-ns-their-model-g1/",
            "is inside the store root"),
        Arguments.of("file:///dev/shm/tensorcast/ns.m", "is inside the store root"),
        Arguments.of("file:///dev/shm/tensorcast", "is the store root"),
        Arguments.of("file:///dev/shm/tensorcast/", "is the store root"),
        Arguments.of("file:///dev/shm", "contains the store root"),
        Arguments.of("file:///dev/", "contains the store root"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("fileSourcesReachingTheStore")
  void aFileSourceInsideOrAboveTheStoreRootIsRefused(String uri, String rule) {
    List<Violation> v = SpecValidator.validate(artifact("ns", "m", 1, uri), SourcePolicy.DEFAULT);

    assertThat(v).hasSize(1);
    assertThat(v.get(0).field()).isEqualTo("spec.source.uri");
    assertThat(v.get(0).rule())
        .contains("'" + uri + "' " + rule + " /dev/shm/tensorcast")
        .contains("a file:// source must be a directory outside it");
  }

  @Test
  void fileSourcesBesideTheStoreRootAndTheConfiguredRootAreHonoured() {
    assertThat(
            SpecValidator.validate(artifact("ns", "m", 1, "file:///dev/shm/tensorcast-models/m")))
        .isEmpty();
    assertThat(SpecValidator.validate(artifact("ns", "m", 1, "file:///dev/shm/models/m")))
        .isEmpty();
    SourcePolicy elsewhere = new SourcePolicy("/mnt/tc-store", EndpointAllowlist.ANY);
    assertThat(
            SpecValidator.validate(
                artifact("ns", "m", 1, "file:///dev/shm/tensorcast/x"), elsewhere))
        .isEmpty();
    assertThat(violations(artifact("ns", "m", 1, "file:///mnt/tc-store/a.b/"), elsewhere))
        .containsExactly(
            "spec.source.uri: 'file:///mnt/tc-store/a.b/' is inside the store root /mnt/tc-store,"
                + " which holds the copies of every ModelArtifact on a node (of every namespace); a"
                + " file:// source must be a directory outside it");
  }

  @Test
  void aHubTokenNeverGoesToAPlainHttpEndpoint() {
    ModelArtifact a = source("hf://Qwen/Qwen2-7B", "http://capture.example:8080", "hf-token");

    assertThat(violations(a, SourcePolicy.DEFAULT))
        .containsExactly(
            "spec.source.endpoint: 'http://capture.example:8080' is plain http: requests and the"
                + " credentials of Secret 'hf-token' would travel unencrypted; use https (hf://"
                + " sources are reached over https only)");

    a.getSpec().getSource().setInsecureEndpoint(true);
    assertThat(violations(a, SourcePolicy.DEFAULT))
        .containsExactly(
            "spec.source.insecureEndpoint: is not allowed for hf:// sources: the Hugging Face Hub"
                + " and its mirrors are reached over https only, so the Hub token never travels"
                + " in clear");
    assertThat(
            violations(
                source("hf://Qwen/Qwen2-7B", "https://hf-mirror.example", "hf-token"),
                SourcePolicy.DEFAULT))
        .isEmpty();
  }

  @Test
  void plainHttpNeedsTheInsecureEndpointDeclaration() {
    ModelArtifact s3 = source("s3://models/m/", "http://minio.storage:9000", "store");
    assertThat(violations(s3, SourcePolicy.DEFAULT))
        .containsExactly(
            "spec.source.endpoint: 'http://minio.storage:9000' is plain http: requests and the"
                + " credentials of Secret 'store' would travel unencrypted; use https, or for an"
                + " in-cluster store set spec.source.insecureEndpoint: true");
    ModelArtifact anonymous = source("oss://models/m/", "http://oss.internal", null);
    assertThat(violations(anonymous, SourcePolicy.DEFAULT))
        .singleElement()
        .asString()
        .contains("is plain http: requests would travel unencrypted");

    s3.getSpec().getSource().setInsecureEndpoint(true);
    assertThat(violations(s3, SourcePolicy.DEFAULT)).isEmpty();
    ModelArtifact noEndpoint = source("s3://models/m/", null, "store");
    noEndpoint.getSpec().getSource().setInsecureEndpoint(true);
    assertThat(violations(noEndpoint, SourcePolicy.DEFAULT))
        .containsExactly(
            "spec.source.insecureEndpoint: is true but spec.source.endpoint is empty; it declares"
                + " that endpoint an in-cluster plain-http store");
  }

  static Stream<Arguments> metadataEndpoints() {
    return Stream.of(
        Arguments.of("https://169.254.169.254", "is a link-local address (169.254.0.0/16)"),
        Arguments.of(
            "http://169.254.170.2/v2/credentials", "is a link-local address (169.254.0.0/16)"),
        Arguments.of("https://[fe80::1]:9000", "is a link-local address (fe80::/10)"),
        Arguments.of(
            "https://[FD00:EC2::254]", "is the AWS metadata service address (fd00:ec2::254)"),
        Arguments.of("https://[::ffff:169.254.169.254]", "is a link-local address"),
        Arguments.of("https://[::ffff:a9fe:a9fe]", "is a link-local address"),
        Arguments.of("https://metadata.google.internal", "names a cloud metadata service"),
        Arguments.of("https://METADATA.google.internal.", "names a cloud metadata service"),
        Arguments.of("https://metadata/computeMetadata/v1", "names a cloud metadata service"),
        Arguments.of("https://100.100.100.200", "is a cloud metadata service address"),
        Arguments.of("https://2852039166", "in a form other than a dotted quad"),
        Arguments.of("https://0251.0376.0251.0376", "in a form other than a dotted quad"),
        Arguments.of("https://0xa9.0xfe.0xa9.0xfe", "in a form other than a dotted quad"),
        Arguments.of("https://169.254.169.254.", "in a form other than a dotted quad"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("metadataEndpoints")
  void linkLocalAndMetadataEndpointsAreRefused(String endpoint, String rule) {
    ModelArtifact a = source("s3://models/m/", endpoint, "store");
    a.getSpec().getSource().setInsecureEndpoint(true);

    List<Violation> v = SpecValidator.validate(a, SourcePolicy.DEFAULT);

    assertThat(v).hasSize(1);
    assertThat(v.get(0).field()).isEqualTo("spec.source.endpoint");
    assertThat(v.get(0).rule()).startsWith("'" + endpoint + "' ").contains(rule);
  }

  @Test
  void ordinaryAddressesAreNotMistakenForMetadata() {
    for (String e :
        List.of(
            "https://10.0.0.5:9000",
            "https://169.255.0.1",
            "https://[fd00:ec2::253]",
            "https://[2001:db8::1]",
            "https://metadata.example.com",
            "https://s3.us-east-1.amazonaws.com")) {
      assertThat(SpecValidator.validate(source("s3://models/m/", e, "store"))).as(e).isEmpty();
    }
  }

  @Test
  void theOperatorsAllowlistIsEnforcedOnTheEndpointThePodsWouldUse() {
    SourcePolicy policy =
        new SourcePolicy(
            "/dev/shm/tensorcast",
            EndpointAllowlist.parse("https://s3.*.amazonaws.com, https://minio.storage:9000"));

    assertThat(violations(source("s3://models/m/", "https://minio.storage:9000", "s"), policy))
        .isEmpty();
    assertThat(
            violations(source("s3://models/m/", "https://s3.eu-west-1.amazonaws.com", "s"), policy))
        .isEmpty();
    // No endpoint: AWS's regional endpoint for the region (default us-east-1).
    assertThat(violations(source("s3://models/m/", null, "s"), policy)).isEmpty();
    assertThat(violations(source("s3://models/m/", "https://minio.storage", "s"), policy))
        .containsExactly(
            "spec.source.endpoint: 'https://minio.storage' is not in the operator's allowed"
                + " endpoints [https://s3.*.amazonaws.com, https://minio.storage:9000] (Helm value"
                + " source.allowedEndpoints, TENSORCAST_ALLOWED_ENDPOINTS)");
    assertThat(violations(source("hf://Qwen/Qwen2-7B", null, "hf"), policy))
        .containsExactly(
            "spec.source.endpoint: is empty, so the pods would use https://huggingface.co, which"
                + " is not in the operator's allowed endpoints [https://s3.*.amazonaws.com,"
                + " https://minio.storage:9000] (Helm value source.allowedEndpoints,"
                + " TENSORCAST_ALLOWED_ENDPOINTS)");
    assertThat(violations(source("s3://models/m/", "https://s3.x.evil.example", "s"), policy))
        .hasSize(1);
    // file:// reads no endpoint; the allowlist does not apply.
    assertThat(violations(artifact("ns", "m", 1, "file:///models/m"), policy)).isEmpty();
  }

  @Test
  void theOperatorsOwnSecretsAreNotCredentials() {
    ModelArtifact a =
        source("s3://models/m/", "https://minio.storage:9000", "other-model-tensorcast");

    assertThat(violations(a, SourcePolicy.DEFAULT))
        .containsExactly(
            "spec.source.credentialsSecretRef.name: 'other-model-tensorcast' ends in -tensorcast,"
                + " the names of the Secrets the operator makes for ModelArtifacts (peer secrets"
                + " and tokens); source credentials must be in a Secret of your own");
  }

  @Test
  void anEndpointForAFileSourceOrWithUserInformationIsRefused() {
    assertThat(
            violations(source("file:///models/m", "https://x.example", null), SourcePolicy.DEFAULT))
        .containsExactly(
            "spec.source.endpoint: is set for a file:// source, which reads no endpoint");
    assertThat(
            violations(
                source("s3://models/m/", "https://user:pw@x.example", null), SourcePolicy.DEFAULT))
        .singleElement()
        .asString()
        .contains("carries user information");
  }
}
