package io.tensorcast.dataplane.write;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.netty.handler.timeout.IdleStateEvent;
import io.netty.util.ReferenceCountUtil;
import io.tensorcast.dataplane.consumer.TensorEndpoint;
import io.tensorcast.dataplane.consumer.TensorReadException;
import io.tensorcast.dataplane.http.ControlToken;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One connection of the write API. Routes (every one needs {@code Authorization: Bearer <write
 * token>}; JSON errors {@code {"error", "reason", "version"}} whose {@code error} names the
 * version, tensor, rule and numbers):
 *
 * <ul>
 *   <li>{@code GET /v1/writes}: the versions. {@code POST /v1/writes} {@code {"name", "kind",
 *       "metadata"}}: create (201; a repeat with the same kind and metadata answers 200).
 *   <li>{@code GET /v1/writes/{v}}: summary, and {@code "seal"} (the {@link SealRecord}) once
 *       sealed. {@code DELETE /v1/writes/{v}}: drop it (204).
 *   <li>{@code POST /v1/writes/{v}/tensors/{name}?dtype=BF16&shape=4096,4096[&parallelism=tp:0/4@0
 *       | &writer_partition=tp:0/4@0]}: put one tensor, the body its {@code dtype × shape} bytes
 *       (little-endian, row-major); {@code PUT} the same, as an upsert.
 *   <li>{@code POST /v1/writes/{v}/batches}: put a batch ({@code PUT}: upsert); body: a 4-byte
 *       little-endian length {@code n}, {@code n} bytes of JSON {@code {"tensors": [{"name",
 *       "dtype", "shape", "parallelism" | "writer_partition"}]}}, then every tensor's bytes in that
 *       order.
 *   <li>{@code POST /v1/writes/{v}/reservations} {@code {"upsert": false, "tensors": [...]}}: the
 *       zero-copy way in: the data plane allocates the batch's segment in the page-locked store and
 *       answers 201 {@code {"id", "file", "size", "tensors": [{"name", "offset", "length"}]}};
 *       {@code file} is relative to the writes directory the writer mounts; the writer writes each
 *       tensor's stored bytes (a writer partition's shard, cut by the writer) at its offset, then
 *       {@code POST .../reservations/{id}/commit} (optionally {@code {"sha256": {"name": "hex"}}},
 *       checked) or {@code DELETE .../reservations/{id}}.
 *   <li>{@code POST /v1/writes/{v}/seal}: seal (200 with the seal record).
 *   <li>{@code POST /v1/writes/{v}/save} {@code {"uri", ...}}: save the sealed version ({@link
 *       Saver}).
 * </ul>
 *
 * <p>A put's body goes straight into its segment as it arrives; a body that ends early (the writer
 * killed), runs long, or breaks the connection drops the batch and nothing else. {@code Expect:
 * 100-continue} is answered only once the put was accepted, so a refused put sends no body.
 */
public final class WriteHandler extends ChannelInboundHandlerAdapter {
  private static final Logger log = LoggerFactory.getLogger(WriteHandler.class);

  /** Largest JSON body or batch header accepted. */
  public static final int MAX_JSON_BYTES = 16 * 1024 * 1024;

  private static final String PREFIX = "/v1/writes";

  /** Saves sealed versions ({@code POST .../save}). */
  @FunctionalInterface
  public interface Saver {
    /**
     * Saves (or starts saving) a sealed version; returns the JSON to answer with.
     *
     * @throws WriteException naming what is wrong (no credentials, a bad URI, not sealed)
     */
    ObjectNode save(WritableVersion version, ObjectNode request) throws WriteException;
  }

  private final WriteService service;
  private final ControlToken token;
  private final ExecutorService workers;
  private final Saver saver;

  /** The request being served, or null. */
  private Exchange current;

  WriteHandler(WriteService service, ControlToken token, ExecutorService workers, Saver saver) {
    this.service = service;
    this.token = token;
    this.workers = workers;
    this.saver = saver;
  }

  /** What one request is doing. */
  private static final class Exchange {
    final HttpRequest request;
    final boolean keepAlive;
    final String versionName;
    Route route;

    /** JSON body collected (non-streaming routes, and a batch's header). */
    ByteBuf collected;

    /** A streaming put once started; null before. */
    Upload upload;

    boolean done;

    Exchange(HttpRequest request, String versionName) {
      this.request = request;
      this.keepAlive = HttpUtil.isKeepAlive(request);
      this.versionName = versionName;
    }
  }

  /** A put streaming into a segment. */
  private static final class Upload {
    /** The batch header (4-byte length + JSON) still being read, for {@code /batches}. */
    boolean readingHeader;

    int jsonLength = -1;

    /** Bytes that arrived while the segment was being staged. */
    final ArrayDeque<ByteBuf> queued = new ArrayDeque<>();

    boolean lastSeen;
    boolean upsert;
    VersionWrite write;
    BatchWriter writer;
    long contentLength = -1;
  }

  private enum Route {
    LIST,
    CREATE,
    GET,
    DROP,
    PUT_TENSOR,
    PUT_BATCH,
    RESERVE,
    COMMIT,
    DROP_RESERVATION,
    SEAL,
    SAVE
  }

  // ------------------------------------------------------------------ Netty events

  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    try {
      if (msg instanceof HttpRequest req) {
        if (current != null && !current.done) {
          ReferenceCountUtil.release(msg);
          respondAndClose(ctx, 400, "BadRequest", "one request at a time: no pipelining", null);
          return;
        }
        start(ctx, req);
      }
      if (msg instanceof HttpContent c && current != null && !current.done) {
        content(ctx, c);
      }
    } catch (WriteException e) {
      fail(ctx, e);
    } catch (RuntimeException e) {
      log.warn("write API request failed", e);
      fail(ctx, new WriteException(500, "InternalError", String.valueOf(e), e));
    } finally {
      ReferenceCountUtil.release(msg);
    }
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    Exchange x = current;
    if (x != null && !x.done) {
      abortUpload(x, "the connection closed before the body was complete");
      x.done = true;
    }
    release(x);
    ctx.fireChannelInactive();
  }

  @Override
  public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
    if (evt instanceof IdleStateEvent) {
      ctx.close();
      return;
    }
    ctx.fireUserEventTriggered(evt);
  }

  @Override
  public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
    log.debug("write API connection failed: {}", cause.toString());
    ctx.close();
  }

  // ------------------------------------------------------------------ request start

  private void start(ChannelHandlerContext ctx, HttpRequest req) throws WriteException {
    release(current);
    current = null;
    if (!req.decoderResult().isSuccess()) {
      respondAndClose(
          ctx,
          400,
          "BadRequest",
          "malformed HTTP/1.1 request: " + req.decoderResult().cause(),
          null);
      return;
    }
    if (!token.accepts(req.headers().get(HttpHeaderNames.AUTHORIZATION))) {
      FullHttpResponse r =
          json(
              401,
              WriteJson.error(
                  new WriteException(
                      401, "Unauthorized", "write token required (Authorization: Bearer <token>)"),
                  null));
      r.headers().set(HttpHeaderNames.WWW_AUTHENTICATE, "Bearer realm=\"tensorcast-write\"");
      r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
      ctx.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
      current = new Exchange(req, null);
      current.done = true;
      return;
    }
    QueryStringDecoder uri = new QueryStringDecoder(req.uri());
    String raw = uri.rawPath();
    if (!raw.equals(PREFIX) && !raw.startsWith(PREFIX + "/")) {
      current = new Exchange(req, null);
      throw new WriteException(
          404, "NotFound", "no route " + raw + "; the write API is under " + PREFIX);
    }
    String[] parts =
        raw.length() <= PREFIX.length()
            ? new String[0]
            : raw.substring(PREFIX.length() + 1).split("/", 4);
    String version = parts.length > 0 ? parts[0] : null;
    Exchange x = new Exchange(req, version);
    current = x;
    HttpMethod m = req.method();
    x.route = route(m, parts);
    if (x.route == Route.PUT_TENSOR || x.route == Route.PUT_BATCH) {
      startUpload(ctx, x, uri, parts);
      return;
    }
    if (HttpUtil.is100ContinueExpected(req)) {
      ctx.writeAndFlush(
          new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.CONTINUE));
    }
    long declared = HttpUtil.getContentLength(req, -1L);
    if (declared > MAX_JSON_BYTES) {
      throw new WriteException(
          413,
          "BodyTooLarge",
          "a JSON body of " + declared + " bytes is larger than " + MAX_JSON_BYTES + " bytes");
    }
    x.collected = ctx.alloc().heapBuffer();
  }

  private Route route(HttpMethod m, String[] p) throws WriteException {
    String sub = p.length > 1 ? p[1] : null;
    if (p.length == 0) {
      if (m.equals(HttpMethod.GET)) {
        return Route.LIST;
      }
      if (m.equals(HttpMethod.POST)) {
        return Route.CREATE;
      }
    } else if (sub == null) {
      if (m.equals(HttpMethod.GET)) {
        return Route.GET;
      }
      if (m.equals(HttpMethod.DELETE)) {
        return Route.DROP;
      }
    } else if (sub.equals("tensors") && p.length >= 3) {
      if (m.equals(HttpMethod.POST) || m.equals(HttpMethod.PUT)) {
        return Route.PUT_TENSOR;
      }
    } else if (sub.equals("batches") && p.length == 2) {
      if (m.equals(HttpMethod.POST) || m.equals(HttpMethod.PUT)) {
        return Route.PUT_BATCH;
      }
    } else if (sub.equals("reservations")) {
      if (p.length == 2 && m.equals(HttpMethod.POST)) {
        return Route.RESERVE;
      }
      if (p.length == 4 && p[3].equals("commit") && m.equals(HttpMethod.POST)) {
        return Route.COMMIT;
      }
      if (p.length == 3 && m.equals(HttpMethod.DELETE)) {
        return Route.DROP_RESERVATION;
      }
    } else if (sub.equals("seal") && p.length == 2 && m.equals(HttpMethod.POST)) {
      return Route.SEAL;
    } else if (sub.equals("save") && p.length == 2 && m.equals(HttpMethod.POST)) {
      return Route.SAVE;
    }
    throw new WriteException(
        p.length > 1 && Set.of("tensors", "batches", "reservations", "seal", "save").contains(sub)
            ? 405
            : 404,
        "NotFound",
        "no route " + m + " " + PREFIX + "/" + String.join("/", p));
  }

  // ------------------------------------------------------------------ streaming puts

  private void startUpload(
      ChannelHandlerContext ctx, Exchange x, QueryStringDecoder uri, String[] parts)
      throws WriteException {
    Upload u = new Upload();
    x.upload = u;
    u.upsert = x.request.method().equals(HttpMethod.PUT);
    u.contentLength = HttpUtil.getContentLength(x.request, -1L);
    WritableVersion v = service.version(x.versionName);
    if (x.route == Route.PUT_BATCH) {
      u.readingHeader = true;
      x.collected = ctx.alloc().heapBuffer();
      if (HttpUtil.is100ContinueExpected(x.request)) {
        ctx.writeAndFlush(
            new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.CONTINUE));
      }
      return;
    }
    String name;
    try {
      name = TensorEndpoint.decodePath(parts.length == 4 ? parts[2] + "/" + parts[3] : parts[2]);
    } catch (TensorReadException e) {
      throw WriteException.bad("InvalidTensor", e.getMessage());
    }
    Map<String, List<String>> q = uri.parameters();
    for (String k : q.keySet()) {
      if (!Set.of("dtype", "shape", "parallelism", "writer_partition").contains(k)) {
        throw WriteException.bad(
            "BadRequest",
            "unknown query parameter '" + k + "' (dtype, shape, parallelism, writer_partition)");
      }
    }
    TensorPut put =
        WriteJson.put(
            name,
            one(q, "dtype"),
            WriteJson.shape(one(q, "shape"), name),
            one(q, "parallelism"),
            one(q, "writer_partition"));
    BatchPlan plan = BatchPlan.of(List.of(put));
    if (u.contentLength >= 0 && u.contentLength != plan.inputBytes()) {
      throw WriteException.bad(
          "SizeMismatch",
          "tensor \""
              + name
              + "\": Content-Length is "
              + u.contentLength
              + " but "
              + put.dtype()
              + " × "
              + java.util.Arrays.toString(put.shape())
              + " takes "
              + plan.inputBytes()
              + " bytes");
    }
    begin(ctx, x, v, plan);
  }

  private static String one(Map<String, List<String>> q, String key) throws WriteException {
    List<String> v = q.get(key);
    if (v == null || v.isEmpty()) {
      return null;
    }
    if (v.size() > 1) {
      throw WriteException.bad("BadRequest", "query parameter '" + key + "' is given twice");
    }
    return v.get(0);
  }

  /** Stages the batch's segment off the event loop, reading nothing meanwhile. */
  private void begin(ChannelHandlerContext ctx, Exchange x, WritableVersion v, BatchPlan plan) {
    Upload u = x.upload;
    ctx.channel().config().setAutoRead(false);
    submit(
        ctx,
        x,
        () -> v.begin(plan, u.upsert, false),
        started -> {
          VersionWrite w = (VersionWrite) started;
          if (x.done || !ctx.channel().isActive()) {
            v.abort(w);
            return;
          }
          u.write = w;
          u.writer = w.writer();
          if (HttpUtil.is100ContinueExpected(x.request) && x.route == Route.PUT_TENSOR) {
            ctx.writeAndFlush(
                new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.CONTINUE));
          }
          ctx.channel().config().setAutoRead(true);
          try {
            while (!u.queued.isEmpty()) {
              ByteBuf b = u.queued.poll();
              try {
                feed(u, b);
              } finally {
                b.release();
              }
            }
            if (u.lastSeen) {
              finishUpload(ctx, x);
            }
          } catch (WriteException e) {
            fail(ctx, e);
          }
        });
  }

  private void content(ChannelHandlerContext ctx, HttpContent c) throws WriteException {
    Exchange x = current;
    boolean last = c instanceof LastHttpContent;
    ByteBuf data = c.content();
    Upload u = x.upload;
    if (u == null) {
      if (x.collected.readableBytes() + data.readableBytes() > MAX_JSON_BYTES) {
        throw new WriteException(
            413, "BodyTooLarge", "a JSON body larger than " + MAX_JSON_BYTES + " bytes");
      }
      x.collected.writeBytes(data);
      if (last) {
        byte[] body = new byte[x.collected.readableBytes()];
        x.collected.readBytes(body);
        dispatch(ctx, x, body);
      }
      return;
    }
    if (u.readingHeader) {
      readBatchHeader(ctx, x, data);
      if (last) {
        u.lastSeen = true;
        if (u.readingHeader) {
          throw WriteException.bad(
              "SizeMismatch",
              "the batch body ended inside its header (4-byte little-endian JSON length, then the"
                  + " JSON)");
        }
      }
      return;
    }
    if (last) {
      u.lastSeen = true;
    }
    if (u.writer == null) {
      if (data.isReadable()) {
        u.queued.add(data.retainedSlice());
      }
      return;
    }
    feed(u, data);
    if (last) {
      finishUpload(ctx, x);
    }
  }

  private void readBatchHeader(ChannelHandlerContext ctx, Exchange x, ByteBuf data)
      throws WriteException {
    Upload u = x.upload;
    ByteBuf h = x.collected;
    if (u.jsonLength < 0) {
      int need = 4 - h.readableBytes();
      h.writeBytes(data, Math.min(need, data.readableBytes()));
      if (h.readableBytes() < 4) {
        return;
      }
      long len = h.readUnsignedIntLE();
      if (len > MAX_JSON_BYTES) {
        throw new WriteException(
            413,
            "BodyTooLarge",
            "the batch's JSON header says " + len + " bytes, more than " + MAX_JSON_BYTES);
      }
      u.jsonLength = (int) len;
      h.clear();
    }
    int need = u.jsonLength - h.readableBytes();
    h.writeBytes(data, Math.min(need, data.readableBytes()));
    if (h.readableBytes() < u.jsonLength) {
      return;
    }
    byte[] json = new byte[u.jsonLength];
    h.readBytes(json);
    u.readingHeader = false;
    if (data.isReadable()) {
      u.queued.add(data.retainedSlice());
    }
    ObjectNode body = WriteJson.object(json, "batch header");
    List<TensorPut> puts = WriteJson.tensors(body, "batch header", Set.of());
    BatchPlan plan = BatchPlan.of(puts);
    if (u.contentLength >= 0 && u.contentLength != 4L + u.jsonLength + plan.inputBytes()) {
      throw WriteException.bad(
          "SizeMismatch",
          "Content-Length is "
              + u.contentLength
              + " but the batch takes 4 + "
              + u.jsonLength
              + " (header) + "
              + plan.inputBytes()
              + " (dtype × shape of its "
              + puts.size()
              + " tensors) = "
              + (4L + u.jsonLength + plan.inputBytes())
              + " bytes");
    }
    begin(ctx, x, service.version(x.versionName), plan);
  }

  private static void feed(Upload u, ByteBuf data) throws WriteException {
    if (!data.isReadable()) {
      return;
    }
    for (ByteBuffer b : data.nioBuffers()) {
      u.writer.accept(b);
    }
  }

  private void finishUpload(ChannelHandlerContext ctx, Exchange x) throws WriteException {
    Upload u = x.upload;
    u.writer.finish();
    VersionWrite w = u.write;
    submit(
        ctx,
        x,
        () -> {
          w.version().commit(w, Map.of());
          ObjectNode o = WriteJson.JSON.createObjectNode();
          o.put("version", w.version().name());
          o.put("batch", w.id());
          o.put("tensors", w.plan().tensors().size());
          o.put("bytesReceived", w.plan().inputBytes());
          o.put("bytesStored", w.plan().storedBytes());
          o.put("upsert", w.upsert());
          return o;
        });
  }

  private void abortUpload(Exchange x, String why) {
    if (x == null || x.upload == null) {
      return;
    }
    Upload u = x.upload;
    if (u.write != null) {
      log.info(
          "version {}: batch {} dropped ({}); nothing of it is kept",
          u.write.version().name(),
          u.write.id(),
          why);
      u.write.version().abort(u.write);
      u.write = null;
    }
    ByteBuf b;
    while ((b = u.queued.poll()) != null) {
      b.release();
    }
  }

  // ------------------------------------------------------------------ JSON routes

  private void dispatch(ChannelHandlerContext ctx, Exchange x, byte[] body) {
    submit(ctx, x, () -> handle(x, body));
  }

  /** Runs a JSON route; returns the body to answer 200/201 with, or null for 204. */
  private Object handle(Exchange x, byte[] body) throws WriteException {
    String v = x.versionName;
    switch (x.route) {
      case LIST -> {
        ObjectNode o = WriteJson.JSON.createObjectNode();
        ArrayNode arr = o.putArray("versions");
        for (WritableVersion w : service.versions()) {
          arr.add(WriteJson.summary(w));
        }
        return o;
      }
      case CREATE -> {
        ObjectNode req = WriteJson.object(body, "create");
        WriteJson.onlyFields(req, "create", Set.of("name", "kind", "metadata"));
        String name = WriteJson.text(req, "name", "create", true);
        boolean existed = contains(name);
        WritableVersion w =
            service.create(
                name,
                WriteJson.text(req, "kind", "create", false),
                WriteJson.stringMap(req, "metadata", "create"));
        return new Created(WriteJson.summary(w), !existed);
      }
      case GET -> {
        WritableVersion w = service.version(v);
        ObjectNode o = WriteJson.summary(w);
        SealRecord r = w.sealRecord();
        if (r != null) {
          try {
            o.set("seal", WriteJson.JSON.readTree(r.toJson()));
          } catch (java.io.IOException e) {
            throw new WriteException(500, "InternalError", e.toString(), e);
          }
        }
        return o;
      }
      case DROP -> {
        service.drop(v);
        return null;
      }
      case RESERVE -> {
        ObjectNode req = WriteJson.object(body, "reservation");
        List<TensorPut> puts = WriteJson.tensors(req, "reservation", Set.of("upsert"));
        JsonNode up = req.get("upsert");
        if (up != null && !up.isBoolean()) {
          throw WriteException.bad("BadRequest", "reservation: field \"upsert\" must be a boolean");
        }
        WritableVersion w = service.version(v);
        VersionWrite r = w.begin(BatchPlan.of(puts), up != null && up.asBoolean(), true);
        ObjectNode o = WriteJson.JSON.createObjectNode();
        o.put("id", r.id());
        o.put("file", service.writesDirectory().relativize(r.file()).toString());
        o.put("path", r.file().toString());
        o.put("size", r.segment().file.size());
        ArrayNode ts = o.putArray("tensors");
        for (VersionWrite.Slot s : r.slots()) {
          ts.addObject().put("name", s.name()).put("offset", s.offset()).put("length", s.length());
        }
        return new Created(o, true);
      }
      case COMMIT, DROP_RESERVATION -> {
        WritableVersion w = service.version(v);
        String[] p = new QueryStringDecoder(x.request.uri()).rawPath().split("/");
        int id;
        try {
          id = Integer.parseInt(p[5]);
        } catch (NumberFormatException | ArrayIndexOutOfBoundsException e) {
          throw WriteException.bad("BadRequest", "reservation id must be an integer");
        }
        VersionWrite r = w.inFlight(id);
        if (r == null || !r.reservation()) {
          throw new WriteException(
              404,
              "NoSuchReservation",
              "version "
                  + v
                  + " has no reservation "
                  + id
                  + " in flight (committed, dropped or expired)");
        }
        if (x.route == Route.DROP_RESERVATION) {
          w.abort(r);
          return null;
        }
        ObjectNode req = WriteJson.object(body, "commit");
        WriteJson.onlyFields(req, "commit", Set.of("sha256"));
        w.commit(r, WriteJson.stringMap(req, "sha256", "commit"));
        ObjectNode o = WriteJson.JSON.createObjectNode();
        o.put("version", v);
        o.put("batch", id);
        o.put("tensors", r.plan().tensors().size());
        o.put("bytesStored", r.plan().storedBytes());
        return o;
      }
      case SEAL -> {
        WriteJson.onlyFields(WriteJson.object(body, "seal"), "seal", Set.of());
        SealRecord r = service.version(v).seal();
        try {
          return WriteJson.JSON.readTree(r.toJson());
        } catch (java.io.IOException e) {
          throw new WriteException(500, "InternalError", e.toString(), e);
        }
      }
      case SAVE -> {
        if (saver == null) {
          throw new WriteException(501, "NotImplemented", "this data plane does not save versions");
        }
        return saver.save(service.version(v), WriteJson.object(body, "save"));
      }
      default -> throw new WriteException(500, "InternalError", "unrouted " + x.route);
    }
  }

  private boolean contains(String name) {
    try {
      service.version(name);
      return true;
    } catch (WriteException e) {
      return false;
    }
  }

  /** A 201 answer (or 200 for a repeated create). */
  private record Created(ObjectNode body, boolean created) {}

  @FunctionalInterface
  private interface Work {
    Object run() throws WriteException;
  }

  /** Runs {@code work} on the worker pool and answers with its result on the event loop. */
  private void submit(ChannelHandlerContext ctx, Exchange x, Work work) {
    submit(ctx, x, work, r -> answer(ctx, x, r));
  }

  /**
   * Runs {@code work} on the worker pool, then {@code then} with its result on the event loop (or
   * answers its failure).
   */
  private void submit(
      ChannelHandlerContext ctx, Exchange x, Work work, java.util.function.Consumer<Object> then) {
    try {
      workers.execute(
          () -> {
            Object result;
            WriteException failure = null;
            try {
              result = work.run();
            } catch (WriteException e) {
              result = null;
              failure = e;
            } catch (RuntimeException e) {
              log.warn("write API work failed", e);
              result = null;
              failure = new WriteException(500, "InternalError", String.valueOf(e), e);
            }
            Object r = result;
            WriteException f = failure;
            ctx.executor()
                .execute(
                    () -> {
                      if (f != null) {
                        if (current == x) {
                          fail(ctx, f);
                        }
                      } else {
                        then.accept(r);
                      }
                    });
          });
    } catch (RejectedExecutionException e) {
      fail(ctx, new WriteException(503, "ShuttingDown", "the write API is shutting down"));
    }
  }

  private void answer(ChannelHandlerContext ctx, Exchange x, Object result) {
    if (x.done) {
      return;
    }
    x.done = true;
    if (x.upload != null) {
      x.upload.write = null; // committed
    }
    FullHttpResponse r;
    if (result == null) {
      r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.NO_CONTENT);
      r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, 0);
    } else if (result instanceof Created c) {
      r = json(c.created() ? 201 : 200, c.body());
    } else {
      r = json(200, (JsonNode) result);
    }
    write(ctx, r, x.keepAlive);
    release(x);
  }

  private void fail(ChannelHandlerContext ctx, WriteException e) {
    Exchange x = current;
    if (x != null && x.done) {
      return;
    }
    boolean midBody = x != null && x.upload != null && !x.upload.lastSeen;
    if (x != null) {
      abortUpload(x, e.reason());
      x.done = true;
    }
    if (e.status() >= 500) {
      log.warn("write API: {}: {}", e.reason(), e.getMessage());
    }
    FullHttpResponse r = json(e.status(), WriteJson.error(e, x == null ? null : x.versionName));
    // The rest of a refused body is not read: close, so the writer sees the answer, not a stall.
    write(ctx, r, !midBody && (x == null || x.keepAlive) && e.status() != 413);
    release(x);
  }

  private void respondAndClose(
      ChannelHandlerContext ctx, int status, String reason, String message, String version) {
    FullHttpResponse r =
        json(status, WriteJson.error(new WriteException(status, reason, message), version));
    write(ctx, r, false);
  }

  private static FullHttpResponse json(int status, JsonNode body) {
    byte[] bytes;
    try {
      bytes = WriteJson.JSON.writeValueAsBytes(body);
    } catch (java.io.IOException e) {
      bytes = ("{\"error\":\"cannot serialise\"}").getBytes(StandardCharsets.UTF_8);
    }
    FullHttpResponse r =
        new DefaultFullHttpResponse(
            HttpVersion.HTTP_1_1,
            HttpResponseStatus.valueOf(status),
            Unpooled.wrappedBuffer(bytes));
    r.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/json");
    r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, bytes.length);
    return r;
  }

  private static void write(ChannelHandlerContext ctx, FullHttpResponse r, boolean keepAlive) {
    if (keepAlive) {
      r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.KEEP_ALIVE);
      ctx.writeAndFlush(r);
      ctx.channel().config().setAutoRead(true);
    } else {
      r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
      ctx.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
    }
  }

  private static void release(Exchange x) {
    if (x == null) {
      return;
    }
    if (x.collected != null) {
      x.collected.release();
      x.collected = null;
    }
    if (x.upload != null) {
      ByteBuf b;
      while ((b = x.upload.queued.poll()) != null) {
        b.release();
      }
    }
  }

  static int littleEndianLength(byte[] four) {
    return ByteBuffer.wrap(four).order(ByteOrder.LITTLE_ENDIAN).getInt();
  }
}
