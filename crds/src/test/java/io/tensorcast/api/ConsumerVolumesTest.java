package io.tensorcast.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import java.util.Map;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class ConsumerVolumesTest {

  /** Kubernetes' qualified-name rule for the name part of a label key. */
  private static final Pattern LABEL_NAME =
      Pattern.compile("([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]");

  @Test
  void nodeLabelKeyIsNamespaceDotNameWhileItFits() {
    assertThat(ConsumerVolumes.nodeLabelKey("team-a", "llama-3.1-8b"))
        .isEqualTo("modelartifact.tensorcast.io/team-a.llama-3.1-8b");
  }

  @Test
  void longNodeLabelKeysAreCutAndHashedToAValidUniqueName() {
    String ns = "n".repeat(63);
    String a = ConsumerVolumes.nodeLabelKey(ns, "model-" + "x".repeat(200));
    String b = ConsumerVolumes.nodeLabelKey(ns, "model-" + "x".repeat(199) + "y");
    String nameA = a.substring(ConsumerVolumes.NODE_LABEL_PREFIX.length());
    assertThat(nameA).hasSize(63).matches(LABEL_NAME);
    assertThat(a).isNotEqualTo(b);
    // A cut that ends in '-' or '.' drops it before the hash.
    String dotted = ConsumerVolumes.nodeLabelKey("ns", "m".repeat(48) + "-.-.-" + "z".repeat(30));
    assertThat(dotted.substring(ConsumerVolumes.NODE_LABEL_PREFIX.length()))
        .matches(LABEL_NAME)
        .startsWith("ns." + "m".repeat(48) + "-");
  }

  @Test
  void referencesResolveOnlyInThePodsNamespace() {
    assertThat(ConsumerVolumes.sameNamespaceName("llama", "a")).contains("llama");
    assertThat(ConsumerVolumes.sameNamespaceName("a/llama", "a")).contains("llama");
    assertThat(ConsumerVolumes.sameNamespaceName("b/llama", "a")).isEmpty();
    assertThat(ConsumerVolumes.sameNamespaceName("a/b/llama", "a")).isEmpty();
    assertThat(ConsumerVolumes.sameNamespaceName("", "a")).isEmpty();
    assertThat(ConsumerVolumes.sameNamespaceName("a/", "a")).isEmpty();
    assertThat(ConsumerVolumes.sameNamespaceName(null, "a")).isEmpty();
  }

  @Test
  void podsNameTheArtifactsOfTheirOwnNamespaceOnly() {
    Pod pod =
        new PodBuilder()
            .withNewMetadata()
            .withName("p")
            .withNamespace("a")
            .endMetadata()
            .withNewSpec()
            .addNewVolume()
            .withName("m1")
            .withNewCsi()
            .withDriver(ConsumerVolumes.DRIVER)
            .withVolumeAttributes(Map.of("modelArtifact", "llama"))
            .endCsi()
            .endVolume()
            .addNewVolume()
            .withName("m2")
            .withNewCsi()
            .withDriver(ConsumerVolumes.DRIVER)
            .withVolumeAttributes(Map.of("modelArtifact", "a/qwen"))
            .endCsi()
            .endVolume()
            .addNewVolume()
            .withName("foreign")
            .withNewCsi()
            .withDriver(ConsumerVolumes.DRIVER)
            .withVolumeAttributes(Map.of("modelArtifact", "b/mistral"))
            .endCsi()
            .endVolume()
            .addNewVolume()
            .withName("foreign-attr")
            .withNewCsi()
            .withDriver(ConsumerVolumes.DRIVER)
            .withVolumeAttributes(Map.of("modelArtifact", "phi", "namespace", "b"))
            .endCsi()
            .endVolume()
            .addNewVolume()
            .withName("other-driver")
            .withNewCsi()
            .withDriver("secrets-store.csi.k8s.io")
            .withVolumeAttributes(Map.of("modelArtifact", "gemma"))
            .endCsi()
            .endVolume()
            .addNewVolume()
            .withName("scratch")
            .withNewEmptyDir()
            .endEmptyDir()
            .endVolume()
            .endSpec()
            .build();
    assertThat(ConsumerVolumes.modelArtifactsNamed(pod)).containsExactly("llama", "qwen");
  }

  @Test
  void artifactIdsAreDns1123LabelsThatChangeWithTheGeneration() {
    assertThat(StoreLayout.artifactId("team-a", "llama.3", 4)).isEqualTo("team-a-llama-3-g4");
    String longId = StoreLayout.artifactId("n".repeat(60), "m".repeat(200), 12);
    assertThat(longId).hasSize(63).endsWith("-g12").matches("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
    assertThat(StoreLayout.artifactDirectory("team-a", "llama.3")).isEqualTo("team-a.llama.3");
  }
}
