package io.tensorcast.dataplane.p2p;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * The members of an artifact's swarm, as the operator sends them ({@code PUT /v1/peers}) or as
 * {@code --peers} gives them. The list includes the receiving member itself (matched by id).
 *
 * @param epoch opaque identity of this member set (the operator's hex SHA-256 of the sorted {@code
 *     id=address} lines)
 * @param members the members, sorted by id, ids unique
 */
public record Membership(String epoch, List<Member> members) {
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * One member.
   *
   * @param id pod name
   * @param address where its peer transport listens
   */
  public record Member(String id, InetSocketAddress address) {
    public Member {
      Objects.requireNonNull(id, "id");
      Objects.requireNonNull(address, "address");
    }

    /** {@code host:port} as given. */
    public String hostPort() {
      return address.getHostString() + ":" + address.getPort();
    }
  }

  public Membership {
    Objects.requireNonNull(epoch, "epoch");
    List<Member> sorted = new ArrayList<>(members);
    sorted.sort(Comparator.comparing(Member::id));
    Set<String> ids = new HashSet<>();
    for (Member m : sorted) {
      if (!ids.add(m.id())) {
        throw new IllegalArgumentException("members: id '" + m.id() + "' appears twice");
      }
    }
    members = List.copyOf(sorted);
  }

  /** The member with this id, or null. */
  public Member member(String id) {
    for (Member m : members) {
      if (m.id().equals(id)) {
        return m;
      }
    }
    return null;
  }

  /** Whether some member's published address has this IP (IPv4-mapped IPv6 equals its IPv4). */
  public boolean publishes(java.net.InetAddress ip) {
    for (Member m : members) {
      if (PeerHandshake.sameAddress(ip, m.address().getAddress())) {
        return true;
      }
    }
    return false;
  }

  /** The member ids. */
  public Set<String> ids() {
    Set<String> out = new HashSet<>();
    members.forEach(m -> out.add(m.id()));
    return out;
  }

  /**
   * Parses the body of {@code PUT /v1/peers}: {@code {"epoch":"...","members":[{"id":"...",
   * "address":"<ip>:<port>"}, ...]}}.
   *
   * @throws IllegalArgumentException with a one-line message naming the field and the rule broken
   */
  public static Membership parseJson(String body) {
    JsonNode root;
    try {
      root = JSON.readTree(body);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(
          "body is not JSON: " + e.getOriginalMessage().replace('\n', ' '));
    }
    if (root == null || !root.isObject()) {
      throw new IllegalArgumentException("body must be a JSON object with epoch and members");
    }
    JsonNode epoch = root.get("epoch");
    if (epoch == null || !epoch.isTextual() || epoch.asText().isBlank()) {
      throw new IllegalArgumentException("epoch: must be a non-empty string");
    }
    JsonNode members = root.get("members");
    if (members == null || !members.isArray()) {
      throw new IllegalArgumentException("members: must be an array of {id, address}");
    }
    List<Member> out = new ArrayList<>();
    for (int i = 0; i < members.size(); i++) {
      JsonNode m = members.get(i);
      String where = "members[" + i + "]";
      if (!m.isObject()) {
        throw new IllegalArgumentException(where + ": must be an object with id and address");
      }
      JsonNode id = m.get("id");
      if (id == null || !id.isTextual() || id.asText().isBlank()) {
        throw new IllegalArgumentException(where + ".id: must be a non-empty string");
      }
      JsonNode address = m.get("address");
      if (address == null || !address.isTextual()) {
        throw new IllegalArgumentException(where + ".address: must be a string <ip>:<port>");
      }
      out.add(new Member(id.asText(), memberAddress(address.asText(), where + ".address")));
    }
    return new Membership(epoch.asText(), out);
  }

  /**
   * Parses {@code --peers ID=HOST:PORT,...}; the epoch is the hex SHA-256 of the sorted {@code
   * id=address} lines, as the operator computes it.
   *
   * @throws IllegalArgumentException naming {@code --peers} and the entry
   */
  public static Membership parseStatic(String spec) {
    List<Member> out = new ArrayList<>();
    for (String entry : spec.split(",")) {
      String e = entry.strip();
      if (e.isEmpty()) {
        continue;
      }
      int eq = e.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException(
            "--peers: entry '" + e + "' is not ID=HOST:PORT (e.g. pod-0=10.0.0.5:8472)");
      }
      out.add(
          new Member(e.substring(0, eq), memberAddress(e.substring(eq + 1), "--peers entry " + e)));
    }
    if (out.isEmpty()) {
      throw new IllegalArgumentException("--peers: no members given");
    }
    return new Membership(epochOf(out), out);
  }

  /** Hex SHA-256 of the members' {@code id=host:port} lines, sorted by id, each ending in \n. */
  public static String epochOf(List<Member> members) {
    List<Member> sorted = new ArrayList<>(members);
    sorted.sort(Comparator.comparing(Member::id));
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      for (Member m : sorted) {
        md.update((m.id() + "=" + m.hostPort() + "\n").getBytes(StandardCharsets.UTF_8));
      }
      return HexFormat.of().formatHex(md.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** A member's address: as {@link #address}, and a member cannot be dialled on port 0. */
  private static InetSocketAddress memberAddress(String spec, String field) {
    InetSocketAddress a = address(spec, field);
    if (a.getPort() == 0) {
      throw new IllegalArgumentException(
          field + ": port 0 is not in 1..65535 ('" + spec + "'); a member is dialled on its port");
    }
    return a;
  }

  /**
   * Parses {@code host:port} ({@code [v6]:port} for IPv6); port 0 is allowed (a listen address that
   * takes any free port).
   *
   * @throws IllegalArgumentException naming {@code field}
   */
  public static InetSocketAddress address(String spec, String field) {
    int colon = spec.lastIndexOf(':');
    if (colon <= 0 || colon == spec.length() - 1) {
      throw new IllegalArgumentException(field + ": '" + spec + "' is not HOST:PORT");
    }
    String host = spec.substring(0, colon);
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    int port;
    try {
      port = Integer.parseInt(spec.substring(colon + 1));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(field + ": port of '" + spec + "' is not a number");
    }
    if (port < 0 || port > 65535) {
      throw new IllegalArgumentException(field + ": port " + port + " is not in 0..65535");
    }
    return new InetSocketAddress(host, port);
  }
}
