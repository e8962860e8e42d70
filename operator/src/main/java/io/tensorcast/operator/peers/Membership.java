package io.tensorcast.operator.peers;

import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.operator.desired.PodPlan;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Collection;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;

/**
 * The peer membership of one artifact's swarm, as the operator (the coordinator) tells it to every
 * member with {@code PUT /v1/peers} (docs/DECISIONS.md, "Peer membership"; the P2P contract).
 *
 * <p>Members are the artifact's data-plane pods of the current generation that are {@code Running},
 * have a pod IP and are not being deleted, sorted by pod name. A member's id is its pod name (the
 * pod runs with {@code --peer-id $(POD_NAME)}); its address is {@code <podIP>:<peer port>}, an IPv6
 * IP in brackets. The epoch is the lowercase hex SHA-256 of the sorted lines {@code id=address},
 * each followed by {@code \n}: equal member sets give equal epochs, in any operator process, so an
 * operator restart does not look like a membership change to the pods.
 *
 * @param epoch hex SHA-256 of the member lines (64 characters)
 * @param members members sorted by id
 */
public record Membership(String epoch, List<Member> members) {

  /**
   * One member.
   *
   * @param id pod name
   * @param address {@code ip:port}
   */
  public record Member(String id, String address) {
    public Member {
      Objects.requireNonNull(id, "id");
      Objects.requireNonNull(address, "address");
    }
  }

  public Membership {
    Objects.requireNonNull(epoch, "epoch");
    members = List.copyOf(members);
  }

  /**
   * The membership of {@code pods}: those that are members (see the class), by name.
   *
   * @param pods candidate pods (the caller passes the current generation's pods)
   * @param peerPort the peer transport port of every pod
   */
  public static Membership of(Collection<Pod> pods, int peerPort) {
    List<Member> members =
        pods.stream()
            .filter(Membership::isMember)
            .sorted(Comparator.comparing(p -> p.getMetadata().getName()))
            .map(
                p ->
                    new Member(
                        p.getMetadata().getName(), address(p.getStatus().getPodIP(), peerPort)))
            .toList();
    return new Membership(epoch(members), members);
  }

  /** Whether {@code p} is Running with a pod IP and not being deleted. */
  public static boolean isMember(Pod p) {
    return p.getStatus() != null
        && "Running".equals(p.getStatus().getPhase())
        && p.getStatus().getPodIP() != null
        && !p.getStatus().getPodIP().isEmpty()
        && !PodPlan.terminating(p);
  }

  /** Lowercase hex SHA-256 of the lines {@code id=address\n} in the given order. */
  public static String epoch(List<Member> sortedMembers) {
    StringBuilder lines = new StringBuilder();
    for (Member m : sortedMembers) {
      lines.append(m.id()).append('=').append(m.address()).append('\n');
    }
    try {
      return HexFormat.of()
          .formatHex(
              MessageDigest.getInstance("SHA-256")
                  .digest(lines.toString().getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Names of the members. */
  public List<String> ids() {
    return members.stream().map(Member::id).toList();
  }

  private static String address(String ip, int port) {
    return (ip.contains(":") ? "[" + ip + "]" : ip) + ":" + port;
  }
}
