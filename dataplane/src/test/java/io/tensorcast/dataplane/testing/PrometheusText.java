package io.tensorcast.dataplane.testing;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/** Reads a data plane's {@code /metrics} (Prometheus text exposition format) in tests. */
public final class PrometheusText {
  private PrometheusText() {}

  /**
   * The exposition served at {@code http://127.0.0.1:port/metrics}, asked with the bearer {@code
   * token}; fails the test unless the answer is 200.
   */
  public static String scrape(int port, String token) throws IOException, InterruptedException {
    HttpResponse<String> r =
        HttpClient.newHttpClient()
            .send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics"))
                    .header("Authorization", "Bearer " + token)
                    .timeout(Duration.ofSeconds(5))
                    .build(),
                HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as("GET /metrics on port %d: %s", port, r.body()).isEqualTo(200);
    return r.body();
  }

  /**
   * The value of the one sample of {@code metric} whose line contains every one of {@code labels}
   * (e.g. {@code artifact="m"}); fails the test unless exactly one sample matches.
   */
  public static double sample(String exposition, String metric, String... labels) {
    List<String> lines =
        exposition
            .lines()
            .filter(l -> l.startsWith(metric + "{") || l.startsWith(metric + " "))
            .filter(l -> Arrays.stream(labels).allMatch(l::contains))
            .toList();
    assertThat(lines)
        .as("samples of %s%s in:%n%s", metric, Arrays.toString(labels), exposition)
        .hasSize(1);
    String line = lines.get(0);
    return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
  }
}
