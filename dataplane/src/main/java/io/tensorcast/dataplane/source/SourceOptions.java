package io.tensorcast.dataplane.source;

import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * How to reach and filter a source: the {@code spec.source} fields of a ModelArtifact other than
 * the URI, plus client limits. Immutable; build with {@link #builder()}. {@link #toString()} never
 * shows secrets.
 *
 * <p>Defaults: no include/exclude (every file), no endpoint override (AWS), no region (us-east-1
 * with cross-region access when there is no endpoint), virtual-hosted addressing, the SDK's default
 * credentials chain, 32 connections, connect timeout 10 s, read (socket) timeout 30 s, request
 * timeout 60 s, 3 attempts for listing calls, no revision (a Hub source then reads {@code main}),
 * no Hub token (a Hub source then reads {@code HF_TOKEN} from the environment).
 */
public final class SourceOptions {

  /**
   * Explicit credentials (from the artifact's {@code credentialsSecretRef}).
   *
   * @param accessKeyId access key id
   * @param secretAccessKey secret key; never printed
   * @param sessionToken session token for temporary credentials, if any; never printed
   */
  public record StaticCredentials(
      String accessKeyId, String secretAccessKey, Optional<String> sessionToken) {
    public StaticCredentials {
      if (accessKeyId == null || accessKeyId.isBlank()) {
        throw new IllegalArgumentException("credentials: accessKeyId is empty");
      }
      if (secretAccessKey == null || secretAccessKey.isEmpty()) {
        throw new IllegalArgumentException(
            "credentials: secretAccessKey is empty for access key " + accessKeyId);
      }
      Objects.requireNonNull(sessionToken, "sessionToken");
    }

    @Override
    public String toString() {
      return "StaticCredentials[accessKeyId="
          + accessKeyId
          + ", secretAccessKey=***"
          + (sessionToken.isPresent() ? ", sessionToken=***" : "")
          + "]";
    }
  }

  /** Where credentials come from. */
  public enum CredentialsMode {
    /** The AWS SDK default chain: environment, system properties, profile, web identity, IMDS. */
    DEFAULT_CHAIN,
    /** {@link #credentials()} as given. */
    STATIC,
    /** Unsigned requests, for public buckets. */
    ANONYMOUS
  }

  private final PathFilter filter;
  private final URI endpoint;
  private final String region;
  private final boolean pathStyle;
  private final CredentialsMode credentialsMode;
  private final StaticCredentials credentials;
  private final int maxConnections;
  private final Duration connectTimeout;
  private final Duration readTimeout;
  private final Duration requestTimeout;
  private final int listMaxAttempts;
  private final boolean throttledRetriesInPlace;
  private final String revision;
  private final String token;
  private final boolean allowInsecureEndpoint;

  private SourceOptions(Builder b) {
    this.filter = PathFilter.of(b.include, b.exclude);
    this.endpoint = b.endpoint;
    this.region = b.region;
    this.pathStyle = b.pathStyle;
    this.credentialsMode = b.credentialsMode;
    this.credentials = b.credentials;
    this.maxConnections = b.maxConnections;
    this.connectTimeout = b.connectTimeout;
    this.readTimeout = b.readTimeout;
    this.requestTimeout = b.requestTimeout;
    this.listMaxAttempts = b.listMaxAttempts;
    this.throttledRetriesInPlace = b.throttledRetriesInPlace;
    this.revision = b.revision;
    this.token = b.token;
    this.allowInsecureEndpoint = b.allowInsecureEndpoint;
  }

  /** Options with every default. */
  public static SourceOptions defaults() {
    return builder().build();
  }

  public static Builder builder() {
    return new Builder();
  }

  /** A builder holding every field of these options, to derive changed copies. */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.include = filter.include();
    b.exclude = filter.exclude();
    b.endpoint = endpoint;
    b.region = region;
    b.pathStyle = pathStyle;
    b.credentialsMode = credentialsMode;
    b.credentials = credentials;
    b.maxConnections = maxConnections;
    b.connectTimeout = connectTimeout;
    b.readTimeout = readTimeout;
    b.requestTimeout = requestTimeout;
    b.listMaxAttempts = listMaxAttempts;
    b.throttledRetriesInPlace = throttledRetriesInPlace;
    b.revision = revision;
    b.token = token;
    b.allowInsecureEndpoint = allowInsecureEndpoint;
    return b;
  }

  /**
   * Whether credentials may go to a plain {@code http://} endpoint: an in-cluster store that speaks
   * no TLS, named explicitly ({@code --allow-insecure-endpoint}). Off by default ({@link
   * EndpointPolicy}).
   */
  public boolean allowInsecureEndpoint() {
    return allowInsecureEndpoint;
  }

  /** The include/exclude selection. */
  public PathFilter filter() {
    return filter;
  }

  /** The endpoint override of an S3-compatible store (e.g. {@code http://127.0.0.1:9090}). */
  public Optional<URI> endpoint() {
    return Optional.ofNullable(endpoint);
  }

  /** The signing region, e.g. {@code us-east-1}. */
  public Optional<String> region() {
    return Optional.ofNullable(region);
  }

  /** Path-style addressing ({@code endpoint/bucket/key}) instead of virtual-hosted. */
  public boolean pathStyle() {
    return pathStyle;
  }

  public CredentialsMode credentialsMode() {
    return credentialsMode;
  }

  /** The explicit credentials when {@link #credentialsMode()} is {@code STATIC}. */
  public Optional<StaticCredentials> credentials() {
    return Optional.ofNullable(credentials);
  }

  /** Size of the HTTP connection pool: the most connections open to the store at once. */
  public int maxConnections() {
    return maxConnections;
  }

  /** Time allowed to establish a TCP (and TLS) connection. */
  public Duration connectTimeout() {
    return connectTimeout;
  }

  /** Longest silence allowed while waiting for response bytes (socket timeout). */
  public Duration readTimeout() {
    return readTimeout;
  }

  /**
   * Time allowed for one request attempt until its response headers (listing pages in full). A
   * ranged read's body is bounded by {@link #readTimeout()} instead.
   */
  public Duration requestTimeout() {
    return requestTimeout;
  }

  /** Attempts the client makes for one listing call (the data path retries on its own). */
  public int listMaxAttempts() {
    return listMaxAttempts;
  }

  /**
   * Whether a metadata call (listing, {@code HEAD}, Hub API call) refused as throttled (429, {@code
   * 503 SlowDown}) is retried inside the call, waiting the server's {@code Retry-After} there
   * (default); false when the caller paces throttling for all its requests together — a load's
   * throttling gate — so that a refusal goes to it at once.
   */
  public boolean throttledRetriesInPlace() {
    return throttledRetriesInPlace;
  }

  /**
   * The revision of a Hugging Face repository ({@code spec.source.revision}): a branch, a tag, a
   * 40-hex commit sha or a pull-request ref such as {@code refs/pr/1}. Other sources ignore it.
   */
  public Optional<String> revision() {
    return Optional.ofNullable(revision);
  }

  /**
   * A Hugging Face access token (sent as {@code Authorization: Bearer}); when absent a Hub source
   * reads {@code HF_TOKEN}. Never printed.
   */
  public Optional<String> token() {
    return Optional.ofNullable(token);
  }

  @Override
  public String toString() {
    return "SourceOptions["
        + filter
        + (revision != null ? ", revision=" + revision : "")
        + (token != null ? ", token=***" : "")
        + (endpoint != null ? ", endpoint=" + endpoint : "")
        + (region != null ? ", region=" + region : "")
        + (pathStyle ? ", pathStyle" : "")
        + (allowInsecureEndpoint ? ", allowInsecureEndpoint" : "")
        + ", credentials="
        + (credentialsMode == CredentialsMode.STATIC ? credentials : credentialsMode)
        + ", maxConnections="
        + maxConnections
        + ", connectTimeout="
        + connectTimeout
        + ", readTimeout="
        + readTimeout
        + ", requestTimeout="
        + requestTimeout
        + "]";
  }

  /** Builder; {@link #build()} checks every field and names the one that is wrong. */
  public static final class Builder {
    private List<String> include = List.of();
    private List<String> exclude = List.of();
    private URI endpoint;
    private String region;
    private boolean pathStyle;
    private CredentialsMode credentialsMode = CredentialsMode.DEFAULT_CHAIN;
    private StaticCredentials credentials;
    private int maxConnections = 32;
    private Duration connectTimeout = Duration.ofSeconds(10);
    private Duration readTimeout = Duration.ofSeconds(30);
    private Duration requestTimeout = Duration.ofSeconds(60);
    private int listMaxAttempts = 3;
    private boolean throttledRetriesInPlace = true;
    private String revision;
    private String token;
    private boolean allowInsecureEndpoint;

    private Builder() {}

    /** Lets credentials go to a plain {@code http://} endpoint (an in-cluster store). */
    public Builder allowInsecureEndpoint(boolean allow) {
      this.allowInsecureEndpoint = allow;
      return this;
    }

    /** A Hub revision: branch, tag, commit sha or {@code refs/pr/N}; {@code null} for none. */
    public Builder revision(String revision) {
      this.revision = revision;
      return this;
    }

    /** A Hub access token; {@code null} to fall back to {@code HF_TOKEN}. */
    public Builder token(String token) {
      this.token = token;
      return this;
    }

    /** Globs a file must match (any of them) to be selected; empty selects all. */
    public Builder include(List<String> globs) {
      this.include = List.copyOf(globs);
      return this;
    }

    /** Globs that deselect a file. */
    public Builder exclude(List<String> globs) {
      this.exclude = List.copyOf(globs);
      return this;
    }

    /** An {@code http://} or {@code https://} endpoint of an S3-compatible store. */
    public Builder endpoint(URI endpoint) {
      this.endpoint = endpoint;
      return this;
    }

    public Builder region(String region) {
      this.region = region;
      return this;
    }

    public Builder pathStyle(boolean pathStyle) {
      this.pathStyle = pathStyle;
      return this;
    }

    /** Uses these credentials instead of the default chain. */
    public Builder credentials(StaticCredentials credentials) {
      this.credentials = Objects.requireNonNull(credentials, "credentials");
      this.credentialsMode = CredentialsMode.STATIC;
      return this;
    }

    public Builder maxConnections(int maxConnections) {
      this.maxConnections = maxConnections;
      return this;
    }

    public Builder connectTimeout(Duration timeout) {
      this.connectTimeout = timeout;
      return this;
    }

    public Builder readTimeout(Duration timeout) {
      this.readTimeout = timeout;
      return this;
    }

    public Builder requestTimeout(Duration timeout) {
      this.requestTimeout = timeout;
      return this;
    }

    public Builder listMaxAttempts(int attempts) {
      this.listMaxAttempts = attempts;
      return this;
    }

    /** See {@link SourceOptions#throttledRetriesInPlace()}. */
    public Builder throttledRetriesInPlace(boolean inPlace) {
      this.throttledRetriesInPlace = inPlace;
      return this;
    }

    /**
     * @throws IllegalArgumentException naming the field and the rule broken
     */
    public SourceOptions build() {
      if (endpoint != null) {
        String scheme = endpoint.getScheme();
        if (scheme == null
            || !(scheme.equalsIgnoreCase("http") || scheme.equalsIgnoreCase("https"))
            || endpoint.getHost() == null) {
          throw new IllegalArgumentException(
              "endpoint '"
                  + endpoint
                  + "' must be an http:// or https:// URL with a host, e.g."
                  + " https://s3.us-west-2.amazonaws.com");
        }
        if (endpoint.getRawQuery() != null || endpoint.getRawFragment() != null) {
          throw new IllegalArgumentException(
              "endpoint '" + endpoint + "' must not have a query or fragment");
        }
      }
      if (region != null && !region.matches("[a-z0-9][a-z0-9-]{0,62}")) {
        throw new IllegalArgumentException(
            "region '" + region + "' must be lowercase letters, digits and '-', e.g. us-east-1");
      }
      if (maxConnections < 1 || maxConnections > 4096) {
        throw new IllegalArgumentException(
            "maxConnections must be between 1 and 4096, got " + maxConnections);
      }
      positive("connectTimeout", connectTimeout);
      positive("readTimeout", readTimeout);
      positive("requestTimeout", requestTimeout);
      if (listMaxAttempts < 1 || listMaxAttempts > 20) {
        throw new IllegalArgumentException(
            "listMaxAttempts must be between 1 and 20, got " + listMaxAttempts);
      }
      if (revision != null
          && (revision.isBlank()
              || !revision.strip().equals(revision)
              || revision.chars().anyMatch(c -> c < 0x20 || c == 0x7f))) {
        throw new IllegalArgumentException(
            "revision '"
                + revision
                + "' must be a branch, tag, commit sha or refs/pr/N without spaces around it or"
                + " control characters");
      }
      if (token != null
          && (token.isBlank() || token.chars().anyMatch(c -> c <= 0x20 || c >= 0x7f))) {
        throw new IllegalArgumentException(
            "token must be a non-empty Hugging Face token without spaces or control characters");
      }
      return new SourceOptions(this);
    }

    private static void positive(String field, Duration d) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException(field + " must be a positive duration, got " + d);
      }
    }
  }
}
