package io.tensorcast.e2e.cluster;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.MoreExecutors;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.storage.CSIDriver;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.unix.DomainSocketAddress;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.tensorcast.csi.v1.NodeGrpc;
import io.tensorcast.csi.v1.NodePublishVolumeRequest;
import io.tensorcast.csi.v1.NodeUnpublishVolumeRequest;
import io.tensorcast.csi.v1.VolumeCapability;
import io.tensorcast.e2e.cluster.PodVolumes.CsiVolume;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The CSI side of the simulated kubelet: which node driver serves which driver name on which node
 * (the registration a node-driver-registrar makes; here {@link SimulatedNode#registerCsiDriver}),
 * and the calls a kubelet makes for inline ephemeral volumes, on the driver's real unix socket:
 *
 * <ul>
 *   <li>Before the call, as the kubelet does: the driver must be registered on the node ({@code
 *       driver name X not found in the list of registered CSI drivers}); its CSIDriver object must
 *       exist and allow {@code Ephemeral} volumes ({@code volume mode "Ephemeral" not supported by
 *       driver X}).
 *   <li>{@code NodePublishVolume}: volume id {@code csi-<sha256(podUID + volume name)>}, the target
 *       path under the node's kubelet root, a mount capability with {@code SINGLE_NODE_WRITER},
 *       {@code readonly} from the volume, the volume attributes plus, when the CSIDriver has {@code
 *       podInfoOnMount: true}, {@code csi.storage.k8s.io/pod.name|pod.namespace|pod.uid|
 *       serviceAccount.name} and {@code csi.storage.k8s.io/ephemeral: "true"}; deadline 2 minutes
 *       (the kubelet's).
 *   <li>{@code NodeUnpublishVolume} with the same id and target when the pod goes away.
 * </ul>
 *
 * Failures come back as the kubelet words them: {@code MountVolume.SetUp failed for volume "model"
 * : rpc error: code = NotFound desc = ...}.
 */
final class CsiPlugins implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(CsiPlugins.class);

  /** The kubelet's deadline for CSI calls. */
  static final long CALL_TIMEOUT_SECONDS = 120;

  private final KubernetesClient client;
  private final Map<String, Map<String, Path>> sockets = new ConcurrentHashMap<>();
  private final Map<Path, ManagedChannel> channels = new ConcurrentHashMap<>();
  private volatile EventLoopGroup group;

  CsiPlugins(KubernetesClient client) {
    this.client = client;
  }

  void register(String node, String driver, Path socket) {
    sockets.computeIfAbsent(node, n -> new ConcurrentHashMap<>()).put(driver, socket);
  }

  void unregister(String node, String driver) {
    Map<String, Path> m = sockets.get(node);
    if (m != null) {
      m.remove(driver);
    }
  }

  /**
   * Starts {@code NodePublishVolume} for one volume of {@code pod} on {@code node}.
   *
   * @return completes normally when the volume is mounted, exceptionally with a {@link
   *     MountFailure}; cancelling it cancels the call
   */
  Future<?> publish(
      String node, Pod pod, CsiVolume volume, java.util.function.Consumer<Throwable> done) {
    NodePublishVolumeRequest request;
    NodeGrpc.NodeFutureStub stub;
    try {
      stub = stub(node, volume);
      CSIDriver driver = client.storage().v1().csiDrivers().withName(volume.driver()).get();
      java.util.List<String> modes =
          driver == null || driver.getSpec().getVolumeLifecycleModes() == null
              ? java.util.List.of("Persistent")
              : driver.getSpec().getVolumeLifecycleModes();
      if (!modes.contains("Ephemeral")) {
        throw new MountFailure(
            volume,
            "volume mode \"Ephemeral\" not supported by driver "
                + volume.driver()
                + (driver == null ? " (no CSIDriver object)" : " (modes " + modes + ")"));
      }
      Map<String, String> context = new LinkedHashMap<>(volume.attributes());
      if (driver != null && Boolean.TRUE.equals(driver.getSpec().getPodInfoOnMount())) {
        context.put("csi.storage.k8s.io/pod.name", pod.getMetadata().getName());
        context.put("csi.storage.k8s.io/pod.namespace", pod.getMetadata().getNamespace());
        context.put("csi.storage.k8s.io/pod.uid", pod.getMetadata().getUid());
        String sa = pod.getSpec().getServiceAccountName();
        context.put("csi.storage.k8s.io/serviceAccount.name", sa == null ? "default" : sa);
        context.put("csi.storage.k8s.io/ephemeral", "true");
      }
      request =
          NodePublishVolumeRequest.newBuilder()
              .setVolumeId(volume.volumeId())
              .setTargetPath(volume.target().toString())
              .setReadonly(volume.readOnly())
              .setVolumeCapability(
                  VolumeCapability.newBuilder()
                      .setMount(VolumeCapability.MountVolume.getDefaultInstance())
                      .setAccessMode(
                          VolumeCapability.AccessMode.newBuilder()
                              .setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER)))
              .putAllVolumeContext(context)
              .build();
    } catch (MountFailure e) {
      done.accept(e);
      return CompletableFuture.completedFuture(null);
    } catch (RuntimeException e) {
      done.accept(new MountFailure(volume, e.toString()));
      return CompletableFuture.completedFuture(null);
    }
    ListenableFuture<?> call =
        stub.withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS).nodePublishVolume(request);
    Futures.addCallback(
        call,
        new FutureCallback<Object>() {
          @Override
          public void onSuccess(Object result) {
            done.accept(null);
          }

          @Override
          public void onFailure(Throwable t) {
            done.accept(new MountFailure(volume, rpcError(t)));
          }
        },
        MoreExecutors.directExecutor());
    return call;
  }

  /**
   * {@code NodeUnpublishVolume} for one volume; completes when the driver answered (a failure is
   * logged: the kubelet would retry, the harness sweeps mounts at close).
   */
  CompletableFuture<Void> unpublish(String node, CsiVolume volume) {
    CompletableFuture<Void> out = new CompletableFuture<>();
    unpublish(node, volume, out, 0);
    return out;
  }

  /** Tries again on ABORTED (a publish of the volume being cancelled), up to 20 times. */
  private void unpublish(String node, CsiVolume volume, CompletableFuture<Void> out, int attempt) {
    NodeGrpc.NodeFutureStub stub;
    try {
      stub = stub(node, volume);
    } catch (MountFailure e) {
      LOG.warn("cannot unpublish {}: {}", volume.target(), e.getMessage());
      out.complete(null);
      return;
    }
    ListenableFuture<?> call =
        stub.withDeadlineAfter(30, TimeUnit.SECONDS)
            .nodeUnpublishVolume(
                NodeUnpublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.volumeId())
                    .setTargetPath(volume.target().toString())
                    .build());
    Futures.addCallback(
        call,
        new FutureCallback<Object>() {
          @Override
          public void onSuccess(Object result) {
            out.complete(null);
          }

          @Override
          public void onFailure(Throwable t) {
            if (Status.fromThrowable(t).getCode() == Status.Code.ABORTED && attempt < 20) {
              CompletableFuture.delayedExecutor(250, TimeUnit.MILLISECONDS)
                  .execute(() -> unpublish(node, volume, out, attempt + 1));
              return;
            }
            LOG.warn("NodeUnpublishVolume of {} failed: {}", volume.target(), rpcError(t));
            out.complete(null);
          }
        },
        MoreExecutors.directExecutor());
  }

  private NodeGrpc.NodeFutureStub stub(String node, CsiVolume volume) throws MountFailure {
    Path socket = sockets.getOrDefault(node, Map.of()).get(volume.driver());
    if (socket == null) {
      throw new MountFailure(
          volume,
          "kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name "
              + volume.driver()
              + " not found in the list of registered CSI drivers");
    }
    return NodeGrpc.newFutureStub(channels.computeIfAbsent(socket, this::channel));
  }

  private ManagedChannel channel(Path socket) {
    synchronized (this) {
      if (group == null) {
        group = new EpollEventLoopGroup(1, new DefaultThreadFactory("kubelet-csi", true));
      }
    }
    return NettyChannelBuilder.forAddress(new DomainSocketAddress(socket.toString()))
        .channelType(EpollDomainSocketChannel.class)
        .eventLoopGroup(group)
        .overrideAuthority("localhost")
        .usePlaintext()
        .build();
  }

  /** {@code rpc error: code = NotFound desc = ...}, as grpc-go prints a status. */
  static String rpcError(Throwable t) {
    if (t instanceof StatusRuntimeException e) {
      Status s = e.getStatus();
      return "rpc error: code = "
          + camel(s.getCode().name())
          + " desc = "
          + (s.getDescription() == null ? "" : s.getDescription());
    }
    return t.toString();
  }

  private static String camel(String upper) {
    StringBuilder b = new StringBuilder();
    for (String part : upper.split("_")) {
      b.append(part.charAt(0)).append(part.substring(1).toLowerCase(Locale.ROOT));
    }
    return b.toString();
  }

  @Override
  public void close() {
    channels.values().forEach(ManagedChannel::shutdownNow);
    channels.clear();
    if (group != null) {
      group.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    }
  }

  /** A failed mount, worded as the kubelet's {@code FailedMount} event. */
  static final class MountFailure extends Exception {
    private static final long serialVersionUID = 1L;

    MountFailure(CsiVolume volume, String detail) {
      super("MountVolume.SetUp failed for volume \"" + volume.name() + "\" : " + detail);
    }
  }
}
