package io.tensorcast.e2e.operator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.OwnerReference;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactKind;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.DistributionMode;
import io.tensorcast.api.v1alpha1.DistributionSpec;
import io.tensorcast.api.v1alpha1.MemorySpec;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.api.v1alpha1.WritersSpec;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.operator.desired.ArtifactChildren;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.operator.reconciler.ModelArtifactReconciler;
import io.tensorcast.operator.trust.MasterKey;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The decisions of {@link ModelArtifactReconciler} itself, on a real API server: the reconciler is
 * constructed here (a fixed clock, the data-plane client pointed at this test) and run by JOSDK
 * against the {@link ReconcilerCluster}, since the shared cluster runs the E2E operator, which
 * would reconcile the same objects. Nothing runs the pods: the test plays the kubelet (a pod's
 * status, its IP, a forced delete of a terminating pod) and the data plane (its {@code /status}
 * answer, served on each node's loopback address), so every case takes seconds and asserts what the
 * reconciler wrote: children and their owner references and labels, status phase, conditions, retry
 * fields.
 */
@Timeout(120)
class ModelArtifactReconcilerIT extends ReconcilerITBase {
  static final String GROUP_LABEL = ReconcilerCluster.GROUP_LABEL;

  /** What each node's data plane answers on {@code /status}, by the node's address. */
  private static Map<String, DataPlaneStatus> reports;

  @BeforeAll
  static void start() {
    startOperator(
        (config, dataPlane, clock) ->
            new ModelArtifactReconciler(
                config, MasterKey.random(), dataPlane, new SimpleMeterRegistry(), clock));
    reports = cluster.reports;
  }

  // ------------------------------------------------------------------------------------ cases

  @Test
  void aValidSpecGetsOwnedChildrenAndTurnsReadyFromWhatItsPodReports() {
    String address = node("a", true);
    ModelArtifact created = create(artifact("model", RdmaPolicy.Required));

    await().atMost(WAIT).until(() -> pods().size() == 1);
    Pod resolver = pods().get(0);
    assertOwnedByTheArtifact(resolver, created);
    assertThat(resolver.getMetadata().getLabels())
        .containsEntry(TensorcastConstants.LABEL_ARTIFACT, "model")
        .containsEntry(
            TensorcastConstants.LABEL_MANAGED_BY, TensorcastConstants.LABEL_MANAGED_BY_OPERATOR)
        .containsEntry(DataPlanePod.LABEL_GENERATION, "1");
    assertThat(resolver.getMetadata().getAnnotations())
        .containsEntry(DataPlanePod.ANNOTATION_NODE, ns + "-a");
    Secret secret = client.secrets().inNamespace(ns).withName(ArtifactChildren.name(created)).get();
    assertOwnedByTheArtifact(secret, created);
    assertThat(secret.getData())
        .containsKeys(
            TensorcastConstants.SECRET_READ_TOKEN, TensorcastConstants.SECRET_ADMIN_TOKEN);
    NetworkPolicy policy =
        client
            .network()
            .v1()
            .networkPolicies()
            .inNamespace(ns)
            .withName(ArtifactChildren.name(created))
            .get();
    assertOwnedByTheArtifact(policy, created);
    ModelArtifact resolving = awaitPhase("model", ArtifactPhase.Pending, ArtifactPhase.Resolving);
    assertThat(condition(resolving, "Ready").getStatus()).isEqualTo("False");

    // The kubelet runs the pod; its data plane reports the artifact loaded.
    reports.put(address, report(created, DataPlaneStatus.Phase.Ready, null));
    ModelArtifact ready = awaitPhase("model", ArtifactPhase.Ready);

    assertThat(ready.getStatus().getReadyNodes()).containsExactly(ns + "-a");
    assertThat(ready.getStatus().getReady()).isEqualTo("1/1");
    assertThat(condition(ready, "Ready").getReason()).isEqualTo("AllReplicasReady");
    assertThat(condition(ready, "Resolved").getStatus()).isEqualTo("True");
    assertThat(ready.getStatus().getObservedGeneration()).isEqualTo(1L);
  }

  @Test
  void anInvalidSpecFailsWithTheValidatorsMessageAndCreatesNothing() {
    node("a", true);
    ModelArtifact a = artifact("plain-http", RdmaPolicy.Required);
    a.getSpec().getSource().setInsecureEndpoint(false);
    a.getSpec().getSource().setEndpoint("http://minio.storage:9000");
    create(a);

    ModelArtifact failed = awaitPhase("plain-http", ArtifactPhase.Failed);

    Condition ready = condition(failed, "Ready");
    assertThat(ready.getStatus()).isEqualTo("False");
    assertThat(ready.getReason()).isEqualTo("InvalidSpec");
    assertThat(ready.getMessage())
        .contains(
            "spec.source.endpoint: 'http://minio.storage:9000' is plain http: requests would travel"
                + " unencrypted");
    assertThat(condition(failed, "Stalled").getStatus())
        .as("a spec error is not retried")
        .isEqualTo("True");
    assertThat(failed.getStatus().getNextRetryTime()).isNull();
    assertThat(pods()).isEmpty();
    assertThat(client.secrets().inNamespace(ns).withName(ArtifactChildren.name(a)).get()).isNull();
  }

  @Test
  void aPodWhoseLoadFailedForATransientReasonFailsTheArtifactWithARetryTime() {
    String address = node("a", true);
    ModelArtifact created = create(artifact("missing", RdmaPolicy.Required));
    await().atMost(WAIT).until(() -> pods().size() == 1);

    reports.put(
        address,
        report(created, DataPlaneStatus.Phase.Failed, "BucketNotFound").toBuilder()
            .message("bucket 'nowhere' does not exist")
            .build());
    ModelArtifact failed = awaitPhase("missing", ArtifactPhase.Failed);

    assertThat(condition(failed, "Ready").getReason()).isEqualTo("BucketNotFound");
    assertThat(condition(failed, "Ready").getMessage()).contains("bucket 'nowhere' does not exist");
    assertThat(failed.getStatus().getRetryAttempts()).isEqualTo(1);
    assertThat(failed.getStatus().getNextRetryTime())
        .as("the first retry 30 s after the failure, by the reconciler's clock")
        .isEqualTo(NOW.plusSeconds(30).toString());
    Condition stalled = condition(failed, "Stalled");
    assertThat(stalled.getStatus()).isEqualTo("False");
    assertThat(stalled.getReason()).isEqualTo("BucketNotFound");
    await()
        .atMost(WAIT)
        .untilAsserted(
            () ->
                assertThat(pods())
                    .as("the failed generation's pods are removed")
                    .allMatch(p -> p.getMetadata().getDeletionTimestamp() != null));
  }

  @Test
  void deletionWaitsForThePodsAndThenLetsTheArtifactGo() {
    node("a", true);
    create(artifact("gone", RdmaPolicy.Required));
    await().atMost(WAIT).until(() -> pods().size() == 1);
    // The scheduler's part: bound to its node, the pod is deleted gracefully (it stays,
    // terminating, until its kubelet confirms it gone), not at once.
    cluster.bind(pods().get(0), ns + "-a");

    client.resources(ModelArtifact.class).inNamespace(ns).withName("gone").delete();

    // Until the artifact is gone, it is never gone while one of its pods is still there. A pod
    // the API server only marks terminating is confirmed gone by the kubelet (this test).
    ReconcilerCluster.Deletion seen =
        cluster.awaitDeletion(
            () -> get("gone"),
            () ->
                client
                    .pods()
                    .inNamespace(ns)
                    .withLabel(TensorcastConstants.LABEL_ARTIFACT)
                    .list()
                    .getItems(),
            WAIT);
    assertThat(seen.podsLeftBehind())
        .as("pods still there when the finalizer let the artifact go")
        .isEmpty();
    assertThat(
            client
                .pods()
                .inNamespace(ns)
                .withLabel(TensorcastConstants.LABEL_ARTIFACT)
                .list()
                .getItems())
        .isEmpty();
  }

  @Test
  void aWrittenArtifactWithNoRdmaReaderNodeIsPendingAndSaysHowToRelaxTheRule() {
    String writer = node("writer", false);
    node("plain", false);
    Pod trainer =
        client
            .pods()
            .inNamespace(ns)
            .resource(
                new PodBuilder()
                    .withNewMetadata()
                    .withName("trainer-0")
                    .withLabels(Map.of("app", "trainer"))
                    .endMetadata()
                    .withNewSpec()
                    .withNodeName(ns + "-writer")
                    .addNewContainer()
                    .withName("trainer")
                    .withImage("trainer")
                    .endContainer()
                    .endSpec()
                    .build())
            .create();
    cluster.running(trainer, writer);
    ModelArtifact a = artifact("policy", RdmaPolicy.Required);
    a.getSpec().setKind(ArtifactKind.RLCheckpoint);
    a.getSpec().getSource().setUri(null);
    a.getSpec().getSource().setEndpoint(null);
    a.getSpec().getSource().setInsecureEndpoint(null);
    WritersSpec writers = new WritersSpec();
    writers.setPodSelector(Map.of("app", "trainer"));
    a.getSpec().getSource().setWriters(writers);
    create(a);

    ModelArtifact pending =
        await()
            .atMost(WAIT)
            .until(
                () -> get("policy"),
                m ->
                    m.getStatus() != null
                        && m.getStatus().getConditions().stream()
                            .anyMatch(
                                c ->
                                    c.getType().equals("Scheduled")
                                        && c.getReason().equals("InsufficientNodes")));

    assertThat(pending.getStatus().getPhase()).isEqualTo(ArtifactPhase.Pending);
    assertThat(condition(pending, "Scheduled").getMessage())
        .startsWith(
            "1 writer node(s), 0 reader node(s); reader nodes (spec.placement, other than the"
                + " writers'): 0 of ")
        .contains(
            "1 not RDMA-capable (no tensorcast.io/rdma in allocatable, no label"
                + " tensorcast.io/rdma=true; spec.placement.rdma is Required: Preferred or"
                + " Disabled uses them too) ["
                + ns
                + "-plain]");
    assertThat(condition(pending, "Ready").getReason()).isEqualTo("InsufficientNodes");
    assertThat(pods())
        .as("the writer node's data-plane pod only")
        .singleElement()
        .satisfies(
            p -> {
              assertThat(p.getMetadata().getAnnotations())
                  .containsEntry(DataPlanePod.ANNOTATION_NODE, ns + "-writer");
              assertThat(p.getSpec().getContainers().get(0).getArgs())
                  .as("versions written without a kind are recorded as spec.kind")
                  .containsSequence("--kind", "RLCheckpoint");
            });
  }

  // ---------------------------------------------------------------------------------- helpers

  /**
   * A Ready node of this test, memory for a few pods, RDMA-capable or not; its data-plane pods
   * answer on the returned loopback address.
   */
  private String node(String suffix, boolean rdma) {
    return cluster.node(ns, suffix, rdma);
  }

  private static ModelArtifact artifactIn(String ns, String name, RdmaPolicy rdma) {
    ModelArtifact a = new ModelArtifact();
    a.getMetadata().setName(name);
    a.getMetadata().setNamespace(ns);
    ModelArtifactSpec spec = new ModelArtifactSpec();
    SourceSpec source = new SourceSpec();
    source.setUri("s3://models/" + name + "/");
    source.setEndpoint("http://s3.storage:9000");
    source.setInsecureEndpoint(true);
    spec.setSource(source);
    spec.getPlacement().setReplicas(1);
    spec.getPlacement().setNodeSelector(Map.of(GROUP_LABEL, ns));
    spec.getPlacement().setRdma(rdma);
    MemorySpec memory = new MemorySpec();
    memory.setPinned(false);
    memory.setLimit(new Quantity("8Mi"));
    spec.setMemory(memory);
    DistributionSpec distribution = new DistributionSpec();
    distribution.setMode(DistributionMode.SourceOnly);
    spec.setDistribution(distribution);
    a.setSpec(spec);
    return a;
  }

  private ModelArtifact artifact(String name, RdmaPolicy rdma) {
    return artifactIn(ns, name, rdma);
  }

  private ModelArtifact create(ModelArtifact a) {
    return client.resource(a).create();
  }

  private ModelArtifact get(String name) {
    return client.resources(ModelArtifact.class).inNamespace(ns).withName(name).get();
  }

  /**
   * The kubelet's part: each new data-plane pod marked Running on its node's address, each
   * terminating one removed.
   */
  private void kubelet() {
    for (Pod p : pods()) {
      if (p.getMetadata().getDeletionTimestamp() != null) {
        client.pods().resource(p).withGracePeriod(0).delete();
      }
    }
  }

  /** The test's data-plane pods; each new one is marked Running on its node's address. */
  private List<Pod> pods() {
    return cluster.running(
        client
            .pods()
            .inNamespace(ns)
            .withLabel(TensorcastConstants.LABEL_ARTIFACT)
            .list()
            .getItems());
  }

  private ModelArtifact awaitPhase(String name, ArtifactPhase... phases) {
    return await()
        .atMost(WAIT)
        .until(
            () -> {
              kubelet();
              return get(name);
            },
            m -> m.getStatus() != null && List.of(phases).contains(m.getStatus().getPhase()));
  }

  private static DataPlaneStatus report(
      ModelArtifact a, DataPlaneStatus.Phase phase, String reason) {
    boolean ready = phase == DataPlaneStatus.Phase.Ready;
    return DataPlaneStatus.builder(DataPlanePod.artifactId(a), phase)
        .reason(reason)
        .source(a.getSpec().getSource().getUri())
        .resolvedRevision(reason == null ? "listing-sha256:0123456789abcdef" : null)
        .files(reason == null ? 1 : 0)
        .filesComplete(ready ? 1 : 0)
        .tensors(reason == null ? 3 : 0)
        .bytesTotal(reason == null ? 4096 : 0)
        .bytesLoaded(ready ? 4096 : 0)
        .bytesFromSource(ready ? 4096 : 0)
        .readyTime(ready ? NOW.toString() : null)
        .fileStatuses(List.of())
        .build();
  }

  private static Condition condition(ModelArtifact a, String type) {
    return a.getStatus().getConditions().stream()
        .filter(c -> c.getType().equals(type))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no condition " + type + " in " + a.getStatus()));
  }

  private static void assertOwnedByTheArtifact(HasMetadata child, ModelArtifact owner) {
    assertThat(child).as("child of " + owner.getMetadata().getName()).isNotNull();
    assertThat(child.getMetadata().getOwnerReferences())
        .singleElement()
        .satisfies(
            (OwnerReference r) -> {
              assertThat(r.getKind()).isEqualTo("ModelArtifact");
              assertThat(r.getName()).isEqualTo(owner.getMetadata().getName());
              assertThat(r.getUid()).isEqualTo(owner.getMetadata().getUid());
              assertThat(r.getController()).isTrue();
            });
  }
}
