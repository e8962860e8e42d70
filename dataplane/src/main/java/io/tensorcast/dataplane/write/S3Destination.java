package io.tensorcast.dataplane.write;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.tensorcast.dataplane.source.PlainHttpEndpoint;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.source.SourceUri;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Function;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentials;
import software.amazon.awssdk.auth.credentials.AwsSessionCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.retry.RetryMode;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.http.apache.ApacheHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.S3ClientBuilder;
import software.amazon.awssdk.services.s3.S3Configuration;
import software.amazon.awssdk.services.s3.model.AbortMultipartUploadRequest;
import software.amazon.awssdk.services.s3.model.CompleteMultipartUploadRequest;
import software.amazon.awssdk.services.s3.model.CompletedMultipartUpload;
import software.amazon.awssdk.services.s3.model.CompletedPart;
import software.amazon.awssdk.services.s3.model.CreateMultipartUploadRequest;
import software.amazon.awssdk.services.s3.model.DeleteObjectRequest;
import software.amazon.awssdk.services.s3.model.HeadObjectRequest;
import software.amazon.awssdk.services.s3.model.HeadObjectResponse;
import software.amazon.awssdk.services.s3.model.ListMultipartUploadsRequest;
import software.amazon.awssdk.services.s3.model.MultipartUpload;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;
import software.amazon.awssdk.services.s3.model.S3Exception;
import software.amazon.awssdk.services.s3.model.UploadPartRequest;

/**
 * Saves to an S3 bucket or an S3-compatible store ({@code s3://}), and to Alibaba Cloud OSS through
 * its S3-compatible API ({@code oss://}: virtual-hosted addressing, no {@code aws-chunked} bodies,
 * as {@link Sources#ossOptions} sets up for reading). AWS SDK v2, Apache HTTP client; bodies are
 * sent plain (no {@code aws-chunked} encoding).
 *
 * <p>A file up to one part is one {@code PutObject}; a larger one a multipart upload of parts
 * uploaded 4 at a time, completed only when every part is in, aborted on failure. Every request
 * carries {@code Content-MD5}; every object the metadata {@code tensorcast-sha256}. Resume: a file
 * whose object exists with that size and SHA-256 is not sent again.
 */
final class S3Destination implements VersionSaver.Destination {
  static final String SHA256_METADATA = "tensorcast-sha256";

  private static final int PARALLEL_PARTS = 4;

  private final SaveTarget target;
  private final String bucket;
  private final String prefix;
  private final S3Client client;
  private final ExecutorService parts;

  private S3Destination(SaveTarget target, String bucket, String prefix, S3Client client) {
    this.target = target;
    this.bucket = bucket;
    this.prefix = prefix;
    this.client = client;
    this.parts =
        Executors.newFixedThreadPool(
            PARALLEL_PARTS,
            r -> {
              Thread t = new Thread(r, "save-part");
              t.setDaemon(true);
              return t;
            });
  }

  /**
   * @throws WriteException 400 {@code NoCredentials} when the environment has none for the store
   *     ({@code AWS_ACCESS_KEY_ID}/{@code AWS_SECRET_ACCESS_KEY}; for OSS also {@code OSS_*} and
   *     {@code ALIBABA_CLOUD_*}); {@code InvalidSaveTarget} for OSS without region or endpoint
   */
  static S3Destination open(SaveTarget target, Function<String, String> env) throws WriteException {
    SourceUri uri = target.parsed();
    SourceOptions.Builder b = SourceOptions.builder().pathStyle(target.pathStyle());
    if (target.endpoint() != null) {
      b.endpoint(target.endpoint());
    }
    if (target.region() != null) {
      b.region(target.region());
    }
    awsCredentials(env).ifPresent(b::credentials);
    SourceOptions options = b.build();
    if (uri.scheme() == SourceUri.Scheme.OSS) {
      try {
        options = Sources.ossOptions(uri, options, env);
      } catch (SourceException e) {
        throw WriteException.bad("InvalidSaveTarget", "save: " + e.getMessage());
      }
    }
    if (options.credentials().isEmpty()) {
      throw WriteException.bad(
          "NoCredentials",
          "saving to "
              + target.uri()
              + " needs credentials, and the data plane has none: set AWS_ACCESS_KEY_ID and"
              + " AWS_SECRET_ACCESS_KEY"
              + (uri.scheme() == SourceUri.Scheme.OSS
                  ? " (or OSS_ACCESS_KEY_ID and OSS_ACCESS_KEY_SECRET)"
                  : "")
              + " in its environment (on Kubernetes: spec.save.credentialsSecretRef); nothing was"
              + " sent");
    }
    SourceOptions.StaticCredentials c = options.credentials().get();
    AwsCredentials creds =
        c.sessionToken().isPresent()
            ? AwsSessionCredentials.create(
                c.accessKeyId(), c.secretAccessKey(), c.sessionToken().get())
            : AwsBasicCredentials.create(c.accessKeyId(), c.secretAccessKey());
    S3ClientBuilder builder =
        S3Client.builder()
            .httpClient(
                PlainHttpEndpoint.withoutTlsFor(
                        ApacheHttpClient.builder()
                            .maxConnections(PARALLEL_PARTS + 2)
                            .connectionTimeout(Duration.ofSeconds(10))
                            .socketTimeout(Duration.ofMinutes(2)),
                        options.endpoint())
                    .build())
            .credentialsProvider(StaticCredentialsProvider.create(creds))
            .region(Region.of(options.region().orElse("us-east-1")))
            .forcePathStyle(options.pathStyle())
            .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
            .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED)
            // Plain bodies, never aws-chunked: OSS refuses chunked uploads, and over plain http
            // the SDK would otherwise sign every upload as a chunked stream.
            .serviceConfiguration(S3Configuration.builder().chunkedEncodingEnabled(false).build())
            .overrideConfiguration(o -> o.retryStrategy(RetryMode.STANDARD));
    options.endpoint().ifPresent(builder::endpointOverride);
    return new S3Destination(target, uri.bucket(), uri.prefix(), builder.build());
  }

  private static Optional<SourceOptions.StaticCredentials> awsCredentials(
      Function<String, String> env) {
    String id = env.apply("AWS_ACCESS_KEY_ID");
    String secret = env.apply("AWS_SECRET_ACCESS_KEY");
    if (id == null || id.isBlank() || secret == null || secret.isEmpty()) {
      return Optional.empty();
    }
    String token = env.apply("AWS_SESSION_TOKEN");
    return Optional.of(
        new SourceOptions.StaticCredentials(
            id.strip(),
            secret,
            token == null || token.isBlank() ? Optional.empty() : Optional.of(token.strip())));
  }

  @Override
  public ObjectNode save(
      SealRecord record,
      StoredArtifact stored,
      List<SealRecord.FileEntry> data,
      SealRecord.FileEntry commitFile)
      throws WriteException {
    ObjectNode result = WriteJson.JSON.createObjectNode();
    ArrayNode files = result.putArray("files");
    long uploaded = 0;
    try {
      if (commitFile != null) {
        // Whatever an earlier save left readable goes first: no reader may mix its rank files
        // with the ones this save writes.
        client.deleteObject(
            DeleteObjectRequest.builder().bucket(bucket).key(prefix + commitFile.path()).build());
      }
      abortStaleUploads(record);
      List<SealRecord.FileEntry> order = new ArrayList<>(data);
      if (commitFile != null) {
        order.add(commitFile);
      }
      for (SealRecord.FileEntry f : order) {
        ObjectNode r = files.addObject();
        r.put("path", f.path()).put("key", prefix + f.path()).put("size", f.size());
        r.put("sha256", f.sha256());
        if (has(f)) {
          r.put("resumed", true);
          continue;
        }
        String etag =
            f.size() <= target.partSize() ? putWhole(f, stored) : putInParts(f, stored, r);
        r.put("etag", etag);
        uploaded += f.size();
      }
    } catch (S3Exception e) {
      throw failure(e);
    } catch (SdkException e) {
      throw new WriteException(
          502,
          "DestinationUnavailable",
          "saving to " + target.uri() + " failed: " + e.getMessage(),
          e);
    }
    result.put("bytesUploaded", uploaded);
    return result;
  }

  private boolean has(SealRecord.FileEntry f) {
    try {
      HeadObjectResponse h =
          client.headObject(
              HeadObjectRequest.builder().bucket(bucket).key(prefix + f.path()).build());
      return h.contentLength() == f.size() && f.sha256().equals(h.metadata().get(SHA256_METADATA));
    } catch (NoSuchKeyException e) {
      return false;
    } catch (S3Exception e) {
      if (e.statusCode() == 404) {
        return false;
      }
      throw e;
    }
  }

  /** Aborts multipart uploads an earlier attempt left under this version's keys. */
  private void abortStaleUploads(SealRecord record) {
    List<String> keys = record.files().stream().map(f -> prefix + f.path()).toList();
    for (MultipartUpload u :
        client
            .listMultipartUploads(
                ListMultipartUploadsRequest.builder().bucket(bucket).prefix(prefix).build())
            .uploads()) {
      if (keys.contains(u.key())) {
        client.abortMultipartUpload(
            AbortMultipartUploadRequest.builder()
                .bucket(bucket)
                .key(u.key())
                .uploadId(u.uploadId())
                .build());
      }
    }
  }

  private String putWhole(SealRecord.FileEntry f, StoredArtifact stored) {
    String md5 = VersionSaver.md5Base64(stored, f.path(), 0, f.size());
    return client
        .putObject(
            PutObjectRequest.builder()
                .bucket(bucket)
                .key(prefix + f.path())
                .contentLength(f.size())
                .contentMD5(md5)
                .contentType("application/octet-stream")
                .metadata(Map.of(SHA256_METADATA, f.sha256()))
                .build(),
            body(stored, f.path(), 0, f.size()))
        .eTag();
  }

  private String putInParts(SealRecord.FileEntry f, StoredArtifact stored, ObjectNode r)
      throws WriteException {
    long partSize = Math.max(target.partSize(), (f.size() + 9_999) / 10_000);
    String key = prefix + f.path();
    String uploadId =
        client
            .createMultipartUpload(
                CreateMultipartUploadRequest.builder()
                    .bucket(bucket)
                    .key(key)
                    .contentType("application/octet-stream")
                    .metadata(Map.of(SHA256_METADATA, f.sha256()))
                    .build())
            .uploadId();
    boolean done = false;
    try {
      List<Future<CompletedPart>> futures = new ArrayList<>();
      int number = 0;
      for (long off = 0; off < f.size(); off += partSize) {
        int n = ++number;
        long at = off;
        long len = Math.min(partSize, f.size() - off);
        futures.add(
            parts.submit(
                () -> {
                  String etag =
                      client
                          .uploadPart(
                              UploadPartRequest.builder()
                                  .bucket(bucket)
                                  .key(key)
                                  .uploadId(uploadId)
                                  .partNumber(n)
                                  .contentLength(len)
                                  .contentMD5(VersionSaver.md5Base64(stored, f.path(), at, len))
                                  .build(),
                              body(stored, f.path(), at, len))
                          .eTag();
                  return CompletedPart.builder().partNumber(n).eTag(etag).build();
                }));
      }
      List<CompletedPart> completed = new ArrayList<>();
      for (Future<CompletedPart> p : futures) {
        try {
          completed.add(p.get());
        } catch (ExecutionException e) {
          futures.forEach(x -> x.cancel(true));
          if (e.getCause() instanceof S3Exception s3) {
            throw s3;
          }
          if (e.getCause() instanceof SdkException sdk) {
            throw sdk;
          }
          throw new WriteException(500, "SaveFailed", "part upload failed: " + e.getCause(), e);
        }
      }
      String etag =
          client
              .completeMultipartUpload(
                  CompleteMultipartUploadRequest.builder()
                      .bucket(bucket)
                      .key(key)
                      .uploadId(uploadId)
                      .multipartUpload(CompletedMultipartUpload.builder().parts(completed).build())
                      .build())
              .eTag();
      r.put("parts", completed.size());
      r.put("partSize", partSize);
      done = true;
      return etag;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new WriteException(503, "Interrupted", "save interrupted", e);
    } finally {
      if (!done) {
        try {
          client.abortMultipartUpload(
              AbortMultipartUploadRequest.builder()
                  .bucket(bucket)
                  .key(key)
                  .uploadId(uploadId)
                  .build());
        } catch (SdkException ignored) {
          // the next save aborts what is left (abortStaleUploads)
        }
      }
    }
  }

  private static RequestBody body(StoredArtifact stored, String path, long offset, long length) {
    return RequestBody.fromContentProvider(
        () -> VersionSaver.stream(stored, path, offset, length),
        length,
        "application/octet-stream");
  }

  private WriteException failure(S3Exception e) {
    String code = e.awsErrorDetails() == null ? null : e.awsErrorDetails().errorCode();
    String reason =
        switch (e.statusCode()) {
          case 403 -> "AccessDenied";
          case 404 -> "NoSuchBucket".equals(code) ? "BucketNotFound" : "NotFound";
          case 400 ->
              "BadDigest".equals(code) || "InvalidDigest".equals(code)
                  ? "DigestMismatch"
                  : "DestinationRefused";
          default -> e.statusCode() >= 500 ? "DestinationUnavailable" : "DestinationRefused";
        };
    int status = e.statusCode() == 403 ? 403 : e.statusCode() == 404 ? 404 : 502;
    return new WriteException(
        status,
        reason,
        "saving to "
            + target.uri()
            + " failed: HTTP "
            + e.statusCode()
            + (code == null ? "" : " " + code)
            + ": "
            + (e.awsErrorDetails() == null ? e.getMessage() : e.awsErrorDetails().errorMessage())
            + "; nothing of this save is readable there (no manifest written)",
        e);
  }

  @Override
  public void close() {
    parts.shutdownNow();
    client.close();
  }
}
