package io.tensorcast.rdma.plugin;

import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.tensorcast.rdma.deviceplugin.v1beta1.AllocateRequest;
import io.tensorcast.rdma.deviceplugin.v1beta1.AllocateResponse;
import io.tensorcast.rdma.deviceplugin.v1beta1.ContainerAllocateRequest;
import io.tensorcast.rdma.deviceplugin.v1beta1.ContainerAllocateResponse;
import io.tensorcast.rdma.deviceplugin.v1beta1.ContainerPreferredAllocationRequest;
import io.tensorcast.rdma.deviceplugin.v1beta1.ContainerPreferredAllocationResponse;
import io.tensorcast.rdma.deviceplugin.v1beta1.Device;
import io.tensorcast.rdma.deviceplugin.v1beta1.DevicePluginGrpc;
import io.tensorcast.rdma.deviceplugin.v1beta1.DevicePluginOptions;
import io.tensorcast.rdma.deviceplugin.v1beta1.DeviceSpec;
import io.tensorcast.rdma.deviceplugin.v1beta1.Empty;
import io.tensorcast.rdma.deviceplugin.v1beta1.ListAndWatchResponse;
import io.tensorcast.rdma.deviceplugin.v1beta1.NUMANode;
import io.tensorcast.rdma.deviceplugin.v1beta1.PreStartContainerRequest;
import io.tensorcast.rdma.deviceplugin.v1beta1.PreStartContainerResponse;
import io.tensorcast.rdma.deviceplugin.v1beta1.PreferredAllocationRequest;
import io.tensorcast.rdma.deviceplugin.v1beta1.PreferredAllocationResponse;
import io.tensorcast.rdma.deviceplugin.v1beta1.TopologyInfo;
import io.tensorcast.rdma.discovery.RdmaDevice;
import io.tensorcast.rdma.discovery.RdmaInventory;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code v1beta1.DevicePlugin} service for {@code tensorcast.io/rdma}: each RDMA device is
 * advertised as {@code slotsPerDevice} shareable slots ({@link DeviceIds}), {@code Healthy} while
 * the device is {@linkplain RdmaDevice#usable() usable}, with its NUMA node as topology.
 *
 * <p>{@link #update} takes each sysfs scan; when the advertised list changes, every open {@code
 * ListAndWatch} stream gets the new full list (the kubelet's contract: "whenever a device state
 * changes or a device disappears, ListAndWatch returns the new list").
 *
 * <p>{@code Allocate} answers, per container, a {@link DeviceSpec} ({@code rw}) for each chosen
 * device's {@code /dev/infiniband/uverbsN} and for {@code /dev/infiniband/rdma_cm}, and the
 * environment variable {@value #ENV_DEVICES} listing the chosen device names (comma separated,
 * sorted). Unknown IDs fail with {@code INVALID_ARGUMENT}, IDs of a device that is no longer usable
 * with {@code FAILED_PRECONDITION}; both name the ID.
 */
public final class RdmaDevicePluginService extends DevicePluginGrpc.DevicePluginImplBase {

  /** Device health string the kubelet understands as allocatable. */
  public static final String HEALTHY = "Healthy";

  /** Device health string the kubelet removes from allocatable. */
  public static final String UNHEALTHY = "Unhealthy";

  /** Environment variable naming the RDMA devices given to a container, e.g. {@code mlx5_0}. */
  public static final String ENV_DEVICES = "TENSORCAST_RDMA_DEVICES";

  private static final Logger LOG = LoggerFactory.getLogger(RdmaDevicePluginService.class);

  private final int slotsPerDevice;
  private final String hostDevRoot;
  private final List<ServerCallStreamObserver<ListAndWatchResponse>> watchers =
      new CopyOnWriteArrayList<>();

  private volatile RdmaInventory inventory = RdmaInventory.empty();
  private volatile Map<String, RdmaDevice> devicesByName = Map.of();
  private volatile ListAndWatchResponse current = ListAndWatchResponse.getDefaultInstance();

  /**
   * @param slotsPerDevice shareable slots per RDMA device (1..1000)
   * @param hostDevRoot the host's {@code /dev}, prefix of every {@code DeviceSpec.host_path}
   */
  public RdmaDevicePluginService(int slotsPerDevice, String hostDevRoot) {
    if (slotsPerDevice < 1) {
      throw new IllegalArgumentException("slots per device must be >= 1, got " + slotsPerDevice);
    }
    this.slotsPerDevice = slotsPerDevice;
    this.hostDevRoot =
        hostDevRoot.endsWith("/")
            ? hostDevRoot.substring(0, hostDevRoot.length() - 1)
            : hostDevRoot;
  }

  /**
   * Takes a new scan; sends the new device list to every {@code ListAndWatch} stream when it
   * differs from the last one sent.
   *
   * @return whether the advertised list changed
   */
  public synchronized boolean update(RdmaInventory scan) {
    Map<String, RdmaDevice> byName = new LinkedHashMap<>();
    ListAndWatchResponse.Builder list = ListAndWatchResponse.newBuilder();
    for (RdmaDevice device : scan.devices()) {
      if (DeviceIds.id(device.name(), slotsPerDevice - 1).length() > DeviceIds.MAX_ID_LENGTH) {
        LOG.error(
            "RDMA device {} not advertised: its IDs '<device>-<slot>' would exceed the kubelet's"
                + " {}-character limit for a device ID",
            device.name(),
            DeviceIds.MAX_ID_LENGTH);
        continue;
      }
      byName.put(device.name(), device);
      for (int slot = 0; slot < slotsPerDevice; slot++) {
        list.addDevices(toDevice(device, slot));
      }
    }
    this.inventory = scan;
    this.devicesByName = Map.copyOf(byName);
    ListAndWatchResponse next = list.build();
    if (next.equals(current)) {
      return false;
    }
    logChanges(byName);
    current = next;
    for (ServerCallStreamObserver<ListAndWatchResponse> watcher : watchers) {
      send(watcher, next);
    }
    return true;
  }

  /** Ends every open {@code ListAndWatch} stream (the server is going away). */
  public synchronized void completeWatchers() {
    for (ServerCallStreamObserver<ListAndWatchResponse> watcher : watchers) {
      try {
        watcher.onCompleted();
      } catch (RuntimeException e) {
        LOG.debug("ListAndWatch stream already closed: {}", e.toString());
      }
    }
    watchers.clear();
  }

  @Override
  public void getDevicePluginOptions(Empty request, StreamObserver<DevicePluginOptions> response) {
    response.onNext(options());
    response.onCompleted();
  }

  /** Options sent at registration and from {@code GetDevicePluginOptions}. */
  public static DevicePluginOptions options() {
    return DevicePluginOptions.newBuilder()
        .setPreStartRequired(false)
        .setGetPreferredAllocationAvailable(true)
        .build();
  }

  @Override
  public void listAndWatch(Empty request, StreamObserver<ListAndWatchResponse> response) {
    ServerCallStreamObserver<ListAndWatchResponse> watcher =
        (ServerCallStreamObserver<ListAndWatchResponse>) response;
    watcher.setOnCancelHandler(() -> watchers.remove(watcher));
    synchronized (this) {
      watchers.add(watcher);
      send(watcher, current);
    }
    LOG.info("kubelet opened ListAndWatch; sent {} devices", current.getDevicesCount());
  }

  @Override
  public void getPreferredAllocation(
      PreferredAllocationRequest request, StreamObserver<PreferredAllocationResponse> response) {
    Map<String, RdmaDevice> byName = devicesByName;
    PreferredAllocationResponse.Builder out = PreferredAllocationResponse.newBuilder();
    for (ContainerPreferredAllocationRequest container : request.getContainerRequestsList()) {
      List<String> ids =
          PreferredAllocation.choose(
              container.getAvailableDeviceIDsList(),
              container.getMustIncludeDeviceIDsList(),
              container.getAllocationSize(),
              name -> {
                RdmaDevice d = byName.get(name);
                return d == null ? -1 : d.numaNode();
              });
      out.addContainerResponses(
          ContainerPreferredAllocationResponse.newBuilder().addAllDeviceIDs(ids));
    }
    response.onNext(out.build());
    response.onCompleted();
  }

  @Override
  public void allocate(AllocateRequest request, StreamObserver<AllocateResponse> response) {
    Map<String, RdmaDevice> byName = devicesByName;
    boolean rdmaCm = inventory.rdmaCmPresent();
    AllocateResponse.Builder out = AllocateResponse.newBuilder();
    for (ContainerAllocateRequest container : request.getContainerRequestsList()) {
      TreeSet<String> names = new TreeSet<>();
      List<RdmaDevice> chosen = new ArrayList<>();
      for (String id : container.getDevicesIdsList()) {
        String name = DeviceIds.deviceOf(id).orElse(null);
        RdmaDevice device = name == null ? null : byName.get(name);
        if (device == null || DeviceIds.slotOf(id) >= slotsPerDevice) {
          response.onError(
              Status.INVALID_ARGUMENT
                  .withDescription(
                      "Allocate: unknown device ID '"
                          + id
                          + "': this plugin advertises '<device>-<slot>' with slot 0.."
                          + (slotsPerDevice - 1)
                          + " for devices "
                          + new java.util.TreeSet<>(byName.keySet()))
                  .asRuntimeException());
          return;
        }
        if (!device.usable()) {
          response.onError(
              Status.FAILED_PRECONDITION
                  .withDescription(
                      "Allocate: device ID '"
                          + id
                          + "' belongs to RDMA device "
                          + name
                          + ", which is not usable: "
                          + device.whyUnusable())
                  .asRuntimeException());
          return;
        }
        if (names.add(name)) {
          chosen.add(device);
        }
      }
      ContainerAllocateResponse.Builder c = ContainerAllocateResponse.newBuilder();
      chosen.sort(java.util.Comparator.comparing(RdmaDevice::name));
      for (RdmaDevice device : chosen) {
        c.addDevices(deviceSpec("infiniband/" + device.uverbs().orElseThrow()));
      }
      if (rdmaCm && !chosen.isEmpty()) {
        c.addDevices(deviceSpec("infiniband/rdma_cm"));
      }
      if (!names.isEmpty()) {
        c.putEnvs(ENV_DEVICES, String.join(",", names));
      }
      out.addContainerResponses(c);
    }
    LOG.info(
        "Allocate: {}",
        out.getContainerResponsesList().stream()
            .map(r -> r.getEnvsMap().get(ENV_DEVICES))
            .toList());
    response.onNext(out.build());
    response.onCompleted();
  }

  @Override
  public void preStartContainer(
      PreStartContainerRequest request, StreamObserver<PreStartContainerResponse> response) {
    // Not requested at registration (pre_start_required=false); answer it anyway.
    response.onNext(PreStartContainerResponse.getDefaultInstance());
    response.onCompleted();
  }

  private DeviceSpec deviceSpec(String relative) {
    return DeviceSpec.newBuilder()
        .setContainerPath("/dev/" + relative)
        .setHostPath(hostDevRoot + "/" + relative)
        .setPermissions("rw")
        .build();
  }

  private static Device toDevice(RdmaDevice device, int slot) {
    Device.Builder d =
        Device.newBuilder()
            .setID(DeviceIds.id(device.name(), slot))
            .setHealth(device.usable() ? HEALTHY : UNHEALTHY);
    if (device.numaNode() >= 0) {
      d.setTopology(
          TopologyInfo.newBuilder().addNodes(NUMANode.newBuilder().setID(device.numaNode())));
    }
    return d.build();
  }

  private void logChanges(Map<String, RdmaDevice> byName) {
    for (RdmaDevice device : byName.values()) {
      if (device.usable()) {
        LOG.info(
            "RDMA device {} ({}, NUMA node {}) is Healthy",
            device.name(),
            device.uverbs().orElse("?"),
            device.numaNode());
      } else {
        LOG.warn("RDMA device {} is Unhealthy: {}", device.name(), device.whyUnusable());
      }
    }
    if (byName.isEmpty()) {
      LOG.info("no RDMA devices found; advertising 0 {} slots", "tensorcast.io/rdma");
    }
  }

  private void send(
      ServerCallStreamObserver<ListAndWatchResponse> watcher, ListAndWatchResponse list) {
    if (watcher.isCancelled()) {
      watchers.remove(watcher);
      return;
    }
    try {
      watcher.onNext(list);
    } catch (RuntimeException e) {
      LOG.debug("dropping closed ListAndWatch stream: {}", e.toString());
      watchers.remove(watcher);
    }
  }
}
