package io.tensorcast.testing;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * An Alibaba OSS-shaped front for S3Mock: a real HTTP server on 127.0.0.1 that accepts only what
 * OSS accepts of the S3 API and forwards the rest to S3Mock path-style. The OSS differences it
 * enforces:
 *
 * <ul>
 *   <li>virtual-hosted addressing only: a request whose {@code Host} is the bare domain
 *       (path-style) gets 403 {@code SecondLevelDomainForbidden}; {@code <bucket>.<domain>} is
 *       required;
 *   <li>no {@code aws-chunked} payloads: {@code Content-Encoding: aws-chunked} or a {@code
 *       STREAMING-*} {@code x-amz-content-sha256} gets 400 {@code InvalidArgument};
 *   <li>the SigV4 {@code Credential=} access key id must be the one configured (403 {@code
 *       InvalidAccessKeyId} otherwise).
 * </ul>
 *
 * <p>Reads and writes (single and multipart uploads, deletes) are forwarded with their bodies,
 * {@code Content-MD5}, {@code Content-Type} and {@code x-amz-meta-*} headers.
 *
 * <p>Clients reach {@code <bucket>.<domain>} through a hosts file ({@code -Djdk.net.hosts.file})
 * mapping it to 127.0.0.1: see {@link #hostsFile}.
 */
public final class OssFront implements AutoCloseable {
  private static final Set<String> FORWARDED =
      Set.of(
          "range",
          "if-match",
          "if-none-match",
          "x-amz-content-sha256",
          "content-md5",
          "content-type");

  private final HttpServer server;
  private final ExecutorService executor =
      Executors.newFixedThreadPool(
          8,
          r -> {
            Thread t = new Thread(r, "oss-front");
            t.setDaemon(true);
            return t;
          });
  private final String domain;
  private final String accessKeyId;
  private final URI upstream;
  private final HttpClient client =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final List<String> hosts = new CopyOnWriteArrayList<>();

  /**
   * @param domain the endpoint's host name, e.g. {@code oss-test.localhost}
   * @param accessKeyId the only access key id accepted
   * @param upstream S3Mock's endpoint
   */
  public OssFront(String domain, String accessKeyId, URI upstream) throws IOException {
    this.domain = domain.toLowerCase(Locale.ROOT);
    this.accessKeyId = accessKeyId;
    this.upstream = upstream;
    server = HttpServer.create(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0), 64);
    server.createContext("/", this::handle);
    server.setExecutor(executor);
    server.start();
  }

  /** {@code http://<domain>:<port>}: the endpoint to give the client. */
  public URI endpoint() {
    return URI.create("http://" + domain + ":" + server.getAddress().getPort());
  }

  /** The {@code Host} header of every request received. */
  public List<String> hosts() {
    return List.copyOf(hosts);
  }

  /** Hosts-file text mapping {@code localhost}, the domain and each bucket's name to 127.0.0.1. */
  public String hostsFile(String... buckets) {
    StringBuilder b = new StringBuilder("127.0.0.1 localhost\n127.0.0.1 " + domain + "\n");
    for (String bucket : buckets) {
      b.append("127.0.0.1 ").append(bucket).append('.').append(domain).append('\n');
    }
    return b.toString();
  }

  private void handle(HttpExchange x) throws IOException {
    try {
      forward(x);
    } catch (IOException | RuntimeException e) {
      System.err.println("oss-front: " + x.getRequestMethod() + " " + x.getRequestURI() + ": " + e);
      throw e;
    }
  }

  private void forward(HttpExchange x) throws IOException {
    try (x) {
      String host = String.valueOf(x.getRequestHeaders().getFirst("Host")).toLowerCase(Locale.ROOT);
      hosts.add(host);
      String name = host.contains(":") ? host.substring(0, host.lastIndexOf(':')) : host;
      if (!name.endsWith("." + domain)) {
        error(x, 403, "SecondLevelDomainForbidden", "Please use virtual hosted style to access.");
        return;
      }
      String bucket = name.substring(0, name.length() - domain.length() - 1);
      String encoding = x.getRequestHeaders().getFirst("Content-Encoding");
      String payload = x.getRequestHeaders().getFirst("x-amz-content-sha256");
      if ((encoding != null && encoding.contains("aws-chunked"))
          || (payload != null && payload.startsWith("STREAMING-"))) {
        error(x, 400, "InvalidArgument", "aws-chunked encoding is not supported.");
        return;
      }
      String auth = x.getRequestHeaders().getFirst("Authorization");
      if (auth == null || !auth.contains("Credential=" + accessKeyId + "/")) {
        error(x, 403, "InvalidAccessKeyId", "The OSS Access Key Id you provided does not exist.");
        return;
      }
      byte[] body = x.getRequestBody().readAllBytes();
      String target = "/" + bucket + x.getRequestURI().getRawPath();
      if (x.getRequestURI().getRawQuery() != null) {
        target += "?" + x.getRequestURI().getRawQuery();
      }
      HttpRequest.Builder request =
          HttpRequest.newBuilder(URI.create(upstream + target))
              .method(
                  x.getRequestMethod(),
                  body.length == 0
                      ? HttpRequest.BodyPublishers.noBody()
                      : HttpRequest.BodyPublishers.ofByteArray(body));
      x.getRequestHeaders()
          .forEach(
              (k, v) -> {
                String lower = k.toLowerCase(Locale.ROOT);
                if (FORWARDED.contains(lower) || lower.startsWith("x-amz-meta-")) {
                  v.forEach(value -> request.header(k, value));
                }
              });
      HttpResponse<InputStream> response;
      try {
        response = client.send(request.build(), HttpResponse.BodyHandlers.ofInputStream());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException(e);
      }
      response
          .headers()
          .map()
          .forEach(
              (k, v) -> {
                String lower = k.toLowerCase(Locale.ROOT);
                if (!lower.equals("content-length")
                    && !lower.equals("transfer-encoding")
                    && !lower.equals("connection")
                    && !lower.equals(":status")) {
                  x.getResponseHeaders().put(k, v);
                }
              });
      // a known length is sent as Content-Length; none means chunked (0 for the JDK server)
      long length = response.headers().firstValueAsLong("content-length").orElse(-1);
      boolean head = x.getRequestMethod().equals("HEAD");
      if (head && length >= 0) {
        x.getResponseHeaders().set("Content-Length", Long.toString(length));
      }
      x.sendResponseHeaders(
          response.statusCode(), head || length == 0 ? -1 : length < 0 ? 0 : length);
      try (InputStream in = response.body()) {
        if (!head) {
          OutputStream out = x.getResponseBody();
          in.transferTo(out);
        }
      }
    }
  }

  private static void error(HttpExchange x, int status, String code, String message)
      throws IOException {
    byte[] body =
        ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>"
                + code
                + "</Code><Message>"
                + message
                + "</Message><RequestId>0</RequestId><HostId>oss-front</HostId></Error>")
            .getBytes(StandardCharsets.UTF_8);
    x.getResponseHeaders().set("Content-Type", "application/xml");
    x.getResponseHeaders().set("x-oss-request-id", "0");
    if (x.getRequestMethod().equals("HEAD")) {
      x.sendResponseHeaders(status, -1);
      return;
    }
    x.sendResponseHeaders(status, body.length);
    x.getResponseBody().write(body);
  }

  @Override
  public void close() {
    server.stop(0);
    executor.shutdownNow();
  }
}
