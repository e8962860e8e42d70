package io.tensorcast.dataplane.write;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceUri;
import java.net.URI;
import java.util.Set;

/**
 * Where a sealed version is saved: the body of a save request ({@code {"uri", "endpoint", "region",
 * "pathStyle", "insecureEndpoint", "revision", "partSize"}}). Credentials never travel in it: they
 * come from the data plane's environment (on Kubernetes from {@code
 * spec.save.credentialsSecretRef}).
 *
 * @param uri {@code s3://bucket/prefix/}, {@code oss://bucket/prefix/}, {@code hf://org/repo[/dir]}
 *     or {@code file:///dir}: the directory the version's files go into
 * @param parsed the parsed URI
 * @param endpoint endpoint of an S3-compatible store, OSS or a Hub mirror, or null
 * @param region bucket region (S3, OSS), or null
 * @param pathStyle path-style bucket addressing (S3-compatible stores)
 * @param insecureEndpoint the endpoint is plain http (an in-cluster store); refused otherwise
 * @param revision Hub branch to commit to (default {@code main})
 * @param partSize multipart part size in bytes (S3, OSS), 5 MiB to 5 GiB; files larger than one
 *     part are uploaded in parts
 */
public record SaveTarget(
    String uri,
    SourceUri parsed,
    URI endpoint,
    String region,
    boolean pathStyle,
    boolean insecureEndpoint,
    String revision,
    long partSize) {

  /** Default multipart part size: 32 MiB. */
  public static final long DEFAULT_PART_SIZE = 32L << 20;

  /** Smallest part S3 accepts (except the last). */
  public static final long MIN_PART_SIZE = 5L << 20;

  /**
   * Parses a save request body.
   *
   * @throws WriteException 400 {@code InvalidSaveTarget} naming the field and the rule broken
   */
  static SaveTarget parse(ObjectNode body) throws WriteException {
    WriteJson.onlyFields(
        body,
        "save",
        Set.of(
            "uri", "endpoint", "region", "pathStyle", "insecureEndpoint", "revision", "partSize"));
    String uri = WriteJson.text(body, "uri", "save", true);
    SourceUri parsed;
    try {
      parsed = SourceUri.parse(uri);
    } catch (SourceException e) {
      throw WriteException.bad("InvalidSaveTarget", "save: " + e.getMessage());
    }
    URI endpoint = null;
    String ep = WriteJson.text(body, "endpoint", "save", false);
    boolean insecure = bool(body, "insecureEndpoint");
    if (ep != null) {
      try {
        endpoint = URI.create(ep);
      } catch (IllegalArgumentException e) {
        throw WriteException.bad("InvalidSaveTarget", "save: endpoint '" + ep + "' is not a URL");
      }
      if (endpoint.getHost() == null
          || !("https".equals(endpoint.getScheme()) || "http".equals(endpoint.getScheme()))) {
        throw WriteException.bad(
            "InvalidSaveTarget", "save: endpoint '" + ep + "' is not an http(s) URL with a host");
      }
      if ("http".equals(endpoint.getScheme()) && !insecure) {
        throw WriteException.bad(
            "InvalidSaveTarget",
            "save: endpoint "
                + ep
                + " is plain http: credentials and bytes would travel unencrypted; use https, or"
                + " set insecureEndpoint: true for an in-cluster store");
      }
    }
    long part = DEFAULT_PART_SIZE;
    JsonNode ps = body.get("partSize");
    if (ps != null && !ps.isNull()) {
      if (!ps.isIntegralNumber() || ps.asLong() < MIN_PART_SIZE || ps.asLong() > (5L << 30)) {
        throw WriteException.bad(
            "InvalidSaveTarget",
            "save: partSize " + ps + " must be an integer from 5 MiB (5242880) to 5 GiB");
      }
      part = ps.asLong();
    }
    String revision = WriteJson.text(body, "revision", "save", false);
    return new SaveTarget(
        uri,
        parsed,
        endpoint,
        WriteJson.text(body, "region", "save", false),
        bool(body, "pathStyle"),
        insecure,
        revision == null ? "main" : revision,
        part);
  }

  private static boolean bool(ObjectNode body, String field) throws WriteException {
    JsonNode v = body.get(field);
    if (v == null || v.isNull()) {
      return false;
    }
    if (!v.isBoolean()) {
      throw WriteException.bad(
          "InvalidSaveTarget", "save: field \"" + field + "\" must be true or false");
    }
    return v.asBoolean();
  }
}
