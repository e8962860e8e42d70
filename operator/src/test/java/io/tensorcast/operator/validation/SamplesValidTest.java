package io.tensorcast.operator.validation;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** Every {@code samples/*.yaml} also passes the operator's own rules (those beyond the schema). */
class SamplesValidTest {

  static Stream<Path> samples() throws IOException {
    Path dir = Path.of(System.getProperty("tensorcast.samples", "../samples"));
    assertThat(dir).as("samples folder").isDirectory();
    List<Path> files;
    try (Stream<Path> list = Files.list(dir)) {
      files = list.filter(p -> p.toString().endsWith(".yaml")).sorted().toList();
    }
    assertThat(files).isNotEmpty();
    return files.stream();
  }

  @ParameterizedTest
  @MethodSource("samples")
  void sampleHasNoViolation(Path file) throws IOException {
    String yaml = Files.readString(file);
    if (yaml.contains("\nkind: TensorShardSet\n")) {
      io.tensorcast.api.v1alpha1.TensorShardSet s =
          new KubernetesSerialization()
              .unmarshal(yaml, io.tensorcast.api.v1alpha1.TensorShardSet.class);
      s.getMetadata().setNamespace("default");
      assertThat(ShardSetValidator.validate(s)).as(file.toString()).isEmpty();
      return;
    }
    ModelArtifact a = new KubernetesSerialization().unmarshal(yaml, ModelArtifact.class);
    a.getMetadata().setNamespace("default");

    assertThat(SpecValidator.validate(a)).as(file.toString()).isEmpty();
  }
}
