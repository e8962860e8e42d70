package io.tensorcast.operator.reconciler;

import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.ObjectMetaBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.dsl.base.PatchContext;
import io.fabric8.kubernetes.client.dsl.base.PatchType;
import io.javaoperatorsdk.operator.api.config.informer.Informer;
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
import io.javaoperatorsdk.operator.processing.event.source.filter.OnUpdateFilter;
import io.javaoperatorsdk.operator.processing.event.source.informer.InformerEventSource;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.tensorcast.api.ConsumerVolumes;
import io.tensorcast.api.Reason;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.consumers.Consumer;
import io.tensorcast.operator.consumers.ConsumerHold;
import io.tensorcast.operator.consumers.Consumers;
import io.tensorcast.operator.desired.CopyGeneration;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.operator.desired.NodeSelection;
import io.tensorcast.operator.desired.PodPlan;
import io.tensorcast.operator.desired.ReadyNodeLabels;
import io.tensorcast.operator.events.EventRecorder;
import io.tensorcast.operator.events.StatusEvents;
import io.tensorcast.operator.metrics.ArtifactMetrics;
import io.tensorcast.operator.metrics.OperatorMetrics;
import io.tensorcast.operator.peers.PeerCoordinator;
import io.tensorcast.operator.status.ConsumerStatus;
import io.tensorcast.operator.status.DataPlaneClient;
import io.tensorcast.operator.status.FailureRetry;
import io.tensorcast.operator.status.FailureRetry.Outcome;
import io.tensorcast.operator.status.StatusAggregator;
import io.tensorcast.operator.status.StatusAggregator.Failure;
import io.tensorcast.operator.status.StatusAggregator.Resolution;
import io.tensorcast.operator.status.WrittenStatus;
import io.tensorcast.operator.trust.ArtifactKeys;
import io.tensorcast.operator.trust.MasterKey;
import io.tensorcast.operator.validation.SourcePolicy;
import io.tensorcast.operator.validation.SpecValidator;
import io.tensorcast.operator.validation.Violation;
import io.tensorcast.operator.written.VersionsClient;
import io.tensorcast.operator.written.WrittenArtifacts;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
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
 * caches) → validate the spec → poll the pods' {@code /status} (with the artifact's admin token) →
 * learn the artifact's size → select nodes → make sure the artifact's Secret and NetworkPolicy are
 * in place ({@link ArtifactObjects}) → reconcile pods → send peer membership to the pods that need
 * it → aggregate the status → patch it if it changed → come back after {@link
 * OperatorConfig#pollInterval()} while not Ready or while a pod has not applied the membership.
 *
 * <p>Trust: the artifact's peer secret and read/admin tokens are derived from the operator's {@link
 * MasterKey} ({@link ArtifactKeys}); the operator writes them into a Secret it owns and never reads
 * a Secret back.
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
    finalizerName = TensorcastConstants.FINALIZER,
    generationAwareEventProcessing = false,
    informer = @Informer(onUpdateFilter = ModelArtifactReconciler.SpecOrRetryChanged.class))
public class ModelArtifactReconciler implements Reconciler<ModelArtifact>, Cleaner<ModelArtifact> {
  private static final Logger log = LoggerFactory.getLogger(ModelArtifactReconciler.class);

  /**
   * Which updates of a ModelArtifact start a reconcile: a new generation (spec), a new value of
   * annotation {@value TensorcastConstants#ANNOTATION_RETRY}, the start of a deletion, or the
   * finalizer added or removed; not the operator's own status writes. (JOSDK's generation-aware
   * filter alone would drop annotation changes.)
   */
  public static final class SpecOrRetryChanged implements OnUpdateFilter<ModelArtifact> {
    @Override
    public boolean accept(ModelArtifact newer, ModelArtifact older) {
      Long g1 = older.getMetadata().getGeneration();
      Long g2 = newer.getMetadata().getGeneration();
      return g1 == null
          || g2 == null
          || g1 < g2
          || !FailureRetry.annotation(newer).equals(FailureRetry.annotation(older))
          || (newer.isMarkedForDeletion() && !older.isMarkedForDeletion())
          || !newer.hasFinalizer(TensorcastConstants.FINALIZER)
          || !older.hasFinalizer(TensorcastConstants.FINALIZER);
    }
  }

  /** Controller name; also the field manager of the operator's writes. */
  public static final String NAME = "modelartifact";

  /** How soon cleanup looks again while the artifact's pods are going away. */
  static final Duration CLEANUP_RECHECK = Duration.ofSeconds(1);

  /**
   * How soon cleanup looks again while consumers use the artifact (their changes also trigger it).
   */
  static final Duration CONSUMER_RECHECK = Duration.ofSeconds(10);

  private final OperatorConfig config;
  private final MasterKey masterKey;
  private final SourcePolicy sourcePolicy;
  private final ArtifactObjects objects;
  private final DataPlaneClient dataPlane;
  private final PeerCoordinator peers;
  private final VersionsClient versionsClient;
  private final ArtifactMetrics metrics;
  private final MeterRegistry registry;
  private final Clock clock;
  private final EventRecorder events;
  private volatile InformerEventSource<Node, ModelArtifact> nodes;
  private volatile InformerEventSource<Pod, ModelArtifact> allPods;
  private volatile InformerEventSource<Pod, ModelArtifact> consumerPods;

  public ModelArtifactReconciler(OperatorConfig config, MasterKey masterKey) {
    this(config, masterKey, new SimpleMeterRegistry());
  }

  /**
   * @param config operator settings
   * @param masterKey the key every artifact's Secret values are derived from
   * @param registry where the per-artifact gauges go ({@link ArtifactMetrics})
   */
  public ModelArtifactReconciler(
      OperatorConfig config, MasterKey masterKey, MeterRegistry registry) {
    this(
        config,
        masterKey,
        new DataPlaneClient(config.controlPort(), config.statusTimeout()),
        registry,
        Clock.systemUTC());
  }

  public ModelArtifactReconciler(
      OperatorConfig config,
      MasterKey masterKey,
      DataPlaneClient dataPlane,
      MeterRegistry registry,
      Clock clock) {
    this.config = Objects.requireNonNull(config, "config");
    this.masterKey = Objects.requireNonNull(masterKey, "masterKey");
    this.sourcePolicy = SourcePolicy.of(config);
    this.objects = new ArtifactObjects(config);
    this.dataPlane = Objects.requireNonNull(dataPlane, "dataPlane");
    this.peers = new PeerCoordinator(dataPlane, config.peerPort());
    this.versionsClient = new VersionsClient(config.controlPort(), config.statusTimeout());
    this.metrics = new ArtifactMetrics(registry);
    this.registry = registry;
    this.clock = Objects.requireNonNull(clock, "clock");
    this.events = new EventRecorder(clock);
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
        EventSources.pods(
            "pods",
            ModelArtifact.class,
            context,
            TensorcastConstants.LABEL_MANAGED_BY
                + "="
                + TensorcastConstants.LABEL_MANAGED_BY_OPERATOR
                + ","
                + TensorcastConstants.LABEL_ARTIFACT,
            (Pod p) ->
                Set.of(
                    new ResourceID(
                        p.getMetadata().getLabels().get(TensorcastConstants.LABEL_ARTIFACT),
                        p.getMetadata().getNamespace())));
    InformerEventSource<Node, ModelArtifact> nodeSource =
        EventSources.nodes("nodes", ModelArtifact.class, context);
    InformerEventSource<Pod, ModelArtifact> consumers =
        new InformerEventSource<>(
            InformerEventSourceConfiguration.from(Pod.class, ModelArtifact.class)
                .withName("consumers")
                .withSecondaryToPrimaryMapper(
                    (Pod p) ->
                        ConsumerVolumes.modelArtifactsNamed(p).stream()
                            .map(a -> new ResourceID(a, p.getMetadata().getNamespace()))
                            .collect(Collectors.toSet()))
                .withOnAddFilter(Consumers::isConsumer)
                .withOnUpdateFilter(
                    (Pod newer, Pod older) ->
                        (Consumers.isConsumer(newer) || Consumers.isConsumer(older))
                                && !Consumer.of(newer).equals(Consumer.of(older))
                            || PodPlan.ended(newer) != PodPlan.ended(older))
                .withOnDeleteFilter(
                    (Pod p, Boolean unknown) -> !ConsumerVolumes.modelArtifactsNamed(p).isEmpty())
                .build(),
            context);
    this.nodes = nodeSource;
    this.allPods = pods;
    this.consumerPods = consumers;
    return List.of(pods, nodeSource, consumers);
  }

  @Override
  public UpdateControl<ModelArtifact> reconcile(
      ModelArtifact artifact, Context<ModelArtifact> context) {
    KubernetesClient client = context.getClient();
    List<Pod> pods = dataPlanePods(artifact, context);
    List<Consumer> consumers = consumers(artifact);

    List<Violation> violations = SpecValidator.validate(artifact, sourcePolicy);
    if (!violations.isEmpty()) {
      return fail(
          artifact,
          context,
          pods,
          new Failure(Reason.InvalidSpec, SpecValidator.describe(violations), true),
          Optional.empty(),
          consumers,
          Outcome.COMPUTED);
    }
    Optional<Failure> recorded = StatusAggregator.recordedFailure(artifact);
    if (recorded.isPresent() && !FailureRetry.retryNow(artifact, clock.instant())) {
      return fail(
          artifact,
          context,
          pods,
          recorded.get(),
          StatusAggregator.resolution(artifact, pods, Map.of()),
          consumers,
          Outcome.KEPT);
    }
    if (recorded.isPresent()) {
      log.info(
          "{}: loading again after {} ({})",
          id(artifact),
          recorded.get().reason(),
          FailureRetry.requested(artifact)
              ? "annotation " + TensorcastConstants.ANNOTATION_RETRY
              : "retry time " + artifact.getStatus().getNextRetryTime());
    }

    if (WrittenArtifacts.isWritten(artifact.getSpec())) {
      return reconcileWritten(artifact, context, pods);
    }
    ArtifactKeys keys =
        ArtifactKeys.derive(masterKey, artifact, CopyGeneration.of(artifact).generation());
    Map<String, DataPlaneStatus> reports =
        dataPlane.poll(currentPods(artifact, pods), keys.adminToken());
    Optional<Resolution> resolution = StatusAggregator.resolution(artifact, pods, reports);
    Optional<Failure> podFailure =
        StatusAggregator.podFailure(
            artifact, pods, reports, resolution, config.memoryOverheadBytes());
    if (podFailure.isPresent()) {
      return fail(
          artifact, context, pods, podFailure.get(), resolution, consumers, Outcome.ATTEMPT_FAILED);
    }

    NodeSelection.Result selection = selectNodes(artifact, pods, resolution);
    if (resolution.isPresent() && selection.noNodeHasEnoughMemory()) {
      return fail(
          artifact,
          context,
          pods,
          new Failure(Reason.InsufficientMemory, selection.message(), false),
          resolution,
          consumers,
          Outcome.COMPUTED);
    }

    ConsumerHold hold =
        ConsumerHold.apply(
            PodPlan.plan(desiredPods(artifact, selection, resolution), pods), consumers);
    PodPlan plan = hold.plan();
    Optional<String> conflict = objects.ensure(client, artifact, keys, !plan.create().isEmpty());
    if (conflict.isPresent()) {
      return fail(
          artifact,
          context,
          pods,
          new Failure(Reason.NameConflict, conflict.get(), false),
          resolution,
          consumers,
          Outcome.COMPUTED);
    }
    apply(plan, client);
    boolean membershipSettled = coordinatePeers(artifact, plan, reports, resolution, keys);

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
    ConsumerStatus.apply(
        status,
        previousConditions(artifact),
        CopyGeneration.metadataGeneration(artifact),
        consumers,
        hold.held(),
        false,
        clock.instant());
    retryPlan(artifact, Outcome.NONE, Optional.empty()).fill(status);
    labelReadyNodes(artifact, status.getReadyNodes(), client);
    metrics.sourceBytes(
        artifact.getMetadata().getNamespace(),
        artifact.getMetadata().getName(),
        status.getBytesFromSource() == null ? 0 : status.getBytesFromSource());
    Duration next =
        status.getPhase() == ArtifactPhase.Ready
                && plan.settled()
                && membershipSettled
                && hold.none()
            ? config.readyResync()
            : config.pollInterval();
    return patchIfChanged(artifact, status, context).rescheduleAfter(next);
  }

  /**
   * A written artifact ({@code spec.source.writers}; the decisions are {@link WrittenArtifacts}'s):
   * writer nodes from the writer pods → reader nodes by placement among the others → the Secret and
   * NetworkPolicy → pods in their roles → peer membership to every pod → each pod's versions →
   * saves to start ({@code spec.save}) → status ({@link WrittenStatus}) → come back after the poll
   * interval (versions come and go).
   */
  private UpdateControl<ModelArtifact> reconcileWritten(
      ModelArtifact artifact, Context<ModelArtifact> context, List<Pod> pods) {
    KubernetesClient client = context.getClient();
    ModelArtifactSpec spec = artifact.getSpec();
    ArtifactKeys keys =
        ArtifactKeys.derive(masterKey, artifact, CopyGeneration.of(artifact).generation());
    Map<String, String> selector = spec.getSource().getWriters().getPodSelector();
    Set<String> writerNodes =
        WrittenArtifacts.writerNodes(
            client
                .pods()
                .inNamespace(artifact.getMetadata().getNamespace())
                .withLabels(selector)
                .list()
                .getItems(),
            selector);
    List<Node> allNodes = nodes == null ? List.of() : nodes.list(n -> true).toList();
    OptionalLong perNode = WrittenArtifacts.bytesPerNode(spec);
    List<NodeSelection.Candidate> writers =
        allNodes.stream()
            .filter(n -> writerNodes.contains(n.getMetadata().getName()))
            .map(NodeSelection.Candidate::of)
            .toList();
    NodeSelection.Result readerChoice = null;
    if (WrittenArtifacts.hasReaders(spec) && !writerNodes.isEmpty()) {
      readerChoice =
          NodeSelection.select(
              allNodes.stream()
                  .filter(n -> !writerNodes.contains(n.getMetadata().getName()))
                  .toList(),
              selectionRequest(artifact, pods, perNode, List.of()));
    }
    List<NodeSelection.Candidate> readers =
        readerChoice == null ? List.of() : readerChoice.chosen();
    List<String> writerPodNames =
        writers.stream().map(c -> DataPlanePod.podName(artifact, c.name())).toList();
    List<Pod> desired = new ArrayList<>();
    for (NodeSelection.Candidate c : writers) {
      desired.add(
          DataPlanePod.desired(
              artifact,
              c,
              perNode,
              config,
              masterKey.id(),
              WrittenArtifacts.Role.WRITER,
              writerPodNames));
    }
    for (NodeSelection.Candidate c : readers) {
      desired.add(
          DataPlanePod.desired(
              artifact,
              c,
              perNode,
              config,
              masterKey.id(),
              WrittenArtifacts.Role.READER,
              writerPodNames));
    }
    PodPlan plan = PodPlan.plan(desired, pods);
    Optional<String> conflict = objects.ensure(client, artifact, keys, !plan.create().isEmpty());
    if (conflict.isPresent()) {
      return fail(
          artifact,
          context,
          pods,
          new Failure(Reason.NameConflict, conflict.get(), false),
          Optional.empty(),
          List.of(),
          Outcome.COMPUTED);
    }
    apply(plan, client);
    List<Pod> members =
        plan.keep().values().stream()
            .sorted(java.util.Comparator.comparing(p -> p.getMetadata().getName()))
            .toList();
    Map<String, DataPlaneStatus> reports = dataPlane.poll(members, keys.adminToken());
    peers.coordinate(id(artifact), members, reports, keys.adminToken());
    WrittenArtifacts.Views views =
        WrittenArtifacts.views(
            members, versionsClient.versions(members, keys.adminToken()), writerNodes);
    for (WrittenArtifacts.SaveOrder o :
        WrittenArtifacts.saves(
            spec.getSave(),
            views.pods(),
            artifact.getStatus() == null ? null : artifact.getStatus().getVersions(),
            views.metadata())) {
      Pod target =
          members.stream()
              .filter(p -> p.getMetadata().getName().equals(o.pod()))
              .findFirst()
              .orElse(null);
      String refused =
          target == null
              ? "pod gone"
              : versionsClient.save(
                  target,
                  o.version(),
                  WrittenArtifacts.saveRequest(spec.getSave(), o.uri()),
                  keys.adminToken());
      if (refused == null) {
        log.info(
            "{}: saving version {} from {} to {}", id(artifact), o.version(), o.pod(), o.uri());
      } else {
        log.warn("{}: saving version {} from {}: {}", id(artifact), o.version(), o.pod(), refused);
      }
    }
    ModelArtifactStatus status =
        WrittenStatus.build(artifact, writerNodes, readerChoice, views.pods(), clock.instant());
    return patchIfChanged(artifact, status, context).rescheduleAfter(config.pollInterval());
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
      Optional<Resolution> resolution,
      ArtifactKeys keys) {
    if (!DataPlanePod.peerToPeer(artifact.getSpec()) || resolution.isEmpty()) {
      peers.forget(id(artifact));
      return true;
    }
    List<Pod> members =
        plan.keep().values().stream()
            .sorted(java.util.Comparator.comparing(p -> p.getMetadata().getName()))
            .toList();
    return peers.coordinate(id(artifact), members, reports, keys.adminToken()).settled();
  }

  /**
   * Deletes the artifact's pods and keeps the finalizer until none is left, so that every node's
   * store is released (data-plane pods unload their artifact on SIGTERM) before the object goes.
   */
  @Override
  public DeleteControl cleanup(ModelArtifact artifact, Context<ModelArtifact> context) {
    KubernetesClient client = context.getClient();
    labelReadyNodes(artifact, List.of(), client);
    List<Consumer> consumers = consumers(artifact);
    if (!consumers.isEmpty()) {
      ModelArtifactStatus status =
          artifact.getStatus() == null
              ? new ModelArtifactStatus()
              : io.fabric8.kubernetes.client.utils.Serialization.clone(artifact.getStatus());
      status.setReadyNodes(List.of());
      ConsumerStatus.apply(
          status,
          previousConditions(artifact),
          CopyGeneration.metadataGeneration(artifact),
          consumers,
          Map.of(),
          true,
          clock.instant());
      patchIfChanged(artifact, status, context);
      log.info(
          "{}: deletion waits for {} consumer pod(s): {}",
          id(artifact),
          consumers.size(),
          consumers.stream().map(Consumer::name).toList());
      return DeleteControl.noFinalizerRemoval().rescheduleAfter(CONSUMER_RECHECK.toMillis());
    }
    List<Pod> pods =
        client
            .pods()
            .inNamespace(artifact.getMetadata().getNamespace())
            .withLabel(TensorcastConstants.LABEL_ARTIFACT, artifact.getMetadata().getName())
            .list()
            .getItems();
    peers.forget(id(artifact));
    objects.forget(id(artifact));
    metrics.remove(artifact.getMetadata().getNamespace(), artifact.getMetadata().getName());
    if (pods.isEmpty()) {
      log.info("{}: every data-plane pod is gone; removing the finalizer", id(artifact));
      return DeleteControl.defaultDelete();
    }
    apply(PodPlan.deleteAll(pods), client);
    log.info("{}: waiting for {} data-plane pod(s) to go away", id(artifact), pods.size());
    return DeleteControl.noFinalizerRemoval().rescheduleAfter(CLEANUP_RECHECK.toMillis());
  }

  /** The artifact's data-plane pods (the "pods" informer only, not its consumers). */
  private List<Pod> dataPlanePods(ModelArtifact artifact, Context<ModelArtifact> context) {
    return allPods == null
        ? List.copyOf(context.getSecondaryResources(Pod.class))
        : List.copyOf(allPods.getSecondaryResources(artifact));
  }

  /** The artifact's consumer pods; see {@link Consumers}. */
  private List<Consumer> consumers(ModelArtifact artifact) {
    return consumerPods == null
        ? List.of()
        : Consumers.of(artifact, consumerPods.getSecondaryResources(artifact));
  }

  private static List<io.fabric8.kubernetes.api.model.Condition> previousConditions(
      ModelArtifact artifact) {
    return artifact.getStatus() == null ? List.of() : artifact.getStatus().getConditions();
  }

  /**
   * Makes exactly the nodes in {@code readyNodes} carry the artifact's {@link ReadyNodeLabels}
   * label (value: the generation), by JSON merge patches of the nodes' labels. A failed patch is
   * logged and tried again on the next pass; it does not fail the reconcile.
   */
  private void labelReadyNodes(
      ModelArtifact artifact, List<String> readyNodes, KubernetesClient client) {
    if (nodes == null) {
      return;
    }
    String key =
        ConsumerVolumes.nodeLabelKey(
            artifact.getMetadata().getNamespace(), artifact.getMetadata().getName());
    Map<String, Optional<String>> changes =
        ReadyNodeLabels.changes(
            nodes.list(n -> true).toList(),
            key,
            Long.toString(DataPlanePod.generation(artifact)),
            Set.copyOf(readyNodes == null ? List.of() : readyNodes));
    changes.forEach(
        (node, value) -> {
          Map<String, Object> labels = new java.util.HashMap<>();
          labels.put(key, value.orElse(null));
          try {
            client
                .nodes()
                .withName(node)
                .patch(
                    PatchContext.of(PatchType.JSON_MERGE),
                    client
                        .getKubernetesSerialization()
                        .asJson(Map.of("metadata", Map.of("labels", labels))));
            log.info(
                "{}: node {} label {}{}",
                id(artifact),
                node,
                key,
                value.map(v -> "=" + v).orElse(" removed"));
          } catch (KubernetesClientException e) {
            if (e.getCode() != 404) {
              log.warn("{}: cannot label node {}: {}", id(artifact), node, e.getMessage());
            }
          }
        });
  }

  /** Chooses nodes for the current generation: see {@link NodeSelection}. */
  NodeSelection.Result selectNodes(
      ModelArtifact artifact, List<Pod> pods, Optional<Resolution> resolution) {
    OptionalLong size =
        resolution.map(r -> OptionalLong.of(r.totalBytes())).orElse(OptionalLong.empty());
    return NodeSelection.select(
        nodes == null ? List.of() : nodes.list(n -> true).toList(),
        selectionRequest(artifact, pods, size, readyLongest(artifact)));
  }

  /**
   * What {@code spec.placement} asks of the nodes, for pods of {@code bytes} each (empty: not known
   * yet), given the artifact's current pods and the memory other artifacts' pods hold.
   */
  private NodeSelection.Request selectionRequest(
      ModelArtifact artifact, List<Pod> pods, OptionalLong bytes, List<String> readyLongest) {
    ModelArtifactSpec spec = artifact.getSpec();
    long overhead = config.memoryOverheadBytes();
    var placement = spec.getPlacement();
    return new NodeSelection.Request(
        placement.getReplicas() == null ? 1 : placement.getReplicas(),
        placement.getRdma() == null ? RdmaPolicy.Required : placement.getRdma(),
        placement.getNodeSelector(),
        placement.getTolerations(),
        DataPlanePod.memoryRequestBytes(spec, bytes, overhead),
        DataPlanePod.memoryBasis(spec, bytes, overhead),
        pods.stream()
            .filter(p -> !PodPlan.terminating(p))
            .map(PodPlan::node)
            .collect(Collectors.toSet()),
        committedByOthers(artifact),
        readyLongest);
  }

  /**
   * Nodes whose copy of the current copy generation was Ready at the last status, longest Ready
   * first (by the data plane's ready time, then node name).
   */
  private static List<String> readyLongest(ModelArtifact artifact) {
    ModelArtifactStatus s = artifact.getStatus();
    if (s == null || s.getNodes() == null || s.getReadyNodes() == null) {
      return List.of();
    }
    Set<String> ready = Set.copyOf(s.getReadyNodes());
    return s.getNodes().stream()
        .filter(e -> e.getPhase() == ArtifactPhase.Ready && ready.contains(e.getNode()))
        .sorted(
            java.util.Comparator.comparing(
                    (io.tensorcast.api.v1alpha1.ArtifactNodeStatus e) -> instant(e.getReadyTime()))
                .thenComparing(io.tensorcast.api.v1alpha1.ArtifactNodeStatus::getNode))
        .map(io.tensorcast.api.v1alpha1.ArtifactNodeStatus::getNode)
        .distinct()
        .toList();
  }

  private static java.time.Instant instant(String time) {
    try {
      return time == null ? java.time.Instant.MAX : java.time.Instant.parse(time);
    } catch (java.time.format.DateTimeParseException e) {
      return java.time.Instant.MAX;
    }
  }

  /**
   * Memory requested per node by the data-plane pods of every other artifact, by artifact ({@code
   * namespace/name}).
   */
  private Map<String, Map<String, Long>> committedByOthers(ModelArtifact artifact) {
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
            Collectors.groupingBy(
                PodPlan::node,
                Collectors.groupingBy(
                    p ->
                        p.getMetadata().getNamespace()
                            + "/"
                            + p.getMetadata().getLabels().get(TensorcastConstants.LABEL_ARTIFACT),
                    Collectors.summingLong(PodPlan::memoryRequest))));
  }

  /** One pod on the first chosen node while the size is unknown; one per chosen node after. */
  List<Pod> desiredPods(
      ModelArtifact artifact, NodeSelection.Result selection, Optional<Resolution> resolution) {
    OptionalLong size =
        resolution.map(r -> OptionalLong.of(r.totalBytes())).orElse(OptionalLong.empty());
    return selection.chosen().stream()
        .limit(resolution.isPresent() ? Long.MAX_VALUE : 1)
        .map(node -> DataPlanePod.desired(artifact, node, size, config, masterKey.id()))
        .toList();
  }

  private UpdateControl<ModelArtifact> fail(
      ModelArtifact artifact,
      Context<ModelArtifact> context,
      List<Pod> pods,
      Failure failure,
      Optional<Resolution> resolution,
      List<Consumer> consumers,
      Outcome outcome) {
    FailureRetry.Plan retry = retryPlan(artifact, outcome, Optional.of(failure));
    failure = retry.failure().orElseThrow();
    peers.forget(id(artifact));
    ConsumerHold hold = ConsumerHold.apply(PodPlan.deleteAll(pods), consumers);
    apply(hold.plan(), context.getClient());
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
    retry.fill(status);
    ConsumerStatus.apply(
        status,
        previousConditions(artifact),
        CopyGeneration.metadataGeneration(artifact),
        consumers,
        hold.held(),
        false,
        clock.instant());
    labelReadyNodes(artifact, List.of(), context.getClient());
    UpdateControl<ModelArtifact> control = patchIfChanged(artifact, status, context);
    Optional<java.time.Instant> retryAt = FailureRetry.nextRetry(status);
    if (retryAt.isPresent()) {
      Duration wait = Duration.between(clock.instant(), retryAt.get());
      return control.rescheduleAfter(
          wait.compareTo(Duration.ofSeconds(1)) < 0 ? Duration.ofSeconds(1) : wait);
    }
    // Memory fit is checked again on a timer: nodes may grow without a node event we filter in;
    // a name conflict likewise, since the operator does not watch Secrets or NetworkPolicies.
    return Reason.InsufficientMemory.name().equals(failure.reason())
            || Reason.NameConflict.name().equals(failure.reason())
        ? control.rescheduleAfter(config.readyResync())
        : control;
  }

  private FailureRetry.Plan retryPlan(
      ModelArtifact artifact, Outcome outcome, Optional<Failure> failure) {
    return FailureRetry.plan(
        artifact,
        CopyGeneration.of(artifact).generation(),
        outcome,
        failure,
        clock.instant(),
        config.retryInitial(),
        config.retryMax());
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
        status.getProgress() == null ? "-" : status.getProgress());
    ModelArtifact fresh = new ModelArtifact();
    fresh.setMetadata(
        new ObjectMetaBuilder()
            .withName(artifact.getMetadata().getName())
            .withNamespace(artifact.getMetadata().getNamespace())
            .build());
    fresh.setSpec(null);
    fresh.setStatus(status);
    PrimaryUpdateAndCacheUtils.ssaPatchStatusAndCacheResource(artifact, fresh, context);
    for (StatusEvents.StatusEvent e :
        StatusEvents.of(
            artifact.getStatus() == null ? null : artifact.getStatus().getPhase(),
            artifact.getStatus() == null ? null : artifact.getStatus().getConditions(),
            status.getPhase(),
            status.getConditions())) {
      events.record(context.getClient(), artifact, e);
    }
    OperatorMetrics.readyTransition(
        registry,
        artifact,
        artifact.getStatus() == null ? null : artifact.getStatus().getPhase(),
        artifact.getStatus() == null ? null : artifact.getStatus().getConditions(),
        status.getPhase(),
        clock.instant());
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
