package io.tensorcast.operator.status;

import static io.tensorcast.api.v1alpha1.Conditions.DEGRADED;
import static io.tensorcast.api.v1alpha1.Conditions.FALSE;
import static io.tensorcast.api.v1alpha1.Conditions.LOADED;
import static io.tensorcast.api.v1alpha1.Conditions.READY;
import static io.tensorcast.api.v1alpha1.Conditions.RESOLVED;
import static io.tensorcast.api.v1alpha1.Conditions.SCHEDULED;
import static io.tensorcast.api.v1alpha1.Conditions.STALLED;
import static io.tensorcast.api.v1alpha1.Conditions.TRUE;

import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.ContainerStateTerminated;
import io.fabric8.kubernetes.api.model.ContainerStatus;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.tensorcast.api.Reason;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactNodeStatus;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ArtifactVerification;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.operator.desired.ByteSize;
import io.tensorcast.operator.desired.CopyGeneration;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.operator.desired.NodeSelection;
import io.tensorcast.operator.desired.PodPlan;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * Turns what the operator observed — the artifact's pods, what each pod reported on {@code GET
 * /status}, the node selection and any failure — into the ModelArtifact's status. Pure and
 * deterministic: the same observations and previous status give an equal status, so in steady state
 * the operator writes nothing. This class owns the conditions.
 *
 * <p>Phase: {@code Failed} on a failure (invalid spec, no node with enough memory, a pod reporting
 * {@code Failed}); {@code Ready} when {@code replicas} up-to-date pods of the current generation
 * report {@code Ready}; {@code Loading} once the size is resolved; {@code Resolving} while a pod
 * runs but the size is unknown; {@code Pending} otherwise.
 *
 * <p>Numbers come only from pods' reports: {@code progress} is the bytes up-to-date pods report as
 * loaded (each capped at {@code totalBytes}) over {@code replicas × totalBytes}, rounded down;
 * {@code bytesFromSource} is the sum of the current generation's node entries' {@code
 * bytesFromSource} (absent when no entry has one), {@code bytesFromSourceOnWire} likewise of their
 * {@code bytesFromSourceOnWire} (every byte received from the source, what faults cost included).
 * When a pod cannot be reached for one round, its last entry is kept while the pod is still
 * running.
 *
 * <p>A pod waiting to load again after a transient source failure reports {@code Pending} with the
 * failure's reason ({@code SourceUnavailable}, {@code Throttled}) and a message ending in {@code ";
 * retrying in 40s (attempt 3)"}. That is not a failure: the artifact keeps its phase, and the
 * reason goes on the {@code Ready=False} condition (on {@code Resolved=False} too before the size
 * is known) and the pod's node entry, with the message {@linkplain
 * DataPlaneStatus#withoutRetryCountdown without its countdown}, so the status changes once per
 * attempt, not on every poll.
 */
public final class StatusAggregator {

  private StatusAggregator() {}

  /**
   * What the source resolved to for one generation.
   *
   * @param totalBytes size of one copy, bytes
   * @param files number of files
   * @param tensors number of tensors in safetensors headers
   * @param revision resolved revision, or null
   */
  public record Resolution(long totalBytes, int files, long tensors, String revision) {}

  /**
   * Why an artifact's generation failed.
   *
   * @param reason CamelCase reason, e.g. {@code BucketNotFound}, {@code InvalidSpec}
   * @param message for people: names the node, file, field or numbers
   * @param beforeResolve whether the failure happened before the source was resolved
   * @param retry when the operator loads the artifact again by itself, for people (e.g. {@code
   *     loading again at 2026-12-01T22:00:30Z, attempt 2}), or null when only a spec change helps
   *     ({@code Stalled=True})
   */
  public record Failure(String reason, String message, boolean beforeResolve, String retry) {
    /** A failure that only a spec change (or a new retry request) gets past. */
    public Failure(String reason, String message, boolean beforeResolve) {
      this(reason, message, beforeResolve, null);
    }

    /** A failure the operator found itself. */
    public Failure(Reason reason, String message, boolean beforeResolve) {
      this(reason.name(), message, beforeResolve, null);
    }

    /** This failure, retried by the operator as {@code retry} says. */
    public Failure retrying(String retry) {
      return new Failure(reason, message, beforeResolve, retry);
    }
  }

  /**
   * Everything one reconcile observed.
   *
   * @param artifact the ModelArtifact (generation, spec, previous status)
   * @param pods the artifact's pods, all generations
   * @param reports this round's reports by pod name (absent: pod not reachable or not asked)
   * @param upToDate names of the pods that stand for desired pods (kept by the plan)
   * @param resolution the size etc. for this generation, if known
   * @param selection the node selection, or null when none was made (invalid spec)
   * @param failure the failure of this generation, if any
   * @param now time of this reconcile (used only for changed conditions)
   */
  public record Input(
      ModelArtifact artifact,
      List<Pod> pods,
      Map<String, DataPlaneStatus> reports,
      Set<String> upToDate,
      Optional<Resolution> resolution,
      NodeSelection.Result selection,
      Optional<Failure> failure,
      Instant now) {}

  /**
   * The size of the current generation: from the previous status when its {@code Resolved}
   * condition is {@code True} for this generation, else from the first pod (by name) of this
   * generation whose report lists files.
   */
  public static Optional<Resolution> resolution(
      ModelArtifact artifact, Collection<Pod> pods, Map<String, DataPlaneStatus> reports) {
    long generation = DataPlanePod.generation(artifact);
    ModelArtifactStatus old = artifact.getStatus();
    Condition resolved = old == null ? null : ConditionSet.find(old.getConditions(), RESOLVED);
    if (old != null
        && old.getTotalBytes() != null
        && resolved != null
        && TRUE.equals(resolved.getStatus())
        && CopyGeneration.recorded(old).orElse(-1) == generation) {
      return Optional.of(
          new Resolution(
              old.getTotalBytes(),
              old.getFiles() == null ? 0 : old.getFiles(),
              old.getTensors() == null ? 0 : old.getTensors(),
              old.getResolvedRevision()));
    }
    return currentPods(pods, generation).stream()
        .map(p -> report(p, reports))
        .filter(r -> r != null && r.files() > 0)
        .findFirst()
        .map(r -> new Resolution(r.bytesTotal(), r.files(), r.tensors(), r.resolvedRevision()));
  }

  /**
   * The failure a pod of this generation reports, if any: the first (by pod name) report with phase
   * {@code Failed}, except a pod that ran out of memory while asking for less than the resolved
   * size plus {@code overheadBytes} (the resolving pod, which is replaced by a sized one).
   */
  public static Optional<Failure> podFailure(
      ModelArtifact artifact,
      Collection<Pod> pods,
      Map<String, DataPlaneStatus> reports,
      Optional<Resolution> resolution,
      long overheadBytes) {
    long generation = DataPlanePod.generation(artifact);
    for (Pod p : currentPods(pods, generation)) {
      DataPlaneStatus r = report(p, reports);
      if (r == null || r.phase() != DataPlaneStatus.Phase.Failed) {
        continue;
      }
      if (Reason.InsufficientMemory.name().equals(r.reason())
          && resolution.isPresent()
          && PodPlan.memoryRequest(p) < resolution.get().totalBytes() + overheadBytes) {
        continue;
      }
      String reason =
          r.reason() == null || r.reason().isEmpty() ? Reason.LoadFailed.name() : r.reason();
      String message =
          "node "
              + PodPlan.node(p)
              + " (pod "
              + p.getMetadata().getName()
              + "): "
              + (r.message() == null ? reason : r.message());
      return Optional.of(new Failure(reason, message, r.files() == 0));
    }
    return Optional.empty();
  }

  /**
   * The failure recorded for this generation by an earlier reconcile that a pod reported (pods are
   * removed after such a failure, so the status remembers it until the spec changes). Failures the
   * operator computes itself (invalid spec, memory, a name conflict) are not remembered: they are
   * checked anew.
   */
  public static Optional<Failure> recordedFailure(ModelArtifact artifact) {
    ModelArtifactStatus old = artifact.getStatus();
    long generation = DataPlanePod.generation(artifact);
    if (old == null
        || old.getPhase() != ArtifactPhase.Failed
        || CopyGeneration.recorded(old).orElse(-1) != generation) {
      return Optional.empty();
    }
    Condition ready = ConditionSet.find(old.getConditions(), READY);
    if (ready == null
        || Reason.InvalidSpec.name().equals(ready.getReason())
        || Reason.InsufficientMemory.name().equals(ready.getReason())
        || Reason.NameConflict.name().equals(ready.getReason())) {
      return Optional.empty();
    }
    Condition resolved = ConditionSet.find(old.getConditions(), RESOLVED);
    boolean beforeResolve = resolved == null || !TRUE.equals(resolved.getStatus());
    return Optional.of(new Failure(ready.getReason(), ready.getMessage(), beforeResolve));
  }

  /**
   * Whether {@code reason} says a file's structure (header, checkpoint, index, path) is broken: the
   * artifact did not resolve, even when the data plane had reported the listing (it reads the bytes
   * while the headers are validated, so its report can come first).
   */
  static boolean brokenStructure(String reason) {
    return Reason.InvalidArtifact.name().equals(reason)
        || Reason.InvalidSafetensors.name().equals(reason)
        || Reason.InvalidTorchCheckpoint.name().equals(reason)
        || Reason.InvalidIndex.name().equals(reason)
        || Reason.UnsafePath.name().equals(reason);
  }

  /** The status for {@code in}. */
  public static ModelArtifactStatus aggregate(Input in) {
    ModelArtifact artifact = in.artifact();
    CopyGeneration copy = CopyGeneration.of(artifact);
    long observed = CopyGeneration.metadataGeneration(artifact);
    int replicas = replicas(artifact);
    ModelArtifactStatus old = artifact.getStatus();
    List<Condition> oldConditions = old == null ? List.of() : old.getConditions();
    Optional<Resolution> res = in.resolution();
    List<Pod> current = currentPods(in.pods(), copy.generation());

    ModelArtifactStatus s = new ModelArtifactStatus();
    s.setObservedGeneration(observed);
    s.setCopyGeneration(copy.generation());
    s.setSpecDigest(copy.specDigest());
    s.setSelector(selector(artifact));
    s.setReplicas(replicas);
    res.ifPresent(
        r -> {
          s.setTotalBytes(r.totalBytes());
          s.setSize(ByteSize.human(r.totalBytes()));
          s.setFiles(r.files());
          s.setTensors(Math.toIntExact(Math.min(Integer.MAX_VALUE, r.tensors())));
          s.setResolvedRevision(r.revision());
        });

    List<ArtifactNodeStatus> entries = new ArrayList<>();
    int ready = 0;
    long loaded = 0;
    Optional<PodTrouble> trouble = Optional.empty();
    if (in.failure().isEmpty()) {
      for (Pod p : current) {
        Optional<PodTrouble> t = trouble(p, in.selection());
        ArtifactNodeStatus e = entry(p, report(p, in.reports()), previous(old, p), res, t);
        entries.add(e);
        boolean upToDate = in.upToDate().contains(p.getMetadata().getName());
        if (upToDate && e.getPhase() == ArtifactPhase.Ready) {
          ready++;
        }
        if (upToDate && res.isPresent() && e.getBytesLoaded() != null) {
          loaded += Math.min(e.getBytesLoaded(), res.get().totalBytes());
        }
        // The first trouble of a pod not serving; one that stalls before one that heals itself.
        if (t.isPresent()
            && !(upToDate && e.getPhase() == ArtifactPhase.Ready)
            && (trouble.isEmpty() || (t.get().stalls() && !trouble.get().stalls()))) {
          trouble = t;
        }
      }
    }
    ready = Math.min(ready, replicas);
    Optional<Pod> retrying =
        in.failure().isPresent()
            ? Optional.empty()
            : current.stream().filter(p -> waitingToRetry(report(p, in.reports()))).findFirst();
    s.setNodes(entries);
    s.setReadyNodes(
        entries.stream()
            .filter(e -> e.getPhase() == ArtifactPhase.Ready)
            .filter(e -> in.upToDate().contains(e.getPod()))
            .map(ArtifactNodeStatus::getNode)
            .sorted()
            .distinct()
            .toList());
    s.setBytesFromSource(
        entries.stream()
            .map(ArtifactNodeStatus::getBytesFromSource)
            .filter(Objects::nonNull)
            .reduce(Long::sum)
            .orElse(null));
    s.setBytesFromSourceOnWire(
        entries.stream()
            .map(ArtifactNodeStatus::getBytesFromSourceOnWire)
            .filter(Objects::nonNull)
            .reduce(Long::sum)
            .orElse(null));
    s.setReadyReplicas(ready);
    s.setReady(ready + "/" + replicas);
    s.setVerification(verification(current, in.reports(), in.upToDate(), old, copy.generation()));
    if (res.isPresent() && res.get().totalBytes() > 0) {
      long whole = (long) replicas * res.get().totalBytes();
      long pct = Math.min(100, (long) Math.floor(100.0 * Math.min(loaded, whole) / whole));
      if (pct == 100 && ready < replicas) {
        pct = 99; // every byte present is not the same as verified everywhere
      }
      s.setProgress(pct + "%");
    }

    ConditionSet c = new ConditionSet(oldConditions, observed, in.now());
    if (in.failure().isPresent()) {
      Failure f = in.failure().get();
      s.setPhase(ArtifactPhase.Failed);
      if (res.isPresent() && !brokenStructure(f.reason())) {
        c.set(RESOLVED, TRUE, Reason.SourceResolved, describe(res.get()));
      } else {
        c.set(RESOLVED, FALSE, f.reason(), f.message());
      }
      c.set(SCHEDULED, FALSE, f.reason(), f.message());
      c.set(LOADED, FALSE, f.reason(), f.message());
      c.set(READY, FALSE, f.reason(), f.message());
      c.set(DEGRADED, FALSE, f.reason(), "the artifact failed; see the Ready condition");
      if (f.retry() == null) {
        c.set(STALLED, TRUE, f.reason(), f.message());
      } else {
        c.set(STALLED, FALSE, f.reason(), f.message() + "; " + f.retry());
      }
      s.setConditions(c.build());
      return s;
    }

    NodeSelection.Result sel = in.selection();
    boolean allReady = ready == replicas;
    boolean anyRunning = current.stream().anyMatch(p -> in.reports().containsKey(name(p)));
    if (allReady) {
      s.setPhase(ArtifactPhase.Ready);
    } else if (res.isPresent()) {
      s.setPhase(
          current.isEmpty() && (sel == null || sel.chosen().isEmpty())
              ? ArtifactPhase.Pending
              : ArtifactPhase.Loading);
    } else {
      s.setPhase(anyRunning ? ArtifactPhase.Resolving : ArtifactPhase.Pending);
    }

    // Resolved
    if (res.isPresent()) {
      c.set(RESOLVED, TRUE, Reason.SourceResolved, describe(res.get()));
    } else if (retrying.isPresent()) {
      Pod p = retrying.get();
      DataPlaneStatus r = report(p, in.reports());
      c.set(
          RESOLVED,
          FALSE,
          r.reason(),
          "pod " + name(p) + " on node " + PodPlan.node(p) + ": " + retryText(r));
    } else if (trouble.isPresent()) {
      c.set(RESOLVED, FALSE, trouble.get().reason(), trouble.get().message());
    } else {
      Optional<Pod> resolver = current.stream().findFirst();
      c.set(
          RESOLVED,
          FALSE,
          Reason.Resolving,
          resolver
              .map(
                  p ->
                      "pod "
                          + name(p)
                          + " on node "
                          + PodPlan.node(p)
                          + (anyRunning ? " is listing the source" : " is starting"))
              .orElse("waiting for a data-plane pod to list the source"));
    }

    // Scheduled
    if (sel != null && !sel.satisfied()) {
      c.set(SCHEDULED, FALSE, sel.reason(), sel.message());
    } else if (res.isEmpty()) {
      c.set(
          SCHEDULED,
          FALSE,
          Reason.PodsPending,
          "the source is resolved first"
              + (sel == null || sel.chosen().isEmpty()
                  ? ""
                  : " on node " + sel.chosenNames().get(0))
              + "; pods are sized and placed once the artifact's size is known");
    } else {
      List<Pod> upToDate = current.stream().filter(p -> in.upToDate().contains(name(p))).toList();
      long bound = upToDate.stream().filter(StatusAggregator::bound).count();
      if (bound >= replicas) {
        c.set(
            SCHEDULED,
            TRUE,
            Reason.NodesSelected,
            "nodes " + String.join(", ", upToDate.stream().map(PodPlan::node).sorted().toList()));
      } else {
        c.set(
            SCHEDULED,
            FALSE,
            Reason.PodsPending,
            bound + " of " + replicas + " pods bound to their node" + pendingDetail(current));
      }
    }

    // Loaded and Ready
    String readyText = ready + "/" + replicas + " replicas ready";
    if (allReady) {
      String each = res.map(r -> ByteSize.human(r.totalBytes())).orElse("?");
      c.set(
          LOADED,
          TRUE,
          Reason.AllBytesLoaded,
          "every byte present and verified on " + replicas + " node(s), " + each + " each");
      c.set(READY, TRUE, Reason.AllReplicasReady, readyText);
    } else {
      c.set(
          LOADED,
          FALSE,
          Reason.Loading,
          res.isPresent()
              ? s.getProgress()
                  + " loaded ("
                  + loaded
                  + " of "
                  + (long) replicas * res.get().totalBytes()
                  + " bytes over "
                  + replicas
                  + " replica(s))"
              : "waiting for the source to be resolved");
      if (trouble.isPresent()) {
        c.set(READY, FALSE, trouble.get().reason(), readyText + "; " + trouble.get().message());
      } else if (retrying.isPresent()) {
        Pod p = retrying.get();
        DataPlaneStatus r = report(p, in.reports());
        c.set(
            READY,
            FALSE,
            r.reason(),
            readyText + "; node " + PodPlan.node(p) + " (pod " + name(p) + "): " + retryText(r));
      } else if (sel != null && !sel.satisfied()) {
        c.set(READY, FALSE, Reason.ReplicasNotReady, readyText + "; " + sel.message());
      } else {
        c.set(READY, FALSE, Reason.ReplicasNotReady, readyText);
      }
    }

    // Degraded: lost a replica after this generation was Ready, until Ready again.
    boolean wasReady =
        ConditionSet.is(oldConditions, READY, TRUE, observed)
            || ConditionSet.is(oldConditions, DEGRADED, TRUE, observed);
    if (!allReady && wasReady) {
      c.set(
          DEGRADED,
          TRUE,
          Reason.ReplicaLost,
          readyText + " after all were ready; lost copies are being reloaded");
    } else {
      c.set(DEGRADED, FALSE, Reason.Healthy, "no replica lost");
    }

    // Stalled: no progress towards Ready without a change (kstatus reads True as Failed).
    if (!allReady && sel != null && !sel.satisfied()) {
      c.set(STALLED, TRUE, sel.reason(), readyText + "; " + sel.message());
    } else if (!allReady && trouble.isPresent() && trouble.get().stalls()) {
      c.set(STALLED, TRUE, trouble.get().reason(), readyText + "; " + trouble.get().message());
    } else {
      c.set(
          STALLED,
          FALSE,
          allReady ? Reason.AllReplicasReady : Reason.Progressing,
          allReady ? readyText : readyText + "; making progress");
    }
    s.setConditions(c.build());
    return s;
  }

  private static ArtifactNodeStatus entry(
      Pod p,
      DataPlaneStatus r,
      ArtifactNodeStatus prev,
      Optional<Resolution> res,
      Optional<PodTrouble> trouble) {
    ArtifactNodeStatus e = new ArtifactNodeStatus();
    e.setNode(PodPlan.node(p));
    e.setPod(name(p));
    boolean running = "Running".equals(p.getStatus() == null ? null : p.getStatus().getPhase());
    if (r != null) {
      e.setPhase(phase(r.phase()));
      e.setBytesLoaded(r.bytesLoaded());
      e.setBytesFromSource(r.bytesFromSource());
      // 0: a data plane that does not count them (older) or has received nothing yet.
      e.setBytesFromSourceOnWire(r.bytesFromSourceOnWire() == 0 ? null : r.bytesFromSourceOnWire());
      e.setBytesFromPeers(r.bytesFromPeers());
      e.setReadyTime(r.phase() == DataPlaneStatus.Phase.Ready ? r.readyTime() : null);
      if (r.phase() == DataPlaneStatus.Phase.Failed) {
        e.setMessage(r.reason() + ": " + r.message());
      } else if (waitingToRetry(r)) {
        e.setMessage(r.reason() + ": " + DataPlaneStatus.withoutRetryCountdown(r.message()));
      } else if (res.isPresent()
          && res.get().revision() != null
          && r.resolvedRevision() != null
          && !res.get().revision().equals(r.resolvedRevision())) {
        // A copy of another revision is not this generation's artifact.
        e.setPhase(ArtifactPhase.Loading);
        e.setReadyTime(null);
        e.setMessage(
            "resolved revision "
                + r.resolvedRevision()
                + " differs from the artifact's "
                + res.get().revision());
      }
    } else if (prev != null && running && !PodPlan.terminating(p) && trouble.isEmpty()) {
      e.setPhase(prev.getPhase());
      e.setBytesLoaded(prev.getBytesLoaded());
      e.setBytesFromSource(prev.getBytesFromSource());
      e.setBytesFromSourceOnWire(prev.getBytesFromSourceOnWire());
      e.setBytesFromPeers(prev.getBytesFromPeers());
      e.setReadyTime(prev.getReadyTime());
      e.setMessage(prev.getMessage());
    } else {
      e.setPhase(ArtifactPhase.Pending);
      e.setBytesLoaded(0L);
      e.setMessage(trouble.map(PodTrouble::message).orElse(null));
    }
    return e;
  }

  /**
   * Whether a report is of a pod waiting to load again after a transient failure: {@code Pending}
   * with a reason. (Reasons while {@code Loading} are retries of single reads; they change with
   * every poll and stay out of the status.)
   */
  static boolean waitingToRetry(DataPlaneStatus r) {
    return r != null
        && r.phase() == DataPlaneStatus.Phase.Pending
        && r.reason() != null
        && !r.reason().isEmpty();
  }

  /** The message of a pod waiting to retry, without the countdown that changes on every poll. */
  private static String retryText(DataPlaneStatus r) {
    return r.message() == null ? r.reason() : DataPlaneStatus.withoutRetryCountdown(r.message());
  }

  /**
   * What keeps a pod from running its data plane, as Kubernetes reports it.
   *
   * @param reason CamelCase: the kubelet's or scheduler's own reason ({@code CrashLoopBackOff},
   *     {@code ImagePullBackOff}, {@code OOMKilled}, {@code Evicted}, {@code Unschedulable}, ...),
   *     {@link Reason#CredentialsNotFound} for a missing Secret or key, {@link Reason#NodeNotReady}
   *     for a node that stopped reporting (a string, since the kubelet's own reasons pass through
   *     as it names them)
   * @param message names pod, node and container, with the pod's own message and, after a crash,
   *     the last termination (reason, exit code, message)
   * @param stalls whether it lasts until something changes (a crash loop, an OOM kill, an image
   *     that cannot be pulled, a missing Secret), so {@code Stalled} is set; an unschedulable pod,
   *     an eviction or a lost node do not stall (the scheduler retries, the pod is replaced)
   */
  public record PodTrouble(String reason, String message, boolean stalls) {}

  /** Waiting reasons of a container that cannot get its image. */
  private static final Set<String> IMAGE_REASONS =
      Set.of(
          "ErrImagePull",
          "ImagePullBackOff",
          "InvalidImageName",
          "ErrImageNeverPull",
          "RegistryUnavailable",
          "ImageInspectError");

  /**
   * The trouble of {@code p}, if any, checked in this order: evicted or failed pod; its node not
   * Ready (by {@code selection}'s exclusions); a container waiting with a reason other than {@code
   * ContainerCreating} (with its last termination after a crash); a container not ready whose last
   * termination was {@code OOMKilled}; the pod not schedulable.
   */
  public static Optional<PodTrouble> trouble(Pod p, NodeSelection.Result selection) {
    String where = "pod " + name(p) + " on node " + PodPlan.node(p);
    io.fabric8.kubernetes.api.model.PodStatus st = p.getStatus();
    if (st == null) {
      return Optional.empty();
    }
    if (st.getReason() != null && "Failed".equals(st.getPhase())) {
      return Optional.of(
          new PodTrouble(
              st.getReason(),
              where
                  + " "
                  + ("Evicted".equals(st.getReason()) ? "was evicted" : "failed")
                  + ": "
                  + Objects.requireNonNullElse(st.getMessage(), st.getReason())
                  + "; it is replaced",
              false));
    }
    if (selection != null
        && selection
            .excluded()
            .getOrDefault(NodeSelection.Exclusion.NOT_READY, List.of())
            .contains(PodPlan.node(p))) {
      return Optional.of(
          new PodTrouble(
              Reason.NodeNotReady.name(),
              where
                  + ": the node is not Ready (its kubelet stopped reporting); the copy there"
                  + " cannot be reached and is placed on another node",
              false));
    }
    if (st.getContainerStatuses() != null) {
      for (ContainerStatus cs : st.getContainerStatuses()) {
        String container = "container " + cs.getName();
        ContainerStateTerminated last =
            cs.getLastState() == null ? null : cs.getLastState().getTerminated();
        if (cs.getState() != null && cs.getState().getWaiting() != null) {
          String why = cs.getState().getWaiting().getReason();
          String msg = cs.getState().getWaiting().getMessage();
          if (why == null || "ContainerCreating".equals(why) || "PodInitializing".equals(why)) {
            continue;
          }
          if ("CreateContainerConfigError".equals(why)) {
            return Optional.of(
                new PodTrouble(
                    Reason.CredentialsNotFound.name(),
                    "pod " + name(p) + ": " + Objects.requireNonNullElse(msg, why),
                    true));
          }
          if ("CrashLoopBackOff".equals(why) && last != null && oomKilled(last)) {
            return Optional.of(oom(p, where, container, cs));
          }
          String text = where + ": " + container + " " + why + (msg == null ? "" : ": " + msg);
          if (last != null) {
            text += "; " + lastTermination(cs);
          }
          boolean stalls =
              "CrashLoopBackOff".equals(why)
                  || IMAGE_REASONS.contains(why)
                  || "CreateContainerError".equals(why);
          return Optional.of(new PodTrouble(why, text, stalls));
        }
        if (!Boolean.TRUE.equals(cs.getReady()) && last != null && oomKilled(last)) {
          return Optional.of(oom(p, where, container, cs));
        }
      }
    }
    PodCondition scheduled = podCondition(p, "PodScheduled");
    if (scheduled != null && FALSE.equals(scheduled.getStatus())) {
      String why = Objects.requireNonNullElse(scheduled.getReason(), "Unschedulable");
      return Optional.of(
          new PodTrouble(
              why,
              "pod "
                  + name(p)
                  + " not scheduled: "
                  + Objects.requireNonNullElse(scheduled.getMessage(), why),
              false));
    }
    return Optional.empty();
  }

  private static boolean oomKilled(ContainerStateTerminated t) {
    return "OOMKilled".equals(t.getReason());
  }

  private static PodTrouble oom(Pod p, String where, String container, ContainerStatus cs) {
    long limit = PodPlan.memoryRequest(p);
    return new PodTrouble(
        "OOMKilled",
        where
            + ": "
            + container
            + " was killed for exceeding its memory limit"
            + (limit > 0 ? " of " + ByteSize.human(limit) : "")
            + " (restarts: "
            + cs.getRestartCount()
            + "); "
            + lastTermination(cs),
        true);
  }

  /** "last termination: Error, exit code 1: message" of a container that ended before. */
  private static String lastTermination(ContainerStatus cs) {
    ContainerStateTerminated t = cs.getLastState().getTerminated();
    String m = t.getMessage() == null ? "" : t.getMessage().strip();
    if (m.length() > MAX_TERMINATION_MESSAGE) {
      m = m.substring(m.length() - MAX_TERMINATION_MESSAGE);
    }
    return "last termination: "
        + Objects.requireNonNullElse(t.getReason(), "Terminated")
        + ", exit code "
        + t.getExitCode()
        + (m.isEmpty() ? "" : ": " + m);
  }

  /** Characters of a termination message kept (its end, where the cause is). */
  static final int MAX_TERMINATION_MESSAGE = 512;

  private static String pendingDetail(List<Pod> pods) {
    for (Pod p : pods) {
      PodCondition scheduled = podCondition(p, "PodScheduled");
      if (scheduled != null && FALSE.equals(scheduled.getStatus())) {
        return "; pod "
            + name(p)
            + ": "
            + Objects.requireNonNullElse(scheduled.getMessage(), scheduled.getReason());
      }
    }
    return "";
  }

  private static PodCondition podCondition(Pod p, String type) {
    if (p.getStatus() == null || p.getStatus().getConditions() == null) {
      return null;
    }
    return p.getStatus().getConditions().stream()
        .filter(c -> type.equals(c.getType()))
        .findFirst()
        .orElse(null);
  }

  private static boolean bound(Pod p) {
    return p.getSpec() != null && p.getSpec().getNodeName() != null;
  }

  /**
   * How the Ready copies' files were verified: from the first up-to-date pod (by name) of this
   * generation that reports Ready with per-file verification; while none does this round, what the
   * status held for this generation (a pod not reachable for one round does not clear it). Files
   * verified by reader piece hashes only are listed, sorted, at most {@value
   * ArtifactVerification#MAX_FILES_LISTED}. {@code generation} is the copy generation.
   */
  static ArtifactVerification verification(
      List<Pod> current,
      Map<String, DataPlaneStatus> reports,
      Set<String> upToDate,
      ModelArtifactStatus old,
      long generation) {
    for (Pod p : current.stream().sorted(Comparator.comparing(StatusAggregator::name)).toList()) {
      DataPlaneStatus r = reports.get(name(p));
      if (r == null
          || r.phase() != DataPlaneStatus.Phase.Ready
          || !upToDate.contains(name(p))
          || r.fileStatuses() == null
          || r.fileStatuses().isEmpty()
          || r.fileStatuses().stream().anyMatch(f -> f.verification() == null)) {
        continue;
      }
      ArtifactVerification v = new ArtifactVerification();
      List<String> weaker =
          r.fileStatuses().stream()
              .filter(f -> f.verification() == DataPlaneStatus.Verification.ReaderPieceHashes)
              .map(DataPlaneStatus.FileStatus::path)
              .sorted()
              .toList();
      v.setSourceDigest(r.fileStatuses().size() - weaker.size());
      v.setReaderPieceHashes(weaker.size());
      v.setReaderPieceHashesFiles(
          new ArrayList<>(
              weaker.subList(0, Math.min(weaker.size(), ArtifactVerification.MAX_FILES_LISTED))));
      return v;
    }
    return old != null && CopyGeneration.recorded(old).orElse(-1) == generation
        ? old.getVerification()
        : null;
  }

  private static ArtifactNodeStatus previous(ModelArtifactStatus old, Pod p) {
    if (old == null || old.getNodes() == null) {
      return null;
    }
    return old.getNodes().stream().filter(e -> name(p).equals(e.getPod())).findFirst().orElse(null);
  }

  private static String describe(Resolution r) {
    return r.files()
        + " file(s), "
        + r.tensors()
        + " tensor(s), "
        + ByteSize.exact(r.totalBytes())
        + (r.revision() == null ? "" : ", revision " + r.revision());
  }

  static ArtifactPhase phase(DataPlaneStatus.Phase p) {
    if (p == null) {
      return ArtifactPhase.Pending;
    }
    return p.artifactPhase();
  }

  /** Pods of {@code generation} not being deleted, ordered by node then name. */
  static List<Pod> currentPods(Collection<Pod> pods, long generation) {
    String g = Long.toString(generation);
    return pods.stream()
        .filter(p -> !PodPlan.terminating(p))
        .filter(
            p ->
                p.getMetadata().getLabels() != null
                    && g.equals(p.getMetadata().getLabels().get(DataPlanePod.LABEL_GENERATION)))
        .sorted(Comparator.comparing(PodPlan::node).thenComparing(StatusAggregator::name))
        .toList();
  }

  /** The report of {@code p}, if it is about the artifact id the pod was made for. */
  static DataPlaneStatus report(Pod p, Map<String, DataPlaneStatus> reports) {
    DataPlaneStatus r = reports.get(name(p));
    if (r == null) {
      return null;
    }
    Map<String, String> a = p.getMetadata().getAnnotations();
    String id = a == null ? null : a.get(DataPlanePod.ANNOTATION_ARTIFACT_ID);
    return id == null || r.artifactId() == null || id.equals(r.artifactId()) ? r : null;
  }

  /**
   * Label selector of the artifact's data-plane pods ({@code status.selector}, the scale
   * subresource's): the data-plane name label and {@link TensorcastConstants#LABEL_ARTIFACT}.
   */
  public static String selector(ModelArtifact a) {
    return TensorcastConstants.LABEL_NAME
        + "="
        + TensorcastConstants.LABEL_NAME_DATAPLANE
        + ","
        + TensorcastConstants.LABEL_ARTIFACT
        + "="
        + a.getMetadata().getName();
  }

  private static int replicas(ModelArtifact a) {
    Integer r =
        a.getSpec().getPlacement() == null ? null : a.getSpec().getPlacement().getReplicas();
    return r == null ? 1 : r;
  }

  private static String name(Pod p) {
    return p.getMetadata().getName();
  }
}
