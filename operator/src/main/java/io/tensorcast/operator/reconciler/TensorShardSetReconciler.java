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
import io.tensorcast.api.Reason;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.Conditions;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ShardPlacementSpec;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.api.v1alpha1.TensorShardSet;
import io.tensorcast.api.v1alpha1.TensorShardSetStatus;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.Membership;
import io.tensorcast.operator.config.OperatorConfig;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.operator.desired.PodPlan;
import io.tensorcast.operator.desired.RankPlacement;
import io.tensorcast.operator.desired.ShardSetChildren;
import io.tensorcast.operator.desired.ShardSetPod;
import io.tensorcast.operator.events.EventRecorder;
import io.tensorcast.operator.events.StatusEvents;
import io.tensorcast.operator.metrics.OperatorMetrics;
import io.tensorcast.operator.peers.PeerMembers;
import io.tensorcast.operator.status.DataPlaneClient;
import io.tensorcast.operator.status.ShardSetStatusAggregator;
import io.tensorcast.operator.status.ShardSetStatusAggregator.Resolution;
import io.tensorcast.operator.status.StatusAggregator.Failure;
import io.tensorcast.operator.trust.ArtifactKeys;
import io.tensorcast.operator.trust.MasterKey;
import io.tensorcast.operator.validation.ShardSetValidator;
import io.tensorcast.operator.validation.SpecValidator;
import io.tensorcast.operator.validation.Violation;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
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
 * Reconciles a TensorShardSet onto data-plane pods, one per node holding ranks, and reports per
 * rank in its status. One pass: observe (the set's pods, nodes, its ModelArtifact and that
 * artifact's pods, consumer pods) → validate the spec → wait for the ModelArtifact to be Ready
 * (saying so) → poll the pods' {@code /status} → learn the plan of this generation (per-rank sizes)
 * → place the ranks on nodes ({@link RankPlacement}) → reconcile pods ({@link ShardSetPod}, {@link
 * PodPlan}), the set's own Secret and NetworkPolicy in place first ({@link ShardSetChildren}) →
 * tell the pods which ModelArtifact copies they may read from ({@code PUT /v1/peers}) → aggregate
 * the status → patch it if it changed.
 *
 * <p>Sizes first, as for a ModelArtifact: until one pod has resolved the plan only the pod of the
 * first block of ranks runs, with the overhead (or {@code spec.memory.limit}) as its memory; it
 * resolves the source, checks the rules against every rank and reports every rank's size. From then
 * on each pod asks for its node's rank files plus the overhead, and a node must have that much
 * allocatable memory. A misfit of rules and tensors fails the generation with the data plane's
 * reason before any byte is stored. Changing {@code spec.parallelism} (or anything else) makes a
 * new generation: new pods, new rank files; the old pods and their memory go.
 */
@ControllerConfiguration(
    name = TensorShardSetReconciler.NAME,
    finalizerName = TensorcastConstants.FINALIZER)
public class TensorShardSetReconciler
    implements Reconciler<TensorShardSet>, Cleaner<TensorShardSet> {
  private static final Logger log = LoggerFactory.getLogger(TensorShardSetReconciler.class);

  /** Controller name; also the field manager of the status writes. */
  public static final String NAME = "tensorshardset";

  private final OperatorConfig config;
  private final MasterKey masterKey;
  private final ArtifactObjects objects;
  private final DataPlaneClient dataPlane;
  private final Clock clock;
  private final EventRecorder events;
  private final MeterRegistry registry;
  private volatile InformerEventSource<Pod, TensorShardSet> pods;
  private volatile InformerEventSource<Node, TensorShardSet> nodes;
  private volatile InformerEventSource<ModelArtifact, TensorShardSet> artifacts;

  /**
   * @param config operator settings
   * @param masterKey the key every set's Secret values are derived from
   */
  public TensorShardSetReconciler(OperatorConfig config, MasterKey masterKey) {
    this(config, masterKey, new SimpleMeterRegistry());
  }

  /**
   * @param registry where the time-to-Ready histogram goes ({@link OperatorMetrics})
   */
  public TensorShardSetReconciler(
      OperatorConfig config, MasterKey masterKey, MeterRegistry registry) {
    this(
        config,
        masterKey,
        new DataPlaneClient(config.controlPort(), config.statusTimeout()),
        Clock.systemUTC(),
        registry);
  }

  public TensorShardSetReconciler(
      OperatorConfig config, MasterKey masterKey, DataPlaneClient dataPlane, Clock clock) {
    this(config, masterKey, dataPlane, clock, new SimpleMeterRegistry());
  }

  public TensorShardSetReconciler(
      OperatorConfig config,
      MasterKey masterKey,
      DataPlaneClient dataPlane,
      Clock clock,
      MeterRegistry registry) {
    this.registry = Objects.requireNonNull(registry, "registry");
    this.config = Objects.requireNonNull(config, "config");
    this.masterKey = Objects.requireNonNull(masterKey, "masterKey");
    this.objects = new ArtifactObjects(config);
    this.dataPlane = Objects.requireNonNull(dataPlane, "dataPlane");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.events = new EventRecorder(clock);
  }

  @Override
  public List<EventSource<?, TensorShardSet>> prepareEventSources(
      EventSourceContext<TensorShardSet> context) {
    InformerEventSource<Pod, TensorShardSet> podSource =
        EventSources.pods(
            "shard-set-pods", TensorShardSet.class, context, null, (Pod p) -> setsOf(p, context));
    InformerEventSource<Node, TensorShardSet> nodeSource =
        EventSources.nodes("shard-set-nodes", TensorShardSet.class, context);
    InformerEventSource<ModelArtifact, TensorShardSet> artifactSource =
        new InformerEventSource<>(
            InformerEventSourceConfiguration.from(ModelArtifact.class, TensorShardSet.class)
                .withName("shard-set-artifacts")
                .withSecondaryToPrimaryMapper(
                    (ModelArtifact a) ->
                        context
                            .getPrimaryCache()
                            .list(
                                s ->
                                    s.getMetadata()
                                            .getNamespace()
                                            .equals(a.getMetadata().getNamespace())
                                        && s.getSpec() != null
                                        && s.getSpec().getArtifactRef() != null
                                        && a.getMetadata()
                                            .getName()
                                            .equals(s.getSpec().getArtifactRef().getName()))
                            .map(ResourceID::fromResource)
                            .collect(Collectors.toSet()))
                .build(),
            context);
    this.pods = podSource;
    this.nodes = nodeSource;
    this.artifacts = artifactSource;
    return List.of(podSource, nodeSource, artifactSource);
  }

  /** The sets a pod concerns: its own set, sets reading its ModelArtifact, sets it places. */
  private static Set<ResourceID> setsOf(Pod p, EventSourceContext<TensorShardSet> context) {
    Map<String, String> labels =
        p.getMetadata().getLabels() == null ? Map.of() : p.getMetadata().getLabels();
    String ns = p.getMetadata().getNamespace();
    String own = labels.get(ShardSetPod.LABEL_SHARD_SET);
    if (own != null) {
      return Set.of(new ResourceID(own, ns));
    }
    String artifact = labels.get(TensorcastConstants.LABEL_ARTIFACT);
    return context
        .getPrimaryCache()
        .list(
            s ->
                s.getMetadata().getNamespace().equals(ns)
                    && s.getSpec() != null
                    && (artifact != null
                            && s.getSpec().getArtifactRef() != null
                            && artifact.equals(s.getSpec().getArtifactRef().getName())
                        || consumerOf(s, labels)))
        .map(ResourceID::fromResource)
        .collect(Collectors.toSet());
  }

  private static boolean consumerOf(TensorShardSet s, Map<String, String> labels) {
    ShardPlacementSpec p = s.getSpec().getPlacement();
    if (p == null || p.getConsumers() == null || p.getConsumers().getMatchLabels() == null) {
      return false;
    }
    Map<String, String> want = p.getConsumers().getMatchLabels();
    return !want.isEmpty()
        && want.entrySet().stream().allMatch(e -> e.getValue().equals(labels.get(e.getKey())));
  }

  @Override
  public UpdateControl<TensorShardSet> reconcile(
      TensorShardSet set, Context<TensorShardSet> context) {
    KubernetesClient client = context.getClient();
    List<Pod> own = ownPods(set);

    List<Violation> violations =
        ShardSetValidator.validate(set, io.tensorcast.operator.validation.SourcePolicy.of(config));
    if (!violations.isEmpty()) {
      return fail(
          set,
          context,
          own,
          new Failure(Reason.InvalidSpec, SpecValidator.describe(violations), true));
    }
    Optional<Failure> recorded = ShardSetStatusAggregator.recordedFailure(set);
    if (recorded.isPresent()) {
      return fail(set, context, own, recorded.get());
    }

    // The source: the set's own, or its ModelArtifact's once that is Ready.
    SourceSpec source = set.getSpec().getSource();
    String revision = null;
    List<Pod> copies = List.of();
    if (set.getSpec().getArtifactRef() != null) {
      String name = set.getSpec().getArtifactRef().getName();
      ModelArtifact a =
          artifacts == null
              ? null
              : artifacts.get(new ResourceID(name, set.getMetadata().getNamespace())).orElse(null);
      Optional<Failure> wait = artifactWait(set, a);
      if (wait.isPresent()) {
        return waitFor(set, context, own, wait.get());
      }
      source = a.getSpec().getSource();
      revision = a.getStatus().getResolvedRevision();
      copies = copiesOf(a);
    }

    List<Pod> current = currentPods(set, own);
    ArtifactKeys keys =
        ArtifactKeys.derive(
            masterKey,
            set,
            set.getMetadata().getGeneration() == null ? 1 : set.getMetadata().getGeneration());
    Map<String, DataPlaneStatus> reports = dataPlane.poll(current, keys.adminToken());
    Optional<Resolution> resolution = ShardSetStatusAggregator.resolution(set, current, reports);
    Optional<Failure> podFailure =
        ShardSetStatusAggregator.podFailure(
            current, reports, resolution, config.memoryOverheadBytes());
    if (podFailure.isPresent()) {
      return fail(set, context, own, podFailure.get());
    }

    RankPlacement.Result placement = place(set, own, resolution);
    if (resolution.isPresent()
        && placement.slots().isEmpty()
        && Reason.InsufficientMemory.equals(placement.reason())) {
      // Keep the resolution in the status: without it the next pass would start a resolver pod
      // again, read the same sizes, fail again and delete it (a loop every ~100 ms). With it, the
      // set waits for its spec or its nodes to change.
      return fail(
              set,
              context,
              own,
              new Failure(Reason.InsufficientMemory, placement.message(), false),
              resolution)
          .rescheduleAfter(config.readyResync());
    }
    boolean readsCopies = set.getSpec().getArtifactRef() != null;
    List<Pod> desired = new ArrayList<>();
    for (RankPlacement.Slot slot : placement.slots()) {
      if (resolution.isEmpty() && !desired.isEmpty()) {
        break; // sizes first: one pod resolves the plan
      }
      OptionalLong bytes =
          slot.bytes().isPresent() ? OptionalLong.of(slot.bytes().get()) : OptionalLong.empty();
      desired.add(
          ShardSetPod.desired(
              set,
              source,
              revision,
              readsCopies,
              slot.node(),
              slot.ranks(),
              bytes,
              config,
              masterKey.id()));
    }
    PodPlan plan = PodPlan.plan(desired, own);
    Optional<String> conflict =
        objects.ensure(
            client,
            set,
            ShardSetChildren.secret(set, keys),
            config.networkPolicy() ? ShardSetChildren.networkPolicy(set, config) : null,
            !plan.create().isEmpty());
    if (conflict.isPresent()) {
      return fail(set, context, own, new Failure(Reason.NameConflict, conflict.get(), false));
    }
    apply(plan, client);
    boolean copiesSettled = sendCopies(plan, reports, copies, keys.adminToken());

    TensorShardSetStatus status =
        ShardSetStatusAggregator.aggregate(
            new ShardSetStatusAggregator.Input(
                set,
                current,
                reports,
                plan.keep().values().stream()
                    .map(p -> p.getMetadata().getName())
                    .collect(Collectors.toSet()),
                resolution,
                placement,
                Optional.empty(),
                Optional.empty(),
                clock.instant()));
    Duration next =
        status.getPhase() == ArtifactPhase.Ready && plan.settled() && copiesSettled
            ? config.readyResync()
            : config.pollInterval();
    return patchIfChanged(set, status, context).rescheduleAfter(next);
  }

  /** Why the set waits for its ModelArtifact, or empty when the artifact is Ready. */
  static Optional<Failure> artifactWait(TensorShardSet set, ModelArtifact a) {
    String name = set.getSpec().getArtifactRef().getName();
    String ns = set.getMetadata().getNamespace();
    if (a == null) {
      return Optional.of(
          new Failure(
              Reason.ArtifactNotFound,
              "ModelArtifact "
                  + ns
                  + "/"
                  + name
                  + " does not exist; waiting for it (create it, or fix spec.artifactRef.name)",
              true));
    }
    long generation = a.getMetadata().getGeneration() == null ? 1 : a.getMetadata().getGeneration();
    var s = a.getStatus();
    if (s != null && s.getPhase() == ArtifactPhase.Failed) {
      var ready =
          s.getConditions().stream().filter(c -> Conditions.READY.equals(c.getType())).findFirst();
      return Optional.of(
          new Failure(
              Reason.ArtifactFailed,
              "ModelArtifact "
                  + ns
                  + "/"
                  + name
                  + " failed"
                  + ready.map(c -> " (" + c.getReason() + ": " + c.getMessage() + ")").orElse("")
                  + "; the set waits until a fixed generation of it is Ready",
              true));
    }
    if (s == null
        || s.getPhase() != ArtifactPhase.Ready
        || s.getObservedGeneration() == null
        || s.getObservedGeneration() != generation) {
      return Optional.of(
          new Failure(
              Reason.ArtifactNotReady,
              "ModelArtifact "
                  + ns
                  + "/"
                  + name
                  + " is "
                  + (s == null || s.getPhase() == null ? "Pending" : s.getPhase())
                  + (s == null || s.getProgress() == null ? "" : " (" + s.getProgress() + ")")
                  + "; waiting until it is Ready",
              true));
    }
    return Optional.empty();
  }

  /** The artifact's Running pods of its current generation on nodes where its copy is Ready. */
  private List<Pod> copiesOf(ModelArtifact a) {
    if (pods == null) {
      return List.of();
    }
    Set<String> readyNodes =
        new HashSet<>(
            a.getStatus().getReadyNodes() == null ? List.of() : a.getStatus().getReadyNodes());
    String g = Long.toString(DataPlanePod.generation(a));
    return pods.list(
            a.getMetadata().getNamespace(),
            p ->
                a.getMetadata()
                        .getName()
                        .equals(
                            p.getMetadata().getLabels() == null
                                ? null
                                : p.getMetadata()
                                    .getLabels()
                                    .get(TensorcastConstants.LABEL_ARTIFACT))
                    && g.equals(p.getMetadata().getLabels().get(DataPlanePod.LABEL_GENERATION))
                    && readyNodes.contains(PodPlan.node(p))
                    && PeerMembers.isMember(p))
        .toList();
  }

  /**
   * Sends the ModelArtifact copies (their control endpoints) as the membership of {@code PUT
   * /v1/peers} to each kept pod that has not applied it yet, with the set's admin token.
   *
   * @return whether every kept pod has applied it
   */
  private boolean sendCopies(
      PodPlan plan, Map<String, DataPlaneStatus> reports, List<Pod> copies, String adminToken) {
    if (copies.isEmpty() || plan.keep().isEmpty()) {
      return true;
    }
    Membership m = PeerMembers.of(copies, config.controlPort());
    List<Pod> targets =
        plan.keep().values().stream()
            .filter(PeerMembers::isMember)
            .filter(
                p -> {
                  DataPlaneStatus r = reports.get(p.getMetadata().getName());
                  return r == null || !m.epoch().equals(r.peerEpoch());
                })
            .toList();
    if (targets.isEmpty()) {
      return true;
    }
    return dataPlane.putPeers(targets, m, adminToken).size() == targets.size();
  }

  private RankPlacement.Result place(
      TensorShardSet set, List<Pod> own, Optional<Resolution> resolution) {
    ShardPlacementSpec placement =
        set.getSpec().getPlacement() == null
            ? new ShardPlacementSpec()
            : set.getSpec().getPlacement();
    List<Pod> consumers =
        placement.getConsumers() == null || pods == null
            ? List.of()
            : pods.list(
                    set.getMetadata().getNamespace(),
                    p ->
                        consumerOf(
                            set,
                            p.getMetadata().getLabels() == null
                                ? Map.of()
                                : p.getMetadata().getLabels()))
                .toList();
    long overhead = config.memoryOverheadBytes();
    long unresolved =
        set.getSpec().getMemory() != null && set.getSpec().getMemory().getLimit() != null
            ? io.tensorcast.operator.desired.ByteSize.bytes(set.getSpec().getMemory().getLimit())
                + overhead
            : overhead;
    return RankPlacement.place(
        placement,
        ShardSetStatusAggregator.world(set),
        nodes == null ? List.of() : nodes.list(n -> true).toList(),
        consumers,
        resolution.map(Resolution::fileBytes),
        overhead,
        unresolved,
        currentPods(set, own).stream()
            .collect(Collectors.toMap(PodPlan::node, ShardSetPod::ranks, (a, b) -> a)),
        committedByOthers(set));
  }

  /**
   * Memory requested per node by every other data-plane pod (artifacts' and sets'), by artifact or
   * set ({@code namespace/name}).
   */
  private Map<String, Map<String, Long>> committedByOthers(TensorShardSet set) {
    if (pods == null) {
      return Map.of();
    }
    String ns = set.getMetadata().getNamespace();
    String name = set.getMetadata().getName();
    return pods.list(
            p -> {
              Map<String, String> l = p.getMetadata().getLabels();
              if (l == null
                  || !TensorcastConstants.LABEL_MANAGED_BY_OPERATOR.equals(
                      l.get(TensorcastConstants.LABEL_MANAGED_BY))) {
                return false;
              }
              boolean mine =
                  ns.equals(p.getMetadata().getNamespace())
                      && name.equals(l.get(ShardSetPod.LABEL_SHARD_SET));
              return !mine && !PodPlan.node(p).isEmpty() && !PodPlan.terminating(p);
            })
        .collect(
            Collectors.groupingBy(
                PodPlan::node,
                Collectors.groupingBy(
                    TensorShardSetReconciler::holder,
                    Collectors.summingLong(PodPlan::memoryRequest))));
  }

  /** {@code namespace/name} of the ModelArtifact or TensorShardSet a data-plane pod belongs to. */
  private static String holder(Pod p) {
    Map<String, String> l = p.getMetadata().getLabels();
    String set = l.get(ShardSetPod.LABEL_SHARD_SET);
    return p.getMetadata().getNamespace()
        + "/"
        + (set != null ? set : l.get(TensorcastConstants.LABEL_ARTIFACT));
  }

  @Override
  public DeleteControl cleanup(TensorShardSet set, Context<TensorShardSet> context) {
    KubernetesClient client = context.getClient();
    List<Pod> left =
        client
            .pods()
            .inNamespace(set.getMetadata().getNamespace())
            .withLabel(ShardSetPod.LABEL_SHARD_SET, set.getMetadata().getName())
            .list()
            .getItems();
    if (left.isEmpty()) {
      objects.forget(set.getMetadata().getNamespace() + "/" + set.getMetadata().getName());
      log.info("{}: every data-plane pod is gone; removing the finalizer", id(set));
      return DeleteControl.defaultDelete();
    }
    apply(PodPlan.deleteAll(left), client);
    log.info("{}: waiting for {} data-plane pod(s) to go away", id(set), left.size());
    return DeleteControl.noFinalizerRemoval().rescheduleAfter(1000);
  }

  private List<Pod> ownPods(TensorShardSet set) {
    if (pods == null) {
      return List.of();
    }
    return pods.list(
            set.getMetadata().getNamespace(),
            p ->
                p.getMetadata().getLabels() != null
                    && set.getMetadata()
                        .getName()
                        .equals(p.getMetadata().getLabels().get(ShardSetPod.LABEL_SHARD_SET)))
        .toList();
  }

  private static List<Pod> currentPods(TensorShardSet set, List<Pod> pods) {
    String g = Long.toString(ShardSetPod.generation(set));
    return pods.stream()
        .filter(p -> !PodPlan.terminating(p))
        .filter(p -> g.equals(p.getMetadata().getLabels().get(DataPlanePod.LABEL_GENERATION)))
        .toList();
  }

  private UpdateControl<TensorShardSet> fail(
      TensorShardSet set, Context<TensorShardSet> context, List<Pod> own, Failure failure) {
    return fail(
        set, context, own, failure, ShardSetStatusAggregator.resolution(set, List.of(), Map.of()));
  }

  /** Deletes the set's pods and records the failure, with the sizes resolved so far. */
  private UpdateControl<TensorShardSet> fail(
      TensorShardSet set,
      Context<TensorShardSet> context,
      List<Pod> own,
      Failure failure,
      Optional<Resolution> resolution) {
    apply(PodPlan.deleteAll(own), context.getClient());
    TensorShardSetStatus status =
        ShardSetStatusAggregator.aggregate(
            new ShardSetStatusAggregator.Input(
                set,
                List.of(),
                Map.of(),
                Set.of(),
                resolution,
                null,
                Optional.of(failure),
                Optional.empty(),
                clock.instant()));
    return patchIfChanged(set, status, context);
  }

  private UpdateControl<TensorShardSet> waitFor(
      TensorShardSet set, Context<TensorShardSet> context, List<Pod> own, Failure why) {
    TensorShardSetStatus status =
        ShardSetStatusAggregator.aggregate(
            new ShardSetStatusAggregator.Input(
                set,
                List.of(),
                Map.of(),
                Set.of(),
                Optional.empty(),
                null,
                Optional.empty(),
                Optional.of(why),
                clock.instant()));
    return patchIfChanged(set, status, context).rescheduleAfter(config.readyResync());
  }

  private UpdateControl<TensorShardSet> patchIfChanged(
      TensorShardSet set, TensorShardSetStatus status, Context<TensorShardSet> context) {
    if (Objects.equals(set.getStatus(), status)) {
      return UpdateControl.noUpdate();
    }
    log.info(
        "{}: status {} ranks {} size/rank {}",
        id(set),
        status.getPhase(),
        status.getRanksReady(),
        status.getSizePerRank());
    TensorShardSet fresh = new TensorShardSet();
    fresh.setMetadata(
        new ObjectMetaBuilder()
            .withName(set.getMetadata().getName())
            .withNamespace(set.getMetadata().getNamespace())
            .build());
    fresh.setSpec(null);
    fresh.setStatus(status);
    PrimaryUpdateAndCacheUtils.ssaPatchStatusAndCacheResource(set, fresh, context);
    for (StatusEvents.StatusEvent e :
        StatusEvents.of(
            set.getStatus() == null ? null : set.getStatus().getPhase(),
            set.getStatus() == null ? null : set.getStatus().getConditions(),
            status.getPhase(),
            status.getConditions())) {
      events.record(context.getClient(), set, e);
    }
    OperatorMetrics.readyTransition(
        registry,
        set,
        set.getStatus() == null ? null : set.getStatus().getPhase(),
        set.getStatus() == null ? null : set.getStatus().getConditions(),
        status.getPhase(),
        clock.instant());
    return UpdateControl.noUpdate();
  }

  private static void apply(PodPlan plan, KubernetesClient client) {
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
            "created pod {}/{} for node {} (ranks {})",
            p.getMetadata().getNamespace(),
            p.getMetadata().getName(),
            PodPlan.node(p),
            ShardSetPod.ranks(p));
      } catch (KubernetesClientException e) {
        if (e.getCode() != 409) {
          throw e;
        }
      }
    }
  }

  private static String id(TensorShardSet s) {
    return s.getMetadata().getNamespace() + "/" + s.getMetadata().getName();
  }
}
