package io.tensorcast.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The proxy's request-rate limit on real sockets: a JDK HTTP server as the upstream, the proxy in
 * front, requests by the JDK's HTTP client. The token bucket runs on a clock moved by hand, so
 * nothing here depends on how fast the machine is.
 */
@Timeout(60)
class FaultInjectingProxyTest {
  private static final long SECOND = 1_000_000_000L;

  private HttpServer upstream;
  private final AtomicInteger upstreamRequests = new AtomicInteger();
  private final AtomicInteger upstreamBodyBytes = new AtomicInteger();
  private FaultInjectingProxy proxy;
  private final AtomicLong now = new AtomicLong(5 * SECOND);
  private final HttpClient client = HttpClient.newHttpClient();

  @BeforeEach
  void setUp() throws IOException {
    upstream = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 16);
    upstream.createContext(
        "/",
        exchange -> {
          upstreamRequests.incrementAndGet();
          try (InputStream in = exchange.getRequestBody()) {
            upstreamBodyBytes.addAndGet(in.readAllBytes().length);
          }
          byte[] body = "object bytes".getBytes(StandardCharsets.UTF_8);
          exchange.sendResponseHeaders(200, body.length);
          exchange.getResponseBody().write(body);
          exchange.close();
        });
    upstream.start();
    proxy = new FaultInjectingProxy("127.0.0.1", upstream.getAddress().getPort());
    proxy.nanoClock = now::get;
  }

  @AfterEach
  void tearDown() {
    proxy.close();
    upstream.stop(0);
  }

  private HttpResponse<String> get() throws Exception {
    return client.send(
        HttpRequest.newBuilder(proxy.endpoint().resolve("/bucket/key")).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private List<Integer> statuses(int n) throws Exception {
    List<Integer> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      out.add(get().statusCode());
    }
    return out;
  }

  @Test
  void aRequestRateLimitAnswers429WithRetryAfterOnceItsBurstIsSpentAndRefillsAtItsRate()
      throws Exception {
    proxy.limitRequestRate(0.5, 3); // a token every 2 s, 3 at most

    assertThat(statuses(3)).as("the burst").containsExactly(200, 200, 200);
    HttpResponse<String> refused = get();
    assertThat(refused.statusCode()).isEqualTo(429);
    assertThat(refused.headers().firstValue("Retry-After"))
        .as("2 s until the next token")
        .contains("2");
    assertThat(refused.body()).contains("<Code>SlowDown</Code>");
    assertThat(upstreamRequests).as("refused requests are not forwarded").hasValue(3);

    now.addAndGet(SECOND); // half a token
    HttpResponse<String> early = get();
    assertThat(early.statusCode()).isEqualTo(429);
    assertThat(early.headers().firstValue("Retry-After")).contains("1");
    now.addAndGet(SECOND); // one token
    assertThat(statuses(2)).containsExactly(200, 429);

    now.addAndGet(60 * SECOND); // never more than the burst
    assertThat(statuses(4)).containsExactly(200, 200, 200, 429);

    assertThat(proxy.tooManyRequests()).isEqualTo(4);
    assertThat(proxy.throttled()).hasSize(4);
    assertThat(proxy.maxInFlightGets()).as("a refused GET is never in flight").isEqualTo(1);
    assertThat(upstreamRequests).hasValue(7);
  }

  @Test
  void aRefusedRequestWithABodyIsAnsweredAndARateOfZeroEndsTheLimit() throws Exception {
    proxy.limitRequestRate(1, 1);
    assertThat(get().statusCode()).isEqualTo(200);
    HttpResponse<String> put =
        client.send(
            HttpRequest.newBuilder(proxy.endpoint().resolve("/bucket/new"))
                .PUT(HttpRequest.BodyPublishers.ofByteArray(new byte[100_000]))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(put.statusCode()).isEqualTo(429);
    assertThat(put.headers().firstValue("Retry-After")).contains("1");
    assertThat(upstreamBodyBytes).as("the refused PUT's body never reached the origin").hasValue(0);

    proxy.limitRequestRate(0, 1);
    assertThat(statuses(5)).containsOnly(200);
    assertThat(proxy.tooManyRequests()).isEqualTo(1);

    proxy.limitRequestRate(1, 1);
    assertThat(statuses(2)).containsExactly(200, 429);
    proxy.reset();
    assertThat(proxy.tooManyRequests()).as("reset clears the count and the limit").isZero();
    assertThat(statuses(3)).containsOnly(200);
  }

  @Test
  void refusesARateLimitWithoutABurst() {
    assertThatThrownBy(() -> proxy.limitRequestRate(1, 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("a burst ≥ 1");
  }
}
