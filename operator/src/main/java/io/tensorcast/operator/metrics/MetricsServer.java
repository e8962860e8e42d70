package io.tensorcast.operator.metrics;

import com.sun.net.httpserver.HttpServer;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;

/**
 * The operator's Prometheus endpoint: {@code GET /metrics} on all interfaces of {@code port}
 * answers the registry's text exposition (format 0.0.4); anything else answers 404. JDK HTTP
 * server, one thread: a scrape is small and rare.
 */
public final class MetricsServer implements AutoCloseable {
  private final HttpServer server;

  private MetricsServer(HttpServer server) {
    this.server = server;
  }

  /**
   * Starts serving.
   *
   * @param port TCP port, 0 for any free one
   * @throws IOException when the port cannot be bound (the message names it)
   */
  public static MetricsServer start(int port, PrometheusMeterRegistry registry) throws IOException {
    HttpServer s;
    try {
      s = HttpServer.create(new InetSocketAddress(port), 0);
    } catch (IOException e) {
      throw new IOException("cannot listen on metrics port " + port + ": " + e.getMessage(), e);
    }
    s.setExecutor(
        Executors.newSingleThreadExecutor(
            r -> {
              Thread t = new Thread(r, "tensorcast-operator-metrics");
              t.setDaemon(true);
              return t;
            }));
    s.createContext(
        "/",
        ex -> {
          try (ex) {
            if (!"/metrics".equals(ex.getRequestURI().getPath())
                || !"GET".equals(ex.getRequestMethod())) {
              ex.sendResponseHeaders(404, -1);
              return;
            }
            byte[] body = registry.scrape().getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream o = ex.getResponseBody()) {
              o.write(body);
            }
          }
        });
    s.start();
    return new MetricsServer(s);
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
