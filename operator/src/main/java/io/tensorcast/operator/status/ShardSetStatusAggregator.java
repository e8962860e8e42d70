package io.tensorcast.operator.status;

import static io.tensorcast.api.v1alpha1.Conditions.FALSE;
import static io.tensorcast.api.v1alpha1.Conditions.LOADED;
import static io.tensorcast.api.v1alpha1.Conditions.READY;
import static io.tensorcast.api.v1alpha1.Conditions.RESOLVED;
import static io.tensorcast.api.v1alpha1.Conditions.SCHEDULED;
import static io.tensorcast.api.v1alpha1.Conditions.TRUE;

import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.Reason;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ParallelismSpec;
import io.tensorcast.api.v1alpha1.ShardRankStatus;
import io.tensorcast.api.v1alpha1.TensorShardSet;
import io.tensorcast.api.v1alpha1.TensorShardSetStatus;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.ShardReport;
import io.tensorcast.operator.desired.ByteSize;
import io.tensorcast.operator.desired.PodPlan;
import io.tensorcast.operator.desired.RankPlacement;
import io.tensorcast.operator.desired.ShardSetPod;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Turns what the operator observed of a TensorShardSet — its pods, their {@code /status} reports
 * with the shard plan and per-rank progress, the rank placement, a failure or a wait — into its
 * status. Pure and deterministic: the same observations give an equal status, so in steady state
 * nothing is written. Owns the set's conditions ({@code Resolved}, {@code Scheduled}, {@code
 * Loaded}, {@code Ready}).
 *
 * <p>Phase: {@code Failed} on a failure; {@code Pending} while waiting (for the ModelArtifact, for
 * consumer pods); {@code Ready} when every rank's file is complete on its node; {@code Loading}
 * once the plan is resolved; {@code Resolving} while a pod runs without it.
 */
public final class ShardSetStatusAggregator {

  private ShardSetStatusAggregator() {}

  /**
   * The plan of the current generation, as a pod resolved it.
   *
   * @param fileBytes per rank: bytes its node stores for it
   * @param tensorBytes per rank: tensor bytes of its file
   * @param ruleSet which rules
   * @param revision resolved revision, or null
   */
  public record Resolution(
      List<Long> fileBytes, List<Long> tensorBytes, String ruleSet, String revision) {}

  /**
   * What one reconcile observed.
   *
   * @param set the TensorShardSet
   * @param pods its pods of the current generation, not being deleted
   * @param reports this round's reports by pod name
   * @param upToDate names of the pods the plan keeps
   * @param resolution the plan, if known
   * @param placement the rank placement, or null
   * @param failure the generation's failure, if any
   * @param waiting why nothing runs yet (not a failure), if so
   * @param now time of this reconcile
   */
  public record Input(
      TensorShardSet set,
      List<Pod> pods,
      Map<String, DataPlaneStatus> reports,
      Set<String> upToDate,
      Optional<Resolution> resolution,
      RankPlacement.Result placement,
      Optional<StatusAggregator.Failure> failure,
      Optional<StatusAggregator.Failure> waiting,
      Instant now) {}

  /** The world size of the spec. */
  public static int world(TensorShardSet set) {
    ParallelismSpec p =
        set.getSpec().getParallelism() == null
            ? new ParallelismSpec()
            : set.getSpec().getParallelism();
    return (int) Math.min(Integer.MAX_VALUE, p.worldSize());
  }

  /**
   * The plan of this generation: from the previous status when {@code Resolved=True} for it, else
   * from the first pod (by name) whose report carries one.
   */
  public static Optional<Resolution> resolution(
      TensorShardSet set, Collection<Pod> pods, Map<String, DataPlaneStatus> reports) {
    long generation = ShardSetPod.generation(set);
    TensorShardSetStatus old = set.getStatus();
    int world = world(set);
    if (old != null
        && ConditionSet.is(old.getConditions(), RESOLVED, TRUE, generation)
        && old.getRanks() != null
        && old.getRanks().size() == world
        && old.getRanks().stream().allMatch(r -> r.getFileBytes() != null)) {
      return Optional.of(
          new Resolution(
              old.getRanks().stream().map(ShardRankStatus::getFileBytes).toList(),
              old.getRanks().stream().map(ShardRankStatus::getBytesNeeded).toList(),
              old.getRuleSet(),
              old.getResolvedRevision()));
    }
    return pods.stream()
        .sorted(java.util.Comparator.comparing(p -> p.getMetadata().getName()))
        .map(p -> reports.get(p.getMetadata().getName()))
        .filter(r -> r != null && r.shards() != null && r.shards().rankFileBytes().size() == world)
        .findFirst()
        .map(
            r ->
                new Resolution(
                    r.shards().rankFileBytes(),
                    r.shards().rankTensorBytes(),
                    r.shards().ruleSet(),
                    r.resolvedRevision()));
  }

  /**
   * A failure a pod reports, except an undersized pod (sized before the plan was known) running out
   * of memory: it is replaced by a sized one.
   */
  public static Optional<StatusAggregator.Failure> podFailure(
      Collection<Pod> pods,
      Map<String, DataPlaneStatus> reports,
      Optional<Resolution> resolution,
      long overhead) {
    for (Pod p :
        pods.stream()
            .sorted(java.util.Comparator.comparing(x -> x.getMetadata().getName()))
            .toList()) {
      DataPlaneStatus r = reports.get(p.getMetadata().getName());
      if (r == null || r.phase() != DataPlaneStatus.Phase.Failed) {
        continue;
      }
      if (Reason.InsufficientMemory.name().equals(r.reason()) && resolution.isPresent()) {
        long need =
            ShardSetPod.ranks(p).stream().mapToLong(k -> resolution.get().fileBytes().get(k)).sum()
                + overhead;
        if (PodPlan.memoryRequest(p) < need) {
          continue;
        }
      }
      String reason = r.reason() == null ? Reason.LoadFailed.name() : r.reason();
      return Optional.of(
          new StatusAggregator.Failure(
              reason,
              "node "
                  + PodPlan.node(p)
                  + " (pod "
                  + p.getMetadata().getName()
                  + "): "
                  + (r.message() == null ? reason : r.message()),
              r.shards() == null || r.shards().rankFileBytes().isEmpty()));
    }
    return Optional.empty();
  }

  /** Reasons the operator computes afresh on every pass (not remembered as failures). */
  static final Set<Reason> RECOMPUTED =
      Set.of(
          Reason.InvalidSpec,
          Reason.InsufficientMemory,
          Reason.ArtifactNotFound,
          Reason.ArtifactNotReady,
          Reason.ArtifactFailed);

  /** A failure a pod reported for this generation earlier (its pods were removed since). */
  public static Optional<StatusAggregator.Failure> recordedFailure(TensorShardSet set) {
    TensorShardSetStatus old = set.getStatus();
    if (old == null
        || old.getPhase() != ArtifactPhase.Failed
        || old.getObservedGeneration() == null
        || old.getObservedGeneration() != ShardSetPod.generation(set)) {
      return Optional.empty();
    }
    Condition ready = ConditionSet.find(old.getConditions(), READY);
    if (ready == null || Reason.of(ready.getReason()).map(RECOMPUTED::contains).orElse(false)) {
      return Optional.empty();
    }
    Condition resolved = ConditionSet.find(old.getConditions(), RESOLVED);
    return Optional.of(
        new StatusAggregator.Failure(
            ready.getReason(),
            ready.getMessage(),
            resolved == null || !TRUE.equals(resolved.getStatus())));
  }

  /** The status for {@code in}. */
  public static TensorShardSetStatus aggregate(Input in) {
    TensorShardSet set = in.set();
    long generation = ShardSetPod.generation(set);
    int world = world(set);
    TensorShardSetStatus old = set.getStatus();
    ConditionSet conditions =
        new ConditionSet(old == null ? null : old.getConditions(), generation, in.now());
    TensorShardSetStatus s = new TensorShardSetStatus();
    s.setObservedGeneration(generation);
    s.setWorldSize(world);
    s.setParallelism(
        (set.getSpec().getParallelism() == null
                ? new ParallelismSpec()
                : set.getSpec().getParallelism())
            .describe());
    Optional<Resolution> res = in.resolution();
    res.ifPresent(
        r -> {
          s.setRuleSet(r.ruleSet());
          s.setResolvedRevision(r.revision());
          long max = r.fileBytes().stream().mapToLong(Long::longValue).max().orElse(0);
          long min = r.fileBytes().stream().mapToLong(Long::longValue).min().orElse(0);
          s.setBytesPerRank(max);
          s.setSizePerRank(
              ByteSize.human(min).equals(ByteSize.human(max))
                  ? ByteSize.human(max)
                  : ByteSize.human(min) + "-" + ByteSize.human(max));
        });

    // Who holds which rank: the kept pods, by their ranks annotation.
    Map<Integer, Pod> podOfRank = new HashMap<>();
    for (Pod p : in.pods()) {
      if (in.upToDate().contains(p.getMetadata().getName())) {
        for (int r : ShardSetPod.ranks(p)) {
          podOfRank.put(r, p);
        }
      }
    }
    List<ShardRankStatus> ranks = new ArrayList<>();
    int ready = 0;
    long needed = 0;
    long fetched = 0;
    boolean anyPod = !in.pods().isEmpty();
    for (int r = 0; r < world && (res.isPresent() || podOfRank.containsKey(r)); r++) {
      if (!res.isPresent() && !podOfRank.containsKey(r)) {
        continue;
      }
      ShardRankStatus e = new ShardRankStatus();
      e.setRank(r);
      if (res.isPresent()) {
        e.setFileBytes(res.get().fileBytes().get(r));
        e.setBytesNeeded(res.get().tensorBytes().get(r));
      }
      Pod p = in.failure().isPresent() ? null : podOfRank.get(r);
      if (p != null) {
        e.setNode(PodPlan.node(p));
        e.setPod(p.getMetadata().getName());
        DataPlaneStatus report = in.reports().get(p.getMetadata().getName());
        ShardRankStatus previous = previous(old, r, p);
        ShardReport.Rank mine = rankOf(report, r);
        if (report == null && previous != null) {
          copyProgress(previous, e);
        } else {
          e.setPhase(phase(report, mine));
          if (mine != null) {
            e.setCoordinates(mine.coordinates());
            e.setFile(mine.file());
            e.setBytesFetched(mine.bytesFetched());
            e.setBytesFromPeers(mine.bytesFromPeers());
            e.setRequests(mine.requests());
            e.setFetchAmplification(ratio(mine.bytesFetched(), mine.bytesNeeded()));
          }
          if (report != null && report.reason() != null && e.getPhase() != ArtifactPhase.Ready) {
            e.setMessage(
                report.reason()
                    + (report.message() == null
                        ? ""
                        : ": " + DataPlaneStatus.withoutRetryCountdown(report.message())));
          }
        }
        if (e.getPhase() == ArtifactPhase.Ready) {
          ready++;
        }
        if (e.getBytesFetched() != null && e.getBytesNeeded() != null) {
          needed += e.getBytesNeeded();
          fetched += e.getBytesFetched();
        }
      } else {
        e.setPhase(ArtifactPhase.Pending);
      }
      ranks.add(e);
    }
    s.setRanks(ranks);
    s.setReadyRanks(ready);
    s.setRanksReady(ready + "/" + world);
    if (needed > 0) {
      s.setBytesNeeded(needed);
      s.setBytesFetched(fetched);
      s.setFetchAmplification(ratio(fetched, needed));
    }

    RankPlacement.Result placement = in.placement();
    if (in.failure().isPresent()) {
      StatusAggregator.Failure f = in.failure().get();
      s.setPhase(ArtifactPhase.Failed);
      conditions.set(
          RESOLVED,
          res.isPresent() && !f.beforeResolve() ? TRUE : FALSE,
          res.isPresent() && !f.beforeResolve() ? Reason.SourceResolved.name() : f.reason(),
          res.isPresent() && !f.beforeResolve() ? resolvedMessage(res.get(), world) : f.message());
      conditions.set(SCHEDULED, FALSE, f.reason(), f.message());
      conditions.set(LOADED, FALSE, f.reason(), f.message());
      conditions.set(READY, FALSE, f.reason(), f.message());
    } else if (in.waiting().isPresent()) {
      StatusAggregator.Failure w = in.waiting().get();
      s.setPhase(ArtifactPhase.Pending);
      conditions.set(RESOLVED, FALSE, w.reason(), w.message());
      conditions.set(SCHEDULED, FALSE, w.reason(), w.message());
      conditions.set(LOADED, FALSE, w.reason(), w.message());
      conditions.set(READY, FALSE, w.reason(), w.message());
    } else {
      boolean allReady = ready == world;
      s.setPhase(
          allReady
              ? ArtifactPhase.Ready
              : res.isPresent()
                  ? ArtifactPhase.Loading
                  : anyPod ? ArtifactPhase.Resolving : ArtifactPhase.Pending);
      if (res.isPresent()) {
        conditions.set(RESOLVED, TRUE, Reason.SourceResolved, resolvedMessage(res.get(), world));
      } else {
        conditions.set(
            RESOLVED,
            FALSE,
            Reason.Resolving,
            "a data-plane pod lists the source, reads the tensors' headers and checks the rules"
                + " against every rank");
      }
      if (placement != null && placement.complete()) {
        conditions.set(SCHEDULED, TRUE, placement.reason(), placement.message());
      } else {
        conditions.set(
            SCHEDULED,
            FALSE,
            placement == null ? Reason.PodsPending : placement.reason(),
            placement == null ? "no placement yet" : placement.message());
      }
      String progress = ready + "/" + world + " ranks ready";
      conditions.set(
          LOADED,
          allReady ? TRUE : FALSE,
          allReady ? Reason.AllBytesLoaded : Reason.Loading,
          progress);
      conditions.set(
          READY,
          allReady ? TRUE : FALSE,
          allReady ? Reason.AllRanksReady : Reason.RanksNotReady,
          allReady
              ? "every rank file is complete and verified on its node (" + progress + ")"
              : progress);
    }
    s.setConditions(conditions.build());
    return s;
  }

  private static String resolvedMessage(Resolution r, int world) {
    long total = r.fileBytes().stream().mapToLong(Long::longValue).sum();
    return world
        + " rank files, "
        + ByteSize.human(total)
        + " in all, cut by "
        + r.ruleSet()
        + (r.revision() == null ? "" : " at revision " + r.revision());
  }

  private static ShardReport.Rank rankOf(DataPlaneStatus report, int rank) {
    if (report == null || report.shards() == null) {
      return null;
    }
    return report.shards().ranks().stream().filter(x -> x.rank() == rank).findFirst().orElse(null);
  }

  private static ArtifactPhase phase(DataPlaneStatus report, ShardReport.Rank mine) {
    if (mine != null && mine.complete()) {
      return ArtifactPhase.Ready;
    }
    if (report == null) {
      return ArtifactPhase.Pending;
    }
    return switch (report.phase()) {
      case Pending -> ArtifactPhase.Pending;
      case Resolving -> ArtifactPhase.Resolving;
      case Loading, Verifying, Ready -> ArtifactPhase.Loading;
      case Failed -> ArtifactPhase.Failed;
    };
  }

  private static ShardRankStatus previous(TensorShardSetStatus old, int rank, Pod p) {
    if (old == null || old.getRanks() == null) {
      return null;
    }
    return old.getRanks().stream()
        .filter(e -> e.getRank() != null && e.getRank() == rank)
        .filter(e -> p.getMetadata().getName().equals(e.getPod()))
        .findFirst()
        .orElse(null);
  }

  private static void copyProgress(ShardRankStatus from, ShardRankStatus to) {
    to.setPhase(from.getPhase());
    to.setCoordinates(from.getCoordinates());
    to.setFile(from.getFile());
    to.setBytesFetched(from.getBytesFetched());
    to.setBytesFromPeers(from.getBytesFromPeers());
    to.setRequests(from.getRequests());
    to.setFetchAmplification(from.getFetchAmplification());
    to.setMessage(from.getMessage());
  }

  /** {@code a / b} with three decimals ({@code 1.000}); {@code 1.000} when b is 0. */
  static String ratio(long a, long b) {
    return String.format(Locale.ROOT, "%.3f", b == 0 ? 1.0 : (double) a / b);
  }
}
