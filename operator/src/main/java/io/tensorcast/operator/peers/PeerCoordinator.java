package io.tensorcast.operator.peers;

import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.Membership;
import io.tensorcast.operator.status.DataPlaneClient;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The operator's side of peer membership: on each reconcile of a PeerToPeer artifact, computes the
 * {@link Membership} of its current pods and sends it ({@code PUT /v1/peers}) to each member that
 * needs it. A member needs it when it has not applied this epoch since this operator started, or
 * when its {@code /status} of this round reports another {@code peerEpoch} (it restarted, or missed
 * a change). So an operator restart re-announces membership once to every pod, and in steady state
 * nothing is sent.
 *
 * <p>A pod is a member only once its data plane has answered {@code /status} (this round or an
 * earlier one of this operator process), not from the moment its container runs: the others give a
 * member they never met one peer timeout to connect, then read its share themselves, and a member
 * whose process starts later than that (a slow JVM start on a busy node, a slow image pull of a
 * sidecar) would then read its own share again from the source, since nobody else's copy of it can
 * be checked without the source's digests. A member that answered once keeps its place when a round
 * does not reach it.
 *
 * <p>A pod whose {@code /status} of this round reports {@code Failed} is not a member: its load
 * failed for good, and its data plane has handed its share over and closed its peer port, so the
 * others must neither wait for it nor dial it. A pod not reached this round keeps its place.
 *
 * <p>A member that does not apply it (down, slow, refusing) is tried again on the next reconcile;
 * the caller reschedules soon while {@link Outcome#settled()} is false. Nothing here writes status:
 * membership delivery is not a fact of the artifact's bytes, and writing it would feed back into
 * the reconcile.
 *
 * <p>Thread-safe: JOSDK reconciles different artifacts in parallel, one artifact at a time.
 */
public final class PeerCoordinator {
  private static final Logger log = LoggerFactory.getLogger(PeerCoordinator.class);

  private final DataPlaneClient client;
  private final int peerPort;

  /** Per artifact ("namespace/name"): pod name → epoch that pod applied. */
  private final Map<String, Map<String, String>> applied = new ConcurrentHashMap<>();

  /** Per artifact: the pods (name and uid) whose data plane answered {@code /status} once. */
  private final Map<String, Set<String>> answered = new ConcurrentHashMap<>();

  /**
   * @param client sends the PUTs (its timeout bounds each call)
   * @param peerPort the pods' peer transport port, part of each member's address
   */
  public PeerCoordinator(DataPlaneClient client, int peerPort) {
    this.client = Objects.requireNonNull(client, "client");
    this.peerPort = peerPort;
  }

  /**
   * What one round did.
   *
   * @param membership the membership computed
   * @param sentTo members the PUT went to, sorted by name
   * @param failed members that did not apply it (tried again next round), sorted by name
   */
  public record Outcome(Membership membership, Set<String> sentTo, Set<String> failed) {
    /** Whether every member has applied the membership. */
    public boolean settled() {
      return failed.isEmpty();
    }
  }

  /**
   * Brings every member of {@code artifact}'s swarm to the current membership.
   *
   * @param artifact "namespace/name" of the ModelArtifact
   * @param currentPods the artifact's pods of the current generation that the operator keeps
   * @param reports this round's {@code /status} reports by pod name (absent: not reached)
   * @param adminToken the artifact's admin token, which {@code PUT /v1/peers} requires
   */
  public Outcome coordinate(
      String artifact,
      List<Pod> currentPods,
      Map<String, DataPlaneStatus> reports,
      String adminToken) {
    Set<String> up = answered.computeIfAbsent(artifact, k -> ConcurrentHashMap.newKeySet());
    Set<String> current = new HashSet<>();
    for (Pod p : currentPods) {
      current.add(key(p));
      if (reports.containsKey(p.getMetadata().getName())) {
        up.add(key(p));
      }
    }
    up.retainAll(current);
    List<Pod> serving =
        currentPods.stream()
            .filter(p -> up.contains(key(p)))
            .filter(p -> !failed(reports.get(p.getMetadata().getName())))
            .toList();
    Membership m = PeerMembers.of(serving, peerPort);
    Map<String, String> known = applied.computeIfAbsent(artifact, k -> new ConcurrentHashMap<>());
    known.keySet().retainAll(Set.copyOf(m.ids()));
    List<Pod> targets =
        serving.stream()
            .filter(PeerMembers::isMember)
            .filter(p -> needs(p.getMetadata().getName(), m.epoch(), known, reports))
            .toList();
    if (targets.isEmpty()) {
      return new Outcome(m, Set.of(), Set.of());
    }
    Set<String> ok = client.putPeers(targets, m, adminToken);
    SortedSet<String> sent = new TreeSet<>();
    SortedSet<String> failed = new TreeSet<>();
    for (Pod p : targets) {
      String name = p.getMetadata().getName();
      sent.add(name);
      if (ok.contains(name)) {
        known.put(name, m.epoch());
      } else {
        known.remove(name);
        failed.add(name);
      }
    }
    log.info(
        "{}: membership epoch {} ({} member(s)) sent to {}{}",
        artifact,
        m.epoch().substring(0, 12),
        m.members().size(),
        sent,
        failed.isEmpty() ? "" : "; not applied by " + failed + ", retrying next reconcile");
    return new Outcome(
        m, Collections.unmodifiableSortedSet(sent), Collections.unmodifiableSortedSet(failed));
  }

  /** Forgets what {@code artifact}'s pods applied (artifact deleted, failed or SourceOnly). */
  public void forget(String artifact) {
    applied.remove(artifact);
    answered.remove(artifact);
  }

  /** A pod's identity: its name (stable per node) and uid (new for each pod of that name). */
  private static String key(Pod p) {
    return p.getMetadata().getName() + "/" + p.getMetadata().getUid();
  }

  /** Whether a pod's report says its load failed for good (it left the swarm). */
  private static boolean failed(DataPlaneStatus report) {
    return report != null && report.phase() == DataPlaneStatus.Phase.Failed;
  }

  private static boolean needs(
      String pod, String epoch, Map<String, String> known, Map<String, DataPlaneStatus> reports) {
    if (!epoch.equals(known.get(pod))) {
      return true;
    }
    DataPlaneStatus r = reports.get(pod);
    return r != null && !epoch.equals(r.peerEpoch());
  }
}
