package io.tensorcast.operator.written;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactKind;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.SaveSpec;
import io.tensorcast.api.v1alpha1.VersionsSpec;
import io.tensorcast.api.v1alpha1.WrittenVersionsStatus;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.operator.desired.PodPlan;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeSet;

/**
 * The decisions of a written ModelArtifact ({@code spec.source.writers}), as pure functions: where
 * its data-plane pods run and in which role, what they are told, when a version is saved, what the
 * status says. The reconciler does the I/O around them.
 *
 * <ul>
 *   <li>Writer nodes: the nodes of the Running pods of the namespace that match {@code
 *       writers.podSelector}; a data-plane pod runs on each in the writer role ({@code serve-writes
 *       --writer}: the put API, and the write token from the artifact's Secret).
 *   <li>Reader nodes: chosen by {@code spec.placement} among the others, in the reader role ({@code
 *       serve-writes --want all}); a written {@code KVCache} has none (its snapshots are saved and
 *       loaded back by key).
 *   <li>Every pod is told the artifact's kind ({@code --kind}, from {@code spec.kind}): a version
 *       written without a kind is recorded as that kind, one of another kind is refused.
 *   <li>Every pod names the writers by pod name ({@code --writers}); each reaches the writers'
 *       control endpoints at their peer-membership addresses, which the operator sends as for any
 *       peer-to-peer artifact.
 *   <li>Memory: {@code spec.memory.limit} (required) is the size of one version; a node holds at
 *       most {@code retain + 1} versions (the ones kept plus the one arriving), so a pod asks for
 *       {@code limit × (retain + 1)} plus the overhead.
 * </ul>
 */
public final class WrittenArtifacts {
  /** Which role a data-plane pod of a written artifact has. */
  public enum Role {
    /** On a node where a writer pod runs: serves the put API, holds what was written there. */
    WRITER,
    /** On another chosen node: keeps a full copy of every version, follows the newest. */
    READER
  }

  /** Most saved versions the status lists. */
  public static final int MAX_SAVED_LISTED = 16;

  private WrittenArtifacts() {}

  /** Whether the artifact is written rather than loaded. */
  public static boolean isWritten(ModelArtifactSpec spec) {
    return spec != null && spec.getSource() != null && spec.getSource().getWriters() != null;
  }

  /** Versions a node keeps ({@code spec.versions.retain}, default 2). */
  public static int retain(ModelArtifactSpec spec) {
    VersionsSpec v = spec.getVersions();
    return v == null || v.getRetain() == null ? VersionsSpec.DEFAULT_RETAIN : v.getRetain();
  }

  /** Whether reader nodes follow the versions (not for a written KVCache). */
  public static boolean hasReaders(ModelArtifactSpec spec) {
    return spec.getKind() != ArtifactKind.KVCache;
  }

  /** The bytes a node of this artifact holds at most: {@code limit × (retain + 1)}. */
  public static OptionalLong bytesPerNode(ModelArtifactSpec spec) {
    OptionalLong limit = DataPlanePod.memoryLimit(spec);
    if (limit.isEmpty()) {
      return limit;
    }
    return OptionalLong.of(Math.multiplyExact(limit.getAsLong(), retain(spec) + 1L));
  }

  /** Whether {@code pod}'s labels carry every entry of {@code selector}. */
  public static boolean matches(Pod pod, Map<String, String> selector) {
    Map<String, String> labels = pod.getMetadata().getLabels();
    if (labels == null || selector == null || selector.isEmpty()) {
      return false;
    }
    for (Map.Entry<String, String> e : selector.entrySet()) {
      if (!e.getValue().equals(labels.get(e.getKey()))) {
        return false;
      }
    }
    return true;
  }

  /**
   * The nodes the artifact's writer pods run on: Running, bound, not being deleted, matching the
   * selector, and not data-plane pods themselves. Sorted.
   */
  public static Set<String> writerNodes(List<Pod> namespacePods, Map<String, String> selector) {
    Set<String> nodes = new TreeSet<>();
    for (Pod p : namespacePods) {
      if (p.getMetadata().getDeletionTimestamp() != null
          || p.getSpec() == null
          || p.getSpec().getNodeName() == null
          || p.getStatus() == null
          || !"Running".equals(p.getStatus().getPhase())
          || TensorcastConstants.LABEL_NAME_DATAPLANE.equals(
              p.getMetadata().getLabels() == null
                  ? null
                  : p.getMetadata().getLabels().get(TensorcastConstants.LABEL_NAME))) {
        continue;
      }
      if (matches(p, selector)) {
        nodes.add(p.getSpec().getNodeName());
      }
    }
    return nodes;
  }

  /**
   * The {@code dataplane serve-writes} arguments of a pod.
   *
   * @param writerPods the pod names of the writer role's data-plane pods (its {@code --writers})
   */
  public static List<String> args(
      ModelArtifact artifact,
      OperatorConfig config,
      String storeRoot,
      Role role,
      List<String> writerPods) {
    ModelArtifactSpec spec = artifact.getSpec();
    List<String> a = new ArrayList<>();
    a.add("serve-writes");
    a.add("--artifact-id");
    a.add(DataPlanePod.artifactId(artifact));
    a.add("--store-root");
    a.add(storeRoot);
    if (config.controlPort() != OperatorConfig.DEFAULT_CONTROL_PORT) {
      a.add("--listen");
      a.add("$(POD_IP):" + config.controlPort());
      a.add("--writer-control-port");
      a.add(Integer.toString(config.controlPort()));
    }
    a.add("--peer-id");
    a.add("$(POD_NAME)");
    if (config.peerPort() != OperatorConfig.DEFAULT_PEER_PORT) {
      a.add("--peer-listen");
      a.add("$(POD_IP):" + config.peerPort());
    }
    if (spec.getDistribution() != null && spec.getDistribution().getPieceSize() != null) {
      a.add("--piece-size");
      a.add(Long.toString(spec.getDistribution().getPieceSize().getNumericalAmount().longValue()));
    }
    a.add("--writers");
    a.add(String.join(",", new TreeSet<>(writerPods)));
    a.add("--retain");
    a.add(Integer.toString(retain(spec)));
    if (spec.getKind() != null) {
      a.add("--kind");
      a.add(spec.getKind().name());
    }
    a.add("--lock-policy");
    a.add(DataPlanePod.pinned(spec) ? "REQUIRED" : "DISABLED");
    if (role == Role.WRITER) {
      a.add("--writer");
      a.add("--write-token-file");
      a.add(TensorcastConstants.ARTIFACT_SECRET_DIR + "/" + TensorcastConstants.SECRET_WRITE_TOKEN);
    } else {
      a.add("--want");
      a.add("all");
    }
    a.add("--peer-secret-file");
    a.add(TensorcastConstants.ARTIFACT_SECRET_DIR + "/" + TensorcastConstants.SECRET_PEER_SECRET);
    a.add("--read-token-file");
    a.add(TensorcastConstants.ARTIFACT_SECRET_DIR + "/" + TensorcastConstants.SECRET_READ_TOKEN);
    a.add("--admin-token-file");
    a.add(TensorcastConstants.ARTIFACT_SECRET_DIR + "/" + TensorcastConstants.SECRET_ADMIN_TOKEN);
    return a;
  }

  /**
   * Where a version is saved: {@code <save.uri><key>/}, the key being the version's name or the
   * value of its {@code keyMetadata} entry.
   *
   * @param metadata the version's metadata (its seal record's)
   * @return the URI, or null when the key entry is missing or not a safe path segment
   */
  public static String saveUri(SaveSpec save, String version, Map<String, String> metadata) {
    String key = version;
    if (save.getKeyMetadata() != null) {
      key = metadata == null ? null : metadata.get(save.getKeyMetadata());
    }
    if (key == null || !key.matches("[A-Za-z0-9][A-Za-z0-9._-]{0,199}")) {
      return null;
    }
    String base = save.getUri().endsWith("/") ? save.getUri() : save.getUri() + "/";
    return base + key + "/";
  }

  /** The body of a save request for {@code uri} under {@code save}'s settings. */
  public static ObjectNode saveRequest(SaveSpec save, String uri) {
    ObjectNode o =
        com.fasterxml.jackson.databind.json.JsonMapper.builder().build().createObjectNode();
    o.put("uri", uri);
    if (save.getEndpoint() != null) {
      o.put("endpoint", save.getEndpoint());
    }
    if (save.getRegion() != null) {
      o.put("region", save.getRegion());
    }
    if (Boolean.TRUE.equals(save.getPathStyle())) {
      o.put("pathStyle", true);
    }
    if (Boolean.TRUE.equals(save.getInsecureEndpoint())) {
      o.put("insecureEndpoint", true);
    }
    return o;
  }

  /**
   * One pod's view of the versions ({@code GET /v1/versions}).
   *
   * @param pod the pod's name
   * @param role its role
   * @param current the version it serves, or null
   * @param versions its versions: name → the entry ({@code state}, {@code complete}, {@code save},
   *     ...)
   */
  public record PodVersions(
      String pod, Role role, String current, Map<String, JsonNode> versions) {}

  /**
   * The pods' answers to {@code GET /v1/versions}, read.
   *
   * @param pods per pod that answered, its view
   * @param metadata per version, the metadata of the first pod that lists it
   */
  public record Views(List<PodVersions> pods, Map<String, Map<String, String>> metadata) {}

  /**
   * Reads the answers of {@code members} ({@code GET /v1/versions}: {@code current}, {@code
   * versions[]} with {@code name}, {@code metadata}, ...); a pod without an answer is left out.
   *
   * @param writerNodes the nodes of the writer role (a pod there is a {@link Role#WRITER})
   */
  public static Views views(
      List<Pod> members, Map<String, JsonNode> answers, Set<String> writerNodes) {
    List<PodVersions> views = new ArrayList<>();
    Map<String, Map<String, String>> metadata = new HashMap<>();
    for (Pod p : members) {
      JsonNode body = answers.get(p.getMetadata().getName());
      if (body == null) {
        continue;
      }
      Map<String, JsonNode> byName = new LinkedHashMap<>();
      for (JsonNode v : body.path("versions")) {
        String name = v.path("name").asText();
        byName.put(name, v);
        Map<String, String> m = new HashMap<>();
        v.path("metadata").fields().forEachRemaining(e -> m.put(e.getKey(), e.getValue().asText()));
        metadata.putIfAbsent(name, m);
      }
      boolean writer = writerNodes.contains(PodPlan.node(p));
      views.add(
          new PodVersions(
              p.getMetadata().getName(),
              writer ? Role.WRITER : Role.READER,
              body.path("current").isTextual() ? body.path("current").asText() : null,
              byName));
    }
    return new Views(views, metadata);
  }

  /** A save to start: which pod saves which version where. */
  public record SaveOrder(String pod, String version, String uri) {}

  /**
   * The next saves: for each version some pod holds complete and Ready that the status does not
   * list as saved, the first such pod (readers before writers, by name), unless a save of it is in
   * progress somewhere. At most one order per version.
   *
   * @param metadata per version, its metadata (for {@code keyMetadata}); missing = none
   */
  public static List<SaveOrder> saves(
      SaveSpec save,
      List<PodVersions> pods,
      WrittenVersionsStatus previous,
      Map<String, Map<String, String>> metadata) {
    List<SaveOrder> out = new ArrayList<>();
    if (save == null) {
      return out;
    }
    Set<String> saved = new TreeSet<>();
    if (previous != null) {
      previous.getSaved().forEach(s -> saved.add(s.getVersion()));
    }
    Set<String> inProgress = new TreeSet<>();
    for (PodVersions p : pods) {
      p.versions()
          .forEach(
              (v, e) -> {
                String st = e.path("save").path("state").asText("");
                if (st.equals("Saving")) {
                  inProgress.add(v);
                } else if (st.equals("Saved")) {
                  saved.add(v);
                }
              });
    }
    List<PodVersions> order = new ArrayList<>(pods);
    order.sort(
        (x, y) ->
            x.role() != y.role() ? (x.role() == Role.READER ? -1 : 1) : x.pod().compareTo(y.pod()));
    Set<String> ordered = new TreeSet<>();
    for (PodVersions p : order) {
      for (Map.Entry<String, JsonNode> e : p.versions().entrySet()) {
        String v = e.getKey();
        JsonNode n = e.getValue();
        if (saved.contains(v) || inProgress.contains(v) || ordered.contains(v)) {
          continue;
        }
        boolean ready = n.path("state").asText("").equals("Ready");
        boolean complete = n.path("complete").asBoolean(false);
        boolean failedHere = n.path("save").path("state").asText("").equals("Failed");
        if (ready && complete && !failedHere) {
          String uri = saveUri(save, v, metadata.get(v));
          if (uri != null) {
            out.add(new SaveOrder(p.pod(), v, uri));
            ordered.add(v);
          }
        }
      }
    }
    return out;
  }

  /**
   * The versions status: the newest version every writer pod serves (latest), the newest every
   * reader serves (serving), the writer nodes, and the saved versions (the previous list plus saves
   * the pods report done, newest last, at most {@value #MAX_SAVED_LISTED}).
   */
  public static WrittenVersionsStatus status(
      List<PodVersions> pods, Set<String> writerNodes, WrittenVersionsStatus previous) {
    WrittenVersionsStatus s = new WrittenVersionsStatus();
    s.setWriterNodes(new ArrayList<>(writerNodes));
    s.setLatest(common(pods, Role.WRITER));
    s.setServing(common(pods, Role.READER));
    List<WrittenVersionsStatus.SavedVersion> saved =
        new ArrayList<>(previous == null ? List.of() : previous.getSaved());
    for (PodVersions p : pods) {
      p.versions()
          .forEach(
              (v, e) -> {
                if (e.path("save").path("state").asText("").equals("Saved")) {
                  WrittenVersionsStatus.SavedVersion sv =
                      new WrittenVersionsStatus.SavedVersion(
                          v, e.path("save").path("uri").asText());
                  if (saved.stream().noneMatch(x -> Objects.equals(x.getVersion(), v))) {
                    saved.add(sv);
                  }
                }
              });
    }
    while (saved.size() > MAX_SAVED_LISTED) {
      saved.remove(0);
    }
    s.setSaved(saved);
    return s;
  }

  /** The version every pod of {@code role} serves, if they agree; else null. */
  private static String common(List<PodVersions> pods, Role role) {
    String v = null;
    boolean any = false;
    for (PodVersions p : pods) {
      if (p.role() != role) {
        continue;
      }
      any = true;
      if (p.current() == null) {
        return null;
      }
      if (v == null) {
        v = p.current();
      } else if (!v.equals(p.current())) {
        return null;
      }
    }
    return any ? v : null;
  }
}
