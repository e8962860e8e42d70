package io.tensorcast.csi;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.tensorcast.api.ConsumerVolumes;
import io.tensorcast.csi.artifacts.InformerArtifactSource;
import io.tensorcast.csi.mount.LinuxMounter;
import io.tensorcast.csi.node.KubernetesPodEvents;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Entry point of the CSI node driver container: {@code java -jar tensorcast-csi-driver.jar
 * [options]}. Runs until SIGTERM; exit code 2 on bad options, 1 when the driver cannot start.
 */
@Command(
    name = "tensorcast-csi-driver",
    mixinStandardHelpOptions = true,
    description =
        "CSI node driver "
            + ConsumerVolumes.DRIVER
            + ": mounts the Ready copy of a ModelArtifact on this node read-only into pods.")
public final class CsiDriverMain implements Callable<Integer> {
  private static final Logger LOG = LoggerFactory.getLogger(CsiDriverMain.class);

  @Option(
      names = "--endpoint",
      defaultValue = "unix:///csi/csi.sock",
      description =
          "Unix socket to serve CSI on, unix:///path or /path (default: ${DEFAULT-VALUE}).")
  String endpoint;

  @Option(
      names = "--node-name",
      defaultValue = "${env:NODE_NAME}",
      description = "This node's name (default: $NODE_NAME).")
  String nodeName;

  @Option(
      names = "--store-root",
      defaultValue = "/dev/shm/tensorcast",
      description =
          "The node's store root, mounted at the same path as on the host; the operator's"
              + " TENSORCAST_STORE_ROOT (default: ${DEFAULT-VALUE}).")
  Path storeRoot;

  @Option(
      names = "--kubelet-root",
      defaultValue = "/var/lib/kubelet",
      description = "The kubelet's --root-dir as seen here (default: ${DEFAULT-VALUE}).")
  Path kubeletRoot;

  @Option(
      names = "--default-ready-timeout",
      defaultValue = "PT3M",
      description =
          "How long a mount waits for the copy when the volume sets no readyTimeout, ISO-8601"
              + " (default: ${DEFAULT-VALUE}).")
  Duration defaultReadyTimeout;

  @Option(
      names = "--max-ready-timeout",
      defaultValue = "PT1H",
      description = "Largest readyTimeout a volume may set, ISO-8601 (default: ${DEFAULT-VALUE}).")
  Duration maxReadyTimeout;

  @Override
  public Integer call() throws Exception {
    if (nodeName == null || nodeName.isBlank()) {
      throw new IllegalArgumentException("--node-name or NODE_NAME is required");
    }
    DriverConfig config =
        new DriverConfig(nodeName, storeRoot, kubeletRoot, defaultReadyTimeout, maxReadyTimeout);
    Path socket = Path.of(endpoint.startsWith("unix://") ? endpoint.substring(7) : endpoint);
    CountDownLatch stopped = new CountDownLatch(1);
    try (KubernetesClient client = new KubernetesClientBuilder().build();
        InformerArtifactSource artifacts = new InformerArtifactSource(client);
        KubernetesPodEvents events = new KubernetesPodEvents(client, nodeName);
        CsiDriver driver = CsiDriver.start(socket, config, artifacts, new LinuxMounter(), events)) {
      LOG.info("{} {} started on node {}", ConsumerVolumes.DRIVER, CsiDriver.version(), nodeName);
      Runtime.getRuntime().addShutdownHook(new Thread(stopped::countDown, "csi-shutdown"));
      stopped.await();
    }
    return 0;
  }

  public static void main(String[] args) {
    CommandLine cli = new CommandLine(new CsiDriverMain());
    cli.setExecutionExceptionHandler(
        (e, cmd, parsed) -> {
          if (e instanceof IllegalArgumentException) {
            cmd.getErr().println("error: " + e.getMessage());
            return 2;
          }
          LOG.error("CSI driver failed: {}", e.getMessage(), e);
          return 1;
        });
    System.exit(cli.execute(args));
  }
}
