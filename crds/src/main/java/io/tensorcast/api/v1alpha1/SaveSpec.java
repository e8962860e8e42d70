package io.tensorcast.api.v1alpha1;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonPropertyDescription;
import io.fabric8.generator.annotation.Pattern;
import io.fabric8.generator.annotation.Required;
import java.util.Objects;

/**
 * Where the sealed versions of a written artifact are saved ({@code spec.save}), in the layout of
 * the unified artifact IO RFC: one {@code model.safetensors}, or {@code manifest.json} + {@code
 * rank_NNNNN.safetensors}, written with an atomic finish (the manifest last). Each version goes to
 * {@code <uri><key>/}, the key being the version's name or, with {@code keyMetadata}, the value of
 * that metadata entry (a KV snapshot's prefix hash), so a new ModelArtifact with that URI as its
 * source loads it back.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public class SaveSpec {

  @Required
  @Pattern(SourceSpec.URI_SCHEME_PATTERN)
  @JsonPropertyDescription(
      "Directory the versions are saved under: s3://bucket/prefix/, oss://bucket/prefix/,"
          + " hf://org/repo[/subdir] or file:///path (on the saving node).")
  private String uri;

  @JsonPropertyDescription(
      "Metadata entry whose value names a version's directory under uri (e.g. prefix_sha256 for"
          + " KV-cache snapshots); absent: the version's name.")
  private String keyMetadata;

  @Pattern(SourceSpec.ENDPOINT_PATTERN)
  @JsonPropertyDescription(
      "Endpoint of an S3-compatible store, OSS or a Hub mirror, as for sources.")
  private String endpoint;

  @JsonPropertyDescription("Declares endpoint an in-cluster plain-http store, as for sources.")
  private Boolean insecureEndpoint;

  @Pattern(SourceSpec.REGION_PATTERN)
  @JsonPropertyDescription("Region of the bucket (S3 and OSS).")
  private String region;

  @JsonPropertyDescription("Path-style bucket addressing (S3-compatible stores). Default false.")
  private Boolean pathStyle;

  @JsonPropertyDescription(
      "Secret with the destination's credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY,"
          + " OSS_ACCESS_KEY_ID/OSS_ACCESS_KEY_SECRET, or HF_TOKEN with write access), given to the"
          + " data-plane pods only. Required for s3://, oss:// and hf://.")
  private CredentialsSecretRef credentialsSecretRef;

  public String getUri() {
    return uri;
  }

  public void setUri(String uri) {
    this.uri = uri;
  }

  public String getKeyMetadata() {
    return keyMetadata;
  }

  public void setKeyMetadata(String keyMetadata) {
    this.keyMetadata = keyMetadata;
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

  @Override
  public boolean equals(Object o) {
    return o instanceof SaveSpec that
        && Objects.equals(uri, that.uri)
        && Objects.equals(keyMetadata, that.keyMetadata)
        && Objects.equals(endpoint, that.endpoint)
        && Objects.equals(insecureEndpoint, that.insecureEndpoint)
        && Objects.equals(region, that.region)
        && Objects.equals(pathStyle, that.pathStyle)
        && Objects.equals(credentialsSecretRef, that.credentialsSecretRef);
  }

  @Override
  public int hashCode() {
    return Objects.hash(
        uri, keyMetadata, endpoint, insecureEndpoint, region, pathStyle, credentialsSecretRef);
  }
}
