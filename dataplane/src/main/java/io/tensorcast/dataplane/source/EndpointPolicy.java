package io.tensorcast.dataplane.source;

import io.tensorcast.api.Reason;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.URI;
import java.net.UnknownHostException;
import java.util.Locale;
import java.util.Set;

/**
 * Where a source may send requests, checked before the first one: a data plane holds credentials
 * and reads what an endpoint answers into a store others consume, so an endpoint chosen by whoever
 * writes a ModelArtifact must not become a way to leak those credentials or to read the node's
 * metadata service.
 *
 * <ul>
 *   <li>Credentials (AWS keys, a Hub token) go only to {@code https://} endpoints, unless the
 *       endpoint is explicitly an in-cluster store without TLS ({@code --allow-insecure-endpoint},
 *       which the operator sets from {@code spec.source.insecureEndpoint}): {@code
 *       InsecureEndpoint}.
 *   <li>Never an endpoint, or a redirect, whose host is or resolves to a link-local address
 *       (169.254.0.0/16, fe80::/10; cloud metadata services live there: 169.254.169.254,
 *       fd00:ec2::254 on AWS, 100.100.100.200 on Alibaba Cloud) or is a metadata host name ({@code
 *       metadata.google.internal}): {@code ForbiddenEndpoint}.
 * </ul>
 *
 * <p>The host is resolved once when checked; a name whose address changes to a forbidden one later
 * (DNS rebinding) is caught for Hub redirects, which are checked per hop, not for the S3 client's
 * own connections.
 */
public final class EndpointPolicy {
  /** Host names of cloud metadata services, refused whatever they resolve to. */
  static final Set<String> METADATA_HOSTS =
      Set.of(
          "metadata.google.internal",
          "metadata.goog",
          "metadata",
          "instance-data",
          "instance-data.ec2.internal");

  private EndpointPolicy() {}

  /**
   * Checks an endpoint before any request goes to it.
   *
   * @param endpoint the URL requests go to
   * @param sendsCredentials whether requests carry credentials (signed S3 requests, a Hub token)
   * @param allowInsecure whether plain http is allowed for credentials ({@code
   *     --allow-insecure-endpoint})
   * @param what names the endpoint in the message, e.g. {@code "--endpoint"}
   * @throws SourceException {@code InsecureEndpoint} or {@code ForbiddenEndpoint}, not retryable,
   *     naming the endpoint, the rule and the way out
   */
  public static void check(
      URI endpoint, boolean sendsCredentials, boolean allowInsecure, String what)
      throws SourceException {
    checkHost(endpoint, what);
    if (sendsCredentials && !allowInsecure && "http".equalsIgnoreCase(endpoint.getScheme())) {
      throw new SourceException(
          Reason.InsecureEndpoint,
          what
              + " '"
              + endpoint
              + "' is plain http and this source sends credentials (AWS keys or a Hub token),"
              + " which anyone on the path could read; use https, or allow it explicitly for an"
              + " in-cluster store without TLS (--allow-insecure-endpoint; on a ModelArtifact"
              + " spec.source.insecureEndpoint: true)",
          false);
    }
  }

  /**
   * Refuses a host that is, or resolves to, a link-local or metadata address.
   *
   * @throws SourceException {@code ForbiddenEndpoint}
   */
  public static void checkHost(URI url, String what) throws SourceException {
    String host = url.getHost();
    if (host == null) {
      return; // the URL's own validation names this
    }
    String h = host.toLowerCase(Locale.ROOT);
    if (h.endsWith(".")) {
      h = h.substring(0, h.length() - 1);
    }
    if (h.startsWith("[") && h.endsWith("]")) {
      h = h.substring(1, h.length() - 1);
    }
    if (METADATA_HOSTS.contains(h)) {
      throw forbidden(url, what, "'" + host + "' is a cloud metadata service's host name");
    }
    InetAddress[] addresses;
    try {
      addresses = InetAddress.getAllByName(h);
    } catch (UnknownHostException e) {
      return; // unresolvable: the client's own request fails and says so
    }
    for (InetAddress a : addresses) {
      String why = forbiddenAddress(a);
      if (why != null) {
        throw forbidden(url, what, "'" + host + "' is " + a.getHostAddress() + ", " + why);
      }
    }
  }

  /** Why an address may not be an endpoint, or null. */
  static String forbiddenAddress(InetAddress a) {
    byte[] b = a.getAddress();
    if (a instanceof Inet4Address) {
      if ((b[0] & 0xff) == 169 && (b[1] & 0xff) == 254) {
        return "a link-local address (169.254.0.0/16, where cloud metadata services answer)";
      }
      if ((b[0] & 0xff) == 100
          && (b[1] & 0xff) == 100
          && (b[2] & 0xff) == 100
          && (b[3] & 0xff) == 200) {
        return "Alibaba Cloud's metadata service";
      }
      return null;
    }
    if (a instanceof Inet6Address) {
      if ((b[0] & 0xff) == 0xfe && (b[1] & 0xc0) == 0x80) {
        return "a link-local address (fe80::/10)";
      }
      if (a.getHostAddress().equalsIgnoreCase("fd00:ec2:0:0:0:0:0:254")) {
        return "AWS's IPv6 metadata service";
      }
      boolean mapped = b[10] == (byte) 0xff && b[11] == (byte) 0xff;
      for (int i = 0; i < 10 && mapped; i++) {
        mapped = b[i] == 0;
      }
      if (mapped) {
        try {
          return forbiddenAddress(
              InetAddress.getByAddress(java.util.Arrays.copyOfRange(b, 12, 16)));
        } catch (UnknownHostException e) {
          return null;
        }
      }
    }
    return null;
  }

  private static SourceException forbidden(URI url, String what, String why) {
    return new SourceException(
        Reason.ForbiddenEndpoint,
        what
            + " '"
            + url
            + "' is refused: "
            + why
            + "; a data plane never sends requests (or credentials) there",
        false);
  }
}
