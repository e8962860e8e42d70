package io.tensorcast.e2e.cluster;

import io.fabric8.kubernetes.api.model.NamespaceBuilder;
import io.fabric8.kubernetes.api.model.ServiceAccount;
import io.fabric8.kubernetes.client.KubernetesClient;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One {@link LocalControlPlane} plus one {@link SimulatedKubelet} per JVM, started on first use and
 * stopped at JVM exit, so that several test classes (and the demo) share a control plane instead of
 * paying ~5 s each.
 *
 * <p>Sharing rules for tests: each test works in its own namespace ({@link #createNamespace}), and
 * pins its pods to its own nodes (give the nodes a label unique to the test and the pods a matching
 * {@code nodeSelector}), since every node is visible to every pod. Node addresses come from {@link
 * #nextNodeAddress()} so they never collide.
 *
 * <p>The working directory is system property {@value #WORKDIR_PROPERTY} if set, else {@code
 * target/e2e-cluster} under the current directory.
 */
public final class SharedCluster {

  /** System property naming the working directory of the shared cluster. */
  public static final String WORKDIR_PROPERTY = "tensorcast.e2e.workdir";

  private static final Logger LOG = LoggerFactory.getLogger(SharedCluster.class);
  private static SharedCluster instance;
  private static RuntimeException startFailure;

  private final LocalControlPlane controlPlane;
  private final ProcessContainerRuntime runtime;
  private final SimulatedKubelet kubelet;
  private final AtomicInteger nodeCounter = new AtomicInteger();
  private static final SecureRandom RANDOM = new SecureRandom();
  private final int addressBase = 16 + RANDOM.nextInt(224);

  private SharedCluster(Path workDir) {
    this.controlPlane = LocalControlPlane.start(workDir);
    try {
      this.runtime = new ProcessContainerRuntime();
      this.kubelet =
          new SimulatedKubelet(
              controlPlane.client(),
              workDir,
              runtime,
              new SimulatedKubelet.Options(
                  Duration.ofSeconds(5),
                  Duration.ofSeconds(10),
                  Duration.ofMinutes(5),
                  Duration.ofSeconds(1)));
    } catch (RuntimeException e) {
      controlPlane.close();
      throw e;
    }
  }

  /**
   * The JVM's shared cluster, started on the first call (a failed start is remembered and rethrown
   * on later calls rather than retried).
   *
   * @throws IllegalStateException when the control plane cannot start (e.g. binaries missing; the
   *     message says how to build them)
   */
  public static synchronized SharedCluster get() {
    if (instance != null) {
      return instance;
    }
    if (startFailure != null) {
      throw new IllegalStateException(
          "the shared local cluster failed to start earlier: " + startFailure.getMessage(),
          startFailure);
    }
    String configured = System.getProperty(WORKDIR_PROPERTY);
    Path workDir =
        configured == null || configured.isBlank()
            ? Path.of("target", "e2e-cluster")
            : Path.of(configured);
    try {
      SharedCluster c = new SharedCluster(workDir);
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(
                  () -> {
                    c.kubelet.close();
                    c.controlPlane.close();
                  },
                  "tensorcast-shared-cluster-stop"));
      instance = c;
      return c;
    } catch (RuntimeException e) {
      startFailure = e;
      throw e;
    }
  }

  public LocalControlPlane controlPlane() {
    return controlPlane;
  }

  /** The control plane's shared admin client (do not close it). */
  public KubernetesClient client() {
    return controlPlane.client();
  }

  public SimulatedKubelet kubelet() {
    return kubelet;
  }

  /** The container runtime of the shared kubelet: add image mappings here. */
  public ProcessContainerRuntime runtime() {
    return runtime;
  }

  /**
   * A loopback address no other node of this JVM uses: {@code 127.<b>.<k>.<n>}, where {@code b} is
   * chosen at random per JVM in [16, 240) so that test JVMs running side by side on one machine
   * rarely share node addresses (and thus pod ports); {@code 127.0.0.1} stays for the control
   * plane.
   */
  public String nextNodeAddress() {
    int n = nodeCounter.incrementAndGet() - 1;
    return "127." + addressBase + "." + (1 + n / 250) + "." + (1 + n % 250);
  }

  /**
   * Creates a namespace named {@code <prefix>-<random>} (prefix lower-cased, cut to 40 characters,
   * characters outside {@code [a-z0-9-]} replaced by {@code -}) and waits until its {@code default}
   * ServiceAccount has its token Secret (until then the API server rejects pods that mount it).
   *
   * @return the namespace's name
   */
  public String createNamespace(String prefix) {
    String base = prefix.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9-]", "-");
    base = base.replaceAll("-+", "-").replaceAll("^-|-$", "");
    if (base.length() > 40) {
      base = base.substring(0, 40).replaceAll("-$", "");
    }
    if (base.isEmpty()) {
      base = "t";
    }
    String name = base + "-" + Integer.toString(RANDOM.nextInt(36 * 36 * 36 * 36), 36);
    client()
        .namespaces()
        .resource(new NamespaceBuilder().withNewMetadata().withName(name).endMetadata().build())
        .create();
    ServiceAccount sa =
        client()
            .serviceAccounts()
            .inNamespace(name)
            .withName("default")
            .waitUntilCondition(
                s -> s != null && s.getSecrets() != null && !s.getSecrets().isEmpty(),
                60,
                TimeUnit.SECONDS);
    LOG.debug(
        "namespace {} ready (service account token {})", name, sa.getSecrets().get(0).getName());
    return name;
  }

  /** Deletes a namespace without waiting (the kubelet finishes its pods' deletion). */
  public void deleteNamespace(String name) {
    client().namespaces().withName(name).delete();
  }
}
