package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Pattern;
import io.fabric8.generator.annotation.Required;
import io.fabric8.generator.annotation.Size;
import java.util.Objects;

/**
 * A Secret in the artifact's namespace holding source credentials ({@code
 * spec.source.credentialsSecretRef}), and which keys of it to read. Absent key names fall back to
 * the {@code DEFAULT_*} constants, the environment variable names the AWS and Hugging Face tools
 * use, so one Secret can also be mounted with {@code envFrom}.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class CredentialsSecretRef {

  /** Default key of the S3/OSS access key id. */
  public static final String DEFAULT_ACCESS_KEY_ID_KEY = "AWS_ACCESS_KEY_ID";

  /** Default key of the S3/OSS secret access key. */
  public static final String DEFAULT_SECRET_ACCESS_KEY_KEY = "AWS_SECRET_ACCESS_KEY";

  /** Default key of the optional S3/OSS session token. */
  public static final String DEFAULT_SESSION_TOKEN_KEY = "AWS_SESSION_TOKEN";

  /** Default key of the Hugging Face access token. */
  public static final String DEFAULT_TOKEN_KEY = "HF_TOKEN";

  /** Kubernetes object names (DNS-1123 subdomain, RFC 1123). */
  public static final String NAME_PATTERN =
      "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

  /** Kubernetes Secret data keys: letters, digits, '-', '_' and '.'. */
  public static final String KEY_PATTERN = "^[-._a-zA-Z0-9]+$";

  @Required
  @Pattern(NAME_PATTERN)
  @Size(max = 253)
  @JsonPropertyDescription("Name of the Secret, in the same namespace as the ModelArtifact.")
  private String name;

  @Pattern(KEY_PATTERN)
  @Size(max = 253)
  @JsonPropertyDescription("Key holding the S3/OSS access key id. Default AWS_ACCESS_KEY_ID.")
  private String accessKeyIdKey;

  @Pattern(KEY_PATTERN)
  @Size(max = 253)
  @JsonPropertyDescription(
      "Key holding the S3/OSS secret access key. Default AWS_SECRET_ACCESS_KEY.")
  private String secretAccessKeyKey;

  @Pattern(KEY_PATTERN)
  @Size(max = 253)
  @JsonPropertyDescription(
      "Key holding an optional S3/OSS session token (read only if present). Default"
          + " AWS_SESSION_TOKEN.")
  private String sessionTokenKey;

  @Pattern(KEY_PATTERN)
  @Size(max = 253)
  @JsonPropertyDescription("Key holding the Hugging Face access token. Default HF_TOKEN.")
  private String tokenKey;

  public CredentialsSecretRef() {}

  public CredentialsSecretRef(String name) {
    this.name = name;
  }

  /** The access key id's key: {@link #getAccessKeyIdKey()} or its default. */
  public String accessKeyIdKeyOrDefault() {
    return accessKeyIdKey != null ? accessKeyIdKey : DEFAULT_ACCESS_KEY_ID_KEY;
  }

  /** The secret access key's key: {@link #getSecretAccessKeyKey()} or its default. */
  public String secretAccessKeyKeyOrDefault() {
    return secretAccessKeyKey != null ? secretAccessKeyKey : DEFAULT_SECRET_ACCESS_KEY_KEY;
  }

  /** The session token's key: {@link #getSessionTokenKey()} or its default. */
  public String sessionTokenKeyOrDefault() {
    return sessionTokenKey != null ? sessionTokenKey : DEFAULT_SESSION_TOKEN_KEY;
  }

  /** The Hugging Face token's key: {@link #getTokenKey()} or its default. */
  public String tokenKeyOrDefault() {
    return tokenKey != null ? tokenKey : DEFAULT_TOKEN_KEY;
  }

  public String getName() {
    return name;
  }

  public void setName(String name) {
    this.name = name;
  }

  public String getAccessKeyIdKey() {
    return accessKeyIdKey;
  }

  public void setAccessKeyIdKey(String accessKeyIdKey) {
    this.accessKeyIdKey = accessKeyIdKey;
  }

  public String getSecretAccessKeyKey() {
    return secretAccessKeyKey;
  }

  public void setSecretAccessKeyKey(String secretAccessKeyKey) {
    this.secretAccessKeyKey = secretAccessKeyKey;
  }

  public String getSessionTokenKey() {
    return sessionTokenKey;
  }

  public void setSessionTokenKey(String sessionTokenKey) {
    this.sessionTokenKey = sessionTokenKey;
  }

  public String getTokenKey() {
    return tokenKey;
  }

  public void setTokenKey(String tokenKey) {
    this.tokenKey = tokenKey;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof CredentialsSecretRef that
        && Objects.equals(name, that.name)
        && Objects.equals(accessKeyIdKey, that.accessKeyIdKey)
        && Objects.equals(secretAccessKeyKey, that.secretAccessKeyKey)
        && Objects.equals(sessionTokenKey, that.sessionTokenKey)
        && Objects.equals(tokenKey, that.tokenKey);
  }

  @Override
  public int hashCode() {
    return Objects.hash(name, accessKeyIdKey, secretAccessKeyKey, sessionTokenKey, tokenKey);
  }
}
