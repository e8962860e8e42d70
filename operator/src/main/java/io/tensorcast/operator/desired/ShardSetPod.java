package io.tensorcast.operator.desired;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.KeyToPathBuilder;
import io.fabric8.kubernetes.api.model.ObjectMeta;
import io.fabric8.kubernetes.api.model.OwnerReferenceBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeBuilder;
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.fabric8.kubernetes.api.model.VolumeMountBuilder;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.tensorcast.api.StoreLayout;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.DistributionMode;
import io.tensorcast.api.v1alpha1.DistributionSpec;
import io.tensorcast.api.v1alpha1.MemorySpec;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.ParallelismSpec;
import io.tensorcast.api.v1alpha1.PlacementSpec;
import io.tensorcast.api.v1alpha1.ShardRule;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.api.v1alpha1.TensorShardSet;
import io.tensorcast.api.v1alpha1.TensorShardSetSpec;
import io.tensorcast.operator.config.OperatorConfig;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.stream.Collectors;

/**
 * The data-plane Pod that writes one node's rank files of a TensorShardSet. Pure. Built by {@link
 * DataPlanePod#desired} on a ModelArtifact that carries the set's identity, source and placement
 * (so the pod has exactly the shape of a ModelArtifact's pod: image, probes, security context,
 * resources, credentials, token), then turned into the set's pod:
 *
 * <ul>
 *   <li>owner reference to the TensorShardSet; label {@link #LABEL_SHARD_SET} instead of {@link
 *       TensorcastConstants#LABEL_ARTIFACT} (so no ModelArtifact claims it); name {@code <set>-<10
 *       hex>} over (namespace, set, node, generation, kind);
 *   <li>store root {@code <storeRoot>/tensorshardsets/<namespace>.<name>} (args, hostPath, the
 *       store-owner init container): the only host directory the pod mounts;
 *   <li>the set's own Secret ({@link ShardSetChildren#secret}, read and admin tokens and peer
 *       secret of the set, not of its ModelArtifact) at {@value
 *       TensorcastConstants#ARTIFACT_SECRET_DIR}; the same non-root security context as a
 *       ModelArtifact's pod;
 *   <li>when the set reads a ModelArtifact's copies: that artifact's {@code read-token} (the only
 *       key of its Secret) read-only at {@value TensorcastConstants#COPY_TOKEN_DIR}, passed as
 *       {@code --copy-token-file}, and the label {@code consumer.tensorcast.io/<artifact>: "true"}
 *       that the artifact's NetworkPolicy admits to its control port;
 *   <li>{@code --distribution source-only} (the pods of a set hold different bytes, they form no
 *       swarm) and {@code --shards <sizes> --ranks <ranks>}, {@code --rules <json>} for explicit
 *       rules, {@code --copy-wait 10s} when the set reads from a ModelArtifact's copies, {@code
 *       --revision} pinned to the artifact's resolved Hugging Face commit;
 *   <li>memory request and limit: the node's rank files plus the operator's overhead.
 * </ul>
 */
public final class ShardSetPod {

  /** Label holding the TensorShardSet's name on its data-plane pods. */
  public static final String LABEL_SHARD_SET = "tensorcast.io/shard-set";

  /** Annotation listing the global ranks the pod writes, e.g. {@code 2,3}. */
  public static final String ANNOTATION_RANKS = "tensorcast.io/ranks";

  /** Name of the pod's volume of the read token of the ModelArtifact it reads slices from. */
  public static final String COPY_TOKEN_VOLUME = "tensorcast-copy-token";

  /** How long a pod waits for the ModelArtifact copies to read from before using the source. */
  public static final String COPY_WAIT = "10s";

  private ShardSetPod() {}

  /**
   * The desired pod.
   *
   * @param set the TensorShardSet
   * @param source the source to read (the set's own, or its ModelArtifact's)
   * @param revision the ModelArtifact's resolved revision to pin (Hugging Face), or null
   * @param readsCopies whether the pod reads from ModelArtifact copies first
   * @param node the node
   * @param ranks the ranks the pod writes, ascending
   * @param bytes the bytes the node stores for them, if known
   * @param config operator settings
   * @param keyId id of the master key the set's Secret was derived from
   */
  public static Pod desired(
      TensorShardSet set,
      SourceSpec source,
      String revision,
      boolean readsCopies,
      NodeSelection.Candidate node,
      List<Integer> ranks,
      OptionalLong bytes,
      OperatorConfig config,
      String keyId) {
    ModelArtifact carrier = carrier(set, source, revision);
    Pod pod = DataPlanePod.desired(carrier, node, bytes, config, keyId);
    String maRoot = DataPlanePod.storeRoot(carrier, config);
    String root = storeRoot(set, config);

    ObjectMeta meta = pod.getMetadata();
    meta.setName(podName(set, node.name()));
    Map<String, String> labels = new LinkedHashMap<>(meta.getLabels());
    labels.remove(TensorcastConstants.LABEL_ARTIFACT);
    labels.put(LABEL_SHARD_SET, set.getMetadata().getName());
    String artifact = readsCopies ? set.getSpec().getArtifactRef().getName() : null;
    if (artifact != null) {
      // Admitted to the ModelArtifact's control port by its NetworkPolicy.
      labels.put(TensorcastConstants.CONSUMER_LABEL_PREFIX + artifact, "true");
    }
    meta.setLabels(labels);
    meta.getAnnotations()
        .put(
            ANNOTATION_RANKS, ranks.stream().map(String::valueOf).collect(Collectors.joining(",")));
    meta.setOwnerReferences(
        List.of(
            new OwnerReferenceBuilder()
                .withApiVersion(set.getApiVersion())
                .withKind(set.getKind())
                .withName(set.getMetadata().getName())
                .withUid(set.getMetadata().getUid())
                .withController(true)
                .withBlockOwnerDeletion(true)
                .build()));

    Container c =
        pod.getSpec().getContainers().stream()
            .filter(x -> DataPlanePod.CONTAINER.equals(x.getName()))
            .findFirst()
            .orElseThrow();
    List<String> args = new ArrayList<>();
    for (String a : c.getArgs()) {
      args.add(a.equals(maRoot) ? root : a);
    }
    args.add("--shards");
    args.add(parallelism(set.getSpec().getParallelism()));
    args.add("--ranks");
    args.add(ranks.stream().map(String::valueOf).collect(Collectors.joining(",")));
    List<ShardRule> rules = set.getSpec().getRules();
    if (rules != null && !rules.isEmpty()) {
      args.add("--rules");
      args.add(Serialization.asJson(rules));
    }
    if (artifact != null) {
      args.add("--copy-wait");
      args.add(COPY_WAIT);
      args.add("--copy-token-file");
      args.add(TensorcastConstants.COPY_TOKEN_DIR + "/" + TensorcastConstants.SECRET_READ_TOKEN);
    }
    c.setArgs(args);
    List<Container> all = new ArrayList<>(pod.getSpec().getInitContainers());
    all.add(c);
    for (Container x : all) {
      for (VolumeMount m : x.getVolumeMounts()) {
        if (maRoot.equals(m.getMountPath())) {
          m.setMountPath(root);
        }
      }
      if (x.getCommand() != null) {
        x.setCommand(x.getCommand().stream().map(a -> a.equals(maRoot) ? root : a).toList());
      }
    }
    for (Volume v : pod.getSpec().getVolumes()) {
      if (v.getHostPath() != null && maRoot.equals(v.getHostPath().getPath())) {
        v.getHostPath().setPath(root);
      }
      if (DataPlanePod.SECRET_VOLUME.equals(v.getName())) {
        v.getSecret().setSecretName(ShardSetChildren.name(set));
      }
    }
    if (artifact != null) {
      pod.getSpec()
          .getVolumes()
          .add(
              new VolumeBuilder()
                  .withName(COPY_TOKEN_VOLUME)
                  .withNewSecret()
                  .withSecretName(ArtifactChildren.name(artifact))
                  .withDefaultMode(DataPlanePod.SECRET_FILE_MODE)
                  .withItems(
                      new KeyToPathBuilder()
                          .withKey(TensorcastConstants.SECRET_READ_TOKEN)
                          .withPath(TensorcastConstants.SECRET_READ_TOKEN)
                          .build())
                  .endSecret()
                  .build());
      c.getVolumeMounts()
          .add(
              new VolumeMountBuilder()
                  .withName(COPY_TOKEN_VOLUME)
                  .withMountPath(TensorcastConstants.COPY_TOKEN_DIR)
                  .withReadOnly(true)
                  .build());
    }
    meta.getAnnotations()
        .put(DataPlanePod.ANNOTATION_SPEC_HASH, DataPlanePod.specHash(pod.getSpec(), keyId));
    return pod;
  }

  /** A ModelArtifact with the set's identity, the source and the set's placement and memory. */
  static ModelArtifact carrier(TensorShardSet set, SourceSpec source, String revision) {
    ModelArtifact a = new ModelArtifact();
    a.setMetadata(Serialization.clone(set.getMetadata()));
    TensorShardSetSpec s = set.getSpec();
    ModelArtifactSpec spec = new ModelArtifactSpec();
    SourceSpec src = Serialization.clone(source);
    if (revision != null && src.getUri() != null && src.getUri().startsWith("hf://")) {
      src.setRevision(revision);
    }
    spec.setSource(src);
    PlacementSpec p = new PlacementSpec();
    if (s.getPlacement() != null) {
      p.setRdma(s.getPlacement().getRdma());
      p.setTolerations(s.getPlacement().getTolerations());
    }
    spec.setPlacement(p);
    MemorySpec m = new MemorySpec();
    if (s.getMemory() != null) {
      m.setPinned(s.getMemory().getPinned());
      m.setLimit(s.getMemory().getLimit());
    }
    spec.setMemory(m);
    DistributionSpec d = new DistributionSpec();
    d.setMode(DistributionMode.SourceOnly);
    spec.setDistribution(d);
    a.setSpec(spec);
    return a;
  }

  /** {@code --shards} of the spec: sizes in canonical order, e.g. {@code dp:1,pp:1,ep:2,tp:4}. */
  public static String parallelism(ParallelismSpec p) {
    ParallelismSpec q = p == null ? new ParallelismSpec() : p;
    return "dp:"
        + ParallelismSpec.size(q.getDp())
        + ",pp:"
        + ParallelismSpec.size(q.getPp())
        + ",ep:"
        + ParallelismSpec.size(q.getEp())
        + ",tp:"
        + ParallelismSpec.size(q.getTp());
  }

  /** The set's store root on a node: {@code <storeRoot>/tensorshardsets/<namespace>.<name>}. */
  public static String storeRoot(TensorShardSet set, OperatorConfig config) {
    String root = config.storeRoot();
    return (root.endsWith("/") ? root : root + "/")
        + StoreLayout.shardSetDirectory(
            set.getMetadata().getNamespace(), set.getMetadata().getName());
  }

  /** The data plane's id of the set's current generation ({@link StoreLayout#artifactId}). */
  public static String artifactId(TensorShardSet set) {
    return StoreLayout.artifactId(
        set.getMetadata().getNamespace(), set.getMetadata().getName(), generation(set));
  }

  /** {@code metadata.generation}, 1 if absent. */
  public static long generation(TensorShardSet set) {
    Long g = set.getMetadata().getGeneration();
    return g == null ? 1 : g;
  }

  /** {@code <set>-<10 hex>}, at most 63 characters, distinct from the set's ModelArtifact pods. */
  public static String podName(TensorShardSet set, String nodeName) {
    String name = set.getMetadata().getName();
    String hash =
        DataPlanePod.sha256(
                "TensorShardSet/"
                    + set.getMetadata().getNamespace()
                    + "/"
                    + name
                    + "/"
                    + nodeName
                    + "/"
                    + generation(set))
            .substring(0, 10);
    String prefix = name.length() > 52 ? name.substring(0, 52) : name;
    while (prefix.endsWith("-") || prefix.endsWith(".")) {
      prefix = prefix.substring(0, prefix.length() - 1);
    }
    return prefix + "-" + hash;
  }

  /** The ranks of a set's pod, from {@link #ANNOTATION_RANKS}. */
  public static List<Integer> ranks(Pod pod) {
    Map<String, String> a = pod.getMetadata().getAnnotations();
    String v = a == null ? null : a.get(ANNOTATION_RANKS);
    List<Integer> out = new ArrayList<>();
    if (v != null && !v.isBlank()) {
      for (String s : v.split(",")) {
        try {
          out.add(Integer.parseInt(s.strip()));
        } catch (NumberFormatException e) {
          // not ours
        }
      }
    }
    return out;
  }
}
