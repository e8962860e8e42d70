package io.tensorcast.e2e.cluster;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.HTTPHeader;
import io.fabric8.kubernetes.api.model.IntOrString;
import io.fabric8.kubernetes.api.model.Probe;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.file.Path;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.X509TrustManager;

/**
 * Runs one probe ({@code httpGet}, {@code tcpSocket} or {@code exec}) the way the kubelet does.
 *
 * <ul>
 *   <li>{@code httpGet}: GET {@code scheme://host:port/path} with the probe's headers; host
 *       defaults to the pod IP; a named port is looked up in the container's {@code ports}; success
 *       is a status in [200, 400); redirects are not followed (a 3xx counts as success); HTTPS
 *       certificates are not verified (as the kubelet).
 *   <li>{@code tcpSocket}: a TCP connect succeeds.
 *   <li>{@code exec}: the command runs on the host with the container's environment and working
 *       directory and exits 0.
 * </ul>
 *
 * Each attempt is bounded by {@code timeoutSeconds} (default 1).
 */
final class Probes {

  private Probes() {}

  /** Probe defaults from the Kubernetes API (k8s.io/api/core/v1 Probe). */
  static int periodSeconds(Probe p) {
    return p.getPeriodSeconds() == null || p.getPeriodSeconds() < 1 ? 10 : p.getPeriodSeconds();
  }

  static int initialDelaySeconds(Probe p) {
    return p.getInitialDelaySeconds() == null ? 0 : Math.max(0, p.getInitialDelaySeconds());
  }

  static int timeoutSeconds(Probe p) {
    return p.getTimeoutSeconds() == null || p.getTimeoutSeconds() < 1 ? 1 : p.getTimeoutSeconds();
  }

  static int successThreshold(Probe p) {
    return p.getSuccessThreshold() == null || p.getSuccessThreshold() < 1
        ? 1
        : p.getSuccessThreshold();
  }

  static int failureThreshold(Probe p) {
    return p.getFailureThreshold() == null || p.getFailureThreshold() < 1
        ? 3
        : p.getFailureThreshold();
  }

  /** Runs the probe once; true on success. Never throws for a failed check. */
  static boolean run(
      Probe probe, Container container, String podIp, Map<String, String> env, Path workingDir) {
    int timeoutMs = timeoutSeconds(probe) * 1000;
    try {
      if (probe.getHttpGet() != null) {
        var h = probe.getHttpGet();
        String host = h.getHost() == null || h.getHost().isEmpty() ? podIp : h.getHost();
        int port = port(h.getPort(), container);
        String path = h.getPath() == null || h.getPath().isEmpty() ? "/" : h.getPath();
        if (!path.startsWith("/")) {
          path = "/" + path;
        }
        String scheme = "HTTPS".equalsIgnoreCase(h.getScheme()) ? "https" : "http";
        HttpURLConnection c =
            (HttpURLConnection)
                URI.create(scheme + "://" + host + ":" + port + path).toURL().openConnection();
        if (c instanceof HttpsURLConnection https) {
          https.setSSLSocketFactory(trustAll().getSocketFactory());
          https.setHostnameVerifier((a, b) -> true);
        }
        c.setConnectTimeout(timeoutMs);
        c.setReadTimeout(timeoutMs);
        c.setInstanceFollowRedirects(false);
        c.setRequestProperty("User-Agent", "kube-probe/1.20");
        c.setRequestProperty("Accept", "*/*");
        List<HTTPHeader> headers = h.getHttpHeaders() == null ? List.of() : h.getHttpHeaders();
        for (HTTPHeader header : headers) {
          c.setRequestProperty(header.getName(), header.getValue());
        }
        try {
          int code = c.getResponseCode();
          try (InputStream in = code >= 400 ? c.getErrorStream() : c.getInputStream()) {
            if (in != null) {
              in.readNBytes(10 * 1024); // the kubelet reads at most 10 KiB of the body
            }
          }
          return code >= 200 && code < 400;
        } finally {
          c.disconnect();
        }
      }
      if (probe.getTcpSocket() != null) {
        var t = probe.getTcpSocket();
        String host = t.getHost() == null || t.getHost().isEmpty() ? podIp : t.getHost();
        try (Socket s = new Socket()) {
          s.connect(new InetSocketAddress(host, port(t.getPort(), container)), timeoutMs);
          return true;
        }
      }
      if (probe.getExec() != null && probe.getExec().getCommand() != null) {
        ProcessBuilder pb = new ProcessBuilder(probe.getExec().getCommand());
        pb.environment().clear();
        pb.environment().putAll(env);
        pb.directory(workingDir.toFile());
        pb.redirectErrorStream(true);
        pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
        Process p = pb.start();
        if (!p.waitFor(timeoutMs, TimeUnit.MILLISECONDS)) {
          p.destroyForcibly();
          return false;
        }
        return p.exitValue() == 0;
      }
      return false;
    } catch (IOException | IllegalArgumentException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  private static int port(IntOrString port, Container container) {
    if (port == null) {
      throw new IllegalArgumentException("probe has no port");
    }
    if (port.getIntVal() != null) {
      return port.getIntVal();
    }
    String name = port.getStrVal();
    if (container.getPorts() != null) {
      for (ContainerPort p : container.getPorts()) {
        if (name.equals(p.getName())) {
          return p.getContainerPort();
        }
      }
    }
    try {
      return Integer.parseInt(name);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("no container port named " + name);
    }
  }

  private static SSLContext trustAll() {
    try {
      SSLContext ctx = SSLContext.getInstance("TLS");
      ctx.init(
          null,
          new TrustManager[] {
            new X509TrustManager() {
              @Override
              public void checkClientTrusted(X509Certificate[] chain, String authType) {}

              @Override
              public void checkServerTrusted(X509Certificate[] chain, String authType) {}

              @Override
              public X509Certificate[] getAcceptedIssuers() {
                return new X509Certificate[0];
              }
            }
          },
          null);
      return ctx;
    } catch (java.security.GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }
}
