package io.tensorcast.dataplane.source;

import io.tensorcast.api.Reason;
import java.net.URI;
import java.util.Optional;
import java.util.function.Function;

/**
 * Opens the {@link ArtifactSource} a {@link SourceUri} names: {@link FileSource} for {@code
 * file://} and plain paths, {@link S3Source} for {@code s3://} and (with OSS settings) {@code
 * oss://}, {@link HfSource} for {@code hf://}.
 */
public final class Sources {
  private Sources() {}

  /**
   * Opens a source with the process environment (credentials and endpoints of OSS and the Hub).
   *
   * @throws SourceException {@code SourceNotFound}/{@code AccessDenied} when a local directory
   *     cannot be used; {@code InvalidSourceOptions} when an {@code oss://} source has neither
   *     endpoint nor region, or asks for path-style addressing
   */
  public static ArtifactSource open(SourceUri uri, SourceOptions options) throws SourceException {
    return open(uri, options, System::getenv);
  }

  /** As {@link #open(SourceUri, SourceOptions)} reading variables from {@code env}. */
  static ArtifactSource open(SourceUri uri, SourceOptions options, Function<String, String> env)
      throws SourceException {
    return switch (uri.scheme()) {
      case FILE -> FileSource.open(uri.localPath(), options.filter());
      case S3 -> S3Source.open(uri, checked(options, options));
      case OSS -> S3Source.open(uri, checked(ossOptions(uri, options, env), options));
      case HF -> HfSource.open(uri, options, env);
    };
  }

  /**
   * {@code resolved} after {@link EndpointPolicy}: an S3/OSS endpoint must not be link-local or a
   * metadata host, and requests signed with credentials (any mode but anonymous) go to https only
   * unless {@code given} allows plain http.
   */
  private static SourceOptions checked(SourceOptions resolved, SourceOptions given)
      throws SourceException {
    if (resolved.endpoint().isPresent()) {
      EndpointPolicy.check(
          resolved.endpoint().get(),
          resolved.credentialsMode() != SourceOptions.CredentialsMode.ANONYMOUS,
          given.allowInsecureEndpoint(),
          "endpoint");
    }
    return resolved;
  }

  /** Parses {@code uri} and opens it; see {@link SourceUri#parse} and {@link #open}. */
  public static ArtifactSource open(String uri, SourceOptions options) throws SourceException {
    return open(SourceUri.parse(uri), options);
  }

  /**
   * The S3 client settings that reach Alibaba Cloud OSS through its S3-compatible API.
   *
   * <ul>
   *   <li>Endpoint: {@link SourceOptions#endpoint()}, else {@code https://s3.oss-<region>
   *       .aliyuncs.com} from the region ({@code cn-hangzhou} or {@code oss-cn-hangzhou}), the
   *       S3-compatible endpoint of Alibaba's "access OSS with AWS SDKs" guide; one of the two is
   *       required. The signing region is the region id without {@code oss-} ({@code us-east-1}
   *       when only an endpoint is given).
   *   <li>Virtual-hosted addressing ({@code bucket.endpoint}): OSS answers path-style requests with
   *       403 {@code SecondLevelDomainForbidden}, so path-style is refused here.
   *   <li>Request checksums only when required (set by {@link S3Source} for every store): OSS
   *       rejects the {@code aws-chunked} uploads the SDK's newer defaults produce.
   *   <li>Credentials: explicit ones from the options; else {@code OSS_ACCESS_KEY_ID}/{@code
   *       OSS_ACCESS_KEY_SECRET} (+ {@code OSS_SESSION_TOKEN}), else {@code
   *       ALIBABA_CLOUD_ACCESS_KEY_ID}/{@code ALIBABA_CLOUD_ACCESS_KEY_SECRET} (+ {@code
   *       ALIBABA_CLOUD_SECURITY_TOKEN}), else the AWS SDK default chain.
   * </ul>
   *
   * <p>OSS ETags of multipart objects ({@code "…-N"}) are not MD5 digests; like S3 they are used
   * only as {@code If-Match} identities, never to verify content.
   */
  public static SourceOptions ossOptions(
      SourceUri uri, SourceOptions options, Function<String, String> env) throws SourceException {
    if (options.pathStyle()) {
      throw new SourceException(
          Reason.InvalidSourceOptions,
          uri
              + ": OSS refuses path-style addressing (403 SecondLevelDomainForbidden); drop"
              + " --path-style / pathStyle for oss:// sources",
          false);
    }
    Optional<String> regionId =
        options.region().map(r -> r.startsWith("oss-") ? r.substring("oss-".length()) : r);
    if (options.endpoint().isEmpty() && regionId.isEmpty()) {
      throw new SourceException(
          Reason.InvalidSourceOptions,
          uri
              + ": an oss:// source needs a region (e.g. cn-hangzhou, giving the endpoint"
              + " https://s3.oss-cn-hangzhou.aliyuncs.com) or an explicit endpoint",
          false);
    }
    SourceOptions.Builder b = options.toBuilder().pathStyle(false);
    b.endpoint(
        options
            .endpoint()
            .orElseGet(() -> URI.create("https://s3.oss-" + regionId.get() + ".aliyuncs.com")));
    b.region(regionId.orElse("us-east-1"));
    if (options.credentialsMode() == SourceOptions.CredentialsMode.DEFAULT_CHAIN) {
      ossCredentials(env, "OSS_ACCESS_KEY_ID", "OSS_ACCESS_KEY_SECRET", "OSS_SESSION_TOKEN")
          .or(
              () ->
                  ossCredentials(
                      env,
                      "ALIBABA_CLOUD_ACCESS_KEY_ID",
                      "ALIBABA_CLOUD_ACCESS_KEY_SECRET",
                      "ALIBABA_CLOUD_SECURITY_TOKEN"))
          .ifPresent(b::credentials);
    }
    try {
      return b.build();
    } catch (IllegalArgumentException e) {
      throw new SourceException(Reason.InvalidSourceOptions, uri + ": " + e.getMessage(), false, e);
    }
  }

  private static Optional<SourceOptions.StaticCredentials> ossCredentials(
      Function<String, String> env, String idVar, String secretVar, String tokenVar) {
    String id = env.apply(idVar);
    String secret = env.apply(secretVar);
    if (id == null || id.isBlank() || secret == null || secret.isEmpty()) {
      return Optional.empty();
    }
    String token = env.apply(tokenVar);
    return Optional.of(
        new SourceOptions.StaticCredentials(
            id.strip(),
            secret,
            token == null || token.isBlank() ? Optional.empty() : Optional.of(token.strip())));
  }
}
