package io.tensorcast.dataplane.consumer;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufOutputStream;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.store.StoredArtifact;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Consumer reads over HTTP: the tensors of the artifact a data plane holds, read straight from its
 * page-locked store. Mounted on the control endpoint behind its bearer token.
 *
 * <ul>
 *   <li>{@code GET /v1/tensors}: JSON {@code {"artifactId", "tensorCount", "tensors": [{"name",
 *       "file", "dtype", "shape", "offset", "length"}]}}; {@code offset} is the byte offset of the
 *       tensor in {@code file} (header included), {@code length} its bytes. Files in store order,
 *       tensors in offset order. 409 when a name occurs in two files (outside a TP shard layout).
 *   <li>{@code GET|HEAD /v1/tensors/{name}?target=as_stored|shard|full[&parallelism=...]}: the
 *       tensor's raw little-endian bytes, {@code application/octet-stream}, with {@code
 *       X-Tensor-Name} (percent-encoded UTF-8), {@code X-Tensor-Dtype} (safetensors name), {@code
 *       X-Tensor-Shape} (comma-separated, empty for a scalar), {@code X-Tensor-Target}, {@code
 *       Accept-Ranges: bytes} and a strong {@code ETag}. {@code name} is percent-encoded in the
 *       path ({@code /} as {@code %2F}; literal slashes after the prefix are also taken as part of
 *       the name). Conditional and range requests per RFC 9110: {@code If-Match} (412), {@code
 *       If-None-Match} (304), {@code If-Range} (strong ETag only), one {@code Range} → 206, several
 *       → 200 whole, none satisfiable → 416 with {@code Content-Range: bytes *}{@code /len}.
 * </ul>
 *
 * <p>Both answer 503 with the phase until the artifact is {@code Ready}. Errors are JSON {@code
 * {"error", "reason"}}: 400 bad parameter or a shard the tensor cannot satisfy (not divisible,
 * split dim outside it), 404 unknown tensor, 409 ambiguous name or identity mismatch, 500 invalid
 * stored header or layout, 503 not ready (see {@link DefaultTensorReadPlanner}).
 *
 * <p>The tensor catalog (headers of the stored files) is built on the first request of an artifact
 * generation and cached for it. Thread-safe.
 */
public final class TensorEndpoint {
  private static final Logger log = LoggerFactory.getLogger(TensorEndpoint.class);

  /** Path of the list; tensors are under {@code PREFIX + "/"}. */
  public static final String PREFIX = "/v1/tensors";

  private static final String JSON = "application/json";
  private static final String NOT_READY = "NotReady";

  private final String artifactId;
  private final Supplier<DataPlaneStatus.Phase> phase;
  private final Supplier<Optional<StoredArtifact>> artifact;
  private final TensorReadPlanner planner;
  private final ObjectMapper json = new ObjectMapper();
  private volatile TensorCatalog cached;

  /**
   * @param artifactId the artifact the data plane serves (named in errors)
   * @param phase the current load phase; reads are answered only when {@code Ready}
   * @param artifact the artifact in the store, once allocated
   * @param planner maps a read to store segments, e.g. {@link DefaultTensorReadPlanner}
   */
  public TensorEndpoint(
      String artifactId,
      Supplier<DataPlaneStatus.Phase> phase,
      Supplier<Optional<StoredArtifact>> artifact,
      TensorReadPlanner planner) {
    this.artifactId = Objects.requireNonNull(artifactId, "artifactId");
    this.phase = Objects.requireNonNull(phase, "phase");
    this.artifact = Objects.requireNonNull(artifact, "artifact");
    this.planner = Objects.requireNonNull(planner, "planner");
  }

  /** Whether a request's raw path (before decoding) belongs to this endpoint. */
  public static boolean handles(String rawPath) {
    return rawPath.equals(PREFIX) || rawPath.startsWith(PREFIX + "/");
  }

  /**
   * Answers a GET or HEAD request whose path {@link #handles} accepts. Never throws: every failure
   * becomes an error reply.
   */
  public Reply answer(HttpRequest req) {
    try {
      QueryStringDecoder uri = new QueryStringDecoder(req.uri());
      String raw = uri.rawPath();
      String rest = raw.length() <= PREFIX.length() ? "" : raw.substring(PREFIX.length() + 1);
      Map<String, List<String>> params = parameters(req.uri(), uri);
      if (rest.isEmpty()) {
        if (!params.isEmpty()) {
          throw new TensorReadException(
              400,
              "BadParameter",
              "GET /v1/tensors takes no query parameters, got '"
                  + params.keySet().iterator().next()
                  + "'");
        }
        return list(catalog());
      }
      String name = decodePath(rest);
      TensorQuery query = TensorQuery.parse(params);
      return tensor(req, catalog(), name, query);
    } catch (TensorReadException e) {
      return error(e.status(), e.reason(), e.getMessage(), null);
    } catch (RuntimeException e) {
      log.warn("tensor request {} failed", req.uri(), e);
      return error(500, "InternalError", String.valueOf(e), null);
    }
  }

  /**
   * The decoded query parameters.
   *
   * @throws TensorReadException 400 {@code BadParameter} when the query string is not valid
   *     percent-encoding (a {@code %} not followed by two hex digits, or bytes that are not UTF-8)
   */
  private static Map<String, List<String>> parameters(String requestUri, QueryStringDecoder uri)
      throws TensorReadException {
    try {
      return uri.parameters();
    } catch (IllegalArgumentException e) {
      throw new TensorReadException(
          400,
          "BadParameter",
          "query string of '"
              + requestUri
              + "' is not valid percent-encoding ("
              + e.getMessage()
              + "); percent-encode parameter values as UTF-8, e.g. %2F for '/'");
    }
  }

  /** The catalog of the artifact generation being served; 503 until Ready. */
  TensorCatalog catalog() throws TensorReadException {
    DataPlaneStatus.Phase p = phase.get();
    Optional<StoredArtifact> a = artifact.get();
    if (p != DataPlaneStatus.Phase.Ready || a.isEmpty()) {
      throw new TensorReadException(
          503,
          NOT_READY,
          "artifact "
              + artifactId
              + " is "
              + p
              + ", not Ready; tensors can be read once it is Ready (GET /readyz)");
    }
    TensorCatalog c = cached;
    if (c != null && c.artifact() == a.get()) {
      return c;
    }
    synchronized (this) {
      c = cached;
      if (c == null || c.artifact() != a.get()) {
        c = TensorCatalog.build(a.get());
        cached = c;
      }
      return c;
    }
  }

  private Reply list(TensorCatalog c) throws TensorReadException {
    if (c.conflict().isPresent()) {
      throw new TensorReadException(409, "DuplicateTensor", c.conflict().get());
    }
    ByteBuf buf = Unpooled.buffer();
    try (JsonGenerator g =
        json.getFactory().createGenerator((OutputStream) new ByteBufOutputStream(buf))) {
      g.writeStartObject();
      g.writeStringField("artifactId", c.artifactId());
      g.writeNumberField("tensorCount", c.entries().size());
      g.writeArrayFieldStart("tensors");
      for (TensorCatalog.Entry e : c.entries()) {
        TensorInfo t = e.info();
        g.writeStartObject();
        g.writeStringField("name", t.name());
        g.writeStringField("file", e.file());
        g.writeStringField("dtype", t.dtype().name());
        g.writeArrayFieldStart("shape");
        for (long d : t.shape()) {
          g.writeNumber(d);
        }
        g.writeEndArray();
        g.writeNumberField("offset", e.fileOffset());
        g.writeNumberField("length", e.length());
        g.writeEndObject();
      }
      g.writeEndArray();
      g.writeEndObject();
    } catch (IOException e) {
      buf.release();
      throw new UncheckedIOException(e);
    }
    FullHttpResponse r =
        new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK, buf);
    r.headers().set(HttpHeaderNames.CONTENT_TYPE, JSON);
    r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, buf.readableBytes());
    return new Reply(r, null, List.of());
  }

  private Reply tensor(HttpRequest req, TensorCatalog c, String name, TensorQuery query)
      throws TensorReadException {
    ReadPlan plan = planner.plan(c, name, query);
    String etag = etag(c.artifact(), plan, query);
    long length = plan.length();
    HttpHeaders h = req.headers();
    boolean head = HttpMethod.HEAD.equals(req.method());

    String ifMatch = h.get(HttpHeaderNames.IF_MATCH);
    if (ifMatch != null && !EntityTags.matches(ifMatch, etag, true)) {
      return error(
          412,
          "PreconditionFailed",
          "If-Match " + ifMatch + " does not match the tensor's ETag " + etag,
          etag);
    }
    String ifNoneMatch = h.get(HttpHeaderNames.IF_NONE_MATCH);
    if (ifNoneMatch != null && EntityTags.matches(ifNoneMatch, etag, false)) {
      FullHttpResponse r =
          new DefaultFullHttpResponse(
              HttpVersion.HTTP_1_1, HttpResponseStatus.NOT_MODIFIED, Unpooled.EMPTY_BUFFER);
      r.headers().set(HttpHeaderNames.ETAG, etag);
      r.headers().set(HttpHeaderNames.ACCEPT_RANGES, "bytes");
      return new Reply(r, null, List.of());
    }

    ByteRange range = ByteRange.evaluate(null, length);
    String rangeHeader = h.get(HttpHeaderNames.RANGE);
    if (!head && rangeHeader != null) {
      String ifRange = h.get(HttpHeaderNames.IF_RANGE);
      // If-Range with a date, or with an ETag that is not a strong match: send the whole body
      if (ifRange == null || EntityTags.strongEquals(ifRange.strip(), etag)) {
        range = ByteRange.evaluate(rangeHeader, length);
      }
    }
    if (range.kind() == ByteRange.Kind.UNSATISFIABLE) {
      Reply e =
          error(
              416,
              "RangeNotSatisfiable",
              "Range '"
                  + rangeHeader
                  + "' selects no byte of tensor \""
                  + name
                  + "\", which has "
                  + length
                  + " bytes",
              etag);
      e.response().headers().set(HttpHeaderNames.CONTENT_RANGE, "bytes */" + length);
      return e;
    }
    boolean partial = range.kind() == ByteRange.Kind.PARTIAL;
    long bodyLength = partial ? range.length() : length;
    List<Segment> body =
        head || bodyLength == 0
            ? List.of()
            : partial ? plan.slice(range.first(), range.length()) : plan.segments();
    HttpResponseStatus status =
        partial ? HttpResponseStatus.PARTIAL_CONTENT : HttpResponseStatus.OK;
    HttpResponse r =
        body.isEmpty()
            ? new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status, Unpooled.EMPTY_BUFFER)
            : new DefaultHttpResponse(HttpVersion.HTTP_1_1, status);
    HttpHeaders out = r.headers();
    out.set(HttpHeaderNames.CONTENT_TYPE, "application/octet-stream");
    out.set(HttpHeaderNames.CONTENT_LENGTH, bodyLength);
    out.set(HttpHeaderNames.ACCEPT_RANGES, "bytes");
    out.set(HttpHeaderNames.ETAG, etag);
    out.set("X-Tensor-Name", encodeHeader(name));
    out.set("X-Tensor-Dtype", plan.dtype().name());
    out.set("X-Tensor-Shape", plan.shapeHeader());
    out.set("X-Tensor-Target", query.canonical());
    if (partial) {
      out.set(
          HttpHeaderNames.CONTENT_RANGE,
          "bytes " + range.first() + "-" + range.last() + "/" + length);
    }
    return body.isEmpty()
        ? new Reply(r, null, body)
        : new Reply(r, c.artifact().directory(), body, c.artifact());
  }

  /**
   * A strong ETag: SHA-256 over every file the plan reads (its path, the source version its bytes
   * were stored under when the store knows it, and the digest the store recorded for it: a SHA-256
   * or the source's digest, see {@link io.tensorcast.dataplane.store.ContentDigest}), the tensor's
   * name, dtype and shape and the canonical query; the first 128 bits in hex, quoted.
   */
  static String etag(StoredArtifact a, ReadPlan plan, TensorQuery query)
      throws TensorReadException {
    MessageDigest md;
    try {
      md = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every Java platform", e);
    }
    Set<String> files = new LinkedHashSet<>();
    plan.segments().forEach(s -> files.add(s.file()));
    for (String f : files) {
      String recorded =
          a.completedDigest(f)
              .orElseThrow(
                  () ->
                      new TensorReadException(
                          503,
                          NOT_READY,
                          "file '" + f + "' of artifact " + a.artifactId() + " is not complete"));
      String version = a.storedVersion(f).orElse("");
      md.update((f + "\0" + version + "\0" + recorded + "\0").getBytes(StandardCharsets.UTF_8));
    }
    md.update(
        (plan.name() + "\0" + plan.dtype() + "\0" + plan.shapeHeader() + "\0" + query.canonical())
            .getBytes(StandardCharsets.UTF_8));
    return "\"" + HexFormat.of().formatHex(md.digest(), 0, 16) + "\"";
  }

  private Reply error(int status, String reason, String message, String etag) {
    byte[] body;
    try {
      Map<String, Object> m = new java.util.LinkedHashMap<>();
      m.put("error", message);
      m.put("reason", reason);
      m.put("artifactId", artifactId);
      if (reason.equals(NOT_READY)) {
        m.put("phase", String.valueOf(phase.get()));
      }
      body = json.writeValueAsBytes(m);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    FullHttpResponse r =
        new DefaultFullHttpResponse(
            HttpVersion.HTTP_1_1, HttpResponseStatus.valueOf(status), Unpooled.wrappedBuffer(body));
    r.headers().set(HttpHeaderNames.CONTENT_TYPE, JSON);
    r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, body.length);
    if (etag != null) {
      r.headers().set(HttpHeaderNames.ETAG, etag);
    }
    if (status == 503) {
      r.headers().set(HttpHeaderNames.RETRY_AFTER, "1");
    }
    return new Reply(r, null, List.of());
  }

  /**
   * Decodes a percent-encoded path part strictly: {@code %XX} escapes of UTF-8 bytes; {@code +}
   * stays {@code +}.
   *
   * @throws TensorReadException 400 {@code BadTensorName} naming the path and the problem
   */
  public static String decodePath(String raw) throws TensorReadException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(raw.length());
    for (int i = 0; i < raw.length(); i++) {
      char ch = raw.charAt(i);
      if (ch == '%') {
        int hi = i + 2 < raw.length() ? Character.digit(raw.charAt(i + 1), 16) : -1;
        int lo = i + 2 < raw.length() ? Character.digit(raw.charAt(i + 2), 16) : -1;
        if (hi < 0 || lo < 0) {
          throw new TensorReadException(
              400,
              "BadTensorName",
              "tensor name in the path '"
                  + raw
                  + "' has a '%' at index "
                  + i
                  + " that is not followed by two hex digits; percent-encode names as UTF-8");
        }
        bytes.write(hi * 16 + lo);
        i += 2;
      } else if (ch < 0x80) {
        bytes.write(ch);
      } else {
        byte[] b = String.valueOf(ch).getBytes(StandardCharsets.UTF_8);
        bytes.write(b, 0, b.length);
      }
    }
    try {
      return StandardCharsets.UTF_8
          .newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(bytes.toByteArray()))
          .toString();
    } catch (CharacterCodingException e) {
      throw new TensorReadException(
          400,
          "BadTensorName",
          "tensor name in the path '" + raw + "' does not decode to UTF-8: " + e.getMessage());
    }
  }

  /**
   * A name as the {@code X-Tensor-Name} header carries it: UTF-8, every byte outside {@code A-Z a-z
   * 0-9 - . _ ~ /} percent-encoded (header values are ASCII).
   */
  public static String encodeHeader(String name) {
    StringBuilder b = new StringBuilder(name.length());
    for (byte x : name.getBytes(StandardCharsets.UTF_8)) {
      int c = x & 0xff;
      if ((c >= 'A' && c <= 'Z')
          || (c >= 'a' && c <= 'z')
          || (c >= '0' && c <= '9')
          || c == '-'
          || c == '.'
          || c == '_'
          || c == '~'
          || c == '/') {
        b.append((char) c);
      } else {
        b.append('%').append(Character.toUpperCase(Character.forDigit(c >> 4, 16)));
        b.append(Character.toUpperCase(Character.forDigit(c & 15, 16)));
      }
    }
    return b.toString();
  }
}
