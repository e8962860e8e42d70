package io.tensorcast.operator.peers;

import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.wire.Membership;
import io.tensorcast.operator.desired.PodPlan;
import java.net.InetSocketAddress;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;

/**
 * Which pods are members of an artifact's swarm, as the operator (the coordinator) tells it to
 * every member with {@code PUT /v1/peers} (docs/DECISIONS.md, "Peer membership"; the P2P contract).
 *
 * <p>Members are the artifact's data-plane pods of the current generation that are {@code Running},
 * have a pod IP and are not being deleted ({@link PeerCoordinator} passes only pods whose data
 * plane has answered). A member's id is its pod name (the pod runs with {@code --peer-id
 * $(POD_NAME)}); its address is {@code <podIP>:<peer port>}. The epoch is {@link
 * Membership#epochOf} the members: equal member sets give equal epochs, in any operator process, so
 * an operator restart does not look like a membership change to the pods.
 */
public final class PeerMembers {
  private PeerMembers() {}

  /**
   * The membership of {@code pods}: those that are members (see the class), sorted by name.
   *
   * @param pods candidate pods (the caller passes the current generation's pods)
   * @param peerPort the peer transport port of every pod, 1..65535
   * @throws IllegalArgumentException when a member pod's IP is not an IP literal or the port is out
   *     of range
   */
  public static Membership of(Collection<Pod> pods, int peerPort) {
    List<Membership.Member> members =
        pods.stream()
            .filter(PeerMembers::isMember)
            .sorted(Comparator.comparing(p -> p.getMetadata().getName()))
            .map(
                p ->
                    new Membership.Member(
                        p.getMetadata().getName(),
                        new InetSocketAddress(p.getStatus().getPodIP(), peerPort)))
            .toList();
    return Membership.of(members);
  }

  /** Whether {@code p} is Running with a pod IP and not being deleted. */
  public static boolean isMember(Pod p) {
    return p.getStatus() != null
        && "Running".equals(p.getStatus().getPhase())
        && p.getStatus().getPodIP() != null
        && !p.getStatus().getPodIP().isEmpty()
        && !PodPlan.terminating(p);
  }
}
