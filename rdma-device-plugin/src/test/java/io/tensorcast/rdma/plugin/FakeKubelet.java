package io.tensorcast.rdma.plugin;

import io.grpc.Context;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.tensorcast.rdma.deviceplugin.v1beta1.DevicePluginGrpc;
import io.tensorcast.rdma.deviceplugin.v1beta1.Empty;
import io.tensorcast.rdma.deviceplugin.v1beta1.ListAndWatchResponse;
import io.tensorcast.rdma.deviceplugin.v1beta1.RegisterRequest;
import io.tensorcast.rdma.deviceplugin.v1beta1.RegistrationGrpc;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A test double of the kubelet's device manager on a real unix socket: serves {@code
 * v1beta1.Registration} on {@code <pluginDir>/kubelet.sock}, records every {@link RegisterRequest},
 * and, like the kubelet, then dials the plugin's endpoint and keeps a {@code ListAndWatch} stream
 * open, recording every device list it receives.
 */
final class FakeKubelet implements AutoCloseable {

  private final UnixSockets sockets;
  private final Path pluginDir;
  private final Server server;
  private final List<RegisterRequest> registrations = new CopyOnWriteArrayList<>();
  private final List<ListAndWatchResponse> lists = new CopyOnWriteArrayList<>();
  private final List<ManagedChannel> channels = new CopyOnWriteArrayList<>();
  private volatile Status reject;
  private volatile boolean streamEnded;
  private volatile Throwable lastError;

  FakeKubelet(UnixSockets sockets, Path pluginDir) throws IOException {
    this.sockets = sockets;
    this.pluginDir = pluginDir;
    this.server = sockets.startServer(pluginDir.resolve("kubelet.sock"), new Registration());
  }

  /** Answer every following Register with this error (null: accept). */
  void reject(Status status) {
    this.reject = status;
  }

  List<RegisterRequest> registrations() {
    return registrations;
  }

  List<ListAndWatchResponse> lists() {
    return lists;
  }

  /** The last device list received, or null. */
  ListAndWatchResponse latest() {
    return lists.isEmpty() ? null : lists.get(lists.size() - 1);
  }

  /** The error that ended the last ListAndWatch stream, or null. */
  Throwable lastError() {
    return lastError;
  }

  /** Whether the plugin ended the last ListAndWatch stream. */
  boolean streamEnded() {
    return streamEnded;
  }

  @Override
  public void close() {
    UnixSockets.stop(server);
    channels.forEach(UnixSockets::stop);
  }

  private final class Registration extends RegistrationGrpc.RegistrationImplBase {
    @Override
    public void register(RegisterRequest request, StreamObserver<Empty> response) {
      registrations.add(request);
      Status r = reject;
      if (r != null) {
        response.onError(r.asRuntimeException());
        return;
      }
      response.onNext(Empty.getDefaultInstance());
      response.onCompleted();
      ManagedChannel channel = sockets.channel(pluginDir.resolve(request.getEndpoint()));
      channels.add(channel);
      streamEnded = false;
      // Outside the Register call's context, which is cancelled when that call completes.
      Context.ROOT.run(() -> watch(channel));
    }

    private void watch(ManagedChannel channel) {
      DevicePluginGrpc.newStub(channel)
          .listAndWatch(
              Empty.getDefaultInstance(),
              new StreamObserver<>() {
                @Override
                public void onNext(ListAndWatchResponse value) {
                  lists.add(value);
                }

                @Override
                public void onError(Throwable t) {
                  lastError = t;
                  streamEnded = true;
                }

                @Override
                public void onCompleted() {
                  streamEnded = true;
                }
              });
    }
  }
}
