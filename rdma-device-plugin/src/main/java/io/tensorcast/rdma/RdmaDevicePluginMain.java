package io.tensorcast.rdma;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.rdma.discovery.RdmaInventory;
import io.tensorcast.rdma.discovery.SysfsRdmaDiscovery;
import io.tensorcast.rdma.labels.NodeLabeler;
import io.tensorcast.rdma.plugin.DevicePluginServer;
import io.tensorcast.rdma.plugin.PluginConfig;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Entry point of the RDMA device plugin container: {@code java -jar
 * tensorcast-rdma-device-plugin.jar [options]}. Runs until SIGTERM; exit code 2 on bad options, 1
 * when the plugin cannot start (e.g. the device plugin directory is not mounted).
 */
@Command(
    name = "tensorcast-rdma-device-plugin",
    mixinStandardHelpOptions = true,
    description =
        "Advertises RDMA devices to the kubelet as "
            + TensorcastConstants.RDMA_RESOURCE
            + " and labels the node while one is usable.")
public final class RdmaDevicePluginMain implements Callable<Integer> {

  private static final Logger LOG = LoggerFactory.getLogger(RdmaDevicePluginMain.class);

  @Option(
      names = "--sys-root",
      defaultValue = "/sys",
      description = "Host sysfs as seen here (default: ${DEFAULT-VALUE}).")
  Path sysRoot;

  @Option(
      names = "--dev-root",
      defaultValue = "/dev",
      description = "Host /dev as seen here, for existence checks (default: ${DEFAULT-VALUE}).")
  Path devRoot;

  @Option(
      names = "--host-dev-root",
      defaultValue = "/dev",
      description =
          "Host /dev as the kubelet sees it; prefix of DeviceSpec host paths (default: ${DEFAULT-VALUE}).")
  String hostDevRoot;

  @Option(
      names = "--plugin-dir",
      defaultValue = "/var/lib/kubelet/device-plugins",
      description = "Kubelet device plugin directory (default: ${DEFAULT-VALUE}).")
  Path pluginDir;

  @Option(
      names = "--socket-name",
      defaultValue = PluginConfig.DEFAULT_SOCKET_NAME,
      description = "Socket file name in the plugin directory (default: ${DEFAULT-VALUE}).")
  String socketName;

  @Option(
      names = "--slots-per-device",
      defaultValue = "16",
      description =
          "Shareable slots advertised per RDMA device, 1..1000 (default: ${DEFAULT-VALUE}).")
  int slotsPerDevice;

  @Option(
      names = "--poll-interval",
      defaultValue = "PT5S",
      description =
          "How often sysfs and the sockets are checked, ISO-8601 duration (default: ${DEFAULT-VALUE}).")
  Duration pollInterval;

  @Option(
      names = "--node-name",
      defaultValue = "${env:NODE_NAME}",
      description = "Node to label (default: $NODE_NAME). Without it no labels are written.")
  String nodeName;

  @Option(names = "--no-labels", description = "Do not label the node.")
  boolean noLabels;

  @Override
  public Integer call() throws Exception {
    PluginConfig config =
        new PluginConfig(
            pluginDir,
            socketName,
            TensorcastConstants.RDMA_RESOURCE,
            slotsPerDevice,
            hostDevRoot,
            pollInterval);
    KubernetesClient client = null;
    Consumer<RdmaInventory> listener = inventory -> {};
    if (noLabels) {
      LOG.info("node labels disabled (--no-labels)");
    } else if (nodeName == null || nodeName.isBlank()) {
      LOG.warn("NODE_NAME is not set and --node-name not given: node labels are not written");
    } else {
      client = new KubernetesClientBuilder().build();
      listener = new NodeLabeler(client, nodeName);
    }
    CountDownLatch stopped = new CountDownLatch(1);
    try (DevicePluginServer server =
        new DevicePluginServer(config, new SysfsRdmaDiscovery(sysRoot, devRoot), listener)) {
      server.start();
      Runtime.getRuntime().addShutdownHook(new Thread(stopped::countDown, "rdma-plugin-shutdown"));
      stopped.await();
    } finally {
      if (client != null) {
        client.close();
      }
    }
    return 0;
  }

  public static void main(String[] args) {
    CommandLine cli = new CommandLine(new RdmaDevicePluginMain());
    cli.setExecutionExceptionHandler(
        (e, cmd, parsed) -> {
          if (e instanceof IllegalArgumentException) {
            cmd.getErr().println("error: " + e.getMessage());
            return 2;
          }
          LOG.error("RDMA device plugin failed: {}", e.getMessage(), e);
          return 1;
        });
    System.exit(cli.execute(args));
  }
}
