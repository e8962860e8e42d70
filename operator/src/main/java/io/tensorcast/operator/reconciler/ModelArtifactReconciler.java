package io.tensorcast.operator.reconciler;

import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.ObjectMetaBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.javaoperatorsdk.operator.api.config.informer.InformerEventSourceConfiguration;
import io.javaoperatorsdk.operator.api.reconciler.Cleaner;
import io.javaoperatorsdk.operator.api.reconciler.Context;
import io.javaoperatorsdk.operator.api.reconciler.ControllerConfiguration;
import io.javaoperatorsdk.operator.api.reconciler.DeleteControl;
import io.javaoperatorsdk.operator.api.reconciler.EventSourceContext;
import io.javaoperatorsdk.operator.api.reconciler.PrimaryUpdateAndCacheUtils;
import io.javaoperatorsdk.operator.api.reconciler.Reconciler;
import io.javaoperatorsdk.operator.api.reconciler.UpdateControl;
import io.javaoperatorsdk.operator.processing.event.ResourceID;
import io.javaoperatorsdk.operator.processing.event.source.EventSource;
import io.javaoperatorsdk.operator.processing.event.source.informer.InformerEventSource;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.Conditions;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.operator.desired.NodeSelection;
import io.tensorcast.operator.desired.PodPlan;
import io.tensorcast.operator.metrics.ArtifactMetrics;
import io.tensorcast.operator.peers.PeerCoordinator;
import io.tensorcast.operator.status.DataPlaneClient;
import io.tensorcast.operator.status.StatusAggregator;
import io.tensorcast.operator.status.StatusAggregator.Failure;
import io.tensorcast.operator.status.StatusAggregator.Resolution;
import io.tensorcast.operator.validation.SpecValidator;
import io.tensorcast.operator.validation.Violation;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reconciles a ModelArtifact onto data-plane pods, one per chosen node, and reports their progress
 * in its status. One pass, top to bottom: observe (the artifact's pods and the nodes, from informer
 * caches) → validate the spec → poll the pods' {@code /status} → learn the artifact's size → select
 * nodes → reconcile pods → send peer membership to the pods that need it → aggregate the status →
 * patch it if it changed → come back after {@link OperatorConfig#pollInterval()} while not Ready or
 * while a pod has not applied the membership.
 *
 * <p>Size first: while the size of the current generation is unknown, only one pod is created (on
 * the first chosen node); it resolves the source and reports files, tensors, bytes and revision.
 * The size goes to {@code status} and from then on every pod asks for size + overhead memory, and a
 * node must have that much allocatable memory. If no eligible node does, the artifact is {@code
 * Failed} with {@code Scheduled=False} reason {@code InsufficientMemory} and the numbers, and its
 * pods are removed; this is checked again on every pass, so adding memory recovers it.
 *
 * <p>A failure a pod reports (a missing bucket, a malformed file) fails the generation: pods are
 * removed (their bytes were already released by the data plane) and the status keeps the reason
 * until the spec changes. An invalid spec fails the same way, without ever creating a pod.
 *
 * <p>The operator never writes {@code spec}, never updates a pod (a pod that no longer matches is
 * replaced), and writes status only when it differs, as a fresh object with identity and status.
 */
@ControllerConfiguration(
    name = ModelArtifactReconciler.NAME,
    finalizerName = TensorcastConstants.FINALIZER)
public class ModelArtifactReconciler implements Reconciler<ModelArtifact>, Cleaner<ModelArtifact> {
  private static final Logger log = LoggerFactory.getLogger(ModelArtifactReconciler.class);

  /** Controller name; also the field manager of the operator's writes. */
  public static final String NAME = "modelartifact";

  /** How soon cleanup looks again while the artifact's pods are going away. */
  static final Duration CLEANUP_RECHECK = Duration.ofSeconds(1);

  private final OperatorConfig config;
  private final DataPlaneClient dataPlane;
  private final PeerCoordinator peers;
  private final ArtifactMetrics metrics;
  private final Clock clock;
  private volatile InformerEventSource<Node, ModelArtifact> nodes;
  private volatile InformerEventSource<Pod, ModelArtifact> allPods;

  public ModelArtifactReconciler(OperatorConfig config) {
    this(config, new SimpleMeterRegistry());
  }

  /**
   * @param config operator settings
   * @param registry where the per-artifact gauges go ({@link ArtifactMetrics})
   */
  public ModelArtifactReconciler(OperatorConfig config, MeterRegistry registry) {
    this(
        config,
        new DataPlaneClient(
            config.controlPort(), config.statusTimeout(), config.controlTokenFile()),
        registry,
        Clock.systemUTC());
  }

  public ModelArtifactReconciler(
      OperatorConfig config, DataPlaneClient dataPlane, MeterRegistry registry, Clock clock) {
    this.config = Objects.requireNonNull(config, "config");
    this.dataPlane = Objects.requireNonNull(dataPlane, "dataPlane");
    this.peers = new PeerCoordinator(dataPlane, config.peerPort());
    this.metrics = new ArtifactMetrics(registry);
    this.clock = Objects.requireNonNull(clock, "clock");
  }

  /**
   * Pods labelled {@link TensorcastConstants#LABEL_ARTIFACT} map to the ModelArtifact of that name
   * in their namespace; any change of a node's schedulability, labels, taints, allocatable or
   * readiness maps to every ModelArtifact.
   */
  @Override
  public List<EventSource<?, ModelArtifact>> prepareEventSources(
      EventSourceContext<ModelArtifact> context) {
    InformerEventSource<Pod, ModelArtifact> pods =
        new InformerEventSource<>(
            InformerEventSourceConfiguration.from(Pod.class, ModelArtifact.class)
                .withName("pods")
                .withLabelSelector(
                    TensorcastConstants.LABEL_MANAGED_BY
                        + "="
                        + TensorcastConstants.LABEL_MANAGED_BY_OPERATOR
                        + ","
                        + TensorcastConstants.LABEL_ARTIFACT)
                .withSecondaryToPrimaryMapper(
                    (Pod p) ->
                        Set.of(
                            new ResourceID(
                                p.getMetadata().getLabels().get(TensorcastConstants.LABEL_ARTIFACT),
                                p.getMetadata().getNamespace())))
                .build(),
            context);
    InformerEventSource<Node, ModelArtifact> nodeSource =
        new InformerEventSource<>(
            InformerEventSourceConfiguration.from(Node.class, ModelArtifact.class)
                .withName("nodes")
                .withWatchAllNamespaces()
                .withSecondaryToPrimaryMapper(
                    (Node n) ->
                        context
                            .getPrimaryCache()
                            .list()
                            .map(ResourceID::fromResource)
                            .collect(Collectors.toSet()))
                .withOnUpdateFilter(
                    (Node newer, Node older) -> !NodeFacts.of(newer).equals(NodeFacts.of(older)))
                .build(),
            context);
    this.nodes = nodeSource;
    this.allPods = pods;
    return List.of(pods, nodeSource);
  }

  @Override
  public UpdateControl<ModelArtifact> reconcile(
      ModelArtifact artifact, Context<ModelArtifact> context) {
    KubernetesClient client = context.getClient();
    List<Pod> pods = List.copyOf(context.getSecondaryResources(Pod.class));

    List<Violation> violations = SpecValidator.validate(artifact);
    if (!violations.isEmpty()) {
      return fail(
          artifact,
          context,
          pods,
          new Failure(Conditions.REASON_INVALID_SPEC, SpecValidator.describe(violations), true),
          Optional.empty());
    }
    Optional<Failure> recorded = StatusAggregator.recordedFailure(artifact);
    if (recorded.isPresent()) {
      return fail(
          artifact,
          context,
          pods,
          recorded.get(),
          StatusAggregator.resolution(artifact, pods, Map.of()));
    }

    Map<String, DataPlaneStatus> reports = dataPlane.poll(currentPods(artifact, pods));
    Optional<Resolution> resolution = StatusAggregator.resolution(artifact, pods, reports);
    Optional<Failure> podFailure =
        StatusAggregator.podFailure(
            artifact, pods, reports, resolution, config.memoryOverheadBytes());
    if (podFailure.isPresent()) {
      return fail(artifact, context, pods, podFailure.get(), resolution);
    }

    NodeSelection.Result selection = selectNodes(artifact, pods, resolution);
    if (resolution.isPresent() && selection.noNodeHasEnoughMemory()) {
      return fail(
          artifact,
          context,
          pods,
          new Failure(StatusAggregator.REASON_INSUFFICIENT_MEMORY, selection.message(), false),
          resolution);
    }

    PodPlan plan = PodPlan.plan(desiredPods(artifact, selection, resolution), pods);
    apply(plan, client);
    boolean membershipSettled = coordinatePeers(artifact, plan, reports, resolution);

    ModelArtifactStatus status =
        StatusAggregator.aggregate(
            new StatusAggregator.Input(
                artifact,
                pods,
                reports,
                plan.keep().values().stream()
                    .map(p -> p.getMetadata().getName())
                    .collect(Collectors.toSet()),
                resolution,
                selection,
                Optional.empty(),
                clock.instant()));
    metrics.sourceBytes(
        artifact.getMetadata().getNamespace(),
        artifact.getMetadata().getName(),
        status.getBytesFromSource() == null ? 0 : status.getBytesFromSource());
    Duration next =
        status.getPhase() == ArtifactPhase.Ready && plan.settled() && membershipSettled
            ? config.readyResync()
            : config.pollInterval();
    return patchIfChanged(artifact, status, context).rescheduleAfter(next);
  }

  /**
   * Sends the peer membership of a PeerToPeer artifact to those of its pods that need it ({@link
   * PeerCoordinator}). Members are the pods the plan keeps (current generation, right size, not
   * being deleted), and only once the size is resolved: until then the one pod that resolves the
   * source is usually too small and replaced, and a pod without membership reads no data before the
   * data plane's membership wait, so the replaced resolver reads only listings and headers from the
   * source. A SourceOnly artifact has no swarm.
   *
   * @return whether every member has applied the membership (false: come back soon)
   */
  private boolean coordinatePeers(
      ModelArtifact artifact,
      PodPlan plan,
      Map<String, DataPlaneStatus> reports,
      Optional<Resolution> resolution) {
    if (!DataPlanePod.peerToPeer(artifact.getSpec()) || resolution.isEmpty()) {
      peers.forget(id(artifact));
      return true;
    }
    List<Pod> members =
        plan.keep().values().stream()
            .sorted(java.util.Comparator.comparing(p -> p.getMetadata().getName()))
            .toList();
    return peers.coordinate(id(artifact), members, reports).settled();
  }

  /**
   * Deletes the artifact's pods and keeps the finalizer until none is left, so that every node's
   * store is released (data-plane pods unload their artifact on SIGTERM) before the object goes.
   */
  @Override
  public DeleteControl cleanup(ModelArtifact artifact, Context<ModelArtifact> context) {
    KubernetesClient client = context.getClient();
    List<Pod> pods =
        client
            .pods()
            .inNamespace(artifact.getMetadata().getNamespace())
            .withLabel(TensorcastConstants.LABEL_ARTIFACT, artifact.getMetadata().getName())
            .list()
            .getItems();
    peers.forget(id(artifact));
    metrics.remove(artifact.getMetadata().getNamespace(), artifact.getMetadata().getName());
    if (pods.isEmpty()) {
      log.info("{}: every data-plane pod is gone; removing the finalizer", id(artifact));
      return DeleteControl.defaultDelete();
    }
    apply(PodPlan.deleteAll(pods), client);
    log.info("{}: waiting for {} data-plane pod(s) to go away", id(artifact), pods.size());
    return DeleteControl.noFinalizerRemoval().rescheduleAfter(CLEANUP_RECHECK.toMillis());
  }

  /** Chooses nodes for the current generation: see {@link NodeSelection}. */
  NodeSelection.Result selectNodes(
      ModelArtifact artifact, List<Pod> pods, Optional<Resolution> resolution) {
    ModelArtifactSpec spec = artifact.getSpec();
    OptionalLong size =
        resolution.map(r -> OptionalLong.of(r.totalBytes())).orElse(OptionalLong.empty());
    long overhead = config.memoryOverheadBytes();
    var placement = spec.getPlacement();
    return NodeSelection.select(
        nodes == null ? List.of() : nodes.list(n -> true).toList(),
        new NodeSelection.Request(
            placement.getReplicas() == null ? 1 : placement.getReplicas(),
            placement.getRdma() == null ? RdmaPolicy.Required : placement.getRdma(),
            placement.getNodeSelector(),
            placement.getTolerations(),
            DataPlanePod.memoryRequestBytes(spec, size, overhead),
            DataPlanePod.memoryBasis(spec, size, overhead),
            pods.stream()
                .filter(p -> !PodPlan.terminating(p))
                .map(PodPlan::node)
                .collect(Collectors.toSet()),
            committedByOthers(artifact)));
  }

  /** Memory requested per node by the data-plane pods of every other artifact. */
  private Map<String, Long> committedByOthers(ModelArtifact artifact) {
    if (allPods == null) {
      return Map.of();
    }
    String ns = artifact.getMetadata().getNamespace();
    String name = artifact.getMetadata().getName();
    return allPods
        .list(
            p ->
                !(ns.equals(p.getMetadata().getNamespace())
                        && name.equals(
                            p.getMetadata().getLabels().get(TensorcastConstants.LABEL_ARTIFACT)))
                    && !PodPlan.node(p).isEmpty()
                    && !PodPlan.terminating(p))
        .collect(
            Collectors.groupingBy(PodPlan::node, Collectors.summingLong(PodPlan::memoryRequest)));
  }

  /** One pod on the first chosen node while the size is unknown; one per chosen node after. */
  List<Pod> desiredPods(
      ModelArtifact artifact, NodeSelection.Result selection, Optional<Resolution> resolution) {
    OptionalLong size =
        resolution.map(r -> OptionalLong.of(r.totalBytes())).orElse(OptionalLong.empty());
    return selection.chosen().stream()
        .limit(resolution.isPresent() ? Long.MAX_VALUE : 1)
        .map(node -> DataPlanePod.desired(artifact, node, size, config))
        .toList();
  }

  private UpdateControl<ModelArtifact> fail(
      ModelArtifact artifact,
      Context<ModelArtifact> context,
      List<Pod> pods,
      Failure failure,
      Optional<Resolution> resolution) {
    peers.forget(id(artifact));
    PodPlan plan = PodPlan.deleteAll(pods);
    apply(plan, context.getClient());
    ModelArtifactStatus status =
        StatusAggregator.aggregate(
            new StatusAggregator.Input(
                artifact,
                pods,
                Map.of(),
                Set.of(),
                resolution,
                null,
                Optional.of(failure),
                clock.instant()));
    UpdateControl<ModelArtifact> control = patchIfChanged(artifact, status, context);
    // Memory fit is checked again on a timer: nodes may grow without a node event we filter in.
    return StatusAggregator.REASON_INSUFFICIENT_MEMORY.equals(failure.reason())
        ? control.rescheduleAfter(config.readyResync())
        : control;
  }

  /**
   * Writes {@code status} when it differs from the artifact's: a server-side apply of a fresh
   * object holding only name, namespace and status to the status subresource (field manager {@value
   * #NAME}, forced), so the operator owns status fields and never a spec field; the result goes to
   * JOSDK's cache so the next pass compares against what was written.
   */
  private UpdateControl<ModelArtifact> patchIfChanged(
      ModelArtifact artifact, ModelArtifactStatus status, Context<ModelArtifact> context) {
    metrics.status(
        artifact.getMetadata().getNamespace(),
        artifact.getMetadata().getName(),
        artifact.getSpec() == null || DataPlanePod.peerToPeer(artifact.getSpec()),
        status);
    if (Objects.equals(artifact.getStatus(), status)) {
      return UpdateControl.noUpdate();
    }
    log.info(
        "{}: status {} ready {} progress {}",
        id(artifact),
        status.getPhase(),
        status.getReady(),
        status.getProgress());
    ModelArtifact fresh = new ModelArtifact();
    fresh.setMetadata(
        new ObjectMetaBuilder()
            .withName(artifact.getMetadata().getName())
            .withNamespace(artifact.getMetadata().getNamespace())
            .build());
    fresh.setSpec(null);
    fresh.setStatus(status);
    PrimaryUpdateAndCacheUtils.ssaPatchStatusAndCacheResource(artifact, fresh, context);
    return UpdateControl.noUpdate();
  }

  private void apply(PodPlan plan, KubernetesClient client) {
    for (Pod p : plan.delete()) {
      try {
        client.pods().inNamespace(p.getMetadata().getNamespace()).resource(p).delete();
        log.info("deleted pod {}/{}", p.getMetadata().getNamespace(), p.getMetadata().getName());
      } catch (KubernetesClientException e) {
        if (e.getCode() != 404) {
          throw e;
        }
      }
    }
    for (Pod p : plan.create()) {
      try {
        client.pods().inNamespace(p.getMetadata().getNamespace()).resource(p).create();
        log.info(
            "created pod {}/{} for node {}",
            p.getMetadata().getNamespace(),
            p.getMetadata().getName(),
            PodPlan.node(p));
      } catch (KubernetesClientException e) {
        if (e.getCode() != 409) {
          throw e;
        }
        // Already there: the cache had not seen it yet. The next pass sees it.
      }
    }
  }

  private static List<Pod> currentPods(ModelArtifact artifact, List<Pod> pods) {
    String g = Long.toString(DataPlanePod.generation(artifact));
    return pods.stream()
        .filter(p -> !PodPlan.terminating(p))
        .filter(p -> g.equals(p.getMetadata().getLabels().get(DataPlanePod.LABEL_GENERATION)))
        .toList();
  }

  private static String id(ModelArtifact a) {
    return a.getMetadata().getNamespace() + "/" + a.getMetadata().getName();
  }
}
