package io.tensorcast.operator.testing;

import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.NodeBuilder;
import io.fabric8.kubernetes.api.model.ObjectMetaBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.fabric8.kubernetes.api.model.PodConditionBuilder;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.Taint;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.operator.desired.NodeSelection;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;

/** Builders of Kubernetes objects for the operator's pure unit tests. */
public final class Fixtures {
  public static final long MI = 1024L * 1024;
  public static final long GI = 1024L * MI;

  private Fixtures() {}

  /** The master key id the fixtures' pods carry. */
  public static final String KEY_ID = "0123456789abcdef";

  /** Operator settings with a 256 MiB overhead and the default image and port. */
  public static OperatorConfig config() {
    return OperatorConfig.defaults();
  }

  /** A node builder with sensible defaults: Ready, schedulable, 64 GiB, no RDMA, no zone. */
  public static NodeSpec node(String name) {
    return new NodeSpec(name);
  }

  /** A fluent description of a test node. */
  public static final class NodeSpec {
    private final String name;
    private final Map<String, String> labels = new LinkedHashMap<>();
    private final Map<String, Quantity> allocatable = new LinkedHashMap<>();
    private final List<Taint> taints = new ArrayList<>();
    private boolean ready = true;
    private boolean cordoned;

    NodeSpec(String name) {
      this.name = name;
      labels.put(NodeSelection.HOSTNAME_LABEL, name);
      allocatable.put("memory", new Quantity("64Gi"));
      allocatable.put("cpu", new Quantity("8"));
    }

    public NodeSpec rdmaResource(int devices) {
      allocatable.put(TensorcastConstants.RDMA_RESOURCE, new Quantity(Integer.toString(devices)));
      return this;
    }

    public NodeSpec rdmaLabel() {
      labels.put(TensorcastConstants.RDMA_NODE_LABEL, TensorcastConstants.RDMA_NODE_LABEL_VALUE);
      return this;
    }

    public NodeSpec memory(String quantity) {
      allocatable.put("memory", new Quantity(quantity));
      return this;
    }

    public NodeSpec zone(String zone) {
      labels.put(NodeSelection.ZONE_LABEL, zone);
      return this;
    }

    public NodeSpec label(String key, String value) {
      labels.put(key, value);
      return this;
    }

    public NodeSpec withoutHostnameLabel() {
      labels.remove(NodeSelection.HOSTNAME_LABEL);
      return this;
    }

    public NodeSpec taint(String key, String value, String effect) {
      Taint t = new Taint();
      t.setKey(key);
      t.setValue(value);
      t.setEffect(effect);
      taints.add(t);
      return this;
    }

    public NodeSpec notReady() {
      ready = false;
      return this;
    }

    public NodeSpec cordoned() {
      cordoned = true;
      return this;
    }

    public Node build() {
      return new NodeBuilder()
          .withMetadata(new ObjectMetaBuilder().withName(name).withLabels(labels).build())
          .withNewSpec()
          .withUnschedulable(cordoned ? true : null)
          .withTaints(taints)
          .endSpec()
          .withNewStatus()
          .withAllocatable(allocatable)
          .withCapacity(allocatable)
          .addNewCondition()
          .withType("Ready")
          .withStatus(ready ? "True" : "False")
          .endCondition()
          .endStatus()
          .build();
    }

    public NodeSelection.Candidate candidate() {
      return NodeSelection.Candidate.of(build());
    }
  }

  /** A ModelArtifact in namespace {@code ns} reading {@code uri}, generation {@code generation}. */
  public static ModelArtifact artifact(String ns, String name, long generation, String uri) {
    ModelArtifact a = new ModelArtifact();
    a.setMetadata(
        new ObjectMetaBuilder()
            .withNamespace(ns)
            .withName(name)
            .withGeneration(generation)
            .withUid("uid-" + name)
            .build());
    ModelArtifactSpec spec = new ModelArtifactSpec();
    SourceSpec source = new SourceSpec();
    source.setUri(uri);
    spec.setSource(source);
    a.setSpec(spec);
    return a;
  }

  /** The desired pod of {@code artifact} on {@code node}, as the server would hold it. */
  public static Pod pod(
      ModelArtifact artifact, NodeSelection.Candidate node, OptionalLong size, PodState state) {
    Pod desired = DataPlanePod.desired(artifact, node, size, config(), KEY_ID);
    return state.apply(desired, node.name());
  }

  /** Where a pod is in its life, as the kubelet and scheduler would report it. */
  public enum PodState {
    /** Created, not bound. */
    UNSCHEDULED,
    /** Bound, running, not ready. */
    RUNNING,
    /** Bound, running, ready. */
    READY,
    /** Being deleted. */
    TERMINATING,
    /** Phase Failed. */
    ENDED;

    Pod apply(Pod desired, String node) {
      PodBuilder b = new PodBuilder(desired);
      if (this == UNSCHEDULED) {
        PodCondition c =
            new PodConditionBuilder()
                .withType("PodScheduled")
                .withStatus("False")
                .withReason("Unschedulable")
                .withMessage("0/3 nodes are available: 3 Insufficient memory.")
                .build();
        return b.withNewStatus().withPhase("Pending").withConditions(c).endStatus().build();
      }
      b.editSpec().withNodeName(node).endSpec();
      b.withNewStatus()
          .withPhase(this == ENDED ? "Failed" : "Running")
          .withPodIP("127.0.1." + Math.abs(node.hashCode() % 200))
          .addNewCondition()
          .withType("Ready")
          .withStatus(this == READY ? "True" : "False")
          .endCondition()
          .endStatus();
      if (this == TERMINATING) {
        b.editMetadata().withDeletionTimestamp("2026-01-01T00:00:00Z").endMetadata();
      }
      return b.build();
    }
  }

  /** A data-plane report. */
  public static DataPlaneStatus report(
      ModelArtifact artifact,
      DataPlaneStatus.Phase phase,
      int files,
      long total,
      long loaded,
      String reason,
      String message) {
    return DataPlaneStatus.builder(DataPlanePod.artifactId(artifact), phase)
        .reason(reason)
        .message(message)
        .source(artifact.getSpec().getSource().getUri())
        .resolvedRevision(files > 0 ? "listing-sha256:0123456789abcdef" : null)
        .files(files)
        .filesComplete(phase == DataPlaneStatus.Phase.Ready ? files : 0)
        .tensors(files * 3L)
        .bytesTotal(total)
        .bytesLoaded(loaded)
        .bytesFromSource(loaded)
        .storeDirectory("/dev/shm/tensorcast/x/" + DataPlanePod.artifactId(artifact))
        .readyTime(phase == DataPlaneStatus.Phase.Ready ? "2026-01-01T00:00:05Z" : null)
        .fileStatuses(List.of())
        .build();
  }
}
