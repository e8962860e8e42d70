package io.tensorcast.dataplane.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Timer;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.netty.handler.timeout.IdleStateEvent;
import io.netty.handler.timeout.IdleStateHandler;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.dataplane.consumer.Reply;
import io.tensorcast.dataplane.consumer.TensorEndpoint;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The data plane's HTTP control endpoint (HTTP/1.1, Netty).
 *
 * <ul>
 *   <li>{@code GET /healthz}: 200 while the process serves (liveness).
 *   <li>{@code GET /readyz}: 200 only when the artifact is {@code Ready} on this node, else 503
 *       with the phase (readiness: a pod is Ready exactly when its bytes are).
 *   <li>{@code GET /status}: {@link DataPlaneStatus} as JSON. Requires {@code Authorization: Bearer
 *       <token>} with the read or admin token ({@link ControlAuth}).
 *   <li>{@code GET /metrics}: Prometheus text exposition of the process's Micrometer registry.
 *   <li>{@code GET /v1/tensors}, {@code GET|HEAD /v1/tensors/{name}}: consumer reads of the
 *       artifact's tensors ({@link TensorEndpoint}), with the read or admin token; bodies are
 *       streamed zero-copy from the store ({@link SegmentStreamer}).
 *   <li>{@code PUT /v1/peers}: the swarm membership as JSON ({@code
 *       {"epoch":"...","members":[{"id":"...","address":"ip:port"}]}}), with the admin token only
 *       (the read token gets 403); 204 when applied, 200 when the epoch is the current one, 400
 *       with a one-line error naming the field. Without a {@link PeersEndpoint} (a pod that loads
 *       from the source only) 409 with the one-line {@link #NO_SWARM}.
 * </ul>
 *
 * <p>No valid token: 401 with {@code WWW-Authenticate: Bearer realm="tensorcast"}. Each refusal is
 * logged with the client's address and the path (at most one line per second).
 *
 * <p>Apart from the peer membership, nothing on the endpoint reconfigures the pod, whose work is
 * fixed by its command line. A connection idle in both directions for {@value #IDLE_SECONDS} s is
 * closed; a body still being sent counts as activity. Pipelined requests are answered in order:
 * while a body streams, the connection stops reading and later requests wait.
 */
public final class ControlServer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ControlServer.class);

  /**
   * The body (one line) of the 409 answer to {@code PUT /v1/peers} on a pod that has no peer swarm.
   */
  public static final String NO_SWARM =
      "this data plane runs with --distribution source-only (or --peer-listen off);"
          + " peer membership is not used";

  /** Largest request body: a PUT /v1/peers of a few thousand members (~80 bytes each). */
  private static final int MAX_REQUEST_BYTES = 1024 * 1024;

  /** Seconds without reads or write progress after which a connection is closed. */
  public static final int IDLE_SECONDS = 30;

  /** Requests a client may pipeline behind a streaming body before the connection is closed. */
  private static final int MAX_QUEUED_REQUESTS = 16;

  private final EventLoopGroup group;
  private final Channel channel;

  private ControlServer(EventLoopGroup group, Channel channel) {
    this.group = group;
    this.channel = channel;
  }

  /**
   * Binds the endpoint.
   *
   * @param address address to bind, e.g. the pod IP and port 8471
   * @param status supplies the current status; called on the event loop, must be cheap
   * @param registry metrics to expose on {@code /metrics}
   * @param auth the tokens of the read and admin scopes; {@code null} only where no token can be
   *     handed out (tests of the endpoint itself): then every request is admitted
   * @throws InterruptedException if interrupted while binding
   */
  public static ControlServer start(
      InetSocketAddress address,
      Supplier<DataPlaneStatus> status,
      PrometheusMeterRegistry registry,
      ControlAuth auth)
      throws InterruptedException {
    return start(address, status, registry, auth, null);
  }

  /**
   * Binds the endpoint with consumer reads of tensors.
   *
   * @param tensors answers {@code /v1/tensors} requests, or {@code null} to answer them 404
   * @see #start(InetSocketAddress, Supplier, PrometheusMeterRegistry, ControlAuth)
   */
  public static ControlServer start(
      InetSocketAddress address,
      Supplier<DataPlaneStatus> status,
      PrometheusMeterRegistry registry,
      ControlAuth auth,
      TensorEndpoint tensors)
      throws InterruptedException {
    return start(address, status, registry, auth, tensors, null, BodyStreaming.DEFAULTS);
  }

  /**
   * More routes of a data plane that has them (the read side of written versions: {@code
   * /v1/writes}, {@code /v1/versions}, saves), each behind the scope it names. Answers must be
   * quick (they run on the event loop): long work is started, not waited for.
   */
  public interface ExtraRoutes {
    /**
     * The scope a request to the decoded path needs, or null when it is not one of these routes.
     */
    ControlAuth.Scope scope(HttpMethod method, String path);

    /** The answer to a request whose path {@link #handles} accepts. */
    FullHttpResponse answer(FullHttpRequest request);
  }

  /** Receives {@code PUT /v1/peers} bodies. */
  @FunctionalInterface
  public interface PeersEndpoint {
    /**
     * Applies a membership body.
     *
     * @return true when applied (204), false when its epoch is the current one (200)
     * @throws IllegalArgumentException with a one-line message naming the field (400)
     */
    boolean apply(String jsonBody);
  }

  /**
   * Binds the endpoint with consumer reads of tensors and the peer membership.
   *
   * @param tensors answers {@code /v1/tensors} requests, or {@code null} to answer them 404
   * @param peers receives {@code PUT /v1/peers}, or {@code null} when this pod has no swarm
   * @param streaming when to gather small segments into buffers instead of one {@code sendfile}
   *     each ({@link BodyStreaming#DEFAULTS} in the data plane)
   */
  public static ControlServer start(
      InetSocketAddress address,
      Supplier<DataPlaneStatus> status,
      PrometheusMeterRegistry registry,
      ControlAuth auth,
      TensorEndpoint tensors,
      PeersEndpoint peers,
      BodyStreaming streaming)
      throws InterruptedException {
    return start(address, status, registry, auth, tensors, peers, streaming, null);
  }

  /**
   * Binds the endpoint with consumer reads, the peer membership and more routes.
   *
   * @param extra more routes, or null
   * @see #start(InetSocketAddress, Supplier, PrometheusMeterRegistry, ControlAuth, TensorEndpoint,
   *     PeersEndpoint, BodyStreaming)
   */
  public static ControlServer start(
      InetSocketAddress address,
      Supplier<DataPlaneStatus> status,
      PrometheusMeterRegistry registry,
      ControlAuth auth,
      TensorEndpoint tensors,
      PeersEndpoint peers,
      BodyStreaming streaming,
      ExtraRoutes extra)
      throws InterruptedException {
    Objects.requireNonNull(status, "status");
    Objects.requireNonNull(streaming, "streaming");
    Objects.requireNonNull(registry, "registry");
    EventLoopGroup group = new NioEventLoopGroup(1);
    ObjectMapper json = new ObjectMapper();
    RefusalLog refusals = new RefusalLog();
    try {
      Channel ch =
          new ServerBootstrap()
              .group(group)
              .channel(NioServerSocketChannel.class)
              .childHandler(
                  new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel c) {
                      c.pipeline()
                          .addLast(new IdleStateHandler(true, 0, 0, IDLE_SECONDS, TimeUnit.SECONDS))
                          .addLast(new HttpServerCodec())
                          .addLast(new HttpObjectAggregator(MAX_REQUEST_BYTES))
                          .addLast(
                              new Handler(
                                  status, registry, auth, json, tensors, peers, streaming, refusals,
                                  extra));
                    }
                  })
              .bind(address)
              .sync()
              .channel();
      log.info("control endpoint listening on {}", ch.localAddress());
      return new ControlServer(group, ch);
    } catch (InterruptedException | RuntimeException e) {
      group.shutdownGracefully();
      throw e;
    }
  }

  /** The bound address (useful when binding port 0). */
  public InetSocketAddress address() {
    return (InetSocketAddress) channel.localAddress();
  }

  @Override
  public void close() {
    channel.close().awaitUninterruptibly();
    group.shutdownGracefully().awaitUninterruptibly();
  }

  /**
   * Logs refused requests: at most one line per second for each kind of refusal (no token, the read
   * token where admin is needed), with the number left out meanwhile.
   */
  private static final class RefusalLog {
    private final java.util.Map<String, long[]> byKind = new java.util.HashMap<>();

    synchronized void refused(String kind, String line) {
      long now = System.nanoTime();
      long[] state = byKind.computeIfAbsent(kind, k -> new long[] {now - 2_000_000_000L, 0});
      if (now - state[0] >= 1_000_000_000L) {
        log.warn(
            "control endpoint: {}{}",
            line,
            state[1] > 0 ? " (" + state[1] + " more refused like this in the last second)" : "");
        state[0] = now;
        state[1] = 0;
      } else {
        state[1]++;
      }
    }
  }

  private static final class Handler extends SimpleChannelInboundHandler<FullHttpRequest> {
    private final Supplier<DataPlaneStatus> status;
    private final PrometheusMeterRegistry registry;
    private final ControlAuth auth;
    private final RefusalLog refusalLog;
    private final ObjectMapper json;
    private final TensorEndpoint tensors;
    private final BodyStreaming bodyStreaming;
    private final ArrayDeque<FullHttpRequest> queued = new ArrayDeque<>();
    private SegmentStreamer streaming;
    private final PeersEndpoint peers;
    private final ExtraRoutes extra;

    Handler(
        Supplier<DataPlaneStatus> status,
        PrometheusMeterRegistry registry,
        ControlAuth auth,
        ObjectMapper json,
        TensorEndpoint tensors,
        PeersEndpoint peers,
        BodyStreaming bodyStreaming,
        RefusalLog refusalLog,
        ExtraRoutes extra) {
      this.refusalLog = refusalLog;
      this.extra = extra;
      this.peers = peers;
      this.bodyStreaming = bodyStreaming;
      this.status = status;
      this.registry = registry;
      this.auth = auth;
      this.json = json;
      this.tensors = tensors;
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) throws Exception {
      if (streaming != null) {
        if (queued.size() >= MAX_QUEUED_REQUESTS) {
          ctx.close();
          return;
        }
        queued.add(req.retain());
        return;
      }
      serve(ctx, req);
    }

    /** A body finished streaming: read again and answer what was pipelined meanwhile. */
    private void streamDone(ChannelHandlerContext ctx) {
      streaming = null;
      if (!ctx.channel().isActive()) {
        releaseQueued();
        return;
      }
      ctx.channel().config().setAutoRead(true);
      while (streaming == null && !queued.isEmpty()) {
        FullHttpRequest next = queued.poll();
        try {
          serve(ctx, next);
        } catch (Exception e) {
          exceptionCaught(ctx, e);
        } finally {
          next.release();
        }
      }
    }

    private void releaseQueued() {
      FullHttpRequest r;
      while ((r = queued.poll()) != null) {
        r.release();
      }
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
      if (streaming != null && ctx.channel().isWritable()) {
        streaming.pump();
      }
      ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      if (streaming != null) {
        streaming.fail(new IOException("connection closed"));
      }
      releaseQueued();
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

    /**
     * Whether the request's token has {@code needed}; otherwise answers 401 (no valid token) or 403
     * (the read token where admin is needed) and logs the refusal.
     */
    private boolean authorized(
        ChannelHandlerContext ctx, FullHttpRequest req, ControlAuth.Scope needed) {
      if (auth == null) {
        return true;
      }
      ControlAuth.Scope has = auth.scope(req.headers().get(HttpHeaderNames.AUTHORIZATION));
      if (has == ControlAuth.Scope.ADMIN || has == needed) {
        return true;
      }
      String path = new QueryStringDecoder(req.uri()).path();
      FullHttpResponse r;
      if (has == ControlAuth.Scope.NONE) {
        r =
            response(
                HttpResponseStatus.UNAUTHORIZED,
                "text/plain",
                "bearer token required: the read token for /status and /v1/tensors, the admin"
                    + " token for PUT /v1/peers\n");
        r.headers().set(HttpHeaderNames.WWW_AUTHENTICATE, "Bearer realm=\"tensorcast\"");
      } else {
        r =
            response(
                HttpResponseStatus.FORBIDDEN,
                "text/plain",
                "the read token does not allow "
                    + req.method()
                    + " "
                    + path
                    + "; it needs the admin token\n");
      }
      refusalLog.refused(
          has.name(),
          ctx.channel().remoteAddress()
              + ": "
              + req.method()
              + " "
              + path
              + " refused ("
              + (has == ControlAuth.Scope.NONE
                  ? "no valid bearer token"
                  : "read token, admin needed")
              + ")");
      write(ctx, req, r);
      return false;
    }

    private void serveTensors(ChannelHandlerContext ctx, FullHttpRequest req) {
      if (!authorized(ctx, req, ControlAuth.Scope.READ)) {
        return;
      }
      if (tensors == null) {
        send(ctx, req, HttpResponseStatus.NOT_FOUND, "text/plain", "not found\n");
        return;
      }
      long started = System.nanoTime();
      boolean head = req.method().equals(HttpMethod.HEAD);
      Reply reply = tensors.answer(req);
      if (reply.response() instanceof FullHttpResponse full) {
        int code = full.status().code();
        long bytes = head ? 0 : full.content().readableBytes();
        write(ctx, req, full);
        recordTensorRequest(code, bytes, started);
        return;
      }
      boolean keepAlive = HttpUtil.isKeepAlive(req);
      SegmentStreamer s =
          new SegmentStreamer(
              ctx,
              reply.directory(),
              reply.body(),
              reply.artifact(),
              keepAlive,
              bodyStreaming,
              () -> {
                recordTensorRequest(
                    reply.response().status().code(),
                    head ? 0 : HttpUtil.getContentLength(reply.response(), 0L),
                    started);
                streamDone(ctx);
              });
      try {
        s.open();
      } catch (IOException e) {
        send(
            ctx,
            req,
            HttpResponseStatus.SERVICE_UNAVAILABLE,
            "application/json",
            "{\"error\":"
                + quote("cannot open the stored file: " + e)
                + ",\"reason\":\"ArtifactUnloaded\"}");
        return;
      }
      if (keepAlive) {
        reply.response().headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.KEEP_ALIVE);
      } else {
        reply.response().headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
      }
      streaming = s;
      ctx.channel().config().setAutoRead(false);
      s.start(reply.response());
    }

    /**
     * {@code tensorcast_dataplane_tensor_requests_seconds{code}}: time from a tensor request to its
     * last body byte handed to the socket; {@code tensorcast_dataplane_tensor_sent_bytes_total}:
     * the body bytes of those replies.
     */
    private void recordTensorRequest(int code, long bodyBytes, long startedNanos) {
      if (registry == null) {
        return;
      }
      Timer.builder("tensorcast.dataplane.tensor.requests")
          .description("Tensor reads answered (GET/HEAD /v1/tensors), by HTTP status")
          .tag("code", Integer.toString(code))
          .register(registry)
          .record(System.nanoTime() - startedNanos, TimeUnit.NANOSECONDS);
      if (bodyBytes > 0) {
        Counter.builder("tensorcast.dataplane.tensor.sent")
            .baseUnit("bytes")
            .description("Body bytes of answered tensor reads")
            .register(registry)
            .increment(bodyBytes);
      }
    }

    private String quote(String text) {
      try {
        return json.writeValueAsString(text);
      } catch (Exception e) {
        return "\"error\"";
      }
    }

    private void serve(ChannelHandlerContext ctx, FullHttpRequest req) throws Exception {
      if (!req.decoderResult().isSuccess()) {
        // The decoder discards the rest of the connection's bytes after a malformed request, so
        // later requests on it would never be answered: say why and close.
        Throwable cause = req.decoderResult().cause();
        FullHttpResponse r =
            response(
                HttpResponseStatus.BAD_REQUEST,
                "text/plain",
                "bad request: "
                    + (cause == null ? "malformed HTTP/1.1" : String.valueOf(cause.getMessage()))
                    + " (limits: request line 4096 bytes, headers 8192 bytes)\n");
        r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        ctx.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
        return;
      }
      ControlAuth.Scope extraScope =
          extra == null
              ? null
              : extra.scope(req.method(), new QueryStringDecoder(req.uri()).path());
      if (extraScope != null) {
        if (authorized(ctx, req, extraScope)) {
          write(ctx, req, extra.answer(req));
        }
        return;
      }
      if (HttpMethod.PUT.equals(req.method())
          && "/v1/peers".equals(new QueryStringDecoder(req.uri()).path())) {
        putPeers(ctx, req);
        return;
      }
      if (!HttpMethod.GET.equals(req.method()) && !HttpMethod.HEAD.equals(req.method())) {
        send(ctx, req, HttpResponseStatus.METHOD_NOT_ALLOWED, "text/plain", "GET only\n");
        return;
      }
      QueryStringDecoder uri = new QueryStringDecoder(req.uri());
      if (TensorEndpoint.handles(uri.rawPath())) {
        serveTensors(ctx, req);
        return;
      }
      String path = uri.path();
      switch (path) {
        case "/healthz" -> send(ctx, req, HttpResponseStatus.OK, "text/plain", "ok\n");
        case "/readyz" -> {
          DataPlaneStatus s = status.get();
          boolean ready = s.phase() == DataPlaneStatus.Phase.Ready;
          send(
              ctx,
              req,
              ready ? HttpResponseStatus.OK : HttpResponseStatus.SERVICE_UNAVAILABLE,
              "text/plain",
              s.phase() + "\n");
        }
        case "/status" -> {
          if (!authorized(ctx, req, ControlAuth.Scope.READ)) {
            return;
          }
          send(
              ctx,
              req,
              HttpResponseStatus.OK,
              "application/json",
              json.writeValueAsString(status.get()));
        }
        case "/metrics" ->
            send(
                ctx,
                req,
                HttpResponseStatus.OK,
                "text/plain; version=0.0.4; charset=utf-8",
                registry.scrape());
        default -> send(ctx, req, HttpResponseStatus.NOT_FOUND, "text/plain", "not found\n");
      }
    }

    private void putPeers(ChannelHandlerContext ctx, FullHttpRequest req) {
      if (!authorized(ctx, req, ControlAuth.Scope.ADMIN)) {
        return;
      }
      if (peers == null) {
        send(ctx, req, HttpResponseStatus.CONFLICT, "text/plain", NO_SWARM + "\n");
        return;
      }
      String body = req.content().toString(StandardCharsets.UTF_8);
      boolean applied;
      try {
        applied = peers.apply(body);
      } catch (IllegalArgumentException e) {
        send(
            ctx,
            req,
            HttpResponseStatus.BAD_REQUEST,
            "text/plain",
            e.getMessage().replace('\n', ' ') + "\n");
        return;
      }
      if (applied) {
        FullHttpResponse r =
            new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.NO_CONTENT);
        r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, 0);
        write(ctx, req, r);
      } else {
        send(ctx, req, HttpResponseStatus.OK, "text/plain", "epoch unchanged\n");
      }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      log.debug("control connection from {} failed: {}", ctx.channel().remoteAddress(), cause);
      ctx.close();
    }

    private static FullHttpResponse response(
        HttpResponseStatus code, String contentType, String body) {
      FullHttpResponse r =
          new DefaultFullHttpResponse(
              HttpVersion.HTTP_1_1,
              code,
              Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8)));
      r.headers().set(HttpHeaderNames.CONTENT_TYPE, contentType);
      r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, r.content().readableBytes());
      return r;
    }

    private static void send(
        ChannelHandlerContext ctx,
        FullHttpRequest req,
        HttpResponseStatus code,
        String contentType,
        String body) {
      write(ctx, req, response(code, contentType, body));
    }

    private static void write(ChannelHandlerContext ctx, FullHttpRequest req, FullHttpResponse r) {
      if (HttpMethod.HEAD.equals(req.method())) {
        r.content().clear();
      }
      boolean keepAlive = HttpUtil.isKeepAlive(req);
      if (keepAlive) {
        r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.KEEP_ALIVE);
        ctx.writeAndFlush(r);
      } else {
        ctx.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
      }
    }
  }
}
