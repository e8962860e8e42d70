package io.tensorcast.operator.desired;

import static io.tensorcast.operator.testing.Fixtures.artifact;
import static io.tensorcast.operator.testing.Fixtures.config;
import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyIngressRule;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.trust.ArtifactKeys;
import io.tensorcast.operator.trust.MasterKey;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ArtifactChildrenTest {

  @Test
  void nameIsTheArtifactsWithASuffixAndStaysASubdomainWhenLong() {
    assertThat(ArtifactChildren.name(artifact("ns", "qwen2.5-7b", 1, "s3://b/m/")))
        .isEqualTo("qwen2.5-7b-tensorcast");
    String longName = "a".repeat(240) + ".b";
    String n = ArtifactChildren.name(artifact("ns", longName, 1, "s3://b/m/"));
    assertThat(n).hasSizeLessThanOrEqualTo(253).endsWith("-tensorcast");
    assertThat(n).matches("[a-z0-9]([-a-z0-9.]*[a-z0-9])?");
    assertThat(ArtifactChildren.name(artifact("ns", "a".repeat(240) + ".c", 1, "s3://b/m/")))
        .isNotEqualTo(n);
  }

  @Test
  void theSecretHoldsTheThreeValuesIsOwnedAndLabelled() {
    ModelArtifact a = artifact("team-a", "llama", 3, "s3://b/m/");
    ArtifactKeys keys =
        ArtifactKeys.derive(
            MasterKey.random(),
            a,
            io.tensorcast.operator.desired.CopyGeneration.of(a).generation());

    Secret s = ArtifactSecret.desired(a, keys);

    assertThat(s.getMetadata().getName()).isEqualTo("llama-tensorcast");
    assertThat(s.getMetadata().getNamespace()).isEqualTo("team-a");
    assertThat(s.getMetadata().getLabels())
        .containsEntry("app.kubernetes.io/managed-by", "tensorcast-operator")
        .containsEntry("tensorcast.io/artifact", "llama");
    var owner = s.getMetadata().getOwnerReferences().get(0);
    assertThat(owner.getUid()).isEqualTo("uid-llama");
    assertThat(owner.getKind()).isEqualTo("ModelArtifact");
    assertThat(owner.getController()).isTrue();
    assertThat(s.getType()).isEqualTo("Opaque");
    assertThat(s.getData())
        .containsOnlyKeys("peer-secret", "read-token", "admin-token", "write-token");
    assertThat(decode(s, "peer-secret")).isEqualTo(keys.peerSecret());
    assertThat(decode(s, "read-token")).isEqualTo(keys.readToken());
    assertThat(decode(s, "admin-token")).isEqualTo(keys.adminToken());
  }

  private static String decode(Secret s, String key) {
    return new String(Base64.getDecoder().decode(s.getData().get(key)), StandardCharsets.UTF_8);
  }

  @Test
  void theNetworkPolicyAdmitsPeersFromMembersAndControlFromOperatorAndConsumers() {
    ModelArtifact a = artifact("team-a", "llama", 3, "s3://b/m/");
    OperatorConfig cfg =
        OperatorConfig.fromLookup(Map.of("TENSORCAST_OPERATOR_NAMESPACE", "tensorcast")::get);

    NetworkPolicy np = ArtifactNetworkPolicy.desired(a, cfg);

    assertThat(np.getMetadata().getName()).isEqualTo("llama-tensorcast");
    assertThat(np.getMetadata().getOwnerReferences().get(0).getUid()).isEqualTo("uid-llama");
    Map<String, String> members =
        Map.of("app.kubernetes.io/name", "tensorcast-dataplane", "tensorcast.io/artifact", "llama");
    assertThat(np.getSpec().getPodSelector().getMatchLabels()).isEqualTo(members);
    assertThat(np.getSpec().getPolicyTypes()).containsExactly("Ingress");
    assertThat(np.getSpec().getEgress()).isNullOrEmpty();
    assertThat(np.getSpec().getIngress()).hasSize(2);
    NetworkPolicyIngressRule peer = np.getSpec().getIngress().get(0);
    assertThat(peer.getPorts())
        .extracting(p -> p.getProtocol() + "/" + p.getPort().getIntVal())
        .containsExactly("TCP/8472");
    assertThat(peer.getFrom()).hasSize(1);
    assertThat(peer.getFrom().get(0).getPodSelector().getMatchLabels()).isEqualTo(members);
    assertThat(peer.getFrom().get(0).getNamespaceSelector()).isNull();
    NetworkPolicyIngressRule control = np.getSpec().getIngress().get(1);
    assertThat(control.getPorts())
        .extracting(p -> p.getProtocol() + "/" + p.getPort().getIntVal())
        .containsExactly("TCP/8471");
    assertThat(control.getFrom()).hasSize(2);
    assertThat(control.getFrom().get(0).getNamespaceSelector().getMatchLabels())
        .isEqualTo(Map.of("kubernetes.io/metadata.name", "tensorcast"));
    assertThat(control.getFrom().get(0).getPodSelector().getMatchLabels())
        .isEqualTo(Map.of("app.kubernetes.io/name", "tensorcast-operator"));
    assertThat(control.getFrom().get(1).getNamespaceSelector()).isNull();
    assertThat(control.getFrom().get(1).getPodSelector().getMatchLabels())
        .isEqualTo(Map.of("consumer.tensorcast.io/llama", "true"));

    NetworkPolicy anyNamespace = ArtifactNetworkPolicy.desired(a, config());
    assertThat(
            anyNamespace
                .getSpec()
                .getIngress()
                .get(1)
                .getFrom()
                .get(0)
                .getNamespaceSelector()
                .getMatchLabels())
        .isEmpty();
  }
}
