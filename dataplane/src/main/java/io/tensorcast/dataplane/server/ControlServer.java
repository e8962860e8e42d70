package io.tensorcast.dataplane.server;

import com.fasterxml.jackson.databind.ObjectMapper;
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
import io.netty.handler.timeout.ReadTimeoutHandler;
import io.tensorcast.api.wire.DataPlaneStatus;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
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
 *       <token>} when a {@link ControlToken} is configured.
 *   <li>{@code GET /metrics}: Prometheus text exposition of the process's Micrometer registry.
 * </ul>
 *
 * <li>{@code PUT /v1/peers} (only with a {@link PeersEndpoint}): the swarm membership as JSON
 *     ({@code {"epoch":"...","members":[{"id":"...","address":"ip:port"}]}}); 204 when applied, 200
 *     when the epoch is the current one, 400 with a one-line error naming the field. Same bearer
 *     token as {@code /status}.
 * </ul>
 *
 * <p>Apart from the peer membership, nothing on the endpoint reconfigures the pod, whose work is
 * fixed by its command line.
 */
public final class ControlServer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ControlServer.class);
  private static final int MAX_REQUEST_BYTES = 16 * 1024;

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
   * @param token bearer token required on {@code /status}, or {@code null} for none
   * @throws InterruptedException if interrupted while binding
   */
  public static ControlServer start(
      InetSocketAddress address,
      Supplier<DataPlaneStatus> status,
      PrometheusMeterRegistry registry,
      ControlToken token)
      throws InterruptedException {
    return start(address, status, registry, token, null);
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
   * As {@link #start(InetSocketAddress, Supplier, PrometheusMeterRegistry, ControlToken)}, also
   * serving {@code PUT /v1/peers} to {@code peers} when it is not null.
   */
  public static ControlServer start(
      InetSocketAddress address,
      Supplier<DataPlaneStatus> status,
      PrometheusMeterRegistry registry,
      ControlToken token,
      PeersEndpoint peers)
      throws InterruptedException {
    Objects.requireNonNull(status, "status");
    Objects.requireNonNull(registry, "registry");
    EventLoopGroup group = new NioEventLoopGroup(1);
    ObjectMapper json = new ObjectMapper();
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
                          .addLast(new ReadTimeoutHandler(30))
                          .addLast(new HttpServerCodec())
                          .addLast(new HttpObjectAggregator(MAX_REQUEST_BYTES))
                          .addLast(new Handler(status, registry, token, json, peers));
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

  private static final class Handler extends SimpleChannelInboundHandler<FullHttpRequest> {
    private final Supplier<DataPlaneStatus> status;
    private final PrometheusMeterRegistry registry;
    private final ControlToken token;
    private final ObjectMapper json;
    private final PeersEndpoint peers;

    Handler(
        Supplier<DataPlaneStatus> status,
        PrometheusMeterRegistry registry,
        ControlToken token,
        ObjectMapper json,
        PeersEndpoint peers) {
      this.peers = peers;
      this.status = status;
      this.registry = registry;
      this.token = token;
      this.json = json;
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) throws Exception {
      if (!req.decoderResult().isSuccess()) {
        send(ctx, req, HttpResponseStatus.BAD_REQUEST, "text/plain", "bad request\n");
        return;
      }
      if (peers != null
          && HttpMethod.PUT.equals(req.method())
          && "/v1/peers".equals(new QueryStringDecoder(req.uri()).path())) {
        putPeers(ctx, req);
        return;
      }
      if (!HttpMethod.GET.equals(req.method()) && !HttpMethod.HEAD.equals(req.method())) {
        send(ctx, req, HttpResponseStatus.METHOD_NOT_ALLOWED, "text/plain", "GET only\n");
        return;
      }
      String path = new QueryStringDecoder(req.uri()).path();
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
          if (token != null && !token.accepts(req.headers().get(HttpHeaderNames.AUTHORIZATION))) {
            FullHttpResponse r =
                response(HttpResponseStatus.UNAUTHORIZED, "text/plain", "bearer token required\n");
            r.headers().set(HttpHeaderNames.WWW_AUTHENTICATE, "Bearer realm=\"tensorcast\"");
            write(ctx, req, r);
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
      if (token != null && !token.accepts(req.headers().get(HttpHeaderNames.AUTHORIZATION))) {
        FullHttpResponse r =
            response(HttpResponseStatus.UNAUTHORIZED, "text/plain", "bearer token required\n");
        r.headers().set(HttpHeaderNames.WWW_AUTHENTICATE, "Bearer realm=\"tensorcast\"");
        write(ctx, req, r);
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
