package io.tensorcast.operator.validation;

import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.operator.desired.ArtifactChildren;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Where a ModelArtifact's data-plane pods may send requests, and its credentials: the rules that
 * keep the operator from being a confused deputy that ships a namespace's Secrets, or its own pods'
 * requests, wherever a spec points.
 *
 * <ul>
 *   <li>Plain {@code http} only when the spec says so ({@code spec.source.insecureEndpoint: true},
 *       an in-cluster store), and never for {@code hf://}: credentials go only to {@code https}.
 *   <li>No link-local or cloud metadata address: 169.254.0.0/16, fe80::/10, fd00:ec2::254 (AWS
 *       IPv6), 100.100.100.200 (Alibaba Cloud), IPv4-mapped forms of them, and the names {@code
 *       metadata}, {@code metadata.google.internal}, {@code instance-data}, {@code
 *       instance-data.ec2.internal}. Numeric hosts must be written canonically (dotted quad), so
 *       {@code 2852039166} or {@code 0251.0376.0251.0376} (both 169.254.169.254 to a C resolver)
 *       cannot hide one. A DNS name that resolves to such an address is for the data plane to
 *       refuse after resolving it: the operator does not share the pods' view of DNS.
 *   <li>The operator's {@link EndpointAllowlist}, applied to the endpoint the pods would use: the
 *       spec's, else the provider's public one ({@code https://huggingface.co}, {@code
 *       https://s3.<region>.amazonaws.com}, {@code https://s3.oss-<region>.aliyuncs.com}).
 *   <li>{@code credentialsSecretRef} must not name a Secret the operator manages (names ending in
 *       {@value ArtifactChildren#SUFFIX}): those hold peer secrets and tokens of other artifacts.
 * </ul>
 */
final class EndpointRules {

  private static final Set<String> METADATA_NAMES =
      Set.of("metadata", "metadata.google.internal", "instance-data", "instance-data.ec2.internal");
  private static final Set<String> METADATA_ADDRESSES = Set.of("100.100.100.200");

  /** fd00:ec2::254, the AWS instance metadata service over IPv6. */
  private static final byte[] AWS_METADATA_V6 = {
    (byte) 0xfd, 0, 0x0e, (byte) 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54
  };

  private static final Pattern DOTTED_QUAD =
      Pattern.compile(
          "(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)(\\.(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3}");

  /** What a C resolver (inet_aton) would take for a number: digits, hex, dots. */
  private static final Pattern NUMERIC_HOST =
      Pattern.compile("(0x[0-9a-f]*|[0-9]+)(\\.(0x[0-9a-f]*|[0-9]+))*\\.?");

  private EndpointRules() {}

  static void check(SourceSpec source, SourcePolicy policy, List<Violation> out) {
    String uri = source.getUri() == null ? "" : source.getUri();
    String scheme = uri.contains("://") ? uri.substring(0, uri.indexOf("://")) : "";
    boolean insecure = Boolean.TRUE.equals(source.getInsecureEndpoint());
    String endpoint = source.getEndpoint();
    boolean endpointWellFormed =
        endpoint != null && Pattern.matches(SourceSpec.ENDPOINT_PATTERN, endpoint);

    if (scheme.equals("file") && endpoint != null) {
      out.add(
          new Violation(
              "spec.source.endpoint", "is set for a file:// source, which reads no endpoint"));
    }
    if (insecure) {
      if (scheme.equals("hf")) {
        out.add(
            new Violation(
                "spec.source.insecureEndpoint",
                "is not allowed for hf:// sources: the Hugging Face Hub and its mirrors are"
                    + " reached over https only, so the Hub token never travels in clear"));
      } else if (endpoint == null && !scheme.equals("file")) {
        out.add(
            new Violation(
                "spec.source.insecureEndpoint",
                "is true but spec.source.endpoint is empty; it declares that endpoint an"
                    + " in-cluster plain-http store"));
      }
    }
    if (endpointWellFormed) {
      endpoint(endpoint, scheme, insecure, source, out);
    }
    if (!policy.allowedEndpoints().isEmpty() && !scheme.equals("file")) {
      Optional<String> effective =
          endpoint != null ? Optional.of(endpoint) : defaultEndpoint(scheme, source.getRegion());
      effective
          .filter(e -> !policy.allowedEndpoints().allows(e))
          .ifPresent(
              e ->
                  out.add(
                      new Violation(
                          "spec.source.endpoint",
                          (endpoint != null
                                  ? "'" + e + "'"
                                  : "is empty, so the pods would use " + e + ", which")
                              + " is not in the operator's allowed endpoints "
                              + policy.allowedEndpoints().entries()
                              + " (Helm value source.allowedEndpoints,"
                              + " TENSORCAST_ALLOWED_ENDPOINTS)")));
    }
    if (source.getCredentialsSecretRef() != null
        && source.getCredentialsSecretRef().getName() != null
        && source.getCredentialsSecretRef().getName().endsWith(ArtifactChildren.SUFFIX)) {
      out.add(
          new Violation(
              "spec.source.credentialsSecretRef.name",
              "'"
                  + source.getCredentialsSecretRef().getName()
                  + "' ends in "
                  + ArtifactChildren.SUFFIX
                  + ", the names of the Secrets the operator makes for ModelArtifacts (peer"
                  + " secrets and tokens); source credentials must be in a Secret of your own"));
    }
  }

  private static void endpoint(
      String endpoint, String scheme, boolean insecure, SourceSpec source, List<Violation> out) {
    // The authority is split by hand: java.net.URI gives no host for forms such as 0x7f.1 or a
    // trailing-dot address, which other clients (curl, Go, C resolvers) still connect to.
    int start = endpoint.indexOf("://") + 3;
    int end = endpoint.indexOf('/', start);
    String authority = endpoint.substring(start, end < 0 ? endpoint.length() : end);
    int at = authority.lastIndexOf('@');
    if (at >= 0) {
      out.add(
          new Violation(
              "spec.source.endpoint",
              "'"
                  + endpoint
                  + "' carries user information; credentials belong in credentialsSecretRef"));
      authority = authority.substring(at + 1);
    }
    String host;
    String port = null;
    if (authority.startsWith("[")) {
      int close = authority.indexOf(']');
      host = close < 0 ? authority : authority.substring(0, close + 1);
      if (close >= 0 && authority.length() > close + 1) {
        port = authority.charAt(close + 1) == ':' ? authority.substring(close + 2) : "";
      }
    } else {
      int colon = authority.lastIndexOf(':');
      host = colon < 0 ? authority : authority.substring(0, colon);
      port = colon < 0 ? null : authority.substring(colon + 1);
    }
    if (port != null && !port.matches("[1-9][0-9]{0,4}")
        || port != null && Integer.parseInt(port) > 65535) {
      out.add(
          new Violation(
              "spec.source.endpoint", "'" + endpoint + "' has the port '" + port + "'; 1-65535"));
    }
    if (endpoint.regionMatches(true, 0, "http://", 0, 7) && !insecure) {
      String creds =
          source.getCredentialsSecretRef() == null
              ? ""
              : " and the credentials of Secret '"
                  + source.getCredentialsSecretRef().getName()
                  + "'";
      out.add(
          new Violation(
              "spec.source.endpoint",
              "'"
                  + endpoint
                  + "' is plain http: requests"
                  + creds
                  + " would travel unencrypted; use https"
                  + (scheme.equals("hf")
                      ? " (hf:// sources are reached over https only)"
                      : ", or for an in-cluster store set spec.source.insecureEndpoint: true")));
    }
    hostRules(endpoint, host, out);
  }

  private static void hostRules(String endpoint, String rawHost, List<Violation> out) {
    String host = rawHost.toLowerCase(Locale.ROOT);
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
      Optional<String> why = forbiddenIpv6(host);
      why.ifPresent(w -> out.add(new Violation("spec.source.endpoint", "'" + endpoint + "' " + w)));
      return;
    }
    String name = host.endsWith(".") ? host.substring(0, host.length() - 1) : host;
    if (METADATA_NAMES.contains(name)) {
      out.add(
          new Violation(
              "spec.source.endpoint",
              "'" + endpoint + "' names a cloud metadata service (" + name + ")"));
      return;
    }
    if (NUMERIC_HOST.matcher(host).matches() && !DOTTED_QUAD.matcher(host).matches()) {
      out.add(
          new Violation(
              "spec.source.endpoint",
              "'"
                  + endpoint
                  + "' has the numeric host '"
                  + rawHost
                  + "' in a form other than a dotted quad (a.b.c.d, decimal, no leading zeros);"
                  + " resolvers read such forms as other addresses"));
      return;
    }
    if (DOTTED_QUAD.matcher(host).matches()) {
      forbiddenIpv4(host)
          .ifPresent(
              w -> out.add(new Violation("spec.source.endpoint", "'" + endpoint + "' " + w)));
    }
  }

  private static Optional<String> forbiddenIpv4(String quad) {
    if (quad.startsWith("169.254.")) {
      return Optional.of(
          "is a link-local address (169.254.0.0/16), where cloud metadata services answer");
    }
    if (METADATA_ADDRESSES.contains(quad)) {
      return Optional.of("is a cloud metadata service address (" + quad + ")");
    }
    return Optional.empty();
  }

  private static Optional<String> forbiddenIpv6(String literal) {
    byte[] b;
    try {
      if (!literal.matches("[0-9a-f:.]+")) {
        return Optional.of("has an IPv6 host that is not a plain address");
      }
      b = InetAddress.getByName(literal).getAddress();
    } catch (UnknownHostException e) {
      return Optional.of("has an IPv6 host that is not an address");
    }
    if (b.length == 4) {
      // An IPv4-mapped IPv6 address: InetAddress returns the IPv4 address.
      return forbiddenIpv4(
          (b[0] & 0xff) + "." + (b[1] & 0xff) + "." + (b[2] & 0xff) + "." + (b[3] & 0xff));
    }
    if ((b[0] & 0xff) == 0xfe && (b[1] & 0xc0) == 0x80) {
      return Optional.of("is a link-local address (fe80::/10)");
    }
    if (java.util.Arrays.equals(b, AWS_METADATA_V6)) {
      return Optional.of("is the AWS metadata service address (fd00:ec2::254)");
    }
    // IPv4-compatible (::a.b.c.d) forms, deprecated but still parsed by some resolvers.
    boolean zeros = true;
    for (int i = 0; i < 12; i++) {
      zeros &= b[i] == 0;
    }
    if (zeros && (b[12] != 0 || b[13] != 0)) {
      return forbiddenIpv4(
          (b[12] & 0xff) + "." + (b[13] & 0xff) + "." + (b[14] & 0xff) + "." + (b[15] & 0xff));
    }
    return Optional.empty();
  }

  /**
   * The endpoint the data plane uses when the spec names none: the Hub's, AWS S3's regional
   * endpoint (region default {@code us-east-1}), OSS's regional S3-compatible endpoint.
   */
  static Optional<String> defaultEndpoint(String scheme, String region) {
    return switch (scheme) {
      case "hf" -> Optional.of("https://huggingface.co");
      case "s3" ->
          Optional.of("https://s3." + (region == null ? "us-east-1" : region) + ".amazonaws.com");
      case "oss" ->
          region == null
              ? Optional.empty()
              : Optional.of(
                  "https://s3."
                      + (region.startsWith("oss-") ? region : "oss-" + region)
                      + ".aliyuncs.com");
      default -> Optional.empty();
    };
  }
}
