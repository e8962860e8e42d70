package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.api.model.OwnerReference;
import io.fabric8.kubernetes.api.model.OwnerReferenceBuilder;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.TensorShardSet;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.trust.ArtifactKeys;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The Secret and NetworkPolicy the operator creates for one TensorShardSet, as {@link
 * ArtifactSecret} and {@link ArtifactNetworkPolicy} do for a ModelArtifact. Pure.
 *
 * <ul>
 *   <li>Name {@code <set name>}{@value #SUFFIX} for both: not the {@code <name>-tensorcast} of a
 *       ModelArtifact of the same name, which the set's pods may read from. (A ModelArtifact named
 *       {@code <set name>-tss} would share the name; the guarded patch leaves its objects alone and
 *       the set reports {@code NameConflict}.)
 *   <li>Owner: the set ({@code controller: true}); labels {@value
 *       TensorcastConstants#LABEL_MANAGED_BY} and {@value ShardSetPod#LABEL_SHARD_SET}.
 *   <li>Secret data: {@code peer-secret}, {@code read-token}, {@code admin-token} derived from the
 *       set's own uid and generation ({@link ArtifactKeys#derive}), so no value is shared with any
 *       ModelArtifact. The set's pods form no swarm; the peer secret is there because every
 *       data-plane pod takes one.
 *   <li>NetworkPolicy: selects the set's data-plane pods; the control port admitted from the
 *       operator and from pods labelled {@link #consumerLabel} = {@code "true"}; the peer port from
 *       nobody.
 * </ul>
 */
public final class ShardSetChildren {

  /** Suffix of the name of a set's Secret and NetworkPolicy. */
  public static final String SUFFIX = "-tss" + ArtifactChildren.SUFFIX;

  private ShardSetChildren() {}

  /** Name of the set's Secret and NetworkPolicy: {@code <set name>-tss-tensorcast}. */
  public static String name(TensorShardSet set) {
    return ArtifactChildren.withSuffix(set.getMetadata().getName(), SUFFIX);
  }

  /** Labels of the set's Secret and NetworkPolicy. */
  public static Map<String, String> labels(TensorShardSet set) {
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put(TensorcastConstants.LABEL_MANAGED_BY, TensorcastConstants.LABEL_MANAGED_BY_OPERATOR);
    labels.put(ShardSetPod.LABEL_SHARD_SET, set.getMetadata().getName());
    return labels;
  }

  /** Labels every data-plane pod of {@code set} carries and its NetworkPolicy selects on. */
  public static Map<String, String> podSelector(TensorShardSet set) {
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put(TensorcastConstants.LABEL_NAME, TensorcastConstants.LABEL_NAME_DATAPLANE);
    labels.put(ShardSetPod.LABEL_SHARD_SET, set.getMetadata().getName());
    return labels;
  }

  /** {@code shardset.consumer.tensorcast.io/<set name>}: admits a pod to the set's control port. */
  public static String consumerLabel(TensorShardSet set) {
    return TensorcastConstants.SHARD_SET_CONSUMER_LABEL_PREFIX + set.getMetadata().getName();
  }

  /** An owner reference to {@code set} with {@code controller: true}. */
  public static OwnerReference ownerReference(TensorShardSet set, boolean blockOwnerDeletion) {
    return new OwnerReferenceBuilder()
        .withApiVersion(set.getApiVersion())
        .withKind(set.getKind())
        .withName(set.getMetadata().getName())
        .withUid(set.getMetadata().getUid())
        .withController(true)
        .withBlockOwnerDeletion(blockOwnerDeletion)
        .build();
  }

  /**
   * The desired Secret: the peer secret, read and admin tokens; no write token (a set's pods take
   * no puts).
   */
  public static Secret secret(TensorShardSet set, ArtifactKeys keys) {
    Map<String, String> data = new LinkedHashMap<>(ArtifactSecret.data(keys));
    data.remove(io.tensorcast.api.TensorcastConstants.SECRET_WRITE_TOKEN);
    return new SecretBuilder()
        .withNewMetadata()
        .withName(name(set))
        .withNamespace(set.getMetadata().getNamespace())
        .withLabels(labels(set))
        .withOwnerReferences(ownerReference(set, false))
        .endMetadata()
        .withType("Opaque")
        .withData(data)
        .build();
  }

  /** The desired NetworkPolicy. */
  public static NetworkPolicy networkPolicy(TensorShardSet set, OperatorConfig config) {
    return ArtifactNetworkPolicy.build(
        name(set),
        set.getMetadata().getNamespace(),
        labels(set),
        ownerReference(set, false),
        podSelector(set),
        false,
        false,
        consumerLabel(set),
        config);
  }
}
