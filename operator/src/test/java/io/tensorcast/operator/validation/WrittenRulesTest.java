package io.tensorcast.operator.validation;

import static io.tensorcast.operator.testing.Fixtures.artifact;
import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Quantity;
import io.tensorcast.api.v1alpha1.ArtifactKind;
import io.tensorcast.api.v1alpha1.CredentialsSecretRef;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.SaveSpec;
import io.tensorcast.api.v1alpha1.VersionsSpec;
import io.tensorcast.api.v1alpha1.WritersSpec;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class WrittenRulesTest {

  private static ModelArtifact written(ArtifactKind kind) {
    ModelArtifact a = artifact("rl", "policy", 1, null);
    WritersSpec w = new WritersSpec();
    w.setPodSelector(Map.of("app", "trainer"));
    a.getSpec().getSource().setWriters(w);
    a.getSpec().setKind(kind);
    a.getSpec().getMemory().setLimit(new Quantity("8Gi"));
    return a;
  }

  private static List<String> fields(ModelArtifact a) {
    return SpecValidator.validate(a).stream().map(v -> v.field() + ": " + v.rule()).toList();
  }

  @Test
  void aWrittenRlCheckpointWithItsLimitIsValid() {
    assertThat(fields(written(ArtifactKind.RLCheckpoint))).isEmpty();
  }

  @Test
  void uriAndWritersTogetherOrNeitherAreRefused() {
    ModelArtifact both = written(ArtifactKind.ModelWeights);
    both.getSpec().getSource().setUri("s3://bucket/m/");
    assertThat(fields(both)).anySatisfy(f -> assertThat(f).startsWith("spec.source: gives both"));
    ModelArtifact neither = artifact("rl", "x", 1, null);
    assertThat(fields(neither))
        .anySatisfy(f -> assertThat(f).startsWith("spec.source.uri: is required"));
  }

  @Test
  void kindDecidesWhatAWrittenArtifactNeeds() {
    ModelArtifact rl = written(ArtifactKind.RLCheckpoint);
    VersionsSpec one = new VersionsSpec();
    one.setRetain(1);
    rl.getSpec().setVersions(one);
    assertThat(fields(rl))
        .anySatisfy(f -> assertThat(f).contains("spec.versions.retain").contains("at least 2"));
    ModelArtifact kv = written(ArtifactKind.KVCache);
    assertThat(fields(kv)).anySatisfy(f -> assertThat(f).startsWith("spec.save: is required"));
    SaveSpec save = new SaveSpec();
    save.setUri("s3://kv-tier/llama/");
    save.setKeyMetadata("prefix_sha256");
    kv.getSpec().setSave(save);
    assertThat(fields(kv))
        .as("s3 needs credentials")
        .anySatisfy(f -> assertThat(f).startsWith("spec.save.credentialsSecretRef"));
    CredentialsSecretRef ref = new CredentialsSecretRef();
    ref.setName("kv-tier-creds");
    save.setCredentialsSecretRef(ref);
    assertThat(fields(kv)).isEmpty();
  }

  @Test
  void aWrittenArtifactNeedsASelectorAndALimitAndNoUriSourceFields() {
    ModelArtifact a = written(ArtifactKind.ModelWeights);
    a.getSpec().getSource().getWriters().setPodSelector(Map.of());
    a.getSpec().getMemory().setLimit(null);
    a.getSpec().getSource().setEndpoint("https://s3.example.com");
    assertThat(fields(a))
        .anySatisfy(f -> assertThat(f).startsWith("spec.source.writers.podSelector: needs"))
        .anySatisfy(f -> assertThat(f).startsWith("spec.memory.limit: is required"))
        .anySatisfy(f -> assertThat(f).startsWith("spec.source.endpoint: describes a uri source"));
  }

  @Test
  void saveAndVersionsBelongToWrittenArtifactsOnly() {
    ModelArtifact loaded = artifact("ns", "m", 1, "s3://bucket/m/");
    SaveSpec save = new SaveSpec();
    save.setUri("file:///data/out/");
    loaded.getSpec().setSave(save);
    assertThat(fields(loaded)).anySatisfy(f -> assertThat(f).startsWith("spec.save: applies to"));
  }
}
