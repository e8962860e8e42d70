package io.tensorcast.csi.node;

import io.grpc.Context;
import io.grpc.Deadline;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.tensorcast.csi.DriverConfig;
import io.tensorcast.csi.artifacts.ArtifactSource;
import io.tensorcast.csi.mount.Mounter;
import io.tensorcast.csi.node.CopyLocator.Found;
import io.tensorcast.csi.node.CopyLocator.Lookup;
import io.tensorcast.csi.node.CopyLocator.Refused;
import io.tensorcast.csi.node.CopyLocator.Waiting;
import io.tensorcast.csi.node.PublishRequest.ArtifactVolume;
import io.tensorcast.csi.v1.NodeGetCapabilitiesRequest;
import io.tensorcast.csi.v1.NodeGetCapabilitiesResponse;
import io.tensorcast.csi.v1.NodeGetInfoRequest;
import io.tensorcast.csi.v1.NodeGetInfoResponse;
import io.tensorcast.csi.v1.NodeGrpc;
import io.tensorcast.csi.v1.NodePublishVolumeRequest;
import io.tensorcast.csi.v1.NodePublishVolumeResponse;
import io.tensorcast.csi.v1.NodeUnpublishVolumeRequest;
import io.tensorcast.csi.v1.NodeUnpublishVolumeResponse;
import java.io.IOException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The CSI Node service for inline ephemeral volumes.
 *
 * <p><b>NodePublishVolume</b> checks the call ({@link PublishRequest}), then waits until the
 * artifact's current generation is Ready on this node and complete in its store ({@link
 * CopyLocator}), creates the target directory and bind-mounts the copy's directory there read-only.
 * The wait is bounded by the volume's {@code readyTimeout}, counted from the first call for the
 * volume: a call that reaches it fails with {@code FAILED_PRECONDITION} and a message naming the
 * artifact, the node and the phase (the next call from the kubelet starts a new wait, so the pod
 * starts as soon as the copy is Ready); a call whose gRPC deadline (the kubelet's is 2 minutes)
 * comes first answers {@code UNAVAILABLE} with the same facts and the time left. A call never
 * publishes an empty or incomplete directory. Other refusals: {@code INVALID_ARGUMENT} (bad call or
 * attributes), {@code PERMISSION_DENIED} (another namespace's artifact), {@code NOT_FOUND} (no such
 * artifact), {@code FAILED_PRECONDITION} (Failed or being deleted; target exists and is not a
 * directory), {@code ABORTED} (another call for the same volume is in progress). A target that is
 * already a mount point is published already: the call succeeds.
 *
 * <p><b>NodeUnpublishVolume</b> unmounts the target (every mount stacked on it) and removes the
 * directory; a target that is not mounted or does not exist is fine (idempotent).
 *
 * <p>No capability is reported: there is no staging, no stats, no expansion.
 */
public final class NodeService extends NodeGrpc.NodeImplBase {
  private static final Logger LOG = LoggerFactory.getLogger(NodeService.class);

  /** A waiting call answers this long before its gRPC deadline. */
  static final Duration DEADLINE_MARGIN = Duration.ofSeconds(3);

  /** Longest single sleep while waiting (the store is re-read at least this often). */
  static final Duration RECHECK = Duration.ofSeconds(1);

  /** Bound on remembered wait starts (volumes whose pods went away without an unpublish). */
  static final int MAX_TRACKED_WAITS = 10_000;

  private final DriverConfig config;
  private final ArtifactSource artifacts;
  private final Mounter mounter;
  private final PodEvents events;
  private final Clock clock;
  private final CopyLocator locator;
  private final Map<String, Boolean> inFlight = new ConcurrentHashMap<>();
  private final Map<String, Instant> waitingSince = new ConcurrentHashMap<>();

  public NodeService(
      DriverConfig config,
      ArtifactSource artifacts,
      Mounter mounter,
      PodEvents events,
      Clock clock) {
    this.config = config;
    this.artifacts = artifacts;
    this.mounter = mounter;
    this.events = events;
    this.clock = clock;
    this.locator = new CopyLocator(config.nodeName(), config.storeRoot());
  }

  @Override
  public void nodePublishVolume(
      NodePublishVolumeRequest request, StreamObserver<NodePublishVolumeResponse> response) {
    try {
      publish(request);
      response.onNext(NodePublishVolumeResponse.getDefaultInstance());
      response.onCompleted();
    } catch (CsiException e) {
      LOG.info("NodePublishVolume {} -> {}: {}", request.getVolumeId(), e.code(), e.getMessage());
      response.onError(e.toStatus());
    } catch (RuntimeException e) {
      LOG.error("NodePublishVolume {} failed", request.getVolumeId(), e);
      response.onError(
          Status.INTERNAL.withDescription("driver error: " + e).withCause(e).asRuntimeException());
    }
  }

  @Override
  public void nodeUnpublishVolume(
      NodeUnpublishVolumeRequest request, StreamObserver<NodeUnpublishVolumeResponse> response) {
    try {
      unpublish(request);
      response.onNext(NodeUnpublishVolumeResponse.getDefaultInstance());
      response.onCompleted();
    } catch (CsiException e) {
      LOG.info("NodeUnpublishVolume {} -> {}: {}", request.getVolumeId(), e.code(), e.getMessage());
      response.onError(e.toStatus());
    } catch (RuntimeException e) {
      LOG.error("NodeUnpublishVolume {} failed", request.getVolumeId(), e);
      response.onError(
          Status.INTERNAL.withDescription("driver error: " + e).withCause(e).asRuntimeException());
    }
  }

  @Override
  public void nodeGetCapabilities(
      NodeGetCapabilitiesRequest request, StreamObserver<NodeGetCapabilitiesResponse> response) {
    response.onNext(NodeGetCapabilitiesResponse.getDefaultInstance());
    response.onCompleted();
  }

  @Override
  public void nodeGetInfo(
      NodeGetInfoRequest request, StreamObserver<NodeGetInfoResponse> response) {
    response.onNext(NodeGetInfoResponse.newBuilder().setNodeId(config.nodeName()).build());
    response.onCompleted();
  }

  void publish(NodePublishVolumeRequest call) throws CsiException {
    PublishRequest r = PublishRequest.of(call, config);
    if (inFlight.putIfAbsent(r.volumeId(), Boolean.TRUE) != null) {
      throw new CsiException(
          Status.Code.ABORTED,
          "an operation on volume " + r.volumeId() + " is in progress; try again");
    }
    try {
      Path target = r.targetPath();
      if (isMountPoint(target)) {
        LOG.info("volume {} is already published at {}", r.volumeId(), target);
        waitingSince.remove(r.volumeId());
        return;
      }
      if (Files.exists(target, LinkOption.NOFOLLOW_LINKS)
          && !Files.isDirectory(target, LinkOption.NOFOLLOW_LINKS)) {
        throw new CsiException(
            Status.Code.FAILED_PRECONDITION,
            "target path "
                + target
                + " of pod "
                + r.podNamespace()
                + "/"
                + r.podName()
                + " exists and is not a directory; remove it");
      }
      Found copy = awaitCopy(r);
      PublishRequest.VolumeSource volume = r.source();
      try {
        Files.createDirectories(target);
        mounter.bindReadOnly(copy.directory(), target);
      } catch (IOException e) {
        throw new CsiException(
            Status.Code.INTERNAL,
            "cannot mount "
                + volume.describe()
                + " ("
                + copy.directory()
                + ") at "
                + target
                + ": "
                + e.getMessage());
      }
      // The copy may have gone between the check and the mount (its pod replaced): never leave
      // a mount of a copy that is no longer current and complete.
      Lookup after = lookup(volume);
      if (!(after instanceof Found f) || !f.directory().equals(copy.directory())) {
        unmountQuietly(target);
        throw new CsiException(
            Status.Code.UNAVAILABLE,
            volume.describe()
                + " changed on node "
                + config.nodeName()
                + " while it was being mounted; the kubelet will retry");
      }
      waitingSince.remove(r.volumeId());
      String message =
          "mounted "
              + volume.describe()
              + " generation "
              + copy.generation()
              + " ("
              + copy.artifactId()
              + ") read-only from node "
              + config.nodeName();
      LOG.info("volume {} of pod {}/{}: {}", r.volumeId(), r.podNamespace(), r.podName(), message);
      events.normal(
          r.podNamespace(),
          r.podName(),
          r.podUid(),
          volume instanceof ArtifactVolume ? "ModelArtifactMounted" : "TensorShardSetMounted",
          message);
    } finally {
      inFlight.remove(r.volumeId());
    }
  }

  /** The lookup of either kind of volume, from the source's current view. */
  private Lookup lookup(PublishRequest.VolumeSource volume) {
    if (volume instanceof PublishRequest.ShardRankVolume s) {
      return locator.locate(s, artifacts.getShardSet(s.namespace(), s.name()).orElse(null));
    }
    ArtifactVolume a = (ArtifactVolume) volume;
    return locator.locate(a, artifacts.get(a.namespace(), a.name()).orElse(null));
  }

  private Found awaitCopy(PublishRequest r) throws CsiException {
    PublishRequest.VolumeSource volume = r.source();
    if (waitingSince.size() >= MAX_TRACKED_WAITS) {
      waitingSince.clear();
    }
    Instant since = waitingSince.computeIfAbsent(r.volumeId(), k -> clock.instant());
    Context context = Context.current();
    Context.CancellationListener wake = c -> artifacts.wake();
    context.addListener(wake, Runnable::run);
    try {
      while (true) {
        long seen = artifacts.version();
        Lookup lookup =
            artifacts.synced()
                ? lookup(volume)
                : new Waiting(
                    "the driver on node "
                        + config.nodeName()
                        + " has not listed ModelArtifacts yet (API server unreachable?)");
        if (lookup instanceof Found found) {
          return found;
        }
        if (lookup instanceof Refused refused) {
          waitingSince.remove(r.volumeId());
          throw new CsiException(refused.code(), refused.message());
        }
        String waiting = ((Waiting) lookup).message();
        Duration waited = Duration.between(since, clock.instant());
        if (waited.compareTo(r.readyTimeout()) >= 0) {
          waitingSince.remove(r.volumeId());
          throw new CsiException(
              Status.Code.FAILED_PRECONDITION,
              waiting
                  + "; gave up after "
                  + ReadyTimeouts.format(waited)
                  + " (volumeAttributes.readyTimeout "
                  + ReadyTimeouts.format(r.readyTimeout())
                  + "); the kubelet retries the mount");
        }
        if (context.isCancelled()) {
          throw new CsiException(Status.Code.CANCELLED, "cancelled while waiting: " + waiting);
        }
        Duration step = r.readyTimeout().minus(waited);
        Deadline deadline = context.getDeadline();
        if (deadline != null) {
          Duration beforeDeadline =
              Duration.ofMillis(deadline.timeRemaining(TimeUnit.MILLISECONDS))
                  .minus(DEADLINE_MARGIN);
          if (beforeDeadline.isNegative() || beforeDeadline.isZero()) {
            throw new CsiException(
                Status.Code.UNAVAILABLE,
                waiting
                    + "; still waiting ("
                    + ReadyTimeouts.format(r.readyTimeout().minus(waited))
                    + " of readyTimeout "
                    + ReadyTimeouts.format(r.readyTimeout())
                    + " left)");
          }
          step = min(step, beforeDeadline);
        }
        try {
          artifacts.awaitChange(seen, min(step, RECHECK));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new CsiException(Status.Code.ABORTED, "interrupted while waiting: " + waiting);
        }
      }
    } finally {
      context.removeListener(wake);
    }
  }

  void unpublish(NodeUnpublishVolumeRequest call) throws CsiException {
    if (call.getVolumeId().isEmpty()) {
      throw new CsiException(Status.Code.INVALID_ARGUMENT, "volume_id is required");
    }
    if (call.getTargetPath().isEmpty()) {
      throw new CsiException(Status.Code.INVALID_ARGUMENT, "target_path is required");
    }
    Path target = Path.of(call.getTargetPath());
    Path pods = config.kubeletRoot().resolve("pods");
    if (!target.isAbsolute() || !target.normalize().startsWith(pods)) {
      throw new CsiException(
          Status.Code.INVALID_ARGUMENT,
          "target_path " + target + " is not under the kubelet's pod directory " + pods);
    }
    target = target.normalize();
    if (inFlight.putIfAbsent(call.getVolumeId(), Boolean.TRUE) != null) {
      throw new CsiException(
          Status.Code.ABORTED,
          "an operation on volume " + call.getVolumeId() + " is in progress; try again");
    }
    try {
      waitingSince.remove(call.getVolumeId());
      for (int i = 0; i < 8 && isMountPoint(target); i++) {
        try {
          mounter.unmount(target);
        } catch (IOException e) {
          throw new CsiException(
              Status.Code.INTERNAL, "cannot unmount " + target + ": " + e.getMessage());
        }
      }
      if (isMountPoint(target)) {
        throw new CsiException(
            Status.Code.INTERNAL, target + " is still a mount point after 8 unmounts");
      }
      try {
        Files.deleteIfExists(target);
      } catch (DirectoryNotEmptyException e) {
        throw new CsiException(
            Status.Code.FAILED_PRECONDITION,
            "target path " + target + " is not empty after unmounting; not removing it");
      } catch (IOException e) {
        throw new CsiException(
            Status.Code.INTERNAL, "cannot remove " + target + ": " + e.getMessage());
      }
      LOG.info("volume {} unpublished from {}", call.getVolumeId(), target);
    } finally {
      inFlight.remove(call.getVolumeId());
    }
  }

  private boolean isMountPoint(Path target) throws CsiException {
    try {
      return mounter.isMountPoint(target);
    } catch (IOException e) {
      throw new CsiException(
          Status.Code.INTERNAL, "cannot read the mount table: " + e.getMessage());
    }
  }

  private void unmountQuietly(Path target) {
    try {
      mounter.unmount(target);
      Files.deleteIfExists(target);
    } catch (IOException e) {
      LOG.warn("cannot undo the mount at {}: {}", target, e.getMessage());
    }
  }

  private static Duration min(Duration a, Duration b) {
    return a.compareTo(b) <= 0 ? a : b;
  }
}
