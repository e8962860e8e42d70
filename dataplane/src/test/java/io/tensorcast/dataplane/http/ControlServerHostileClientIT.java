package io.tensorcast.dataplane.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.tensorcast.api.wire.Membership;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Malformed and oversized requests against a real control endpoint over a real socket. */
class ControlServerHostileClientIT {
  private ControlServer server;

  @BeforeEach
  void start() throws Exception {
    server =
        ControlServer.start(
            new InetSocketAddress("127.0.0.1", 0),
            () -> null, // /healthz and /v1/peers never ask for the status
            new PrometheusMeterRegistry(PrometheusConfig.DEFAULT),
            null,
            null,
            body -> {
              Membership.parseJson(body);
              return true;
            },
            BodyStreaming.DEFAULTS);
  }

  @AfterEach
  void stop() {
    server.close();
  }

  /** Everything the server sends until it closes the connection; fails after 5 s of silence. */
  private String untilClosed(byte[] request) throws IOException {
    try (Socket s = new Socket()) {
      s.connect(server.address(), 2_000);
      s.setSoTimeout(5_000); // the server's idle timeout is 30 s: a hang shows as a timeout here
      OutputStream out = s.getOutputStream();
      out.write(request);
      out.flush();
      InputStream in = s.getInputStream();
      ByteArrayOutputStream got = new ByteArrayOutputStream();
      byte[] buf = new byte[8192];
      try {
        for (int n; (n = in.read(buf)) >= 0; ) {
          got.write(buf, 0, n);
        }
      } catch (java.net.SocketTimeoutException e) {
        throw new AssertionError(
            "the server kept the connection open after answering: "
                + got.toString(StandardCharsets.ISO_8859_1),
            e);
      }
      return got.toString(StandardCharsets.ISO_8859_1);
    }
  }

  @Test
  void anOverlongRequestLineIsAnsweredWithTheRuleAndTheConnectionClosed() throws Exception {
    String request =
        "GET /v1/tensors/"
            + "a".repeat(5000)
            + " HTTP/1.1\r\nHost: x\r\n\r\n"
            + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    String answer = untilClosed(request.getBytes(StandardCharsets.US_ASCII));
    assertThat(answer).startsWith("HTTP/1.1 400 Bad Request\r\n");
    assertThat(answer).contains("connection: close").contains("4096 bytes");
    assertThat(answer)
        .as("nothing after the 400: the request stream is lost")
        .doesNotContain("200 OK");
  }

  @Test
  void oversizedHeadersAreAnsweredWithTheRuleAndTheConnectionClosed() throws Exception {
    String request = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + "b".repeat(9000) + "\r\n\r\n";
    String answer = untilClosed(request.getBytes(StandardCharsets.US_ASCII));
    assertThat(answer).startsWith("HTTP/1.1 400 Bad Request\r\n");
    assertThat(answer).contains("connection: close").contains("8192 bytes");
  }

  @Test
  void aPeersBodyOverOneMebibyteIsRefusedWith413AndTheConnectionStaysUsable() throws Exception {
    byte[] body =
        ("{\"epoch\":\"e\",\"members\":["
                + "{\"id\":\"p\",\"address\":\"10.0.0.1:8472\"},".repeat(40_000)
                + "]}")
            .getBytes(StandardCharsets.US_ASCII);
    assertThat(body.length).isGreaterThan(1 << 20);
    String head =
        "PUT /v1/peers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
            + body.length
            + "\r\n\r\n";
    ByteArrayOutputStream req = new ByteArrayOutputStream();
    req.write(head.getBytes(StandardCharsets.US_ASCII));
    req.write(body);
    req.write(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            .getBytes(StandardCharsets.US_ASCII));
    String answer = untilClosed(req.toByteArray());
    assertThat(answer).startsWith("HTTP/1.1 413 Request Entity Too Large\r\n");
    assertThat(answer)
        .as("the body is skipped, the next request answered")
        .endsWith("\r\n\r\nok\n");
  }

  @Test
  void aPeersMemberOnPortZeroIsA400NamingTheField() throws Exception {
    byte[] body =
        "{\"epoch\":\"e\",\"members\":[{\"id\":\"p\",\"address\":\"10.0.0.1:0\"}]}"
            .getBytes(StandardCharsets.US_ASCII);
    String head =
        "PUT /v1/peers HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: "
            + body.length
            + "\r\n\r\n";
    ByteArrayOutputStream req = new ByteArrayOutputStream();
    req.write(head.getBytes(StandardCharsets.US_ASCII));
    req.write(body);
    String answer = untilClosed(req.toByteArray());
    assertThat(answer).startsWith("HTTP/1.1 400 Bad Request\r\n");
    assertThat(answer).contains("members[0].address: port 0 is not in 1..65535");
  }
}
