package io.tensorcast.rdma.plugin;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.rdma.FakeSysfs;
import io.tensorcast.rdma.deviceplugin.v1beta1.AllocateRequest;
import io.tensorcast.rdma.deviceplugin.v1beta1.AllocateResponse;
import io.tensorcast.rdma.deviceplugin.v1beta1.ContainerAllocateRequest;
import io.tensorcast.rdma.deviceplugin.v1beta1.ContainerAllocateResponse;
import io.tensorcast.rdma.deviceplugin.v1beta1.ContainerPreferredAllocationRequest;
import io.tensorcast.rdma.deviceplugin.v1beta1.Device;
import io.tensorcast.rdma.deviceplugin.v1beta1.DevicePluginGrpc;
import io.tensorcast.rdma.deviceplugin.v1beta1.DevicePluginGrpc.DevicePluginBlockingStub;
import io.tensorcast.rdma.deviceplugin.v1beta1.DevicePluginOptions;
import io.tensorcast.rdma.deviceplugin.v1beta1.DeviceSpec;
import io.tensorcast.rdma.deviceplugin.v1beta1.Empty;
import io.tensorcast.rdma.deviceplugin.v1beta1.ListAndWatchResponse;
import io.tensorcast.rdma.deviceplugin.v1beta1.PreStartContainerRequest;
import io.tensorcast.rdma.deviceplugin.v1beta1.PreStartContainerResponse;
import io.tensorcast.rdma.deviceplugin.v1beta1.PreferredAllocationRequest;
import io.tensorcast.rdma.deviceplugin.v1beta1.RegisterRequest;
import io.tensorcast.rdma.discovery.RdmaInventory;
import io.tensorcast.rdma.discovery.SysfsRdmaDiscovery;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The plugin against a test double of the kubelet's Registration service on a real unix socket, and
 * a real gRPC client on the plugin's socket; devices come from a fake sysfs tree.
 */
class DevicePluginIT {

  private static final Duration POLL = Duration.ofMillis(100);

  @TempDir Path dir;

  private FakeSysfs sysfs;
  private Path pluginDir;
  private PluginConfig config;
  private UnixSockets sockets;
  private FakeKubelet kubelet;
  private DevicePluginServer plugin;
  private final List<RdmaInventory> scans = new CopyOnWriteArrayList<>();
  private ManagedChannel channel;

  @BeforeEach
  void setUp() throws Exception {
    sysfs =
        new FakeSysfs(dir)
            .device("mlx5_0", 0, 0, "4: ACTIVE", "InfiniBand", "200 Gb/sec (4X HDR)")
            .device("mlx5_1", 1, 1, "1: DOWN", "InfiniBand", "200 Gb/sec (4X HDR)");
    pluginDir = Files.createDirectories(dir.resolve("device-plugins"));
    config =
        new PluginConfig(
            pluginDir,
            PluginConfig.DEFAULT_SOCKET_NAME,
            TensorcastConstants.RDMA_RESOURCE,
            2,
            "/dev",
            POLL);
    sockets = new UnixSockets();
  }

  @AfterEach
  void tearDown() {
    if (channel != null) {
      UnixSockets.stop(channel);
    }
    if (plugin != null) {
      plugin.close();
    }
    if (kubelet != null) {
      kubelet.close();
    }
    sockets.close();
  }

  private void startPlugin() throws Exception {
    plugin =
        new DevicePluginServer(
            config, new SysfsRdmaDiscovery(sysfs.sysRoot(), sysfs.devRoot()), scans::add);
    plugin.start();
  }

  private DevicePluginBlockingStub client() {
    if (channel == null) {
      channel = sockets.channel(config.socketPath());
    }
    return DevicePluginGrpc.newBlockingStub(channel);
  }

  private static Map<String, String> health(ListAndWatchResponse list) {
    return list == null
        ? Map.of()
        : list.getDevicesList().stream()
            .collect(Collectors.toMap(Device::getID, Device::getHealth));
  }

  @Test
  void registersWithTheKubeletThenStreamsTheSlotsOfEveryDevice() throws Exception {
    kubelet = new FakeKubelet(sockets, pluginDir);
    startPlugin();

    await().until(() -> kubelet.registrations().size() == 1);
    RegisterRequest reg = kubelet.registrations().get(0);
    assertThat(reg.getVersion()).isEqualTo("v1beta1");
    assertThat(reg.getEndpoint()).isEqualTo("tensorcast-rdma.sock");
    assertThat(reg.getResourceName()).isEqualTo("tensorcast.io/rdma");
    assertThat(reg.getOptions().getGetPreferredAllocationAvailable()).isTrue();
    assertThat(reg.getOptions().getPreStartRequired()).isFalse();
    assertThat(Files.exists(pluginDir.resolve("tensorcast-rdma.sock"))).isTrue();

    await().failFast(() -> kubelet.lastError() != null).until(() -> kubelet.latest() != null);
    ListAndWatchResponse list = kubelet.latest();
    assertThat(health(list))
        .containsExactlyInAnyOrderEntriesOf(
            Map.of(
                "mlx5_0-0", "Healthy",
                "mlx5_0-1", "Healthy",
                "mlx5_1-0", "Unhealthy",
                "mlx5_1-1", "Unhealthy"));
    Device d =
        list.getDevicesList().stream()
            .filter(x -> x.getID().equals("mlx5_1-1"))
            .findFirst()
            .orElseThrow();
    assertThat(d.getTopology().getNodesList()).hasSize(1);
    assertThat(d.getTopology().getNodes(0).getID()).isEqualTo(1);
    assertThat(scans).isNotEmpty();
  }

  @Test
  void listAndWatchSendsANewListWhenPortStateChanges() throws Exception {
    kubelet = new FakeKubelet(sockets, pluginDir);
    startPlugin();
    await().until(() -> kubelet.latest() != null);
    int before = kubelet.lists().size();

    sysfs.state("mlx5_1", "4: ACTIVE");
    await().until(() -> "Healthy".equals(health(kubelet.latest()).get("mlx5_1-0")));
    assertThat(health(kubelet.latest())).containsEntry("mlx5_1-1", "Healthy");
    assertThat(kubelet.lists().size()).isGreaterThan(before);

    // Flapping: the last state wins, whatever the polls caught in between.
    sysfs.state("mlx5_0", "1: DOWN").state("mlx5_0", "4: ACTIVE").state("mlx5_0", "1: DOWN");
    await().until(() -> "Unhealthy".equals(health(kubelet.latest()).get("mlx5_0-0")));
    assertThat(health(kubelet.latest())).containsEntry("mlx5_0-1", "Unhealthy");

    // A removed device disappears from the list.
    sysfs.remove("mlx5_0");
    await()
        .until(
            () ->
                health(kubelet.latest()).keySet().equals(java.util.Set.of("mlx5_1-0", "mlx5_1-1")));

    // No change, no new list.
    int settled = kubelet.lists().size();
    await().pollDelay(Duration.ofMillis(500)).until(() -> true);
    assertThat(kubelet.lists()).hasSize(settled);
  }

  @Test
  void aRealClientGetsOptionsAndAStreamThatFollowsChanges() throws Exception {
    startPlugin();
    DevicePluginOptions options = client().getDevicePluginOptions(Empty.getDefaultInstance());
    assertThat(options.getGetPreferredAllocationAvailable()).isTrue();
    assertThat(options.getPreStartRequired()).isFalse();

    PreStartContainerResponse pre =
        client()
            .preStartContainer(
                PreStartContainerRequest.newBuilder().addDevicesIds("mlx5_0-0").build());
    assertThat(pre).isEqualTo(PreStartContainerResponse.getDefaultInstance());

    var stream = client().listAndWatch(Empty.getDefaultInstance());
    assertThat(health(stream.next())).containsEntry("mlx5_1-0", "Unhealthy");
    sysfs.state("mlx5_1", "4: ACTIVE");
    assertThat(health(stream.next())).containsEntry("mlx5_1-0", "Healthy");
  }

  @Test
  void allocateGivesTheVerbsAndRdmaCmDevicesAndNamesTheChosenDevices() throws Exception {
    sysfs.state("mlx5_1", "4: ACTIVE");
    startPlugin();

    AllocateResponse res =
        client()
            .allocate(
                AllocateRequest.newBuilder()
                    .addContainerRequests(
                        ContainerAllocateRequest.newBuilder()
                            .addDevicesIds("mlx5_0-0")
                            .addDevicesIds("mlx5_0-1"))
                    .addContainerRequests(
                        ContainerAllocateRequest.newBuilder()
                            .addDevicesIds("mlx5_1-1")
                            .addDevicesIds("mlx5_0-1"))
                    .build());

    assertThat(res.getContainerResponsesCount()).isEqualTo(2);
    ContainerAllocateResponse first = res.getContainerResponses(0);
    assertThat(first.getDevicesList())
        .containsExactly(
            spec("/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0"),
            spec("/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm"));
    assertThat(first.getEnvsMap()).containsExactly(Map.entry("TENSORCAST_RDMA_DEVICES", "mlx5_0"));
    ContainerAllocateResponse second = res.getContainerResponses(1);
    assertThat(second.getDevicesList())
        .containsExactly(
            spec("/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0"),
            spec("/dev/infiniband/uverbs1", "/dev/infiniband/uverbs1"),
            spec("/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm"));
    assertThat(second.getEnvsMap())
        .containsExactly(Map.entry("TENSORCAST_RDMA_DEVICES", "mlx5_0,mlx5_1"));
  }

  @Test
  void allocateRefusesUnknownAndUnusableDevicesNamingTheId() throws Exception {
    startPlugin();
    assertThatThrownBy(() -> client().allocate(request("mlx5_7-0")))
        .isInstanceOfSatisfying(
            StatusRuntimeException.class,
            e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT))
        .hasMessageContaining("unknown device ID 'mlx5_7-0'")
        .hasMessageContaining("[mlx5_0, mlx5_1]");
    assertThatThrownBy(() -> client().allocate(request("mlx5_0-2")))
        .hasMessageContaining("INVALID_ARGUMENT")
        .hasMessageContaining("slot 0..1");
    assertThatThrownBy(() -> client().allocate(request("mlx5_1-0")))
        .isInstanceOfSatisfying(
            StatusRuntimeException.class,
            e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.FAILED_PRECONDITION))
        .hasMessageContaining("device ID 'mlx5_1-0' belongs to RDMA device mlx5_1")
        .hasMessageContaining("no port is ACTIVE (port 1: DOWN/Disabled)");
  }

  @Test
  void preferredAllocationKeepsSlotsOnOneDeviceAndNumaNode() throws Exception {
    sysfs.device("mlx5_2", 2, 0, "4: ACTIVE", "InfiniBand", "200 Gb/sec (4X HDR)");
    sysfs.state("mlx5_1", "4: ACTIVE");
    startPlugin();
    var res =
        client()
            .getPreferredAllocation(
                PreferredAllocationRequest.newBuilder()
                    .addContainerRequests(
                        ContainerPreferredAllocationRequest.newBuilder()
                            .addAllAvailableDeviceIDs(
                                List.of("mlx5_0-1", "mlx5_1-0", "mlx5_1-1", "mlx5_2-0", "mlx5_2-1"))
                            .addMustIncludeDeviceIDs("mlx5_0-1")
                            .setAllocationSize(2))
                    .addContainerRequests(
                        ContainerPreferredAllocationRequest.newBuilder()
                            .addAllAvailableDeviceIDs(
                                List.of("mlx5_0-1", "mlx5_1-0", "mlx5_1-1", "mlx5_2-0"))
                            .setAllocationSize(2))
                    .build());
    // mlx5_0 and mlx5_2 share NUMA node 0; mlx5_1 is on node 1.
    assertThat(res.getContainerResponses(0).getDeviceIDsList())
        .containsExactly("mlx5_0-1", "mlx5_2-0");
    assertThat(res.getContainerResponses(1).getDeviceIDsList())
        .containsExactly("mlx5_1-0", "mlx5_1-1");
  }

  @Test
  void registersAgainWhenTheKubeletSocketIsRecreated() throws Exception {
    kubelet = new FakeKubelet(sockets, pluginDir);
    startPlugin();
    await().until(() -> kubelet.latest() != null);

    // Kubelet restart: its socket goes away and a new kubelet creates a new one.
    kubelet.close();
    kubelet = new FakeKubelet(sockets, pluginDir);

    await().until(() -> kubelet.registrations().size() == 1);
    assertThat(kubelet.registrations().get(0).getResourceName()).isEqualTo("tensorcast.io/rdma");
    await().until(() -> kubelet.latest() != null);
    assertThat(kubelet.latest().getDevicesCount()).isEqualTo(4);
    await().until(() -> plugin.registrations() == 2);
  }

  @Test
  void restartsItsServerAndRegistersAgainWhenItsSocketIsRemoved() throws Exception {
    kubelet = new FakeKubelet(sockets, pluginDir);
    startPlugin();
    await().until(() -> kubelet.latest() != null);
    Path socket = config.socketPath();
    Object before = DevicePluginServer.identity(socket);

    // What a starting kubelet does to every socket in the directory.
    Files.delete(socket);

    await().until(() -> kubelet.registrations().size() == 2);
    assertThat(DevicePluginServer.identity(socket)).isNotNull().isNotEqualTo(before);
    // The kubelet dialed the new socket and got the device list again ...
    await().until(() -> kubelet.lists().size() >= 2);
    assertThat(kubelet.latest().getDevicesCount()).isEqualTo(4);
    // ... and a client on the new socket is served.
    assertThat(
            client()
                .getDevicePluginOptions(Empty.getDefaultInstance())
                .getGetPreferredAllocationAvailable())
        .isTrue();
  }

  @Test
  void keepsRetryingRegistrationUntilTheKubeletAcceptsIt() throws Exception {
    startPlugin(); // no kubelet yet
    await().pollDelay(Duration.ofMillis(300)).until(() -> true);
    assertThat(plugin.registrations()).isZero();

    kubelet = new FakeKubelet(sockets, pluginDir);
    kubelet.reject(Status.INVALID_ARGUMENT.withDescription("resource already registered"));
    await().until(() -> kubelet.registrations().size() >= 2);
    assertThat(plugin.registrations()).isZero();

    kubelet.reject(null);
    await().until(() -> plugin.registrations() == 1);
    await().until(() -> kubelet.latest() != null);
  }

  private static AllocateRequest request(String id) {
    return AllocateRequest.newBuilder()
        .addContainerRequests(ContainerAllocateRequest.newBuilder().addDevicesIds(id))
        .build();
  }

  private static DeviceSpec spec(String container, String host) {
    return DeviceSpec.newBuilder()
        .setContainerPath(container)
        .setHostPath(host)
        .setPermissions("rw")
        .build();
  }
}
