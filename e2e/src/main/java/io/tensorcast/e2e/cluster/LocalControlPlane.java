package io.tensorcast.e2e.cluster;

import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.tensorcast.testing.TestFiles;
import io.tensorcast.testing.TestPorts;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.KeyStore;
import java.security.SecureRandom;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A real Kubernetes 1.20 control plane on loopback: etcd, kube-apiserver, kube-controller-manager
 * and kube-scheduler as local processes, built from Debian's source package by {@code
 * hack/k8s/build-binaries.sh}. There is no kubelet; {@link SimulatedKubelet} plays the nodes.
 *
 * <p>Binaries come from, in order: system property {@value #BIN_PROPERTY}, environment variable
 * {@value #BIN_ENV}, or {@code ~/.cache/tensorcast/k8s-1.20.2/bin}. The directory must hold {@code
 * etcd}, {@code kube-apiserver}, {@code kube-controller-manager} and {@code kube-scheduler}.
 *
 * <p>Set-up:
 *
 * <ul>
 *   <li>Every component listens on 127.0.0.1 on free ports; no insecure ports.
 *   <li>kube-apiserver authenticates one static token ({@link #adminToken()}, user {@code admin} in
 *       group {@code system:masters}) and authorizes with RBAC; it serves a self-signed certificate
 *       that it generates in {@code workDir/pki/apiserver}; the kubeconfig trusts exactly that
 *       certificate. Service-account tokens are signed with an RSA key generated per start.
 *   <li>The {@code TaintNodesByCondition} admission plugin is <b>disabled</b>: it would give every
 *       new Node the taint {@code node.kubernetes.io/not-ready:NoSchedule}, and with no kubelet and
 *       no node-lifecycle controller nothing would ever remove it. Node readiness is therefore
 *       whatever the simulated node writes into its {@code Ready} condition.
 *   <li>kube-controller-manager runs {@value #CONTROLLERS}; the node-lifecycle controller is off,
 *       so nodes need no heartbeat or Lease and pods are never evicted for an unready node.
 *   <li>kube-scheduler runs without {@code --authentication-kubeconfig}/{@code
 *       --authorization-kubeconfig} (they make it wait for a ConfigMap this API server never
 *       creates).
 * </ul>
 *
 * <p>Each component logs to {@code workDir/logs/<component>.log}. {@link #close()} stops all
 * processes (SIGTERM, then SIGKILL after a bounded grace); they also end when the JVM exits (see
 * {@link ManagedProcess}). A start wipes the previous etcd data and keys in {@code workDir}.
 */
public final class LocalControlPlane implements AutoCloseable {
  private static final SecureRandom RANDOM = new SecureRandom();

  /** System property naming the directory with the control-plane binaries. */
  public static final String BIN_PROPERTY = "tensorcast.k8s.bin";

  /** Environment variable naming the directory with the control-plane binaries. */
  public static final String BIN_ENV = "TENSORCAST_K8S_BIN";

  /** Controllers that kube-controller-manager runs (node lifecycle deliberately absent). */
  public static final String CONTROLLERS =
      "garbagecollector,namespace,serviceaccount,serviceaccount-token,deployment,replicaset,"
          + "statefulset,daemonset,job,endpoint,endpointslice";

  private static final Logger LOG = LoggerFactory.getLogger(LocalControlPlane.class);
  private static final List<String> BINARIES =
      List.of("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler");
  private static final Duration START_TIMEOUT = Duration.ofSeconds(120);
  private static final Duration STOP_GRACE = Duration.ofSeconds(10);

  private final Path workDir;
  private final Path kubeconfig;
  private final String adminToken;
  private final int apiServerPort;
  private final List<ManagedProcess> processes;
  private volatile KubernetesClient client;
  private volatile boolean closed;

  private LocalControlPlane(
      Path workDir,
      Path kubeconfig,
      String adminToken,
      int apiServerPort,
      List<ManagedProcess> processes) {
    this.workDir = workDir;
    this.kubeconfig = kubeconfig;
    this.adminToken = adminToken;
    this.apiServerPort = apiServerPort;
    this.processes = processes;
  }

  /**
   * Resolves the directory holding the control-plane binaries (see class Javadoc for the order).
   *
   * @throws IllegalStateException naming the directory and the missing binaries, and telling how to
   *     build them, when any of the four is missing or not executable
   */
  public static Path binDir() {
    String configured = System.getProperty(BIN_PROPERTY);
    String source = "system property " + BIN_PROPERTY;
    if (configured == null || configured.isBlank()) {
      configured = System.getenv(BIN_ENV);
      source = "environment variable " + BIN_ENV;
    }
    Path dir;
    if (configured == null || configured.isBlank()) {
      dir = Path.of(System.getProperty("user.home"), ".cache", "tensorcast", "k8s-1.20.2", "bin");
      source = "default location (set " + BIN_PROPERTY + " or " + BIN_ENV + " to override)";
    } else {
      dir = Path.of(configured);
    }
    List<String> missing = new ArrayList<>();
    for (String b : BINARIES) {
      if (!Files.isExecutable(dir.resolve(b))) {
        missing.add(b);
      }
    }
    if (!missing.isEmpty()) {
      throw new IllegalStateException(
          "Kubernetes control-plane binaries missing in "
              + dir
              + " ("
              + source
              + "): "
              + String.join(", ", missing)
              + ". Build them once with `sudo hack/k8s/build-binaries.sh` (prints the bin dir; "
              + "about 6-10 min on 2 cores), or point "
              + BIN_PROPERTY
              + " / "
              + BIN_ENV
              + " at a directory that holds "
              + String.join(", ", BINARIES)
              + ".");
    }
    return dir;
  }

  /**
   * Starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler and waits until the API
   * server is ready, the {@code default} namespace exists and both controllers answer their health
   * check.
   *
   * @param workDir directory for data, keys, kubeconfig and logs; created if missing
   * @throws IllegalStateException when the binaries are missing (see {@link #binDir()}) or a
   *     component does not come up within 120 s; the message carries the tail of its log
   */
  public static LocalControlPlane start(Path workDir) {
    Path bin = binDir();
    Path dir = workDir.toAbsolutePath();
    List<ManagedProcess> started = new ArrayList<>();
    try {
      return doStart(bin, dir, started);
    } catch (IOException e) {
      started.forEach(p -> p.stop(STOP_GRACE));
      throw new UncheckedIOException("cannot start the local control plane in " + dir, e);
    } catch (RuntimeException e) {
      started.forEach(p -> p.stop(STOP_GRACE));
      throw e;
    }
  }

  private static LocalControlPlane doStart(Path bin, Path dir, List<ManagedProcess> started)
      throws IOException {
    long t0 = System.nanoTime();
    Path logs = dir.resolve("logs");
    Path pki = dir.resolve("pki");
    Path etcdData = dir.resolve("etcd");
    TestFiles.deleteTree(etcdData);
    TestFiles.deleteTree(pki);
    Files.createDirectories(logs);
    Files.createDirectories(pki);
    for (String b : BINARIES) {
      Files.deleteIfExists(logs.resolve(b + ".log"));
    }

    byte[] tokenBytes = new byte[24];
    RANDOM.nextBytes(tokenBytes);
    String token = HexFormat.of().formatHex(tokenBytes);
    Path tokenFile = pki.resolve("tokens.csv");
    Files.writeString(tokenFile, token + ",admin,admin-uid,\"system:masters\"\n");

    KeyPair saKey;
    try {
      KeyPairGenerator gen = KeyPairGenerator.getInstance("RSA");
      gen.initialize(2048, RANDOM);
      saKey = gen.generateKeyPair();
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException("RSA is not available in this JVM", e);
    }
    Path saPrivate = pki.resolve("sa.key");
    Path saPublic = pki.resolve("sa.pub");
    Files.writeString(saPrivate, pem("PRIVATE KEY", saKey.getPrivate().getEncoded()));
    Files.writeString(saPublic, pem("PUBLIC KEY", saKey.getPublic().getEncoded()));

    int etcdClient = freePort();
    int etcdPeer = freePort();
    int apiPort = freePort();
    int cmPort = freePort();
    int schedPort = freePort();
    Map<String, String> env = baseEnvironment();

    String etcdUrl = "http://127.0.0.1:" + etcdClient;
    String etcdPeerUrl = "http://127.0.0.1:" + etcdPeer;
    ManagedProcess etcd =
        ManagedProcess.start(
            "etcd",
            List.of(
                bin.resolve("etcd").toString(),
                "--name=default",
                "--data-dir=" + etcdData,
                "--listen-client-urls=" + etcdUrl,
                "--advertise-client-urls=" + etcdUrl,
                "--listen-peer-urls=" + etcdPeerUrl,
                "--initial-advertise-peer-urls=" + etcdPeerUrl,
                "--initial-cluster=default=" + etcdPeerUrl,
                "--initial-cluster-state=new"),
            env,
            dir,
            logs.resolve("etcd.log"));
    started.add(etcd);
    HttpClient plain = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
    await(
        "etcd health at " + etcdUrl + "/health",
        etcd,
        deadline,
        () -> {
          HttpResponse<String> r = get(plain, etcdUrl + "/health", null);
          return r != null && r.statusCode() == 200 && r.body().contains("true");
        });

    Path apiCerts = pki.resolve("apiserver");
    ManagedProcess apiserver =
        ManagedProcess.start(
            "kube-apiserver",
            List.of(
                bin.resolve("kube-apiserver").toString(),
                "--etcd-servers=" + etcdUrl,
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--secure-port=" + apiPort,
                "--insecure-port=0",
                "--cert-dir=" + apiCerts,
                "--token-auth-file=" + tokenFile,
                "--authorization-mode=RBAC",
                "--service-account-key-file=" + saPublic,
                "--service-account-signing-key-file=" + saPrivate,
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--endpoint-reconciler-type=none",
                "--disable-admission-plugins=TaintNodesByCondition",
                "--allow-privileged=true",
                "--profiling=false"),
            env,
            dir,
            logs.resolve("kube-apiserver.log"));
    started.add(apiserver);
    Path apiCert = apiCerts.resolve("apiserver.crt");
    await("serving certificate " + apiCert, apiserver, deadline, () -> Files.exists(apiCert));
    String apiUrl = "https://127.0.0.1:" + apiPort;
    HttpClient api =
        HttpClient.newBuilder()
            .connectTimeout(Duration.ofSeconds(2))
            .sslContext(trusting(apiCert))
            .build();
    await(
        "kube-apiserver " + apiUrl + "/readyz",
        apiserver,
        deadline,
        () -> {
          HttpResponse<String> r = get(api, apiUrl + "/readyz", token);
          return r != null && r.statusCode() == 200;
        });
    await(
        "namespace default",
        apiserver,
        deadline,
        () -> {
          HttpResponse<String> r = get(api, apiUrl + "/api/v1/namespaces/default", token);
          return r != null && r.statusCode() == 200;
        });

    Path kubeconfig = dir.resolve("kubeconfig");
    Files.writeString(kubeconfig, kubeconfigYaml(apiUrl, apiCert, token));

    ManagedProcess cm =
        ManagedProcess.start(
            "kube-controller-manager",
            List.of(
                bin.resolve("kube-controller-manager").toString(),
                "--kubeconfig=" + kubeconfig,
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--port=0",
                "--secure-port=" + cmPort,
                "--cert-dir=" + pki.resolve("controller-manager"),
                "--controllers=" + CONTROLLERS,
                "--service-account-private-key-file=" + saPrivate,
                "--root-ca-file=" + apiCert,
                "--use-service-account-credentials=false"),
            env,
            dir,
            logs.resolve("kube-controller-manager.log"));
    started.add(cm);
    ManagedProcess scheduler =
        ManagedProcess.start(
            "kube-scheduler",
            List.of(
                bin.resolve("kube-scheduler").toString(),
                "--kubeconfig=" + kubeconfig,
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--port=0",
                "--secure-port=" + schedPort,
                "--cert-dir=" + pki.resolve("scheduler")),
            env,
            dir,
            logs.resolve("kube-scheduler.log"));
    started.add(scheduler);
    // Their self-signed serving certificates guard only a health endpoint on loopback.
    HttpClient local =
        HttpClient.newBuilder()
            .connectTimeout(Duration.ofSeconds(2))
            .sslContext(trustingAnything())
            .build();
    await(
        "kube-controller-manager https://127.0.0.1:" + cmPort + "/healthz",
        cm,
        deadline,
        () -> {
          HttpResponse<String> r = get(local, "https://127.0.0.1:" + cmPort + "/healthz", null);
          return r != null && r.statusCode() == 200;
        });
    await(
        "kube-scheduler https://127.0.0.1:" + schedPort + "/healthz",
        scheduler,
        deadline,
        () -> {
          HttpResponse<String> r = get(local, "https://127.0.0.1:" + schedPort + "/healthz", null);
          return r != null && r.statusCode() == 200;
        });
    LOG.info(
        "local control plane up in {} ms: {} (kubeconfig {})",
        Duration.ofNanos(System.nanoTime() - t0).toMillis(),
        apiUrl,
        kubeconfig);
    return new LocalControlPlane(dir, kubeconfig, token, apiPort, List.copyOf(started));
  }

  /** Path of a kubeconfig for user {@code admin} (cluster-admin); usable by {@code kubectl}. */
  public Path kubeconfig() {
    return kubeconfig;
  }

  /** The API server's URL, {@code https://127.0.0.1:<port>}. */
  public String apiServerUrl() {
    return "https://127.0.0.1:" + apiServerPort;
  }

  /** The API server's port on 127.0.0.1. */
  public int apiServerPort() {
    return apiServerPort;
  }

  /** Bearer token of user {@code admin} (group {@code system:masters}). */
  public String adminToken() {
    return adminToken;
  }

  /** The working directory given to {@link #start(Path)}, as an absolute path. */
  public Path workDir() {
    return workDir;
  }

  /** Directory with one {@code <component>.log} per control-plane process. */
  public Path logsDir() {
    return workDir.resolve("logs");
  }

  /**
   * A fabric8 client configured from {@link #kubeconfig()}, created on first use and shared; it is
   * closed by {@link #close()}, so callers must not close it. Use {@link #newClient()} for one you
   * own.
   */
  public KubernetesClient client() {
    KubernetesClient c = client;
    if (c == null) {
      synchronized (this) {
        if (closed) {
          throw new IllegalStateException("local control plane is closed");
        }
        c = client;
        if (c == null) {
          c = newClient();
          client = c;
        }
      }
    }
    return c;
  }

  /** A new fabric8 client configured from {@link #kubeconfig()}; the caller closes it. */
  public KubernetesClient newClient() {
    try {
      Config config = Config.fromKubeconfig(Files.readString(kubeconfig));
      return new KubernetesClientBuilder().withConfig(config).build();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read kubeconfig " + kubeconfig, e);
    }
  }

  /** Whether every control-plane process is still running. */
  public boolean isRunning() {
    return !closed && processes.stream().allMatch(ManagedProcess::isAlive);
  }

  /**
   * Stops the scheduler, controller-manager, API server and etcd (in that order; SIGTERM, then
   * SIGKILL after 10 s each). Idempotent.
   */
  @Override
  public void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
    }
    KubernetesClient c = client;
    if (c != null) {
      c.close();
    }
    List<ManagedProcess> reversed = new ArrayList<>(processes);
    java.util.Collections.reverse(reversed);
    reversed.forEach(ManagedProcess::terminate);
    for (ManagedProcess p : reversed) {
      p.stop(STOP_GRACE);
    }
  }

  // ---------------------------------------------------------------------------------------------

  private static String kubeconfigYaml(String apiUrl, Path caFile, String token) {
    return """
        apiVersion: v1
        kind: Config
        clusters:
        - name: tensorcast-local
          cluster:
            server: %s
            certificate-authority: %s
        users:
        - name: admin
          user:
            token: %s
        contexts:
        - name: tensorcast-local
          context:
            cluster: tensorcast-local
            user: admin
            namespace: default
        current-context: tensorcast-local
        """
        .formatted(apiUrl, caFile, token);
  }

  private static Map<String, String> baseEnvironment() {
    Map<String, String> env = new LinkedHashMap<>();
    env.put("PATH", System.getenv().getOrDefault("PATH", "/usr/bin:/bin"));
    env.put("HOME", System.getProperty("user.home"));
    return env;
  }

  static int freePort() throws IOException {
    return TestPorts.freePort(java.net.InetAddress.getLoopbackAddress());
  }

  private static String pem(String type, byte[] der) {
    String b64 =
        Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(der);
    return "-----BEGIN " + type + "-----\n" + b64 + "\n-----END " + type + "-----\n";
  }

  private static HttpResponse<String> get(HttpClient http, String url, String token) {
    try {
      HttpRequest.Builder b =
          HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(3));
      if (token != null) {
        b.header("Authorization", "Bearer " + token);
      }
      return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while starting the control plane", e);
    }
  }

  /** Polls {@code condition} every 100 ms until it holds, the process dies, or the deadline. */
  private static void await(
      String what, ManagedProcess process, long deadlineNanos, BooleanSupplier condition) {
    while (true) {
      if (condition.getAsBoolean()) {
        return;
      }
      if (!process.isAlive()) {
        throw new IllegalStateException(
            process.name()
                + " exited (status "
                + process.onExit().getNow(-1)
                + ") while waiting for "
                + what
                + "; last lines of "
                + process.logFile()
                + ":\n"
                + process.logTail(30));
      }
      if (System.nanoTime() > deadlineNanos) {
        throw new IllegalStateException(
            "timed out after "
                + START_TIMEOUT.toSeconds()
                + " s waiting for "
                + what
                + "; last lines of "
                + process.logFile()
                + ":\n"
                + process.logTail(30));
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while waiting for " + what, e);
      }
    }
  }

  private static SSLContext trusting(Path pemFile) {
    try {
      CertificateFactory cf = CertificateFactory.getInstance("X.509");
      KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
      ks.load(null, null);
      int i = 0;
      for (Certificate c :
          cf.generateCertificates(new ByteArrayInputStream(Files.readAllBytes(pemFile)))) {
        ks.setCertificateEntry("cert-" + i++, c);
      }
      TrustManagerFactory tmf =
          TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      tmf.init(ks);
      SSLContext ctx = SSLContext.getInstance("TLS");
      ctx.init(null, tmf.getTrustManagers(), null);
      return ctx;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + pemFile, e);
    } catch (java.security.GeneralSecurityException e) {
      throw new IllegalStateException("cannot load certificates from " + pemFile, e);
    }
  }

  private static SSLContext trustingAnything() {
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

  @Override
  public String toString() {
    return "LocalControlPlane[" + apiServerUrl() + ", " + workDir + "]";
  }
}
