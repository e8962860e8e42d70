package io.tensorcast.operator.validation;

import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * The operator-level list of source endpoints a ModelArtifact may use (Helm value {@code
 * source.allowedEndpoints}, environment {@code TENSORCAST_ALLOWED_ENDPOINTS}). Empty: any endpoint
 * the other rules accept.
 *
 * <p>An entry is {@code scheme://host[:port]}: scheme {@code https} or {@code http}; host a DNS
 * name, an IPv4 address or a bracketed IPv6 address, where {@code *} in a DNS name stands for any
 * characters within one label (so {@code https://s3.*.amazonaws.com} matches {@code
 * https://s3.eu-west-1.amazonaws.com} but not {@code https://s3.amazonaws.com} or {@code
 * https://s3.x.evil.example/.amazonaws.com}); without a port, only the scheme's default port (443,
 * 80) matches. Entries have no path: an endpoint's path does not widen or narrow what it reaches.
 * Host names compare case-insensitively and without a trailing dot.
 */
public final class EndpointAllowlist {

  /** Allows every endpoint. */
  public static final EndpointAllowlist ANY = new EndpointAllowlist(List.of());

  private static final Pattern HOST_GLOB =
      Pattern.compile("[a-z0-9*]([-a-z0-9*]*[a-z0-9*])?(\\.[a-z0-9*]([-a-z0-9*]*[a-z0-9*])?)*");

  /** One entry, kept as written and as a matcher. */
  private record Entry(String text, String scheme, Pattern host, int port) {}

  private final List<Entry> entries;

  private EndpointAllowlist(List<Entry> entries) {
    this.entries = List.copyOf(entries);
  }

  /**
   * Parses entries separated by commas and/or white space.
   *
   * @throws IllegalArgumentException naming the first entry that is not {@code
   *     https|http://host[:port]}, and why
   */
  public static EndpointAllowlist parse(String text) {
    if (text == null || text.isBlank()) {
      return ANY;
    }
    List<Entry> out = new ArrayList<>();
    for (String raw : text.split("[,\\s]+")) {
      if (!raw.isEmpty()) {
        out.add(entry(raw));
      }
    }
    return new EndpointAllowlist(out);
  }

  private static Entry entry(String raw) {
    String text = raw.endsWith("/") ? raw.substring(0, raw.length() - 1) : raw;
    int sep = text.indexOf("://");
    if (sep < 0) {
      throw bad(raw, "is not scheme://host[:port]");
    }
    String scheme = text.substring(0, sep).toLowerCase(Locale.ROOT);
    if (!scheme.equals("https") && !scheme.equals("http")) {
      throw bad(raw, "has scheme '" + scheme + "'; only https and http");
    }
    String authority = text.substring(sep + 3);
    if (authority.contains("/") || authority.contains("?") || authority.contains("#")) {
      throw bad(raw, "has a path, query or fragment; entries are scheme://host[:port]");
    }
    if (authority.contains("@")) {
      throw bad(raw, "has user information; entries are scheme://host[:port]");
    }
    String host;
    int port = -1;
    if (authority.startsWith("[")) {
      int close = authority.indexOf(']');
      if (close < 0) {
        throw bad(raw, "has an unclosed IPv6 bracket");
      }
      host = authority.substring(0, close + 1).toLowerCase(Locale.ROOT);
      String rest = authority.substring(close + 1);
      if (!rest.isEmpty()) {
        if (!rest.startsWith(":")) {
          throw bad(raw, "has characters after the IPv6 address");
        }
        port = port(raw, rest.substring(1));
      }
    } else {
      int colon = authority.lastIndexOf(':');
      host = colon < 0 ? authority : authority.substring(0, colon);
      if (colon >= 0) {
        port = port(raw, authority.substring(colon + 1));
      }
      host = host.toLowerCase(Locale.ROOT);
      if (host.endsWith(".")) {
        host = host.substring(0, host.length() - 1);
      }
      if (!HOST_GLOB.matcher(host).matches()) {
        throw bad(
            raw,
            "host '"
                + host
                + "' is not a DNS name (labels of a-z, 0-9, '-', with * for any characters"
                + " within one label) or an address");
      }
    }
    if (port < 0) {
      port = scheme.equals("https") ? 443 : 80;
    }
    StringBuilder regex = new StringBuilder();
    for (char c : host.toCharArray()) {
      if (c == '*') {
        regex.append("[^.]*");
      } else {
        regex.append(Pattern.quote(Character.toString(c)));
      }
    }
    return new Entry(raw, scheme, Pattern.compile(regex.toString()), port);
  }

  private static int port(String raw, String text) {
    try {
      int p = Integer.parseInt(text);
      if (p >= 1 && p <= 65535) {
        return p;
      }
    } catch (NumberFormatException e) {
      // fall through
    }
    throw bad(raw, "port '" + text + "' is not 1-65535");
  }

  private static IllegalArgumentException bad(String entry, String why) {
    return new IllegalArgumentException("allowed endpoint '" + entry + "' " + why);
  }

  /** Whether no entry is configured (everything is allowed). */
  public boolean isEmpty() {
    return entries.isEmpty();
  }

  /** The entries as written. */
  public List<String> entries() {
    return entries.stream().map(Entry::text).toList();
  }

  /**
   * Whether {@code endpoint} (an absolute http(s) URL) is allowed: always when the list is empty,
   * else when an entry has its scheme, host and port.
   */
  public boolean allows(String endpoint) {
    if (entries.isEmpty()) {
      return true;
    }
    URI uri;
    try {
      uri = new URI(endpoint);
    } catch (URISyntaxException e) {
      return false;
    }
    if (uri.getScheme() == null || uri.getHost() == null) {
      return false;
    }
    String scheme = uri.getScheme().toLowerCase(Locale.ROOT);
    String host = uri.getHost().toLowerCase(Locale.ROOT);
    if (host.endsWith(".")) {
      host = host.substring(0, host.length() - 1);
    }
    int port = uri.getPort() >= 0 ? uri.getPort() : scheme.equals("https") ? 443 : 80;
    for (Entry e : entries) {
      if (e.scheme().equals(scheme) && e.port() == port && e.host().matcher(host).matches()) {
        return true;
      }
    }
    return false;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof EndpointAllowlist that && entries().equals(that.entries());
  }

  @Override
  public int hashCode() {
    return Objects.hash(entries());
  }

  @Override
  public String toString() {
    return entries.isEmpty() ? "[any]" : entries().toString();
  }
}
