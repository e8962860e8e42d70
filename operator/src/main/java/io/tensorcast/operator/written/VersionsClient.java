package io.tensorcast.operator.written;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fabric8.kubernetes.api.model.Pod;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Asks the data-plane pods of a written artifact for their versions ({@code GET /v1/versions}) and
 * starts saves ({@code POST /v1/versions/{v}/save}), with the artifact's admin token. A pod that
 * does not answer is left out for this round.
 */
public final class VersionsClient {
  private static final Logger log = LoggerFactory.getLogger(VersionsClient.class);
  private static final int MAX_BODY_BYTES = 16 * 1024 * 1024;

  private final HttpClient http;
  private final int port;
  private final Duration timeout;
  private final ObjectMapper json = new ObjectMapper();

  public VersionsClient(int port, Duration timeout) {
    this.port = port;
    this.timeout = timeout;
    this.http =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(timeout)
            .followRedirects(HttpClient.Redirect.NEVER)
            .build();
  }

  private static Optional<String> ip(Pod p) {
    String ip = p.getStatus() == null ? null : p.getStatus().getPodIP();
    return ip == null || ip.isEmpty() || p.getMetadata().getDeletionTimestamp() != null
        ? Optional.empty()
        : Optional.of(ip);
  }

  private URI uri(String ip, String path) {
    String host = ip.contains(":") ? "[" + ip + "]" : ip;
    return URI.create("http://" + host + ":" + port + path);
  }

  /** Each pod's {@code /v1/versions} body, by pod name; pods that did not answer are absent. */
  public Map<String, JsonNode> versions(List<Pod> pods, String adminToken) {
    Map<String, JsonNode> out = new LinkedHashMap<>();
    for (Pod p : pods) {
      Optional<String> ip = ip(p);
      if (ip.isEmpty()) {
        continue;
      }
      try {
        HttpResponse<byte[]> r =
            http.send(
                HttpRequest.newBuilder(uri(ip.get(), "/v1/versions"))
                    .timeout(timeout)
                    .header("Authorization", "Bearer " + adminToken)
                    .GET()
                    .build(),
                HttpResponse.BodyHandlers.ofByteArray());
        if (r.statusCode() == 200 && r.body().length <= MAX_BODY_BYTES) {
          out.put(p.getMetadata().getName(), json.readTree(r.body()));
        }
      } catch (java.io.IOException e) {
        log.debug("pod {}: /v1/versions failed: {}", p.getMetadata().getName(), e.toString());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    return out;
  }

  /**
   * Starts a save on {@code pod}.
   *
   * @return null when accepted (202), else the pod's answer (status and body) for the log
   */
  public String save(Pod pod, String version, ObjectNode request, String adminToken) {
    Optional<String> ip = ip(pod);
    if (ip.isEmpty()) {
      return "no address";
    }
    try {
      HttpResponse<String> r =
          http.send(
              HttpRequest.newBuilder(uri(ip.get(), "/v1/versions/" + version + "/save"))
                  .timeout(timeout)
                  .header("Authorization", "Bearer " + adminToken)
                  .header("Content-Type", "application/json")
                  .POST(HttpRequest.BodyPublishers.ofByteArray(json.writeValueAsBytes(request)))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      return r.statusCode() == 202 ? null : "HTTP " + r.statusCode() + ": " + r.body();
    } catch (java.io.IOException e) {
      return e.toString();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "interrupted";
    }
  }
}
