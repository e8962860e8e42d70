package io.tensorcast.api.wire;

import com.fasterxml.jackson.annotation.JsonIgnore;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.annotation.JsonPropertyOrder;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.Inet6Address;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * The members of one artifact's swarm: what the operator (the coordinator) sends to every member
 * with {@code PUT /v1/peers}, and what a data-plane pod applies (from that call, or from its {@code
 * --peers} list). The list includes the receiving member itself (matched by id).
 *
 * <p>JSON: {@code {"epoch":"<hex>","members":[{"id":"<pod name>","address":"<ip>:<port>"}, ...]}},
 * an IPv6 address in brackets ({@code [fd00::5]:8472}). {@link #parseJson} is the one reader of
 * that body and {@link #toJson} (equally Jackson's {@code ObjectMapper}) the one writer.
 *
 * <p>Rules, checked by the constructors whatever the origin: the epoch is a non-blank string;
 * member ids are non-blank and unique; a member's port is in 1..65535 (a member is dialled on it).
 * Members are kept sorted by id.
 *
 * @param epoch opaque identity of this member set; the operator sends {@link #epochOf} of the
 *     members (lowercase hex SHA-256, 64 characters), so equal member sets give equal epochs in any
 *     operator process
 * @param members the members, sorted by id, ids unique
 */
@JsonPropertyOrder({"epoch", "members"})
public record Membership(String epoch, List<Member> members) {
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * One member.
   *
   * @param id pod name (the pod runs with {@code --peer-id $(POD_NAME)}); non-blank
   * @param address where its peer transport listens; port in 1..65535
   */
  public record Member(String id, @JsonIgnore InetSocketAddress address) {
    public Member {
      Objects.requireNonNull(id, "id");
      Objects.requireNonNull(address, "address");
      if (id.isBlank()) {
        throw new IllegalArgumentException("member id: must be a non-empty string");
      }
      if (address.getPort() == 0) {
        throw new IllegalArgumentException(
            "member "
                + id
                + ": port 0 is not in 1..65535 ('"
                + Membership.hostPort(address)
                + "'); a member is dialled on its port");
      }
    }

    /** The address as sent on the wire: {@code host:port}, an IPv6 host in brackets. */
    @JsonProperty("address")
    public String hostPort() {
      return Membership.hostPort(address);
    }
  }

  public Membership {
    Objects.requireNonNull(epoch, "epoch");
    if (epoch.isBlank()) {
      throw new IllegalArgumentException("epoch: must be a non-empty string");
    }
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

  /** A membership whose epoch is {@link #epochOf} the members. */
  public static Membership of(List<Member> members) {
    return new Membership(epochOf(members), members);
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

  /** The member ids, in id order. */
  public Set<String> ids() {
    Set<String> out = new LinkedHashSet<>();
    members.forEach(m -> out.add(m.id()));
    return Collections.unmodifiableSet(out);
  }

  /** This membership as the JSON body of {@code PUT /v1/peers} (see the class). */
  public String toJson() {
    try {
      return JSON.writeValueAsString(this);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot write membership as JSON", e);
    }
  }

  /**
   * Parses the body of {@code PUT /v1/peers} (see the class); unknown fields are ignored, so the
   * operator may be newer.
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
   * Parses {@code --peers ID=HOST:PORT,...}; the epoch is {@link #epochOf} the members, as the
   * operator computes it.
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
    return of(out);
  }

  /**
   * Lowercase hex SHA-256 (64 characters) of the members' lines {@code id=host:port\n} ({@link
   * Member#hostPort}), sorted by id.
   */
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

  /**
   * {@code host:port}; an IPv6 address in brackets and in its RFC 5952 text form ({@code fd00::2},
   * as Kubernetes writes a pod IP), whatever form it was given in.
   */
  private static String hostPort(InetSocketAddress a) {
    String host =
        a.getAddress() instanceof Inet6Address v6 && v6.getScopeId() == 0
            ? rfc5952(v6.getAddress())
            : a.getHostString();
    boolean brackets = host.indexOf(':') >= 0 && !host.startsWith("[");
    return (brackets ? "[" + host + "]" : host) + ":" + a.getPort();
  }

  /** RFC 5952 text of 16 address bytes: lowercase, no leading zeros, the longest zero run as ::. */
  private static String rfc5952(byte[] raw) {
    int[] groups = new int[8];
    for (int i = 0; i < 8; i++) {
      groups[i] = ((raw[2 * i] & 0xff) << 8) | (raw[2 * i + 1] & 0xff);
    }
    int bestStart = -1;
    int bestLength = 1;
    for (int i = 0; i < 8; ) {
      int j = i;
      while (j < 8 && groups[j] == 0) {
        j++;
      }
      if (j - i > bestLength) {
        bestStart = i;
        bestLength = j - i;
      }
      i = j == i ? i + 1 : j;
    }
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < 8; i++) {
      if (i == bestStart) {
        out.append("::");
        i += bestLength - 1;
        continue;
      }
      if (out.length() > 0 && out.charAt(out.length() - 1) != ':') {
        out.append(':');
      }
      out.append(Integer.toHexString(groups[i]));
    }
    return out.toString();
  }
}
