package io.tensorcast.csi.node;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.unix.DomainSocketAddress;
import io.tensorcast.api.ConsumerVolumes;
import io.tensorcast.api.StoreLayout;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.csi.Artifacts;
import io.tensorcast.csi.CsiDriver;
import io.tensorcast.csi.DriverConfig;
import io.tensorcast.csi.StaticArtifactSource;
import io.tensorcast.csi.mount.LinuxMounter;
import io.tensorcast.csi.v1.GetPluginInfoRequest;
import io.tensorcast.csi.v1.IdentityGrpc;
import io.tensorcast.csi.v1.NodeGetCapabilitiesRequest;
import io.tensorcast.csi.v1.NodeGetInfoRequest;
import io.tensorcast.csi.v1.NodeGrpc;
import io.tensorcast.csi.v1.NodePublishVolumeRequest;
import io.tensorcast.csi.v1.NodeUnpublishVolumeRequest;
import io.tensorcast.csi.v1.ProbeRequest;
import io.tensorcast.csi.v1.VolumeCapability;
import io.tensorcast.dataplane.store.LockPolicy;
import io.tensorcast.dataplane.store.PinnedStore;
import io.tensorcast.dataplane.store.StoreFile;
import io.tensorcast.dataplane.store.StoredArtifact;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The driver on its real unix socket, called as the kubelet calls it, mounting for real (bind mount
 * + read-only remount: the test runs as root) copies that the data plane's own {@link PinnedStore}
 * wrote into a store on {@code /dev/shm}.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NodeServiceIT {
  static final String NODE = "n1";
  static final String NS = "team-a";
  static final String NAME = "llama";

  private Path root;
  private Path storeRoot;
  private Path kubeletRoot;
  private PinnedStore store;
  private final StaticArtifactSource artifacts = new StaticArtifactSource();
  private final List<String> events = Collections.synchronizedList(new ArrayList<>());
  private CsiDriver driver;
  private EventLoopGroup group;
  private ManagedChannel channel;
  private NodeGrpc.NodeBlockingStub node;
  private final List<Path> targets = new ArrayList<>();
  private final Map<String, byte[]> files = new LinkedHashMap<>();

  @BeforeEach
  void setUp() throws Exception {
    assertThat(new com.sun.security.auth.module.UnixSystem().getUid())
        .as("NodeServiceIT mounts for real and must run as root")
        .isZero();
    root = Files.createTempDirectory(Path.of("/dev/shm"), "csi-it-");
    storeRoot = root.resolve("store");
    kubeletRoot = root.resolve("kubelet");
    Files.createDirectories(kubeletRoot.resolve("pods"));
    store =
        new PinnedStore(
            storeRoot.resolve(StoreLayout.artifactDirectory(NS, NAME)),
            64L << 20,
            LockPolicy.DISABLED);
    Random random = new Random(7);
    byte[] weights = new byte[300_000];
    random.nextBytes(weights);
    files.put("config.json", "{\"model_type\":\"llama\"}".getBytes());
    files.put("model.safetensors", weights);
    Path socket = Files.createTempDirectory(Path.of("/tmp"), "csi").resolve("csi.sock");
    driver =
        CsiDriver.start(
            socket,
            new DriverConfig(
                NODE, storeRoot, kubeletRoot, Duration.ofSeconds(20), Duration.ofMinutes(10)),
            artifacts,
            new LinuxMounter(),
            (ns, name, uid, reason, message) -> events.add(reason + ": " + message));
    group = new EpollEventLoopGroup(1);
    channel =
        NettyChannelBuilder.forAddress(new DomainSocketAddress(socket.toString()))
            .channelType(EpollDomainSocketChannel.class)
            .eventLoopGroup(group)
            .usePlaintext()
            .build();
    node = NodeGrpc.newBlockingStub(channel);
  }

  @AfterEach
  void tearDown() throws Exception {
    LinuxMounter mounter = new LinuxMounter();
    for (Path t : targets) {
      while (mounter.isMountPoint(t)) {
        mounter.unmount(t);
      }
    }
    channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    group.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    driver.close();
    store.close();
    Files.deleteIfExists(driver.socket());
    Files.deleteIfExists(driver.socket().getParent());
    TestFiles.deleteTree(root);
  }

  // ----------------------------------------------------------------------------------- cases

  @Test
  void publishesTheReadyCopyReadOnlyIdempotentlyAndUnpublishRemovesIt() throws Exception {
    load(1);
    artifacts.put(ready(1));
    Path target = target("pod-1");

    node.nodePublishVolume(publish("vol-1", target, attrs(NAME)));

    assertThat(new LinuxMounter().isMountPoint(target)).isTrue();
    for (var e : files.entrySet()) {
      assertThat(Files.readAllBytes(target.resolve(e.getKey()))).isEqualTo(e.getValue());
    }
    try (var list = Files.list(target)) {
      assertThat(list.map(p -> p.getFileName().toString()))
          .containsExactlyInAnyOrder("config.json", "model.safetensors");
    }
    assertThatThrownBy(() -> Files.writeString(target.resolve("config.json"), "{}"))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("Read-only file system");
    assertThatThrownBy(() -> Files.createFile(target.resolve("new")))
        .isInstanceOf(IOException.class);
    assertThat(events)
        .singleElement()
        .asString()
        .contains(
            "ModelArtifactMounted", "ModelArtifact team-a/llama generation 1", "team-a-llama-g1");

    node.nodePublishVolume(publish("vol-1", target, attrs(NAME))); // published already: fine
    assertThat(mountCount(target)).isEqualTo(1);

    node.nodeUnpublishVolume(unpublish("vol-1", target));
    assertThat(new LinuxMounter().isMountPoint(target)).isFalse();
    assertThat(target).doesNotExist();
    assertThat(storeRoot.resolve("team-a.llama/team-a-llama-g1/model.safetensors"))
        .hasBinaryContent(files.get("model.safetensors"));
    node.nodeUnpublishVolume(unpublish("vol-1", target)); // gone already: fine
  }

  @Test
  void publishesTheLayoutDirectoryOfATensorShardSetRankReadyOnThisNode() throws Exception {
    String set = "llama-tp2";
    String id = StoreLayout.artifactId(NS, set, 1);
    Path setRoot = storeRoot.resolve(StoreLayout.shardSetDirectory(NS, set));
    byte[] manifest = "{\"tp_size\":2}".getBytes();
    byte[] rank = new byte[4096];
    new Random(3).nextBytes(rank);
    try (PinnedStore shards = new PinnedStore(setRoot, 16L << 20, LockPolicy.DISABLED)) {
      StoredArtifact a =
          shards.allocate(
              id,
              List.of(
                  new io.tensorcast.dataplane.store.StoreFile("manifest.json", manifest.length),
                  new io.tensorcast.dataplane.store.StoreFile(
                      "rank_00001.safetensors", rank.length)));
      a.write("manifest.json", 0, java.nio.ByteBuffer.wrap(manifest));
      a.write("rank_00001.safetensors", 0, java.nio.ByteBuffer.wrap(rank));
      a.markComplete("manifest.json");
      a.markComplete("rank_00001.safetensors");
      io.tensorcast.api.v1alpha1.TensorShardSet tss =
          new io.tensorcast.api.v1alpha1.TensorShardSet();
      tss.getMetadata().setName(set);
      tss.getMetadata().setNamespace(NS);
      tss.getMetadata().setGeneration(1L);
      io.tensorcast.api.v1alpha1.TensorShardSetStatus st =
          new io.tensorcast.api.v1alpha1.TensorShardSetStatus();
      st.setObservedGeneration(1L);
      st.setPhase(ArtifactPhase.Loading);
      st.setWorldSize(2);
      io.tensorcast.api.v1alpha1.ShardRankStatus r1 =
          new io.tensorcast.api.v1alpha1.ShardRankStatus();
      r1.setRank(1);
      r1.setNode(NODE);
      r1.setPhase(ArtifactPhase.Ready);
      r1.setFile(setRoot.resolve(id).resolve("rank_00001.safetensors").toString());
      io.tensorcast.api.v1alpha1.ShardRankStatus r0 =
          new io.tensorcast.api.v1alpha1.ShardRankStatus();
      r0.setRank(0);
      r0.setNode("n2");
      r0.setPhase(ArtifactPhase.Loading);
      st.setRanks(List.of(r0, r1));
      tss.setStatus(st);
      artifacts.putShardSet(tss);

      Map<String, String> attrs = attrs(NAME);
      attrs.remove("modelArtifact");
      attrs.put("tensorShardSet", set);
      attrs.put("rank", "1");
      attrs.put("readyTimeout", "1s");
      Path target = target("pod-rank");
      node.nodePublishVolume(publish("vol-r", target, attrs));
      assertThat(Files.readAllBytes(target.resolve("rank_00001.safetensors"))).isEqualTo(rank);
      assertThat(Files.readAllBytes(target.resolve("manifest.json"))).isEqualTo(manifest);
      node.nodeUnpublishVolume(unpublish("vol-r", target));

      attrs.put("rank", "0");
      expect(attrs, Status.Code.FAILED_PRECONDITION, "rank 0 is not placed on node n1");
      attrs.put("rank", "5");
      expect(attrs, Status.Code.INVALID_ARGUMENT, "the set has 2 ranks");
      shards.unload(id);
    }
  }

  @Test
  void waitsUntilTheCopyIsReadyOnThisNodeAndCompleteInTheStoreThenMounts() throws Exception {
    StoredArtifact loading = allocate(1);
    artifacts.put(artifact(1, ArtifactPhase.Loading, ArtifactPhase.Loading));
    Path target = target("pod-2");
    AtomicBoolean released = new AtomicBoolean();

    CompletableFuture<Void> call =
        CompletableFuture.runAsync(
            () -> node.nodePublishVolume(publish("vol-2", target, attrs(NAME))));
    await()
        .during(Duration.ofMillis(1500))
        .atMost(Duration.ofSeconds(3))
        .until(() -> !call.isDone());

    // Status says Ready before the bytes are complete in this node's store: still waiting.
    artifacts.put(ready(1));
    await()
        .during(Duration.ofMillis(1500))
        .atMost(Duration.ofSeconds(3))
        .until(() -> !call.isDone());
    assertThat(target).doesNotExist();

    write(loading);
    released.set(true);
    call.get(10, TimeUnit.SECONDS);
    assertThat(released).isTrue();
    assertThat(Files.readAllBytes(target.resolve("model.safetensors")))
        .isEqualTo(files.get("model.safetensors"));
  }

  @Test
  void aWaitThatReachesReadyTimeoutNamesTheArtifactTheNodeAndThePhase() {
    artifacts.put(artifact(1, ArtifactPhase.Loading, ArtifactPhase.Loading));
    Map<String, String> attrs = attrs(NAME);
    attrs.put("readyTimeout", "1s");

    assertThatThrownBy(() -> node.nodePublishVolume(publish("vol-3", target("pod-3"), attrs)))
        .satisfies(
            e ->
                assertStatus(
                    e,
                    Status.Code.FAILED_PRECONDITION,
                    "ModelArtifact team-a/llama is not Ready on node n1: node phase Loading, 400 of"
                        + " 1000 bytes loaded (artifact phase Loading)",
                    "gave up after 1",
                    "readyTimeout 1s"));
    assertThat(target("pod-3")).doesNotExist();
  }

  @Test
  void aCallWhoseDeadlineComesFirstAnswersUnavailableWithWhatItWaitsFor() {
    artifacts.put(artifact(1, ArtifactPhase.Loading, ArtifactPhase.Loading));
    assertThatThrownBy(
            () ->
                node.withDeadlineAfter(5, TimeUnit.SECONDS)
                    .nodePublishVolume(publish("vol-4", target("pod-4"), attrs(NAME))))
        .satisfies(
            e ->
                assertStatus(
                    e,
                    Status.Code.UNAVAILABLE,
                    "is not Ready on node n1",
                    "still waiting",
                    "of readyTimeout 20s left"));
  }

  @Test
  void neverMountsAnOlderGenerationsCopy() {
    load(1);
    ModelArtifact g2 = ready(1);
    g2.getMetadata().setGeneration(2L); // spec changed; the operator has not reported yet
    artifacts.put(g2);
    Map<String, String> attrs = attrs(NAME);
    attrs.put("readyTimeout", "0s");
    assertThatThrownBy(() -> node.nodePublishVolume(publish("vol-5", target("pod-5"), attrs)))
        .satisfies(
            e ->
                assertStatus(
                    e,
                    Status.Code.FAILED_PRECONDITION,
                    "generation 2 is not Ready on node n1: the operator has not reported on this"
                        + " generation yet"));

    artifacts.put(ready(2)); // reported Ready for generation 2, but this store holds only g1
    assertThatThrownBy(() -> node.nodePublishVolume(publish("vol-5", target("pod-5"), attrs)))
        .satisfies(
            e ->
                assertStatus(
                    e,
                    Status.Code.FAILED_PRECONDITION,
                    "reported Ready on node n1 but this node's store does not hold the complete"
                        + " copy yet",
                    "team-a-llama-g2"));
  }

  /**
   * The resolving pod of a small artifact can finish its load before the operator replaces it (it
   * asked for the overhead only): its {@code status.nodes[]} entry says Ready while the pod is
   * deleted, and its copy with it. The operator leaves such a pod out of {@code status.readyNodes};
   * a mount of it would be emptied under the consumer.
   */
  @Test
  void neverMountsTheCopyOfAPodBeingReplaced() throws Exception {
    load(1);
    ModelArtifact replacing = artifact(1, ArtifactPhase.Loading, ArtifactPhase.Ready);
    replacing.getStatus().setReadyNodes(List.of());
    artifacts.put(replacing);
    Map<String, String> attrs = attrs(NAME);
    attrs.put("readyTimeout", "0s");
    Path target = target("pod-replaced");
    assertThatThrownBy(() -> node.nodePublishVolume(publish("vol-r", target, attrs)))
        .satisfies(
            e ->
                assertStatus(
                    e,
                    Status.Code.FAILED_PRECONDITION,
                    "ModelArtifact team-a/llama is not Ready on node n1: the copy of pod llama-n1"
                        + " there is being replaced (the node is not in status.readyNodes;"
                        + " artifact phase Loading)"));
    assertThat(target).doesNotExist();

    artifacts.put(ready(1)); // the replacement pod reported Ready
    node.nodePublishVolume(publish("vol-r", target, attrs));
    assertThat(Files.readAllBytes(target.resolve("model.safetensors")))
        .isEqualTo(files.get("model.safetensors"));
    node.nodeUnpublishVolume(unpublish("vol-r", target));
  }

  /**
   * A generation that changed only the replicas keeps its copy generation ({@code
   * status.copyGeneration}): the copy loaded for generation 1 is what generation 3 mounts.
   */
  @Test
  void mountsTheCopyOfTheCopyGenerationAfterAScale() throws Exception {
    load(1);
    ModelArtifact scaled = ready(3);
    scaled.getStatus().setCopyGeneration(1L);
    artifacts.put(scaled);
    Path target = target("pod-scaled");

    node.nodePublishVolume(publish("vol-scaled", target, attrs(NAME)));

    assertThat(Files.readAllBytes(target.resolve("model.safetensors")))
        .isEqualTo(files.get("model.safetensors"));
    assertThat(events).last().asString().contains("team-a-llama-g1");
    node.nodeUnpublishVolume(unpublish("vol-scaled", target));
  }

  @Test
  void badInputGetsACodeAndAMessageAPersonCanActOn() throws Exception {
    load(1);
    artifacts.put(ready(1));
    ModelArtifact failed = Artifacts.artifact(NS, "broken", 1, ArtifactPhase.Failed, Map.of());
    artifacts.put(failed);
    ModelArtifact deleting = ready(1);
    deleting.getMetadata().setName("going");
    deleting.getMetadata().setDeletionTimestamp("2026-12-01T10:00:00Z");
    artifacts.put(deleting);
    ModelArtifact elsewhere =
        Artifacts.artifact(
            NS, "elsewhere", 1, ArtifactPhase.Ready, Map.of("n2", ArtifactPhase.Ready));
    artifacts.put(elsewhere);

    expect(attrs("nope"), Status.Code.NOT_FOUND, "ModelArtifact team-a/nope not found");
    expect(
        attrs("broken"),
        Status.Code.FAILED_PRECONDITION,
        "ModelArtifact team-a/broken generation 1 failed (BucketNotFound: node n1 (pod m-1): bucket"
            + " 'weights' does not exist)");
    expect(
        attrs("going"),
        Status.Code.FAILED_PRECONDITION,
        "ModelArtifact team-a/going is being deleted");
    Map<String, String> noWait = attrs("elsewhere");
    noWait.put("readyTimeout", "0s");
    expect(
        noWait,
        Status.Code.FAILED_PRECONDITION,
        "ModelArtifact team-a/elsewhere has no copy on node n1 (phase Ready; Ready on nodes n2)",
        "modelartifact.tensorcast.io/team-a.elsewhere");
    expect(
        attrs("team-b/llama"),
        Status.Code.PERMISSION_DENIED,
        "pod team-a/pod may not use ModelArtifact team-b/llama: a pod can mount only"
            + " ModelArtifacts of its own namespace (team-a)");
    Map<String, String> nsAttr = attrs(NAME);
    nsAttr.put("namespace", "team-b");
    expect(nsAttr, Status.Code.PERMISSION_DENIED, "may not use ModelArtifact team-b/llama");
    Map<String, String> missing = attrs(NAME);
    missing.remove("modelArtifact");
    expect(missing, Status.Code.INVALID_ARGUMENT, "volumeAttributes.modelArtifact is required");
    Map<String, String> noPodInfo = attrs(NAME);
    noPodInfo.remove("csi.storage.k8s.io/pod.namespace");
    expect(
        noPodInfo,
        Status.Code.INVALID_ARGUMENT,
        "csi.storage.k8s.io/pod.namespace is missing from the volume context",
        "podInfoOnMount: true");
    Map<String, String> persistent = attrs(NAME);
    persistent.remove("csi.storage.k8s.io/ephemeral");
    expect(persistent, Status.Code.INVALID_ARGUMENT, "is not an inline ephemeral volume");
    Map<String, String> typo = attrs(NAME);
    typo.put("modelArtefact", NAME);
    expect(
        typo,
        Status.Code.INVALID_ARGUMENT,
        "unknown volumeAttributes [modelArtefact]; allowed: modelArtifact, tensorShardSet, rank,"
            + " namespace, readyTimeout");
    Map<String, String> badTimeout = attrs(NAME);
    badTimeout.put("readyTimeout", "2 hours");
    expect(
        badTimeout,
        Status.Code.INVALID_ARGUMENT,
        "volumeAttributes.readyTimeout '2 hours' is not a duration between 0s and 10m0s");
    Map<String, String> shards = attrs(NAME);
    shards.put("tensorShardSet", "llama-tp8");
    expect(shards, Status.Code.INVALID_ARGUMENT, "name both modelArtifact and tensorShardSet");
    Map<String, String> noRank = attrs(NAME);
    noRank.remove("modelArtifact");
    noRank.put("tensorShardSet", "llama-tp8");
    expect(noRank, Status.Code.INVALID_ARGUMENT, "needs both volumeAttributes.tensorShardSet");
    noRank.put("rank", "-1");
    expect(noRank, Status.Code.INVALID_ARGUMENT, "volumeAttributes.rank '-1' is not a rank");
    expect(attrs("Not_A_Name"), Status.Code.INVALID_ARGUMENT, "is not a valid object name");

    Path file = target("pod-file");
    Files.createDirectories(file.getParent());
    Files.writeString(file, "x");
    assertThatThrownBy(() -> node.nodePublishVolume(publish("vol-f", file, attrs(NAME))))
        .satisfies(
            e ->
                assertStatus(
                    e,
                    Status.Code.FAILED_PRECONDITION,
                    "exists and is not a directory; remove it"));
    assertThat(file).hasContent("x");

    assertThatThrownBy(
            () ->
                node.nodePublishVolume(
                    publish("vol-o", root.resolve("elsewhere/mount"), attrs(NAME))))
        .satisfies(
            e ->
                assertStatus(
                    e, Status.Code.INVALID_ARGUMENT, "is not under the kubelet's pod directory"));
    assertThatThrownBy(
            () ->
                node.nodePublishVolume(
                    publish("vol-b", target("pod-b"), attrs(NAME)).toBuilder()
                        .setVolumeCapability(
                            VolumeCapability.newBuilder()
                                .setBlock(VolumeCapability.BlockVolume.getDefaultInstance()))
                        .build()))
        .satisfies(e -> assertStatus(e, Status.Code.INVALID_ARGUMENT, "raw block volume"));
    assertThat(events).isEmpty();
  }

  @Test
  void identityAndNodeInfoAnswerAsTheKubeletAndRegistrarExpect() {
    var identity = IdentityGrpc.newBlockingStub(channel);
    var info = identity.getPluginInfo(GetPluginInfoRequest.getDefaultInstance());
    assertThat(info.getName()).isEqualTo(ConsumerVolumes.DRIVER);
    assertThat(info.getVendorVersion()).isNotEmpty();
    assertThat(identity.probe(ProbeRequest.getDefaultInstance()).getReady().getValue()).isTrue();
    assertThat(node.nodeGetInfo(NodeGetInfoRequest.getDefaultInstance()).getNodeId())
        .isEqualTo(NODE);
    assertThat(
            node.nodeGetCapabilities(NodeGetCapabilitiesRequest.getDefaultInstance())
                .getCapabilitiesList())
        .isEmpty();
  }

  // --------------------------------------------------------------------------------- helpers

  private void expect(Map<String, String> attrs, Status.Code code, String... parts) {
    Path target = target("pod-" + code + "-" + attrs.hashCode());
    assertThatThrownBy(() -> node.nodePublishVolume(publish("vol-x", target, attrs)))
        .satisfies(e -> assertStatus(e, code, parts));
    assertThat(target).doesNotExist();
  }

  private static void assertStatus(Throwable e, Status.Code code, String... parts) {
    assertThat(e).isInstanceOf(StatusRuntimeException.class);
    Status s = ((StatusRuntimeException) e).getStatus();
    assertThat(s.getCode()).as(s.toString()).isEqualTo(code);
    assertThat(s.getDescription()).contains(parts);
  }

  private ModelArtifact ready(long generation) {
    return artifact(generation, ArtifactPhase.Ready, ArtifactPhase.Ready);
  }

  private ModelArtifact artifact(long generation, ArtifactPhase phase, ArtifactPhase onNode) {
    return Artifacts.artifact(NS, NAME, generation, phase, Map.of(NODE, onNode));
  }

  private StoredArtifact allocate(long generation) {
    try {
      return store.allocate(
          StoreLayout.artifactId(NS, NAME, generation),
          files.entrySet().stream()
              .map(e -> new StoreFile(e.getKey(), e.getValue().length))
              .toList());
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private void write(StoredArtifact a) throws Exception {
    for (var e : files.entrySet()) {
      a.write(e.getKey(), 0, ByteBuffer.wrap(e.getValue()));
      a.markComplete(e.getKey());
    }
  }

  private void load(long generation) {
    try {
      write(allocate(generation));
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private Path target(String pod) {
    Path t = kubeletRoot.resolve("pods/" + pod + "/volumes/kubernetes.io~csi/model/mount");
    targets.add(t);
    return t;
  }

  private static int mountCount(Path target) throws IOException {
    return (int)
        io.tensorcast.csi.mount.MountTable.mountPoints(Path.of("/proc/self/mountinfo")).stream()
            .filter(target::equals)
            .count();
  }

  private static Map<String, String> attrs(String modelArtifact) {
    Map<String, String> m = new HashMap<>();
    m.put("modelArtifact", modelArtifact);
    m.put("csi.storage.k8s.io/pod.namespace", NS);
    m.put("csi.storage.k8s.io/pod.name", "pod");
    m.put("csi.storage.k8s.io/pod.uid", "0f6c1d2e-uid");
    m.put("csi.storage.k8s.io/serviceAccount.name", "default");
    m.put("csi.storage.k8s.io/ephemeral", "true");
    return m;
  }

  private static NodePublishVolumeRequest publish(
      String volumeId, Path target, Map<String, String> context) {
    try {
      Files.createDirectories(target.getParent());
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
    return NodePublishVolumeRequest.newBuilder()
        .setVolumeId(volumeId)
        .setTargetPath(target.toString())
        .setReadonly(true)
        .setVolumeCapability(
            VolumeCapability.newBuilder()
                .setMount(VolumeCapability.MountVolume.getDefaultInstance())
                .setAccessMode(
                    VolumeCapability.AccessMode.newBuilder()
                        .setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER)))
        .putAllVolumeContext(context)
        .build();
  }

  private static NodeUnpublishVolumeRequest unpublish(String volumeId, Path target) {
    return NodeUnpublishVolumeRequest.newBuilder()
        .setVolumeId(volumeId)
        .setTargetPath(target.toString())
        .build();
  }
}
