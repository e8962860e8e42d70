package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Pattern;
import io.fabric8.generator.annotation.Size;
import io.fabric8.generator.annotation.ValidationRule;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Where an artifact's bytes come from ({@code spec.source}).
 *
 * <p>The URI schemes and their meaning are those of the unified artifact IO design: {@code
 * s3://bucket/prefix/}, {@code oss://bucket/prefix/}, {@code hf://org/repo[/subdir]} and {@code
 * file:///path} (a directory on the node). The CRD schema enforces {@link #URI_SCHEME_PATTERN} and,
 * on Kubernetes 1.25 and later, CEL rules with one message per rule of {@link #URI_PATTERN}; the
 * operator enforces {@link #URI_PATTERN}; the data plane still checks every listed path (no {@code
 * ..}, no absolute keys).
 *
 * <p>Exactly one of {@code uri} (the artifact is loaded) and {@code writers} (pods write it): a CEL
 * rule on Kubernetes 1.25 and later, and the operator's check ({@code WrittenRules}) everywhere.
 */
@ValidationRule(
    value = "has(self.uri) != has(self.writers)",
    message =
        "exactly one of uri (the artifact is loaded from it) and writers (pods write it) must be"
            + " set")
@JsonInclude(JsonInclude.Include.NON_NULL)
public class SourceSpec {

  /** A path segment that is neither empty, {@code .} nor {@code ..}, and holds no whitespace. */
  private static final String SEGMENT = "(?:[^/.\\s][^/\\s]*|\\.[^/.\\s][^/\\s]*|\\.\\.[^/\\s]+)";

  /** An object key prefix after the bucket: nothing, {@code /}, or segments with optional '/'. */
  private static final String OBJECT_PREFIX = "(?:/(?:" + SEGMENT + "/)*(?:" + SEGMENT + ")?)?";

  /** S3 bucket naming rules: 3-63 characters, lowercase letters, digits, '.' and '-'. */
  private static final String S3_BUCKET = "[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]";

  /** OSS bucket naming rules: 3-63 characters, lowercase letters, digits and '-'. */
  private static final String OSS_BUCKET = "[a-z0-9][a-z0-9-]{1,61}[a-z0-9]";

  /**
   * Hugging Face Hub rules for an org or repo name: letters, digits, '-', '_', '.', at most 96
   * characters, not starting or ending with '-' or '.'.
   */
  private static final String HF_NAME = "[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?";

  /**
   * The rule {@code spec.source.uri} must match (also emitted as the CRD's OpenAPI {@code
   * pattern}). Anchored, because Kubernetes searches the pattern anywhere in the value (Go RE2; no
   * look-arounds, so it is written without them). Accepts {@code s3://BUCKET[/prefix[/]]}, {@code
   * oss://BUCKET[/prefix[/]]}, {@code hf://ORG/REPO[/subdir][/]} and {@code file:///abs/path[/]};
   * refuses other schemes, empty, {@code .} and {@code ..} segments, and whitespace.
   */
  public static final String URI_PATTERN =
      "^(?:s3://"
          + S3_BUCKET
          + OBJECT_PREFIX
          + "|oss://"
          + OSS_BUCKET
          + OBJECT_PREFIX
          + "|hf://"
          + HF_NAME
          + "/"
          + HF_NAME
          + "(?:/"
          + SEGMENT
          + ")*/?"
          + "|file://(?:/"
          + SEGMENT
          + ")+/?)$";

  /**
   * The rule the CRD schema gives {@code uri} on every Kubernetes version: one of the four schemes
   * and no white space. Short, so that the API server's refusal ({@code spec.source.uri in body
   * should match '...'}) says what is allowed. The bucket, repository and segment rules of {@link
   * #URI_PATTERN} are CEL rules on {@code uri}, one message each, where the server runs CEL
   * (Kubernetes 1.25 and later); the operator checks the whole of {@link #URI_PATTERN} ({@code
   * InvalidSpec}) on every version.
   */
  public static final String URI_SCHEME_PATTERN = "^(s3|oss|hf|file)://\\S+$";

  /** An http(s) URL with a host and an optional path, no query or fragment. */
  public static final String ENDPOINT_PATTERN = "^https?://[^/\\s?#]+(?:/[^\\s?#]*)?$";

  /** Region names of S3 and OSS: lowercase letters, digits and '-'. */
  public static final String REGION_PATTERN = "^[a-z0-9][a-z0-9-]*$";

  /** A revision: one or more characters, none of them white space. */
  public static final String REVISION_PATTERN = "^\\S+$";

  /** Longest {@code uri}: an S3 key (1024 bytes) after scheme and bucket fits with room. */
  public static final int MAX_URI_LENGTH = 2048;

  /** Most patterns in {@code include} or {@code exclude}. */
  public static final int MAX_GLOBS = 256;

  /** Longest pattern in {@code include} or {@code exclude}. */
  public static final int MAX_GLOB_LENGTH = 1024;

  @Pattern(URI_SCHEME_PATTERN)
  @Size(max = MAX_URI_LENGTH)
  @ValidationRule(
      value =
          "!self.startsWith('s3://') || self.matches('^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/|$)')",
      message =
          "the bucket of an s3:// uri has 3-63 characters: a-z, 0-9, '.' and '-', first and last"
              + " a letter or digit")
  @ValidationRule(
      value =
          "!self.startsWith('oss://') || self.matches('^oss://[a-z0-9][a-z0-9-]{1,61}[a-z0-9](/|$)')",
      message =
          "the bucket of an oss:// uri has 3-63 characters: a-z, 0-9 and '-', first and last a"
              + " letter or digit")
  @ValidationRule(
      value =
          "!self.startsWith('hf://') || self.matches('^hf://[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(/|$)')",
      message = "an hf:// uri is hf://org/repo or hf://org/repo/subdir")
  @ValidationRule(
      value = "!self.matches('^[a-z0-9]+://.+//') && !self.matches('/[.][.]?(/|$)')",
      message = "the path of a uri has no empty, '.' or '..' segments")
  @JsonPropertyDescription(
      "Where the artifact lives: s3://bucket/prefix/, oss://bucket/prefix/, hf://org/repo[/subdir]"
          + " or file:///path (a directory on the node). Everything under the prefix or directory"
          + " is the artifact, filtered by include/exclude. At most 2048 characters. Exactly one"
          + " of uri and writers.")
  private String uri;

  @JsonPropertyDescription(
      "The artifact is written by pods on the nodes (trainer ranks, prefill servers) instead of"
          + " loaded from a uri: which pods write it. Exactly one of uri and writers.")
  private WritersSpec writers;

  @Pattern(REVISION_PATTERN)
  @Size(max = 255)
  @JsonPropertyDescription(
      "Hugging Face branch, tag or commit (default main), without white space, at most 255"
          + " characters; resolved once to a commit per generation and reported in"
          + " status.resolvedRevision. Ignored for other schemes.")
  private String revision;

  @Pattern(ENDPOINT_PATTERN)
  @Size(max = 2048)
  @JsonPropertyDescription(
      "Endpoint URL of an S3-compatible or OSS server or a Hugging Face Hub mirror, e.g."
          + " https://oss-cn-hangzhou.aliyuncs.com or https://minio.storage:9000. Empty means the"
          + " provider's public endpoint for the region (the Hub: https://huggingface.co). Must"
          + " be https unless insecureEndpoint is true; link-local and cloud metadata addresses"
          + " are refused, and the operator may allow only some endpoints.")
  private String endpoint;

  @JsonPropertyDescription(
      "Declares that endpoint is an in-cluster store spoken to over plain http (e.g."
          + " http://minio.storage:9000): requests, and the credentials of"
          + " credentialsSecretRef, then travel unencrypted. Refused for hf:// (the Hub and its"
          + " mirrors are reached over https). Default false: only https endpoints.")
  private Boolean insecureEndpoint;

  @Pattern(REGION_PATTERN)
  @Size(max = 64)
  @JsonPropertyDescription("Region of the bucket (S3 and OSS), e.g. us-east-1 or cn-hangzhou.")
  private String region;

  @JsonPropertyDescription(
      "Address buckets as endpoint/bucket/key (path style) instead of bucket.endpoint/key"
          + " (virtual-hosted). Needed by many S3-compatible servers; OSS refuses path style."
          + " Default false.")
  private Boolean pathStyle;

  @JsonPropertyDescription(
      "Secret in the artifact's namespace holding the source credentials. Only data-plane pods"
          + " read it; the operator sees the name, never the contents. Absent means anonymous"
          + " access.")
  private CredentialsSecretRef credentialsSecretRef;

  @JsonInclude(JsonInclude.Include.NON_EMPTY)
  @Size(max = MAX_GLOBS)
  @JsonPropertyDescription(
      "Glob patterns (e.g. *.safetensors, config.json) of files to load, relative to the uri;"
          + " empty means every file. At most 256 patterns of at most 1024 characters.")
  private List<@Size(min = 1, max = MAX_GLOB_LENGTH) String> include = new ArrayList<>();

  @JsonInclude(JsonInclude.Include.NON_EMPTY)
  @Size(max = MAX_GLOBS)
  @JsonPropertyDescription(
      "Glob patterns of files to skip, relative to the uri; applied after include. At most 256"
          + " patterns of at most 1024 characters.")
  private List<@Size(min = 1, max = MAX_GLOB_LENGTH) String> exclude = new ArrayList<>();

  public String getUri() {
    return uri;
  }

  public void setUri(String uri) {
    this.uri = uri;
  }

  public WritersSpec getWriters() {
    return writers;
  }

  public void setWriters(WritersSpec writers) {
    this.writers = writers;
  }

  public String getRevision() {
    return revision;
  }

  public void setRevision(String revision) {
    this.revision = revision;
  }

  public String getEndpoint() {
    return endpoint;
  }

  public void setEndpoint(String endpoint) {
    this.endpoint = endpoint;
  }

  public Boolean getInsecureEndpoint() {
    return insecureEndpoint;
  }

  public void setInsecureEndpoint(Boolean insecureEndpoint) {
    this.insecureEndpoint = insecureEndpoint;
  }

  public String getRegion() {
    return region;
  }

  public void setRegion(String region) {
    this.region = region;
  }

  public Boolean getPathStyle() {
    return pathStyle;
  }

  public void setPathStyle(Boolean pathStyle) {
    this.pathStyle = pathStyle;
  }

  public CredentialsSecretRef getCredentialsSecretRef() {
    return credentialsSecretRef;
  }

  public void setCredentialsSecretRef(CredentialsSecretRef credentialsSecretRef) {
    this.credentialsSecretRef = credentialsSecretRef;
  }

  public List<String> getInclude() {
    return include;
  }

  public void setInclude(List<String> include) {
    this.include = include;
  }

  public List<String> getExclude() {
    return exclude;
  }

  public void setExclude(List<String> exclude) {
    this.exclude = exclude;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof SourceSpec that
        && Objects.equals(uri, that.uri)
        && Objects.equals(writers, that.writers)
        && Objects.equals(revision, that.revision)
        && Objects.equals(endpoint, that.endpoint)
        && Objects.equals(insecureEndpoint, that.insecureEndpoint)
        && Objects.equals(region, that.region)
        && Objects.equals(pathStyle, that.pathStyle)
        && Objects.equals(credentialsSecretRef, that.credentialsSecretRef)
        && Objects.equals(include, that.include)
        && Objects.equals(exclude, that.exclude);
  }

  @Override
  public int hashCode() {
    return Objects.hash(
        uri,
        writers,
        revision,
        endpoint,
        insecureEndpoint,
        region,
        pathStyle,
        credentialsSecretRef,
        include,
        exclude);
  }
}
