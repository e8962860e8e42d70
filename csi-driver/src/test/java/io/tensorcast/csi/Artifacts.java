package io.tensorcast.csi;

import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.ObjectMetaBuilder;
import io.tensorcast.api.v1alpha1.ArtifactNodeStatus;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** ModelArtifacts with the status shapes the operator writes, for driver tests. */
public final class Artifacts {
  private Artifacts() {}

  /**
   * An artifact at {@code generation} whose status describes that generation with the given phase
   * and per-node phases.
   */
  public static ModelArtifact artifact(
      String ns,
      String name,
      long generation,
      ArtifactPhase phase,
      Map<String, ArtifactPhase> nodes) {
    ModelArtifact a = new ModelArtifact();
    a.setMetadata(
        new ObjectMetaBuilder()
            .withNamespace(ns)
            .withName(name)
            .withGeneration(generation)
            .withUid("uid-" + name)
            .build());
    ModelArtifactStatus s = new ModelArtifactStatus();
    s.setObservedGeneration(generation);
    s.setPhase(phase);
    s.setTotalBytes(1000L);
    List<ArtifactNodeStatus> entries = new ArrayList<>();
    List<String> ready = new ArrayList<>();
    nodes.forEach(
        (node, p) -> {
          ArtifactNodeStatus e = new ArtifactNodeStatus();
          e.setNode(node);
          e.setPod(name + "-" + node);
          e.setPhase(p);
          e.setBytesLoaded(p == ArtifactPhase.Ready ? 1000L : 400L);
          entries.add(e);
          if (p == ArtifactPhase.Ready) {
            ready.add(node);
          }
        });
    s.setNodes(entries);
    s.setReadyNodes(ready.stream().sorted().toList());
    if (phase == ArtifactPhase.Failed) {
      Condition c = new Condition();
      c.setType("Ready");
      c.setStatus("False");
      c.setReason("BucketNotFound");
      c.setMessage("node n1 (pod m-1): bucket 'weights' does not exist");
      s.setConditions(List.of(c));
    }
    a.setStatus(s);
    return a;
  }
}
