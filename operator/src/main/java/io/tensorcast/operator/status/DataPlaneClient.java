package io.tensorcast.operator.status;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.Membership;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Asks data-plane pods for their {@link DataPlaneStatus} on {@code GET
 * http://<podIP>:<port>/status} (java.net.http, HTTP/1.1), and tells them their peers on {@code PUT
 * /v1/peers} ({@link #putPeers}). Every call is bounded by the timeout; pods are asked in parallel,
 * so one round takes at most about one timeout. A pod that does not answer, answers non-200 or with
 * JSON that does not parse is left out of the result for this round: the caller treats it as
 * unknown, not as failed.
 *
 * <p>Every call carries {@code Authorization: Bearer <admin token>}: the artifact's admin token,
 * which the operator derives from its master key ({@link
 * io.tensorcast.operator.trust.ArtifactKeys}) and never reads from a Secret.
 */
public final class DataPlaneClient {
  private static final Logger log = LoggerFactory.getLogger(DataPlaneClient.class);

  /** Largest status body accepted (a status lists files, so it grows with the artifact). */
  static final int MAX_BODY_BYTES = 16 * 1024 * 1024;

  private final HttpClient http;
  private final int port;
  private final Duration timeout;
  private final ObjectMapper json =
      new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);

  /**
   * @param port the pods' control port
   * @param timeout bound on connect plus response of one call
   */
  public DataPlaneClient(int port, Duration timeout) {
    this.port = port;
    this.timeout = timeout;
    this.http =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(timeout)
            .followRedirects(HttpClient.Redirect.NEVER)
            .build();
  }

  /**
   * Asks every pod that has an IP and is not being deleted.
   *
   * @param pods pods of one ModelArtifact
   * @param adminToken that artifact's admin token
   * @return reports by pod name; pods that did not answer properly are absent
   */
  public Map<String, DataPlaneStatus> poll(List<Pod> pods, String adminToken) {
    Optional<String> token = Optional.of(adminToken);
    Map<String, CompletableFuture<DataPlaneStatus>> calls = new LinkedHashMap<>();
    for (Pod p : pods) {
      String ip = p.getStatus() == null ? null : p.getStatus().getPodIP();
      if (ip == null || ip.isEmpty() || p.getMetadata().getDeletionTimestamp() != null) {
        continue;
      }
      calls.put(p.getMetadata().getName(), fetch(ip, token, p.getMetadata().getName()));
    }
    Map<String, DataPlaneStatus> out = new LinkedHashMap<>();
    long deadline = System.nanoTime() + timeout.toNanos() + TimeUnit.MILLISECONDS.toNanos(500);
    for (Map.Entry<String, CompletableFuture<DataPlaneStatus>> e : calls.entrySet()) {
      try {
        long left = Math.max(1, deadline - System.nanoTime());
        DataPlaneStatus s = e.getValue().get(left, TimeUnit.NANOSECONDS);
        if (s != null) {
          out.put(e.getKey(), s);
        }
      } catch (TimeoutException ex) {
        e.getValue().cancel(true);
        log.debug("pod {}: no status within {}", e.getKey(), timeout);
      } catch (ExecutionException ex) {
        log.debug("pod {}: status call failed: {}", e.getKey(), ex.getCause().toString());
      } catch (InterruptedException ex) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    return out;
  }

  /** One call; completes with null when the answer is not a usable status. */
  CompletableFuture<DataPlaneStatus> fetch(String ip, Optional<String> token, String pod) {
    HttpRequest.Builder req =
        HttpRequest.newBuilder(uri(ip, "/status"))
            .timeout(timeout)
            .header("Accept", "application/json")
            .GET();
    token.ifPresent(t -> req.header("Authorization", "Bearer " + t));
    return http.sendAsync(req.build(), HttpResponse.BodyHandlers.ofByteArray())
        .thenApply(
            resp -> {
              if (resp.statusCode() == 401 || resp.statusCode() == 403) {
                log.warn(
                    "pod {}: /status answered {}: the pod does not accept this artifact's admin"
                        + " token (its Secret volume not refreshed yet, or made from another"
                        + " master key)",
                    pod,
                    resp.statusCode());
                return null;
              }
              if (resp.statusCode() != 200) {
                log.debug("pod {}: /status answered {}", pod, resp.statusCode());
                return null;
              }
              byte[] body = resp.body();
              if (body.length > MAX_BODY_BYTES) {
                log.warn("pod {}: /status body of {} bytes ignored", pod, body.length);
                return null;
              }
              try {
                return json.readValue(body, DataPlaneStatus.class);
              } catch (IOException ex) {
                log.warn("pod {}: /status is not a DataPlaneStatus: {}", pod, ex.getMessage());
                return null;
              }
            });
  }

  /**
   * Sends {@code membership} with {@code PUT http://<podIP>:<port>/v1/peers} to each of {@code
   * targets} in parallel (P2P contract: body {@code {"epoch":...,"members":[{"id":...,"address":
   * ...}]}}, {@code Content-Type: application/json}, the admin token as for {@code /status}). Every
   * call is bounded by the timeout, so one round takes at most about one timeout. A pod applied the
   * membership when it answers 204 (applied) or 200 (already its epoch); any other answer, a
   * timeout or a connection failure leaves it out of the result, for the caller to try again later.
   *
   * @param targets pods to send to; those without an IP or being deleted are skipped
   * @param membership what to send
   * @param adminToken the artifact's admin token
   * @return names of the pods that applied it
   */
  public Set<String> putPeers(List<Pod> targets, Membership membership, String adminToken) {
    byte[] body = membership.toJson().getBytes(StandardCharsets.UTF_8);
    Optional<String> token = Optional.of(adminToken);
    Map<String, CompletableFuture<Boolean>> calls = new LinkedHashMap<>();
    for (Pod p : targets) {
      String ip = p.getStatus() == null ? null : p.getStatus().getPodIP();
      if (ip == null || ip.isEmpty() || p.getMetadata().getDeletionTimestamp() != null) {
        continue;
      }
      String pod = p.getMetadata().getName();
      HttpRequest.Builder req =
          HttpRequest.newBuilder(uri(ip, "/v1/peers"))
              .timeout(timeout)
              .header("Content-Type", "application/json")
              .PUT(HttpRequest.BodyPublishers.ofByteArray(body));
      token.ifPresent(t -> req.header("Authorization", "Bearer " + t));
      calls.put(
          pod,
          http.sendAsync(req.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8))
              .thenApply(
                  resp -> {
                    if (resp.statusCode() == 204 || resp.statusCode() == 200) {
                      return true;
                    }
                    String text = resp.body() == null ? "" : resp.body().strip();
                    log.warn(
                        "pod {}: PUT /v1/peers epoch {} answered {}: {}",
                        pod,
                        membership.epoch(),
                        resp.statusCode(),
                        text.length() > 200 ? text.substring(0, 200) + "..." : text);
                    return false;
                  }));
    }
    Set<String> applied = new TreeSet<>();
    long deadline = System.nanoTime() + timeout.toNanos() + TimeUnit.MILLISECONDS.toNanos(500);
    for (Map.Entry<String, CompletableFuture<Boolean>> e : calls.entrySet()) {
      try {
        long left = Math.max(1, deadline - System.nanoTime());
        if (e.getValue().get(left, TimeUnit.NANOSECONDS)) {
          applied.add(e.getKey());
        }
      } catch (TimeoutException ex) {
        e.getValue().cancel(true);
        log.debug("pod {}: PUT /v1/peers not answered within {}", e.getKey(), timeout);
      } catch (ExecutionException ex) {
        log.debug("pod {}: PUT /v1/peers failed: {}", e.getKey(), ex.getCause().toString());
      } catch (InterruptedException ex) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    return applied;
  }

  private URI uri(String ip, String path) {
    String host = ip.contains(":") ? "[" + ip + "]" : ip;
    return URI.create("http://" + host + ":" + port + path);
  }
}
