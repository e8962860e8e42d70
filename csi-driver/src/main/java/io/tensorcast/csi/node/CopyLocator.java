package io.tensorcast.csi.node;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fabric8.kubernetes.api.model.Condition;
import io.grpc.Status;
import io.tensorcast.api.ConsumerVolumes;
import io.tensorcast.api.StoreLayout;
import io.tensorcast.api.v1alpha1.ArtifactNodeStatus;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.Conditions;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.api.v1alpha1.ShardRankStatus;
import io.tensorcast.api.v1alpha1.TensorShardSet;
import io.tensorcast.api.v1alpha1.TensorShardSetStatus;
import io.tensorcast.csi.node.PublishRequest.ArtifactVolume;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * Decides, from an artifact's status and the node's store, whether a volume can be published now:
 * the copy of the artifact's <em>current</em> generation must be reported {@code Ready} on this
 * node ({@code status.observedGeneration == metadata.generation}, the node's {@code status.nodes[]}
 * entry {@code Ready} and the node in {@code status.readyNodes}, which leaves out a pod being
 * replaced), and the store must hold it complete: the state file {@code
 * <storeRoot>/<ns>.<name>/.tensorcast/<artifactId>.json} lists every file with its digest ({@code
 * sha256} in the state file's format 1, {@code digest} in format 2; the data plane writes a file's
 * digest only once the file is complete and verified), and each file is a regular file of the
 * listed size in {@code <storeRoot>/<ns>.<name>/<artifactId>/}. The artifact id is that of {@code
 * status.copyGeneration} (the generation whose content the copies hold, which a change of replicas
 * alone keeps), or of {@code metadata.generation} when the status has none. A copy of other content
 * is never mounted.
 */
public final class CopyLocator {

  /** The outcome for one volume. */
  public sealed interface Lookup permits Found, Waiting, Refused {}

  /**
   * The copy to mount.
   *
   * @param directory the copy's directory in the store
   * @param generation the copy generation it holds ({@code status.copyGeneration})
   * @param artifactId the data plane's id of that generation
   */
  public record Found(Path directory, long generation, String artifactId) implements Lookup {}

  /** Not Ready on this node yet; {@code message} says what is missing, for people. */
  public record Waiting(String message) implements Lookup {}

  /** Will not become mountable by waiting (no such artifact, Failed, being deleted). */
  public record Refused(Status.Code code, String message) implements Lookup {}

  private static final ObjectMapper JSON = new ObjectMapper();

  private final String nodeName;
  private final Path storeRoot;

  public CopyLocator(String nodeName, Path storeRoot) {
    this.nodeName = nodeName;
    this.storeRoot = storeRoot;
  }

  /** Looks up {@code volume} given the artifact as last seen ({@code null}: it does not exist). */
  public Lookup locate(ArtifactVolume volume, ModelArtifact artifact) {
    String ref = volume.describe();
    if (artifact == null) {
      return new Refused(
          Status.Code.NOT_FOUND,
          ref
              + " not found: create it in namespace "
              + volume.namespace()
              + ", or fix volumeAttributes.modelArtifact");
    }
    if (artifact.getMetadata().getDeletionTimestamp() != null) {
      return new Refused(
          Status.Code.FAILED_PRECONDITION,
          ref
              + " is being deleted (since "
              + artifact.getMetadata().getDeletionTimestamp()
              + "); no new pod can mount it");
    }
    long generation =
        Objects.requireNonNullElse(artifact.getMetadata().getGeneration(), 1L).longValue();
    ModelArtifactStatus status = artifact.getStatus();
    if (status == null
        || status.getObservedGeneration() == null
        || status.getObservedGeneration() != generation) {
      return new Waiting(
          ref
              + " generation "
              + generation
              + " is not Ready on node "
              + nodeName
              + ": the operator has not reported on this generation yet"
              + (status == null || status.getObservedGeneration() == null
                  ? ""
                  : " (status describes generation "
                      + status.getObservedGeneration()
                      + ", phase "
                      + phase(status)
                      + ")"));
    }
    if (status.getPhase() == ArtifactPhase.Failed) {
      Condition ready = find(status.getConditions(), Conditions.READY);
      return new Refused(
          Status.Code.FAILED_PRECONDITION,
          ref
              + " generation "
              + generation
              + " failed"
              + (ready == null ? "" : " (" + ready.getReason() + ": " + ready.getMessage() + ")")
              + "; it is not loaded on node "
              + nodeName
              + ": fix its spec, a new generation loads again");
    }
    List<ArtifactNodeStatus> nodes = status.getNodes() == null ? List.of() : status.getNodes();
    Optional<ArtifactNodeStatus> mine =
        nodes.stream().filter(n -> nodeName.equals(n.getNode())).findFirst();
    if (mine.isEmpty()) {
      List<String> readyOn =
          status.getReadyNodes() == null ? List.of() : List.copyOf(status.getReadyNodes());
      return new Waiting(
          ref
              + " has no copy on node "
              + nodeName
              + " (phase "
              + phase(status)
              + "; Ready on "
              + (readyOn.isEmpty() ? "no node yet" : "nodes " + String.join(", ", readyOn))
              + "): schedule the pod onto a node with label "
              + ConsumerVolumes.nodeLabelKey(volume.namespace(), volume.name())
              + " (node affinity), or raise spec.placement.replicas");
    }
    ArtifactNodeStatus entry = mine.get();
    if (entry.getPhase() != ArtifactPhase.Ready) {
      return new Waiting(
          ref
              + " is not Ready on node "
              + nodeName
              + ": node phase "
              + (entry.getPhase() == null ? "Pending" : entry.getPhase())
              + loaded(entry, status)
              + " (artifact phase "
              + phase(status)
              + (status.getProgress() == null ? "" : ", " + status.getProgress())
              + ")"
              + (entry.getMessage() == null || entry.getMessage().isEmpty()
                  ? ""
                  : "; " + entry.getMessage()));
    }
    // The entry of a pod the operator is replacing (the resolving pod, a pod of a changed spec)
    // can say Ready while the pod is being deleted, and its copy is removed with it: only the
    // nodes the operator counts (status.readyNodes, the nodes it labels) serve mounts.
    if (status.getReadyNodes() == null || !status.getReadyNodes().contains(nodeName)) {
      return new Waiting(
          ref
              + " is not Ready on node "
              + nodeName
              + ": the copy of pod "
              + entry.getPod()
              + " there is being replaced (the node is not in status.readyNodes; artifact phase "
              + phase(status)
              + ")");
    }
    long copyGeneration =
        status.getCopyGeneration() == null ? generation : status.getCopyGeneration();
    String artifactId = StoreLayout.artifactId(volume.namespace(), volume.name(), copyGeneration);
    Path root = storeRoot.resolve(StoreLayout.artifactDirectory(volume.namespace(), volume.name()));
    Path directory = root.resolve(artifactId);
    Optional<String> incomplete =
        incomplete(root.resolve(StoreLayout.STATE_DIR).resolve(artifactId + ".json"), directory);
    if (incomplete.isPresent()) {
      return new Waiting(
          ref
              + " is reported Ready on node "
              + nodeName
              + " but this node's store does not hold the complete copy yet: "
              + incomplete.get());
    }
    return new Found(directory, copyGeneration, artifactId);
  }

  /**
   * Looks up a TensorShardSet rank: the set's current generation must report the rank {@code Ready}
   * on this node, and this node's store must hold that generation complete; the directory to mount
   * is the layout directory of the rank's file ({@code manifest.json} + the node's rank files).
   */
  public Lookup locate(PublishRequest.ShardRankVolume volume, TensorShardSet set) {
    String ref = volume.describe();
    if (set == null) {
      return new Refused(
          Status.Code.NOT_FOUND,
          "TensorShardSet "
              + volume.namespace()
              + "/"
              + volume.name()
              + " not found: create it, or fix volumeAttributes.tensorShardSet");
    }
    if (set.getMetadata().getDeletionTimestamp() != null) {
      return new Refused(Status.Code.FAILED_PRECONDITION, ref + ": the set is being deleted");
    }
    long generation = Objects.requireNonNullElse(set.getMetadata().getGeneration(), 1L);
    TensorShardSetStatus status = set.getStatus();
    if (status == null
        || status.getObservedGeneration() == null
        || status.getObservedGeneration() != generation) {
      return new Waiting(ref + ": the operator has not reported on generation " + generation);
    }
    if (status.getPhase() == ArtifactPhase.Failed) {
      Condition ready = find(status.getConditions(), Conditions.READY);
      return new Refused(
          Status.Code.FAILED_PRECONDITION,
          ref
              + ": generation "
              + generation
              + " failed"
              + (ready == null ? "" : " (" + ready.getReason() + ": " + ready.getMessage() + ")"));
    }
    int world = status.getWorldSize() == null ? 0 : status.getWorldSize();
    if (volume.rank() >= world) {
      return new Refused(
          Status.Code.INVALID_ARGUMENT,
          ref + " does not exist: the set has " + world + " ranks (0.." + (world - 1) + ")");
    }
    Optional<ShardRankStatus> entry =
        status.getRanks().stream()
            .filter(r -> r.getRank() != null && r.getRank() == volume.rank())
            .findFirst();
    if (entry.isEmpty() || !nodeName.equals(entry.get().getNode())) {
      return new Waiting(
          ref
              + " is not placed on node "
              + nodeName
              + (entry.isPresent() && entry.get().getNode() != null
                  ? " (it is on node " + entry.get().getNode() + ")"
                  : "")
              + "; schedule the pod where the rank is, or place the ranks by consumer pods");
    }
    if (entry.get().getPhase() != ArtifactPhase.Ready || entry.get().getFile() == null) {
      return new Waiting(
          ref + " is not Ready on node " + nodeName + " (phase " + entry.get().getPhase() + ")");
    }
    String artifactId = StoreLayout.artifactId(volume.namespace(), volume.name(), generation);
    Path root = storeRoot.resolve(StoreLayout.shardSetDirectory(volume.namespace(), volume.name()));
    Path directory = root.resolve(artifactId);
    String file = entry.get().getFile();
    int at = file.indexOf("/" + artifactId + "/");
    if (at < 0) {
      return new Refused(
          Status.Code.INTERNAL, ref + ": reported file " + file + " is not under " + artifactId);
    }
    Path layout =
        directory.resolve(file.substring(at + artifactId.length() + 2)).normalize().getParent();
    if (layout == null || !layout.startsWith(directory)) {
      return new Refused(Status.Code.INTERNAL, ref + ": reported file " + file + " escapes");
    }
    Optional<String> incomplete =
        incomplete(root.resolve(StoreLayout.STATE_DIR).resolve(artifactId + ".json"), directory);
    if (incomplete.isPresent()) {
      return new Waiting(
          ref + " is reported Ready but the store is not complete: " + incomplete.get());
    }
    return new Found(layout, generation, artifactId);
  }

  /** What is missing from the copy in the store, or empty when it is complete. */
  static Optional<String> incomplete(Path stateFile, Path directory) {
    if (!Files.isRegularFile(stateFile, LinkOption.NOFOLLOW_LINKS)) {
      return Optional.of("no state file " + stateFile);
    }
    JsonNode state;
    try {
      state = JSON.readTree(stateFile.toFile());
    } catch (IOException e) {
      return Optional.of("state file " + stateFile + " is unreadable: " + e.getMessage());
    }
    JsonNode files = state.get("files");
    if (files == null || !files.isArray() || files.isEmpty()) {
      return Optional.of("state file " + stateFile + " lists no files");
    }
    if (!Files.isDirectory(directory, LinkOption.NOFOLLOW_LINKS)) {
      return Optional.of("no directory " + directory);
    }
    for (JsonNode f : files) {
      String path = f.path("path").asText("");
      // A complete file has its digest: "digest" in the state file's format 2, "sha256" in 1.
      if (path.isEmpty()
          || (f.path("digest").asText("").isEmpty() && f.path("sha256").asText("").isEmpty())) {
        return Optional.of("file '" + path + "' is not complete yet");
      }
      Path file = directory.resolve(path).normalize();
      if (!file.startsWith(directory)) {
        return Optional.of("state file " + stateFile + " names a path outside the copy: " + path);
      }
      try {
        if (!Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS)
            || Files.size(file) != f.path("size").asLong(-1)) {
          return Optional.of("file '" + path + "' is missing or has another size");
        }
      } catch (IOException e) {
        return Optional.of("file '" + path + "' cannot be read: " + e.getMessage());
      }
    }
    return Optional.empty();
  }

  private static String loaded(ArtifactNodeStatus entry, ModelArtifactStatus status) {
    if (entry.getBytesLoaded() == null || status.getTotalBytes() == null) {
      return "";
    }
    return ", " + entry.getBytesLoaded() + " of " + status.getTotalBytes() + " bytes loaded";
  }

  private static String phase(ModelArtifactStatus status) {
    return status == null || status.getPhase() == null ? "Pending" : status.getPhase().toString();
  }

  private static Condition find(List<Condition> conditions, String type) {
    return conditions == null
        ? null
        : conditions.stream().filter(c -> type.equals(c.getType())).findFirst().orElse(null);
  }
}
