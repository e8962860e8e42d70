package io.tensorcast.operator.validation;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.api.v1alpha1.ParallelismSpec;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.api.v1alpha1.TensorShardSet;
import io.tensorcast.api.v1alpha1.TensorShardSetSpec;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/** A set's own source is held to the operator's source rules, as a ModelArtifact's. */
class ShardSetValidatorTest {

  static TensorShardSet set(Consumer<SourceSpec> source) {
    TensorShardSet s = new TensorShardSet();
    s.getMetadata().setName("llama-tp4");
    s.getMetadata().setNamespace("team");
    TensorShardSetSpec spec = new TensorShardSetSpec();
    SourceSpec src = new SourceSpec();
    source.accept(src);
    spec.setSource(src);
    spec.setParallelism(new ParallelismSpec(4, 1, 1, 1));
    s.setSpec(spec);
    return s;
  }

  static List<String> violations(TensorShardSet s, SourcePolicy policy) {
    return ShardSetValidator.validate(s, policy).stream().map(Violation::toString).toList();
  }

  @Test
  void aFileSourceInsideTheStoreRootIsInvalid() {
    TensorShardSet s = set(src -> src.setUri("file:///dev/shm/tensorcast/other-ns.their-model/"));
    assertThat(violations(s, SourcePolicy.DEFAULT))
        .singleElement()
        .asString()
        .contains("spec.source.uri")
        .contains("is inside the store root");
  }

  @Test
  void anEndpointOutsideTheOperatorsAllowlistIsInvalid() {
    TensorShardSet s =
        set(
            src -> {
              src.setUri("s3://models/llama/");
              src.setEndpoint("https://capture.example.com");
            });
    SourcePolicy policy =
        new SourcePolicy(
            "/dev/shm/tensorcast", EndpointAllowlist.parse("https://minio.storage:9000"));
    assertThat(violations(s, policy))
        .singleElement()
        .asString()
        .contains("https://capture.example.com")
        .contains("is not in the operator's allowed endpoints");
    assertThat(ShardSetValidator.validate(s, SourcePolicy.DEFAULT)).isEmpty();
  }

  @Test
  void credentialsOverPlainHttpNeedInsecureEndpoint() {
    TensorShardSet s =
        set(
            src -> {
              src.setUri("s3://models/llama/");
              src.setEndpoint("http://minio.storage:9000");
              src.setCredentialsSecretRef(
                  new io.tensorcast.api.v1alpha1.CredentialsSecretRef("store-credentials"));
            });
    assertThat(violations(s, SourcePolicy.DEFAULT))
        .singleElement()
        .asString()
        .contains("is plain http");
    s.getSpec().getSource().setInsecureEndpoint(true);
    assertThat(ShardSetValidator.validate(s, SourcePolicy.DEFAULT)).isEmpty();
  }
}
