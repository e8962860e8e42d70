package io.tensorcast.csi.identity;

import com.google.protobuf.BoolValue;
import io.grpc.stub.StreamObserver;
import io.tensorcast.api.ConsumerVolumes;
import io.tensorcast.csi.v1.GetPluginCapabilitiesRequest;
import io.tensorcast.csi.v1.GetPluginCapabilitiesResponse;
import io.tensorcast.csi.v1.GetPluginInfoRequest;
import io.tensorcast.csi.v1.GetPluginInfoResponse;
import io.tensorcast.csi.v1.IdentityGrpc;
import io.tensorcast.csi.v1.ProbeRequest;
import io.tensorcast.csi.v1.ProbeResponse;
import java.util.function.BooleanSupplier;

/**
 * The CSI Identity service: name {@value ConsumerVolumes#DRIVER}, no plugin capability (a node-only
 * driver: no Controller service, no topology), and {@code Probe} ready once the driver has listed
 * the ModelArtifacts.
 */
public final class IdentityService extends IdentityGrpc.IdentityImplBase {

  private final String version;
  private final BooleanSupplier ready;

  public IdentityService(String version, BooleanSupplier ready) {
    this.version = version;
    this.ready = ready;
  }

  @Override
  public void getPluginInfo(
      GetPluginInfoRequest request, StreamObserver<GetPluginInfoResponse> response) {
    response.onNext(
        GetPluginInfoResponse.newBuilder()
            .setName(ConsumerVolumes.DRIVER)
            .setVendorVersion(version)
            .build());
    response.onCompleted();
  }

  @Override
  public void getPluginCapabilities(
      GetPluginCapabilitiesRequest request,
      StreamObserver<GetPluginCapabilitiesResponse> response) {
    response.onNext(GetPluginCapabilitiesResponse.getDefaultInstance());
    response.onCompleted();
  }

  @Override
  public void probe(ProbeRequest request, StreamObserver<ProbeResponse> response) {
    response.onNext(
        ProbeResponse.newBuilder()
            .setReady(BoolValue.newBuilder().setValue(ready.getAsBoolean()))
            .build());
    response.onCompleted();
  }
}
