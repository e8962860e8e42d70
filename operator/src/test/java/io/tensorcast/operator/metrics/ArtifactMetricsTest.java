package io.tensorcast.operator.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;

class ArtifactMetricsTest {

  @Test
  void sourceBytesIsAPrometheusGaugePerArtifactServedOnMetrics() throws Exception {
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    ArtifactMetrics metrics = new ArtifactMetrics(registry);

    metrics.sourceBytes("team-a", "llama", 100);
    metrics.sourceBytes("team-a", "llama", 1_073_741_824L);
    metrics.sourceBytes("team-b", "qwen", 0);

    try (MetricsServer server = MetricsServer.start(0, registry)) {
      HttpResponse<String> resp =
          HttpClient.newHttpClient()
              .send(
                  HttpRequest.newBuilder(
                          URI.create("http://127.0.0.1:" + server.port() + "/metrics"))
                      .build(),
                  HttpResponse.BodyHandlers.ofString());
      assertThat(resp.statusCode()).isEqualTo(200);
      assertThat(resp.body())
          .contains("# TYPE tensorcast_operator_artifact_source_bytes gauge")
          .contains(
              "tensorcast_operator_artifact_source_bytes{name=\"llama\",namespace=\"team-a\"}"
                  + " 1.073741824E9")
          .contains(
              "tensorcast_operator_artifact_source_bytes{name=\"qwen\",namespace=\"team-b\"} 0.0");
    }

    metrics.remove("team-a", "llama");
    assertThat(registry.scrape()).doesNotContain("llama").contains("qwen");
  }

  @Test
  void sizeAndPhaseGaugesFollowTheStatusAndGoWithTheArtifact() {
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    ArtifactMetrics metrics = new ArtifactMetrics(registry);
    ModelArtifactStatus status = new ModelArtifactStatus();
    status.setPhase(ArtifactPhase.Loading);
    status.setTotalBytes(2048L);

    metrics.status("team-a", "llama", true, status);
    status.setPhase(ArtifactPhase.Failed);
    metrics.status("team-a", "llama", false, status);

    String scrape = registry.scrape();
    assertThat(scrape)
        .contains(
            "tensorcast_operator_artifact_size_bytes{name=\"llama\",namespace=\"team-a\"} 2048.0")
        .contains(
            "tensorcast_operator_artifact_phase{name=\"llama\",namespace=\"team-a\",phase=\"Failed\"}"
                + " 1.0")
        .contains(
            "tensorcast_operator_artifact_phase{name=\"llama\",namespace=\"team-a\",phase=\"Loading\"}"
                + " 0.0");
    assertThat(scrape)
        .contains(
            "tensorcast_operator_artifact_peer_to_peer{name=\"llama\",namespace=\"team-a\"} 0.0");
    assertThat(scrape.lines().filter(l -> l.startsWith("tensorcast_operator_artifact_phase{")))
        .hasSize(ArtifactPhase.values().length);

    metrics.remove("team-a", "llama");
    assertThat(registry.scrape()).doesNotContain("llama");
  }
}
