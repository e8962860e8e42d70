package io.tensorcast.operator.health;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.javaoperatorsdk.operator.Operator;
import io.javaoperatorsdk.operator.RuntimeInfo;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.function.Supplier;

/**
 * The operator's probe endpoint, for the kubelet's liveness and readiness probes: on all interfaces
 * of one port,
 *
 * <ul>
 *   <li>{@code GET /healthz} answers 200 {@code ok} while the operator is starting or started, and
 *       503 once it has stopped after a start (the pod should then be restarted);
 *   <li>{@code GET /readyz} answers 200 {@code ok} once JOSDK reports the operator started and
 *       every informer of every controller healthy ({@link RuntimeInfo#allEventSourcesAreHealthy});
 *       else 503 with one line per unhealthy informer ({@code controller/event source: status}). A
 *       standby replica under leader election runs its informers too, so it is ready;
 * </ul>
 *
 * anything else answers 404. JDK HTTP server, one daemon thread.
 */
public final class HealthServer implements AutoCloseable {

  /** What the probes report, computed on each request. */
  public record Health(boolean live, boolean ready, String detail) {}

  private final HttpServer server;

  private HealthServer(HttpServer server) {
    this.server = server;
  }

  /**
   * Starts serving the health of {@code operator}.
   *
   * @param port TCP port, 0 for any free one
   * @throws IOException when the port cannot be bound (the message names it)
   */
  public static HealthServer start(int port, Operator operator) throws IOException {
    return start(port, of(operator));
  }

  /**
   * Starts serving the health that {@code health} computes.
   *
   * @param port TCP port, 0 for any free one
   * @throws IOException when the port cannot be bound (the message names it)
   */
  public static HealthServer start(int port, Supplier<Health> health) throws IOException {
    HttpServer s;
    try {
      s = HttpServer.create(new InetSocketAddress(port), 0);
    } catch (IOException e) {
      throw new IOException("cannot listen on health port " + port + ": " + e.getMessage(), e);
    }
    s.setExecutor(
        Executors.newSingleThreadExecutor(
            r -> {
              Thread t = new Thread(r, "tensorcast-operator-health");
              t.setDaemon(true);
              return t;
            }));
    s.createContext(
        "/",
        ex -> {
          try (ex) {
            String path = ex.getRequestURI().getPath();
            if (!"GET".equals(ex.getRequestMethod())
                || !("/healthz".equals(path) || "/readyz".equals(path))) {
              ex.sendResponseHeaders(404, -1);
              return;
            }
            Health h = health.get();
            boolean ok = "/healthz".equals(path) ? h.live() : h.ready();
            respond(ex, ok ? 200 : 503, ok ? "ok\n" : h.detail() + "\n");
          }
        });
    s.start();
    return new HealthServer(s);
  }

  /**
   * The health of a JOSDK operator: live unless it stopped after starting; ready once started with
   * every informer healthy.
   */
  public static Supplier<Health> of(Operator operator) {
    boolean[] wasStarted = {false};
    return () -> {
      RuntimeInfo info = operator.getRuntimeInfo();
      if (!info.isStarted()) {
        synchronized (wasStarted) {
          boolean stopped = wasStarted[0];
          return new Health(!stopped, false, stopped ? "operator stopped" : "operator starting");
        }
      }
      synchronized (wasStarted) {
        wasStarted[0] = true;
      }
      if (info.allEventSourcesAreHealthy()) {
        return new Health(true, true, "ok");
      }
      Map<String, String> unhealthy = new TreeMap<>();
      info.unhealthyEventSources()
          .forEach(
              (controller, sources) ->
                  sources.forEach(
                      (name, indicator) ->
                          unhealthy.put(
                              controller + "/" + name, String.valueOf(indicator.getStatus()))));
      StringBuilder b = new StringBuilder("unhealthy event sources:");
      unhealthy.forEach((k, v) -> b.append('\n').append(k).append(": ").append(v));
      return new Health(true, false, b.toString());
    };
  }

  private static void respond(HttpExchange ex, int code, String body) throws IOException {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
    ex.sendResponseHeaders(code, bytes.length);
    try (OutputStream o = ex.getResponseBody()) {
      o.write(bytes);
    }
  }

  /** The bound port. */
  public int port() {
    return server.getAddress().getPort();
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
