package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.api.model.IntOrString;
import io.fabric8.kubernetes.api.model.LabelSelector;
import io.fabric8.kubernetes.api.model.LabelSelectorBuilder;
import io.fabric8.kubernetes.api.model.OwnerReference;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyBuilder;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyIngressRule;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyIngressRuleBuilder;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyPeer;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyPeerBuilder;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyPort;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyPortBuilder;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.operator.config.OperatorConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The NetworkPolicy the operator creates for one ModelArtifact (name {@link ArtifactChildren#name},
 * owned by the artifact). It selects the artifact's data-plane pods ({@link
 * ArtifactChildren#podSelector}) and admits, for ingress:
 *
 * <ul>
 *   <li>the peer port ({@link OperatorConfig#peerPort()}, TCP) only from the same artifact's
 *       data-plane pods;
 *   <li>the control port ({@link OperatorConfig#controlPort()}, TCP) only from the operator's pods
 *       (label {@value #OPERATOR_POD_LABEL_VALUE} in the operator's namespace, selected by its
 *       {@code kubernetes.io/metadata.name} label; any namespace when the operator does not know
 *       its own) and from consumers: pods of the artifact's namespace labelled {@link
 *       ArtifactChildren#consumerLabel} = {@code "true"}; for a written artifact ({@code
 *       spec.source.writers}) also from its own data-plane pods, which ask the writers' pods for
 *       the seal records of new versions there.
 * </ul>
 *
 * Everything else is refused by any network plugin that enforces NetworkPolicies; egress is not
 * restricted (pods reach their source). NetworkPolicies add up, so a cluster admin can admit more
 * (e.g. a metrics scraper on the control port) with a policy of their own. Pure.
 */
public final class ArtifactNetworkPolicy {

  /** Value of {@code app.kubernetes.io/name} on the operator's pods (the Helm chart sets it). */
  public static final String OPERATOR_POD_LABEL_VALUE = "tensorcast-operator";

  /** The namespace label Kubernetes (1.21+) puts on every namespace, holding its name. */
  public static final String NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name";

  private ArtifactNetworkPolicy() {}

  /** The desired NetworkPolicy. */
  public static NetworkPolicy desired(ModelArtifact artifact, OperatorConfig config) {
    return build(
        ArtifactChildren.name(artifact),
        artifact.getMetadata().getNamespace(),
        ArtifactChildren.labels(artifact),
        ArtifactChildren.ownerReference(artifact, false),
        ArtifactChildren.podSelector(artifact),
        true,
        io.tensorcast.operator.written.WrittenArtifacts.isWritten(artifact.getSpec()),
        ArtifactChildren.consumerLabel(artifact),
        config);
  }

  /**
   * A NetworkPolicy selecting the pods labelled {@code podSelector}: the control port admitted from
   * the operator's pods and from pods of {@code namespace} labelled {@code consumerLabel: "true"};
   * the peer port admitted from the selected pods when {@code peers}, from nobody otherwise; the
   * control port also from the selected pods when {@code membersOnControl} (a written artifact's
   * reader pods ask its writer pods for their versions there).
   */
  static NetworkPolicy build(
      String name,
      String namespace,
      Map<String, String> labels,
      OwnerReference owner,
      Map<String, String> podSelector,
      boolean peers,
      boolean membersOnControl,
      String consumerLabel,
      OperatorConfig config) {
    LabelSelector dataPlane = new LabelSelectorBuilder().withMatchLabels(podSelector).build();
    NetworkPolicyPeer members = new NetworkPolicyPeerBuilder().withPodSelector(dataPlane).build();
    NetworkPolicyPeer operator =
        new NetworkPolicyPeerBuilder()
            .withNamespaceSelector(
                new LabelSelectorBuilder()
                    .withMatchLabels(
                        config
                            .operatorNamespace()
                            .map(ns -> Map.of(NAMESPACE_NAME_LABEL, ns))
                            .orElse(Map.of()))
                    .build())
            .withPodSelector(
                new LabelSelectorBuilder()
                    .withMatchLabels(
                        Map.of(TensorcastConstants.LABEL_NAME, OPERATOR_POD_LABEL_VALUE))
                    .build())
            .build();
    NetworkPolicyPeer consumers =
        new NetworkPolicyPeerBuilder()
            .withPodSelector(
                new LabelSelectorBuilder().withMatchLabels(Map.of(consumerLabel, "true")).build())
            .build();
    List<NetworkPolicyIngressRule> ingress = new ArrayList<>();
    if (peers) {
      ingress.add(
          new NetworkPolicyIngressRuleBuilder()
              .withPorts(tcp(config.peerPort()))
              .withFrom(members)
              .build());
    }
    ingress.add(
        new NetworkPolicyIngressRuleBuilder()
            .withPorts(tcp(config.controlPort()))
            .withFrom(
                membersOnControl
                    ? List.of(operator, consumers, members)
                    : List.of(operator, consumers))
            .build());
    return new NetworkPolicyBuilder()
        .withNewMetadata()
        .withName(name)
        .withNamespace(namespace)
        .withLabels(labels)
        .withOwnerReferences(owner)
        .endMetadata()
        .withNewSpec()
        .withPodSelector(dataPlane)
        .withPolicyTypes("Ingress")
        .withIngress(ingress)
        .endSpec()
        .build();
  }

  private static NetworkPolicyPort tcp(int port) {
    return new NetworkPolicyPortBuilder()
        .withProtocol("TCP")
        .withPort(new IntOrString(port))
        .build();
  }
}
