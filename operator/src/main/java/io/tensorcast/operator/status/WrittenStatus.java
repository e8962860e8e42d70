package io.tensorcast.operator.status;

import io.tensorcast.api.Reason;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.Conditions;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.api.v1alpha1.WrittenVersionsStatus;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.operator.desired.NodeSelection;
import io.tensorcast.operator.written.WrittenArtifacts;
import io.tensorcast.operator.written.WrittenArtifacts.PodVersions;
import io.tensorcast.operator.written.WrittenArtifacts.Role;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * The status of a written ModelArtifact ({@code spec.source.writers}), from what its pods report on
 * {@code /v1/versions}:
 *
 * <ul>
 *   <li>{@code Pending} with {@code Scheduled=False} reason {@code NoWriters} while no Running pod
 *       matches the writers' selector;
 *   <li>{@code Pending} with {@code Scheduled=False} and {@code Ready=False} with the selection's
 *       reason (e.g. {@code InsufficientNodes}) while no node can hold a reader copy: the Scheduled
 *       message says which rule excluded how many nodes (e.g. {@code spec.placement.rdma: Required}
 *       and no RDMA-capable node) and how to relax it; with fewer reader nodes than {@code
 *       spec.placement.replicas} Scheduled is False the same way and the artifact stays Loading;
 *   <li>{@code Loading} (Ready=False, {@code WaitingForVersion}) until every reader node (for a
 *       {@code KVCache}: every writer node) serves a version;
 *   <li>{@code Ready} (Ready=True, {@code AllReplicasReady}) once they do; {@code resolvedRevision}
 *       is the version every reader serves, {@code status.versions} lists latest, serving, writer
 *       nodes and saved versions.
 * </ul>
 *
 * A reader serving version N-1 while N arrives stays ready: Ready means "every reader has a
 * version", and {@code versions.serving} moves to N when the last reader has it.
 */
public final class WrittenStatus {
  private WrittenStatus() {}

  /**
   * @param readers the choice of reader nodes by {@code spec.placement}, or null when none was made
   *     (a {@code KVCache}, which has no readers, or no writer node yet)
   * @param pods every kept pod's versions (pods that did not answer are absent)
   */
  public static ModelArtifactStatus build(
      ModelArtifact artifact,
      Set<String> writerNodes,
      NodeSelection.Result readers,
      List<PodVersions> pods,
      Instant now) {
    long generation = DataPlanePod.generation(artifact);
    ModelArtifactStatus previous = artifact.getStatus();
    WrittenVersionsStatus versions =
        WrittenArtifacts.status(
            pods, writerNodes, previous == null ? null : previous.getVersions());
    int readerNodes = readers == null ? 0 : readers.chosen().size();
    Role role = readers != null ? Role.READER : Role.WRITER;
    int replicas = readers != null ? readers.replicas() : writerNodes.size();
    int ready = 0;
    for (PodVersions p : pods) {
      if (p.role() == role && p.current() != null) {
        ready++;
      }
    }
    ConditionSet c =
        new ConditionSet(previous == null ? null : previous.getConditions(), generation, now);
    String nodes = writerNodes.size() + " writer node(s), " + readerNodes + " reader node(s)";
    if (readers != null && !readers.satisfied()) {
      c.set(
          Conditions.SCHEDULED,
          Conditions.FALSE,
          readers.reason(),
          nodes + "; reader nodes (spec.placement, other than the writers'): " + readers.message());
    } else if (!writerNodes.isEmpty()) {
      c.set(Conditions.SCHEDULED, Conditions.TRUE, Reason.NodesSelected, nodes);
    }
    ArtifactPhase phase;
    if (writerNodes.isEmpty()) {
      phase = ArtifactPhase.Pending;
      c.set(
          Conditions.SCHEDULED,
          Conditions.FALSE,
          "NoWriters",
          "no Running pod in the namespace matches spec.source.writers.podSelector "
              + artifact.getSpec().getSource().getWriters().getPodSelector()
              + "; data-plane pods start on the nodes of the writer pods");
      c.set(Conditions.READY, Conditions.FALSE, "NoWriters", "waiting for writer pods");
    } else if (readers != null && readerNodes == 0) {
      phase = ArtifactPhase.Pending;
      c.set(
          Conditions.READY,
          Conditions.FALSE,
          readers.reason(),
          "no node can hold a reader copy, so no other node gets the written versions; see the"
              + " Scheduled condition");
    } else if (ready < replicas || replicas == 0) {
      phase = ArtifactPhase.Loading;
      c.set(
          Conditions.READY,
          Conditions.FALSE,
          "WaitingForVersion",
          ready
              + " of "
              + replicas
              + (readers != null ? " reader" : " writer")
              + " node(s) serve a version"
              + (readers != null && !readers.satisfied()
                  ? " (" + readerNodes + " could be chosen; see the Scheduled condition)"
                  : "")
              + (versions.getLatest() == null
                  ? "; no version sealed by every writer yet"
                  : "; latest sealed: " + versions.getLatest()));
    } else {
      phase = ArtifactPhase.Ready;
      c.set(
          Conditions.READY,
          Conditions.TRUE,
          Reason.AllReplicasReady,
          (readers != null ? "every reader node serves a version" : "every writer node serves")
              + (versions.getServing() == null
                  ? " (not all the same one yet)"
                  : "; all serve " + versions.getServing()));
    }
    ModelArtifactStatus s = new ModelArtifactStatus();
    s.setPhase(phase);
    s.setObservedGeneration(generation);
    s.setConditions(c.build());
    s.setVersions(versions);
    s.setResolvedRevision(readers != null ? versions.getServing() : versions.getLatest());
    s.setReplicas(replicas);
    s.setReadyReplicas(ready);
    s.setReady(ready + "/" + replicas);
    s.setNodes(new ArrayList<>());
    s.setReadyNodes(new ArrayList<>());
    return s;
  }
}
