package io.tensorcast.dataplane.source;

import io.tensorcast.api.Reason;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import software.amazon.awssdk.auth.credentials.AnonymousCredentialsProvider;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.AwsSessionCredentials;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.awscore.exception.AwsServiceException;
import software.amazon.awssdk.awscore.retry.AwsRetryStrategy;
import software.amazon.awssdk.core.ResponseInputStream;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.http.SdkHttpClient;
import software.amazon.awssdk.http.apache.ApacheHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.retries.api.RetryStrategy;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.S3ClientBuilder;
import software.amazon.awssdk.services.s3.model.ChecksumMode;
import software.amazon.awssdk.services.s3.model.ChecksumType;
import software.amazon.awssdk.services.s3.model.GetObjectRequest;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;
import software.amazon.awssdk.services.s3.model.HeadObjectRequest;
import software.amazon.awssdk.services.s3.model.HeadObjectResponse;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Request;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Response;
import software.amazon.awssdk.services.s3.model.NoSuchBucketException;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.S3Object;
import software.amazon.awssdk.utils.SdkAutoCloseable;

/**
 * An S3 (or S3-compatible) prefix as an artifact source: {@code s3://bucket/prefix/}.
 *
 * <p>Client: AWS SDK v2 sync {@link S3Client} over the Apache HTTP client, whose pool holds {@link
 * SourceOptions#maxConnections()} connections (with no TLS set up at all for a plain {@code
 * http://} endpoint: {@link PlainHttpEndpoint}); endpoint override, path-style addressing and
 * region from the options; request checksum calculation and response checksum validation only when
 * the operation requires them (so S3-compatible stores that reject {@code aws-chunked} uploads or
 * do not send checksums work). Listing calls use the SDK's standard retries ({@link
 * SourceOptions#listMaxAttempts()}); ranged GETs are made once each — the data path ({@code
 * ParallelRangeReader}) retries and resumes on its own.
 *
 * <p>ETags identify an object version: they go out as {@code If-Match} so a replaced object fails
 * with {@code ObjectChanged}. Digests ({@link #publishedDigest}): a HEAD with checksum mode on
 * gives the object's full-object checksum when it has one (SHA-256, CRC-64/NVME, CRC-32C, CRC-32,
 * SHA-1); else a single-part object's ETag is the MD5 of its content, except under SSE-KMS or SSE-C
 * encryption (and, on OSS, for appendable or multipart objects). A multipart upload's ETag ({@code
 * "<hex>-N"}) and a composite multipart checksum ({@code "<base64>-N"}, type {@code COMPOSITE}) are
 * digests of the parts' digests: they cannot be checked against the bytes, and such a file is
 * verified by its readers' piece hashes only.
 *
 * <p>Listing: ListObjectsV2, paginated, under the prefix; paths are keys relative to the prefix;
 * directory markers (keys ending with {@code /}) are skipped; a key whose relative path is absolute
 * or has {@code ..}, {@code .}, empty or backslash segments fails the listing ({@code UnsafePath}).
 * ETags are recorded without quotes.
 *
 * <p>Ranged reads ({@link #openRange}) send {@code Range: bytes=a-b} (RFC 9110 §14.1.2: the end is
 * inclusive, {@code b = offset + length - 1}) and {@code If-Match} with the listed ETag, then check
 * the response before any byte is handed on: 206 with {@code Content-Range: bytes a-b/size} equal
 * to what was asked and the listed size (200 only when the range is the whole object), a {@code
 * Content-Length} equal to the length, the listed ETag. Anything else is a {@link SourceException};
 * other bytes are never returned.
 *
 * <p>Errors map to reasons: NoSuchBucket → {@code BucketNotFound}; NoSuchKey/404 → {@code
 * ObjectNotFound}; 401/403 → {@code AccessDenied}; 412 (If-Match failed), 416, a different size or
 * ETag → {@code ObjectChanged} (not retryable: resolve again); 429, 503 SlowDown → retryable {@code
 * Throttled}; other 5xx, timeouts and I/O errors → retryable {@code SourceUnavailable}.
 */
public final class S3Source implements ArtifactSource {
  private static final Pattern CONTENT_RANGE = Pattern.compile("bytes (\\d+)-(\\d+)/(\\d+|\\*)");

  private final String bucket;
  private final String prefix;
  private final String description;
  private final PathFilter filter;
  private final SdkHttpClient http;
  private final AwsCredentialsProvider credentials;
  private final S3Client listClient;
  private final S3Client getClient;

  private S3Source(SourceUri uri, SourceOptions options) {
    this.bucket = uri.bucket();
    this.prefix = uri.prefix();
    this.description = uri.toString();
    this.filter = options.filter();
    this.http =
        PlainHttpEndpoint.withoutTlsFor(
                ApacheHttpClient.builder()
                    .maxConnections(options.maxConnections())
                    .connectionTimeout(options.connectTimeout())
                    .socketTimeout(options.readTimeout())
                    .connectionAcquisitionTimeout(options.requestTimeout())
                    .tcpKeepAlive(true),
                options.endpoint())
            .build();
    this.credentials = credentialsProvider(options);
    RetryStrategy listRetries =
        new RetryAfterStrategy(
            AwsRetryStrategy.standardRetryStrategy().toBuilder()
                .maxAttempts(options.listMaxAttempts())
                .build(),
            options.throttledRetriesInPlace());
    this.listClient = client(options, listRetries);
    this.getClient = client(options, AwsRetryStrategy.doNotRetry());
  }

  /**
   * Creates the source; no request is made until {@link #list()}.
   *
   * @param uri an {@code s3://} or {@code oss://} URI; for OSS pass options prepared by {@link
   *     Sources#open} (endpoint, virtual-hosted addressing, credentials)
   */
  public static S3Source open(SourceUri uri, SourceOptions options) {
    if (uri.scheme() != SourceUri.Scheme.S3 && uri.scheme() != SourceUri.Scheme.OSS) {
      throw new IllegalArgumentException("not an s3:// URI: " + uri);
    }
    return new S3Source(uri, options);
  }

  private S3Client client(SourceOptions options, RetryStrategy retries) {
    S3ClientBuilder builder =
        S3Client.builder()
            .httpClient(http)
            .credentialsProvider(credentials)
            .region(Region.of(options.region().orElse("us-east-1")))
            .forcePathStyle(options.pathStyle())
            .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
            .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED)
            .overrideConfiguration(
                o -> o.retryStrategy(retries).apiCallAttemptTimeout(options.requestTimeout()));
    options.endpoint().ifPresent(builder::endpointOverride);
    if (options.endpoint().isEmpty() && options.region().isEmpty()) {
      // No region given for AWS itself: follow the bucket's region rather than failing with 301.
      builder.crossRegionAccessEnabled(true);
    }
    return builder.build();
  }

  private static AwsCredentialsProvider credentialsProvider(SourceOptions options) {
    return switch (options.credentialsMode()) {
      case ANONYMOUS -> AnonymousCredentialsProvider.create();
      case DEFAULT_CHAIN -> DefaultCredentialsProvider.builder().build();
      case STATIC -> {
        SourceOptions.StaticCredentials c = options.credentials().orElseThrow();
        yield StaticCredentialsProvider.create(
            c.sessionToken().isPresent()
                ? AwsSessionCredentials.create(
                    c.accessKeyId(), c.secretAccessKey(), c.sessionToken().get())
                : AwsBasicCredentials.create(c.accessKeyId(), c.secretAccessKey()));
      }
    };
  }

  @Override
  public List<SourceFile> list() throws SourceException {
    ListObjectsV2Request request =
        ListObjectsV2Request.builder().bucket(bucket).prefix(prefix).build();
    List<SourceFile> files = new ArrayList<>();
    try {
      for (ListObjectsV2Response page : listClient.listObjectsV2Paginator(request)) {
        for (S3Object object : page.contents()) {
          String key = object.key();
          if (!key.startsWith(prefix)) {
            throw new SourceException(
                Reason.InvalidResponse,
                "listing " + description + " returned the key '" + key + "' outside the prefix",
                false);
          }
          String relative = key.substring(prefix.length());
          if (relative.isEmpty() || relative.endsWith("/")) {
            continue; // a directory marker, not a file
          }
          SourcePaths.requireSafe(relative, description);
          if (!filter.accepts(relative)) {
            continue;
          }
          Long size = object.size();
          if (size == null || size < 0) {
            throw new SourceException(
                Reason.InvalidResponse,
                "listing " + description + " gave no size for '" + relative + "'",
                false);
          }
          files.add(new SourceFile(relative, size, unquote(object.eTag()), Optional.empty()));
        }
      }
    } catch (SdkException e) {
      throw map(e, "listing " + description, true);
    }
    files.sort(Comparator.comparing(SourceFile::path));
    return List.copyOf(files);
  }

  @Override
  public InputStream openRange(SourceFile file, long offset, long length) throws SourceException {
    FileSource.checkRange(file, offset, length);
    if (length == 0) {
      return InputStream.nullInputStream();
    }
    SourcePaths.requireSafe(file.path(), description);
    String where = description + file.path();
    long last = offset + length - 1;
    String range = "bytes=" + offset + "-" + last;
    GetObjectRequest.Builder request =
        GetObjectRequest.builder().bucket(bucket).key(prefix + file.path()).range(range);
    if (!file.etag().isEmpty()) {
      request.ifMatch('"' + file.etag() + '"');
    }
    ResponseInputStream<GetObjectResponse> in;
    try {
      in = getClient.getObject(request.build());
    } catch (SdkException e) {
      throw map(e, "reading " + where + " (Range: " + range + ")", false);
    }
    try {
      checkResponse(in.response(), file, offset, length, where, range);
    } catch (SourceException e) {
      in.abort();
      closeQuietly(in);
      throw e;
    }
    return new RangeStream(in, length);
  }

  /**
   * The checks of every ranged response: status, Content-Range, length and identity of every
   * response.
   */
  private static void checkResponse(
      GetObjectResponse response,
      SourceFile file,
      long offset,
      long length,
      String where,
      String range)
      throws SourceException {
    int status = response.sdkHttpResponse().statusCode();
    String asked = "asked for " + range + " of " + where + " (" + file.size() + " bytes)";
    Long contentLength = response.contentLength();
    if (status == 200) {
      if (offset != 0 || length != file.size()) {
        throw new SourceException(
            Reason.RangeNotHonored,
            asked
                + " but the server answered 200 with the whole object"
                + (contentLength != null ? " (Content-Length " + contentLength + ")" : "")
                + "; the endpoint or a proxy in between ignores Range headers, so these bytes"
                + " are refused",
            false);
      }
    } else if (status == 206) {
      String contentRange = response.contentRange();
      Matcher m = contentRange == null ? null : CONTENT_RANGE.matcher(contentRange.strip());
      if (m == null || !m.matches()) {
        throw new SourceException(
            Reason.InvalidResponse,
            asked + " but the 206 answer has Content-Range '" + contentRange + "'",
            false);
      }
      long start = Long.parseLong(m.group(1));
      long end = Long.parseLong(m.group(2));
      String total = m.group(3);
      if (!total.equals("*") && Long.parseLong(total) != file.size()) {
        throw new SourceException(
            Reason.ObjectChanged,
            asked
                + " but Content-Range '"
                + contentRange
                + "' gives the object size "
                + total
                + "; it changed since listing, resolve the artifact again",
            false);
      }
      if (start != offset || end != offset + length - 1 || total.equals("*")) {
        throw new SourceException(
            Reason.InvalidResponse,
            asked + " but the server sent Content-Range '" + contentRange + "'",
            false);
      }
    } else {
      throw new SourceException(
          status >= 500 ? Reason.SourceUnavailable : Reason.InvalidResponse,
          asked + " but the server answered HTTP " + status + " instead of 206",
          status >= 500);
    }
    if (contentLength == null || contentLength != length) {
      throw new SourceException(
          Reason.InvalidResponse,
          asked + " but the answer has Content-Length " + contentLength + " instead of " + length,
          false);
    }
    String etag = unquote(response.eTag());
    if (!file.etag().isEmpty() && !etag.isEmpty() && !etag.equals(file.etag())) {
      throw new SourceException(
          Reason.ObjectChanged,
          asked
              + " but the object's ETag is now "
              + etag
              + " (listed "
              + file.etag()
              + "); resolve the artifact again",
          false);
    }
  }

  /**
   * Maps an SDK failure to a reason.
   *
   * @param what the operation and object, for the message
   * @param listing whether this was a listing call (a bare 404 then means the bucket)
   */
  static SourceException map(SdkException e, String what, boolean listing) {
    if (e instanceof NoSuchBucketException) {
      return new SourceException(
          Reason.BucketNotFound, what + ": the bucket does not exist (NoSuchBucket)", false, e);
    }
    if (e instanceof NoSuchKeyException) {
      return new SourceException(
          Reason.ObjectNotFound, what + ": the object does not exist (NoSuchKey)", false, e);
    }
    if (e instanceof AwsServiceException ase) {
      int status = ase.statusCode();
      String code = ase.awsErrorDetails() == null ? null : ase.awsErrorDetails().errorCode();
      String detail =
          " (HTTP "
              + status
              + (code != null ? " " + code : "")
              + (ase.awsErrorDetails() != null && ase.awsErrorDetails().errorMessage() != null
                  ? ": " + ase.awsErrorDetails().errorMessage()
                  : "")
              + ")";
      Duration retryAfter = retryAfter(ase);
      if ("NoSuchBucket".equals(code) || (listing && status == 404)) {
        return new SourceException(
            Reason.BucketNotFound, what + ": the bucket does not exist" + detail, false, e);
      }
      if ("NoSuchKey".equals(code) || status == 404) {
        return new SourceException(
            Reason.ObjectNotFound, what + ": the object does not exist" + detail, false, e);
      }
      if (status == 401 || status == 403) {
        return new SourceException(
            Reason.AccessDenied,
            what
                + ": access denied"
                + detail
                + "; check the credentials (credentialsSecretRef), region and bucket policy",
            false,
            e);
      }
      if (status == 412 || status == 416) {
        return new SourceException(
            Reason.ObjectChanged,
            what
                + ": the object is no longer the one listed"
                + detail
                + "; resolve the artifact again",
            false,
            e);
      }
      if (throttling(ase)) {
        return new SourceException(
            Reason.Throttled, what + ": throttled by the store" + detail, true, retryAfter, e);
      }
      if (status >= 500 || status == 408 || "RequestTimeout".equals(code)) {
        return new SourceException(
            Reason.SourceUnavailable, what + ": the store failed" + detail, true, retryAfter, e);
      }
      return new SourceException(
          Reason.SourceRequestRejected, what + ": rejected" + detail, false, e);
    }
    if (e instanceof SdkClientException) {
      String message = String.valueOf(e.getMessage());
      if (message.startsWith("Unable to load credentials")) {
        return new SourceException(
            Reason.CredentialsNotFound,
            what
                + ": no credentials found ("
                + message
                + "); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile / web"
                + " identity) for the CLI, spec.source.credentialsSecretRef on a ModelArtifact",
            false,
            e);
      }
      return new SourceException(
          Reason.SourceUnavailable, what + ": " + message, isTransient(e), null, e);
    }
    return new SourceException(Reason.SourceUnavailable, what + ": " + e.getMessage(), false, e);
  }

  /** Client-side failures that another attempt may cure: I/O errors and timeouts. */
  private static boolean isTransient(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof IOException
          || t.getClass().getSimpleName().contains("Timeout")
          || t.getClass().getSimpleName().contains("Aborted")) {
        return true;
      }
      if (t.getCause() == t) {
        break;
      }
    }
    return false;
  }

  /** The {@code Retry-After} of an error response (seconds or HTTP-date), or null. */
  static Duration retryAfter(AwsServiceException e) {
    if (e.awsErrorDetails() == null || e.awsErrorDetails().sdkHttpResponse() == null) {
      return null;
    }
    return e.awsErrorDetails()
        .sdkHttpResponse()
        .firstMatchingHeader("Retry-After")
        .flatMap(Backoff::parseRetryAfter)
        .orElse(null);
  }

  static String unquote(String etag) {
    if (etag == null) {
      return "";
    }
    String t = etag.strip();
    if (t.startsWith("W/")) {
      t = t.substring(2);
    }
    if (t.length() >= 2 && t.startsWith("\"") && t.endsWith("\"")) {
      t = t.substring(1, t.length() - 1);
    }
    return t;
  }

  private static void closeQuietly(InputStream in) {
    try {
      in.close();
    } catch (IOException | RuntimeException ignored) {
      // Already aborted; the refusal is what matters.
    }
  }

  /** Whether the store refused the call as throttled: 429, {@code SlowDown} and the like. */
  static boolean throttling(AwsServiceException e) {
    String code = e.awsErrorDetails() == null ? null : e.awsErrorDetails().errorCode();
    return e.statusCode() == 429
        || "SlowDown".equals(code)
        || "Throttling".equals(code)
        || "RequestLimitExceeded".equals(code);
  }

  /**
   * The object's full-object checksum or single-part ETag MD5, from a HEAD with {@code If-Match}
   * (the listed ETag) and checksum mode on; see the class comment for which digest is used when.
   *
   * @throws SourceException mapped as for reads ({@code ObjectChanged} when the object was
   *     replaced)
   */
  @Override
  public PublishedDigest publishedDigest(SourceFile file) throws SourceException {
    SourcePaths.requireSafe(file.path(), description);
    HeadObjectRequest.Builder request =
        HeadObjectRequest.builder()
            .bucket(bucket)
            .key(prefix + file.path())
            .checksumMode(ChecksumMode.ENABLED);
    if (!file.etag().isEmpty()) {
      request.ifMatch('"' + file.etag() + '"');
    }
    HeadObjectResponse head;
    try {
      head = listClient.headObject(request.build());
    } catch (SdkException e) {
      throw map(e, "HEAD " + description + file.path(), false);
    }
    return digestOf(head, file);
  }

  /** The checkable digest a HEAD answer gives, or why there is none. */
  static PublishedDigest digestOf(HeadObjectResponse head, SourceFile file) {
    boolean composite = head.checksumType() == ChecksumType.COMPOSITE;
    String[][] candidates = {
      {"SHA256", head.checksumSHA256()},
      {"CRC64NVME", head.checksumCRC64NVME()},
      {"CRC32C", head.checksumCRC32C()},
      {"CRC32", head.checksumCRC32()},
      {"SHA1", head.checksumSHA1()},
    };
    String compositeSeen = null;
    for (String[] c : candidates) {
      String value = c[1];
      if (value == null || value.isBlank()) {
        continue;
      }
      // CRC-64/NVME checksums are always of the full object; the others are composite for
      // multipart uploads unless the store says FULL_OBJECT.
      boolean partsOnly = value.contains("-") || (composite && !c[0].equals("CRC64NVME"));
      if (partsOnly) {
        compositeSeen = c[0];
        continue;
      }
      try {
        return PublishedDigest.base64(
            PublishedDigest.Algorithm.valueOf(c[0]),
            value.strip(),
            c[0] + " (full-object checksum)");
      } catch (IllegalArgumentException notBase64) {
        compositeSeen = c[0] + " (not base64: '" + value + "')";
      }
    }
    String etag = unquote(head.eTag());
    if (etag.isEmpty()) {
      etag = file.etag();
    }
    String why = etagNotMd5(head, etag);
    if (why == null) {
      return PublishedDigest.hex(PublishedDigest.Algorithm.MD5, etag, "MD5 (single-part ETag)");
    }
    return PublishedDigest.none(
        (compositeSeen != null
                ? "the object's "
                    + compositeSeen
                    + " checksum is composite (a digest of its"
                    + " multipart upload's parts), which the bytes cannot be checked against; "
                : "the object has no full-object checksum; ")
            + why);
  }

  /** Why {@code etag} is not the MD5 of the object's content, or null when it is. */
  private static String etagNotMd5(HeadObjectResponse head, String etag) {
    if (!etag.matches("[0-9a-fA-F]{32}")) {
      return "its ETag '"
          + etag
          + "' is not an MD5 (a multipart upload's ETag is a digest of its parts)";
    }
    String sse = head.serverSideEncryptionAsString();
    if (head.sseCustomerAlgorithm() != null
        || (sse != null && sse.toLowerCase(java.util.Locale.ROOT).contains("kms"))) {
      return "its ETag is not the content's MD5 under "
          + (head.sseCustomerAlgorithm() != null ? "SSE-C" : "SSE-KMS")
          + " encryption";
    }
    java.util.Map<String, java.util.List<String>> headers =
        head.sdkHttpResponse() == null ? java.util.Map.of() : head.sdkHttpResponse().headers();
    String ossType = header(headers, "x-oss-object-type");
    if (ossType != null && !ossType.equalsIgnoreCase("Normal")) {
      return "its ETag is not the content's MD5 for an OSS " + ossType + " object";
    }
    String ossSse = header(headers, "x-oss-server-side-encryption");
    if (ossSse != null && ossSse.toUpperCase(java.util.Locale.ROOT).contains("KMS")) {
      return "its ETag is not the content's MD5 under OSS KMS encryption";
    }
    return null;
  }

  private static String header(java.util.Map<String, java.util.List<String>> headers, String name) {
    for (java.util.Map.Entry<String, java.util.List<String>> e : headers.entrySet()) {
      if (e.getKey().equalsIgnoreCase(name) && !e.getValue().isEmpty()) {
        return e.getValue().get(0);
      }
    }
    return null;
  }

  @Override
  public PathFilter filter() {
    return filter;
  }

  @Override
  public String describe() {
    return description;
  }

  @Override
  public void close() {
    listClient.close();
    getClient.close();
    http.close();
    if (credentials instanceof SdkAutoCloseable closeable) {
      closeable.close();
    }
  }

  /**
   * A checked response body: never more than the range's length; SDK runtime failures surface as
   * {@link IOException} so the reader resumes; closing early aborts the connection instead of
   * draining the rest of the body.
   */
  private static final class RangeStream extends RangeInputStream {
    private final ResponseInputStream<GetObjectResponse> in;

    RangeStream(ResponseInputStream<GetObjectResponse> in, long length) {
      super(length);
      this.in = in;
    }

    @Override
    protected int readBody(byte[] b, int off, int len) throws IOException {
      try {
        return in.read(b, off, len);
      } catch (RuntimeException e) {
        throw new IOException("reading the response body failed: " + e.getMessage(), e);
      }
    }

    @Override
    public void close() {
      if (remaining() > 0) {
        in.abort();
      }
      closeQuietly(in);
    }
  }
}
