package io.tensorcast.e2e.operator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.Condition;
import io.fabric8.kubernetes.api.model.ManagedFieldsEntry;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.client.dsl.Resource;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactNodeStatus;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.CredentialsSecretRef;
import io.tensorcast.api.v1alpha1.MemorySpec;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.e2e.cluster.NodeSpec;
import io.tensorcast.e2e.cluster.SimulatedNode;
import io.tensorcast.operator.desired.DataPlanePod;
import io.tensorcast.operator.desired.PodPlan;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The operator end to end on a real kube-apiserver 1.20 with the real scheduler, garbage collector
 * and a simulated kubelet that runs each data-plane pod as a {@code java -jar
 * tensorcast-dataplane.jar serve ...} process on its node's loopback address, loading real corpus
 * safetensors files from a real S3-compatible server into each node's store directory.
 *
 * <p>Each test has its own namespace and its own simulated nodes, labelled {@value #GROUP_LABEL} =
 * namespace; the artifacts select them with {@code placement.nodeSelector}.
 */
class ModelArtifactIT extends OperatorTestBase {
  static final Duration LOAD_TIMEOUT = Duration.ofSeconds(90);

  // ------------------------------------------------------------------------------------ cases

  @Test
  void loadsOntoRdmaNodesOnlyByteIdenticalThenCleansUp() throws Exception {
    SimulatedNode rdmaByResource =
        node("rdma-1", Map.of(TensorcastConstants.RDMA_RESOURCE, "2"), Map.of());
    SimulatedNode rdmaByLabel =
        node(
            "rdma-2",
            Map.of(),
            Map.of(TensorcastConstants.RDMA_NODE_LABEL, TensorcastConstants.RDMA_NODE_LABEL_VALUE));
    SimulatedNode plain = node("plain", Map.of(), Map.of());
    Map<String, Path> files = tinyShardedModel();
    files.put(
        "adapter/adapter_model.safetensors",
        corpus("safetensors/peft-gpt2__adapter_model.safetensors"));
    String bucket = seed(files);

    ModelArtifact created =
        create(artifact("tiny", "s3://" + bucket + "/model/", 2, RdmaPolicy.Required));

    ModelArtifact ready = awaitPhase("tiny", ArtifactPhase.Ready);
    ModelArtifactStatus s = ready.getStatus();
    long total = files.values().stream().mapToLong(ModelArtifactIT::size).sum();
    assertThat(s.getReady()).isEqualTo("2/2");
    assertThat(s.getReadyReplicas()).isEqualTo(2);
    assertThat(s.getProgress()).isEqualTo("100%");
    assertThat(s.getTotalBytes()).isEqualTo(total);
    assertThat(s.getFiles()).isEqualTo(files.size());
    assertThat(s.getObservedGeneration()).isEqualTo(1L);
    assertThat(s.getResolvedRevision()).isNotBlank();
    for (String type : List.of("Resolved", "Scheduled", "Loaded", "Ready")) {
      assertThat(condition(ready, type).getStatus()).as(type).isEqualTo("True");
    }
    assertThat(condition(ready, "Ready").getReason()).isEqualTo("AllReplicasReady");
    assertThat(condition(ready, "Degraded").getStatus()).isEqualTo("False");

    List<Pod> pods = pods();
    assertThat(pods).hasSize(2);
    assertThat(pods)
        .extracting(p -> p.getSpec().getNodeName())
        .containsExactlyInAnyOrder(rdmaByResource.name(), rdmaByLabel.name())
        .doesNotContain(plain.name());
    for (Pod p : pods) {
      Map<String, Quantity> requests =
          p.getSpec().getContainers().get(0).getResources().getRequests();
      assertThat(requests.containsKey(TensorcastConstants.RDMA_RESOURCE))
          .as("pod on %s requests the RDMA resource", p.getSpec().getNodeName())
          .isEqualTo(p.getSpec().getNodeName().equals(rdmaByResource.name()));
      assertThat(PodPlan.memoryRequest(p)).isEqualTo(total + OperatorEnvironment.OVERHEAD);
    }
    assertThat(s.getNodes())
        .extracting(ArtifactNodeStatus::getNode)
        .containsExactlyInAnyOrder(rdmaByResource.name(), rdmaByLabel.name());
    assertThat(s.getNodes()).allSatisfy(n -> assertThat(n.getBytesLoaded()).isEqualTo(total));

    for (SimulatedNode n : List.of(rdmaByResource, rdmaByLabel)) {
      assertStoreHolds(n, ready, files);
    }

    // In steady state the operator writes nothing, though it looks every 5 s.
    String version = ready.getMetadata().getResourceVersion();
    await()
        .during(Duration.ofSeconds(7))
        .atMost(Duration.ofSeconds(10))
        .until(() -> version.equals(get("tiny").getMetadata().getResourceVersion()));
    // The operator owns status only, never spec (GitOps keeps spec).
    for (ManagedFieldsEntry m : get("tiny").getMetadata().getManagedFields()) {
      if (m.getManager().contains("modelartifact")) {
        assertThat(client.getKubernetesSerialization().asJson(m.getFieldsV1()))
            .as("fields owned by %s", m.getManager())
            .doesNotContain("\"f:spec\"");
      }
    }

    assertOperatorMetrics();

    Map<String, String> row = row(kubectl("get", "modelartifacts", "-o", "wide"), "tiny");
    assertThat(row)
        .containsOnlyKeys(
            "NAME",
            "PHASE",
            "READY",
            "SIZE",
            "PROGRESS",
            "SOURCE",
            "FROM-SOURCE",
            "CONSUMERS",
            "AGE")
        .containsEntry("CONSUMERS", "0")
        .containsEntry("FROM-SOURCE", Long.toString(s.getBytesFromSource()))
        .containsEntry("PHASE", "Ready")
        .containsEntry("READY", "2/2")
        .containsEntry("SIZE", s.getSize())
        .containsEntry("PROGRESS", "100%")
        .containsEntry("SOURCE", "s3://" + bucket + "/model/");
    assertThat(row(kubectl("get", "ma"), "tiny")).doesNotContainKey("SOURCE");
    assertThat(kubectl("wait", "--for=condition=Ready", "modelartifact/tiny", "--timeout=10s"))
        .contains("condition met");

    client.resource(created).delete();
    await()
        .atMost(Duration.ofSeconds(60))
        .until(
            () ->
                client.resources(ModelArtifact.class).inNamespace(ns).withName("tiny").get()
                    == null);
    assertThat(pods()).isEmpty();
    for (SimulatedNode n : List.of(rdmaByResource, rdmaByLabel)) {
      assertThat(storeDir(n, ready)).doesNotExist();
    }
  }

  /**
   * Three nodes load one artifact as a swarm. Every byte leaves the source about once (counted by a
   * proxy in front of the S3 server), the status says how many bytes each node got from the source
   * and from peers, every pod applied the operator's membership, and every store is byte-identical
   * to the source.
   */
  @Test
  void peerToPeerReadsEachByteFromTheSourceAboutOnce() throws Exception {
    for (int i = 1; i <= 3; i++) {
      node("p2p-" + i, Map.of(TensorcastConstants.RDMA_RESOURCE, "1"), Map.of());
    }
    Map<String, Path> files = new LinkedHashMap<>();
    files.put(
        "lora.safetensors",
        corpus("safetensors/pokemon-diffusers__pytorch_lora_weights.safetensors"));
    files.put(
        "mnist.safetensors",
        corpus("safetensors/burn__examples_import-model-weights_mnist.safetensors"));
    files.put("adapter.safetensors", corpus("safetensors/peft-gpt2__adapter_model.safetensors"));
    String bucket = seed(files);
    long size = files.values().stream().mapToLong(ModelArtifactIT::size).sum();

    try (FaultInjectingProxy counting = new FaultInjectingProxy(env.s3.endpoint())) {
      ModelArtifact spec = artifact("swarm", "s3://" + bucket + "/model/", 3, RdmaPolicy.Required);
      spec.getSpec().getSource().setEndpoint(counting.endpoint().toString());
      spec.getSpec().getDistribution().setPieceSize(new Quantity("256Ki"));
      create(spec);

      ModelArtifact ready = awaitPhase("swarm", ArtifactPhase.Ready);
      ModelArtifactStatus s = ready.getStatus();
      assertThat(s.getReady()).isEqualTo("3/3");
      assertThat(s.getTotalBytes()).isEqualTo(size);
      for (SimulatedNode n : nodes) {
        assertStoreHolds(n, ready, files);
      }
      assertThat(s.getNodes()).hasSize(3);
      long perNodeSum =
          s.getNodes().stream().mapToLong(ArtifactNodeStatus::getBytesFromSource).sum();
      assertThat(s.getBytesFromSource()).isEqualTo(perNodeSum);
      assertThat(s.getBytesFromSource())
          .as("bytes from the source over 3 nodes, artifact %d bytes; nodes %s", size, s.getNodes())
          .isGreaterThanOrEqualTo(size)
          .isLessThanOrEqualTo((long) (1.05 * size));
      assertThat(s.getNodes())
          .as("node entries %s", s.getNodes())
          .anySatisfy(n -> assertThat(n.getBytesFromPeers()).isPositive())
          .allSatisfy(
              n ->
                  assertThat(n.getBytesFromSource() + n.getBytesFromPeers())
                      .isGreaterThanOrEqualTo(size));

      // What went through the proxy: the pieces the status counts, plus listings and headers.
      List<FaultInjectingProxy.RecordedRequest> gets =
          counting.requests().stream().filter(r -> r.method().equals("GET")).toList();
      long listings = gets.stream().filter(r -> r.range().isEmpty()).count();
      long resolvers =
          gets.stream().filter(r -> r.range().equals(java.util.Optional.of("bytes=0-7"))).count()
              / files.size();
      long headerBytes = 0;
      for (Path f : files.values()) {
        headerBytes += 8 + headerLength(f);
      }
      long allowance = resolvers * headerBytes + listings * 8192;
      long proxied = counting.getBodyBytes();
      assertThat(proxied - s.getBytesFromSource())
          .as(
              "proxy counted %d body bytes, status %d; %d resolving pod(s) x %d header bytes and"
                  + " %d listing(s)",
              proxied, s.getBytesFromSource(), resolvers, headerBytes, listings)
          .isBetween(0L, allowance);

      // Every pod applied the membership the operator computes for the three of them.
      List<Pod> pods = pods();
      String epoch =
          io.tensorcast.operator.peers.PeerMembers.of(pods, env.config.peerPort()).epoch();
      for (Pod p : pods) {
        io.tensorcast.api.wire.DataPlaneStatus st =
            new com.fasterxml.jackson.databind.ObjectMapper()
                .configure(
                    com.fasterxml.jackson.databind.DeserializationFeature
                        .FAIL_ON_UNKNOWN_PROPERTIES,
                    false)
                .readValue(controlGet(p, "/status"), io.tensorcast.api.wire.DataPlaneStatus.class);
        assertThat(st.peerEpoch())
            .as("peerEpoch of %s", p.getMetadata().getName())
            .isEqualTo(epoch);
      }
      assertThat(
              env.meters
                  .get("tensorcast.operator.artifact.source.bytes")
                  .tags("namespace", ns, "name", "swarm")
                  .gauge()
                  .value())
          .isEqualTo((double) s.getBytesFromSource());

      // Steady state: no status writes, no membership traffic needed.
      String version = ready.getMetadata().getResourceVersion();
      await()
          .during(Duration.ofSeconds(7))
          .atMost(Duration.ofSeconds(10))
          .until(() -> version.equals(get("swarm").getMetadata().getResourceVersion()));
    }
  }

  /**
   * {@code kubectl scale} 1→2→1 through the scale subresource: the original copy stays the same
   * pod, Ready at every look, and reads nothing more from the source; the second node's copy comes
   * from it (counted on the wire); scaling down removes the newer copy only. No pod is replaced,
   * the copy generation stays 1 while the spec's generation moves to 3.
   */
  @Test
  void scalingUpAndDownKeepsTheReadyCopyAndReadsNothingMoreForIt() throws Exception {
    node("scale-1", Map.of(), Map.of());
    node("scale-2", Map.of(), Map.of());
    Map<String, Path> files = new LinkedHashMap<>();
    files.put(
        "lora.safetensors",
        corpus("safetensors/pokemon-diffusers__pytorch_lora_weights.safetensors"));
    files.put("adapter.safetensors", corpus("safetensors/peft-gpt2__adapter_model.safetensors"));
    String bucket = seed(files);
    long size = files.values().stream().mapToLong(ModelArtifactIT::size).sum();

    try (FaultInjectingProxy counting = new FaultInjectingProxy(env.s3.endpoint())) {
      ModelArtifact spec = artifact("scaled", "s3://" + bucket + "/model/", 1, RdmaPolicy.Disabled);
      spec.getSpec().getSource().setEndpoint(counting.endpoint().toString());
      spec.getSpec().getDistribution().setPieceSize(new Quantity("256Ki"));
      create(spec);
      ModelArtifact one = awaitPhase("scaled", ArtifactPhase.Ready);
      assertThat(pods()).hasSize(1);
      Pod original = pods().get(0);
      String originalNode = PodPlan.node(original);
      ArtifactNodeStatus before = nodeEntry(one, original);
      assertThat(before.getBytesFromSource()).isEqualTo(size);
      long proxiedBefore = counting.getBodyBytes();

      // Watch the original copy at every change of the artifact and of its pods.
      List<String> lapses = java.util.Collections.synchronizedList(new ArrayList<>());
      Runnable look =
          () -> {
            ModelArtifact a = get("scaled");
            Pod p = client.pods().inNamespace(ns).withName(original.getMetadata().getName()).get();
            ArtifactNodeStatus e =
                a == null || a.getStatus() == null ? null : nodeEntry(a, original);
            if (p == null
                || PodPlan.terminating(p)
                || !original.getMetadata().getUid().equals(p.getMetadata().getUid())) {
              lapses.add("pod " + original.getMetadata().getName() + " gone or replaced");
            } else if (e == null
                || e.getPhase() != ArtifactPhase.Ready
                || !a.getStatus().getReadyNodes().contains(originalNode)) {
              lapses.add("not Ready at resourceVersion " + a.getMetadata().getResourceVersion());
            }
          };
      java.util.concurrent.ScheduledExecutorService watcher =
          java.util.concurrent.Executors.newSingleThreadScheduledExecutor();
      watcher.scheduleWithFixedDelay(look, 0, 100, TimeUnit.MILLISECONDS);
      try {
        kubectl("scale", "modelartifact/scaled", "--replicas=2");
        ModelArtifact two =
            await()
                .atMost(LOAD_TIMEOUT)
                .until(
                    () -> get("scaled"),
                    a ->
                        a.getStatus() != null
                            && Long.valueOf(2).equals(a.getStatus().getObservedGeneration())
                            && "2/2".equals(a.getStatus().getReady()));
        assertThat(two.getStatus().getCopyGeneration()).isEqualTo(1L);
        assertThat(two.getStatus().getPhase()).isEqualTo(ArtifactPhase.Ready);
        List<Pod> pods = pods();
        assertThat(pods).hasSize(2);
        assertThat(pods)
            .allSatisfy(
                p ->
                    assertThat(p.getMetadata().getLabels())
                        .containsEntry(DataPlanePod.LABEL_GENERATION, "1"));
        ArtifactNodeStatus survivor = nodeEntry(two, original);
        assertThat(survivor.getBytesFromSource())
            .as("source bytes of the copy that stayed")
            .isEqualTo(before.getBytesFromSource());
        ArtifactNodeStatus added =
            two.getStatus().getNodes().stream()
                .filter(e -> !e.getNode().equals(originalNode))
                .findFirst()
                .orElseThrow();
        assertThat(added.getBytesFromSource() + added.getBytesFromPeers())
            .isGreaterThanOrEqualTo(size);
        assertThat(added.getBytesFromPeers()).as("the new copy from its peer").isPositive();
        long headerBytes = 0;
        for (Path f : files.values()) {
          headerBytes += 8 + headerLength(f);
        }
        long listings =
            counting.requests().stream()
                .filter(r -> r.method().equals("GET") && r.range().isEmpty())
                .count();
        assertThat(counting.getBodyBytes() - proxiedBefore)
            .as("what the source served during the scale-up: the new copy's own source bytes")
            .isBetween(
                added.getBytesFromSource(),
                added.getBytesFromSource() + headerBytes + listings * 8192);
        // The scale subresource's selector finds exactly the artifact's data-plane pods.
        assertThat(
                client
                    .pods()
                    .inNamespace(ns)
                    .withLabelSelector(two.getStatus().getSelector())
                    .list()
                    .getItems())
            .extracting(p -> p.getMetadata().getName())
            .containsExactlyInAnyOrderElementsOf(podNames());

        kubectl("scale", "modelartifact/scaled", "--replicas=1");
        ModelArtifact back =
            await()
                .atMost(LOAD_TIMEOUT)
                .until(
                    () -> get("scaled"),
                    a ->
                        a.getStatus() != null
                            && Long.valueOf(3).equals(a.getStatus().getObservedGeneration())
                            && "1/1".equals(a.getStatus().getReady())
                            && pods().size() == 1);
        assertThat(back.getStatus().getCopyGeneration()).isEqualTo(1L);
        assertThat(podNames()).containsExactly(original.getMetadata().getName());
        assertThat(back.getStatus().getReadyNodes()).containsExactly(originalNode);
        assertThat(nodeEntry(back, original).getBytesFromSource())
            .isEqualTo(before.getBytesFromSource());
      } finally {
        watcher.shutdownNow();
      }
      look.run();
      assertThat(lapses).as("the original copy at every look").isEmpty();
    }
  }

  /**
   * Pods sized to the artifact, not to {@code spec.memory.limit}: two artifacts of 180 MiB with
   * {@code limit: 4Gi} both load onto one node of 512 MiB allocatable (half the scale of 383 MiB
   * artifacts with {@code limit: 8Gi} on a 1 GiB node, ratios kept; the harness's overhead is 64
   * MiB). The resolving pods ask for the overhead only, the data plane's budget check refuses the
   * bytes, and each is replaced by a pod of exactly size + overhead.
   */
  @Test
  void twoArtifactsWithALargeLimitFitANodeTheirSizesFit(@org.junit.jupiter.api.io.TempDir Path dir)
      throws Exception {
    // Each pod gets its own address, as pods do on a real node.
    SimulatedNode small =
        env.cluster
            .kubelet()
            .addNode(
                NodeSpec.builder(ns + "-small", env.cluster.nextNodeAddress())
                    .label(GROUP_LABEL, ns)
                    .allocatable("memory", "512Mi")
                    .podAddresses(
                        env.cluster.nextNodeAddress(),
                        env.cluster.nextNodeAddress(),
                        env.cluster.nextNodeAddress(),
                        env.cluster.nextNodeAddress())
                    .build());
    nodes.add(small);
    long tensorBytes = 180L * 1024 * 1024;
    String bucket = ("e2e-" + ns).toLowerCase();
    env.s3.createBucket(bucket);
    Map<String, Long> sizes = new LinkedHashMap<>();
    for (String name : List.of("alpha", "beta")) {
      Path f = dir.resolve(name + ".safetensors");
      byte fill = (byte) name.charAt(0);
      io.tensorcast.dataplane.format.safetensors.SafetensorsWriter.write(
          f,
          List.of(
              new io.tensorcast.dataplane.format.safetensors.TensorDeclaration(
                  "weight",
                  io.tensorcast.dataplane.format.safetensors.Dtype.U8,
                  new long[] {tensorBytes})),
          Map.of(),
          (t, out) -> {
            java.nio.ByteBuffer chunk = java.nio.ByteBuffer.allocate(1 << 20);
            for (long left = t.byteLength(); left > 0; ) {
              chunk.clear();
              java.util.Arrays.fill(chunk.array(), fill);
              chunk.limit((int) Math.min(chunk.capacity(), left));
              left -= chunk.remaining();
              while (chunk.hasRemaining()) {
                out.write(chunk);
              }
            }
          });
      env.s3.putFile(bucket, name + "/model.safetensors", f);
      sizes.put(name, Files.size(f));
      Files.delete(f);
      ModelArtifact a = artifact(name, "s3://" + bucket + "/" + name + "/", 1, RdmaPolicy.Disabled);
      MemorySpec memory = new MemorySpec();
      memory.setLimit(new Quantity("4Gi"));
      a.getSpec().setMemory(memory);
      create(a);
    }

    for (String name : sizes.keySet()) {
      ModelArtifact ready = awaitPhase(name, ArtifactPhase.Ready);
      assertThat(ready.getStatus().getTotalBytes()).isEqualTo(sizes.get(name));
      assertThat(ready.getStatus().getReadyNodes()).containsExactly(small.name());
    }
    List<Pod> pods = pods();
    assertThat(pods).hasSize(2);
    long requested = 0;
    for (Pod p : pods) {
      String artifact = p.getMetadata().getLabels().get(TensorcastConstants.LABEL_ARTIFACT);
      assertThat(PodPlan.memoryRequest(p))
          .as("memory request of %s", p.getMetadata().getName())
          .isEqualTo(sizes.get(artifact) + OperatorEnvironment.OVERHEAD);
      requested += PodPlan.memoryRequest(p);
    }
    assertThat(requested).isLessThanOrEqualTo(512L * 1024 * 1024);
  }

  @Test
  void rdmaRequiredWithoutRdmaNodesIsNotScheduledAndCreatesNoPod() {
    node("plain-1", Map.of(), Map.of());
    node("plain-2", Map.of(), Map.of());
    String bucket =
        seed(Map.of("m.safetensors", corpus("safetensors/mlverse-safetensors__hello.safetensors")));

    create(artifact("needs-rdma", "s3://" + bucket + "/model/", 2, RdmaPolicy.Required));

    ModelArtifact a = awaitCondition("needs-rdma", "Scheduled", c -> "False".equals(c.getStatus()));
    Condition scheduled = condition(a, "Scheduled");
    assertThat(scheduled.getReason()).isEqualTo("InsufficientNodes");
    assertThat(scheduled.getMessage())
        .contains("nodes are eligible for 2 replicas")
        .contains(
            "2 not RDMA-capable (no tensorcast.io/rdma in allocatable, no label"
                + " tensorcast.io/rdma=true; spec.placement.rdma is Required: Preferred or"
                + " Disabled uses them too) ["
                + ns
                + "-plain-1, "
                + ns
                + "-plain-2]");
    assertThat(a.getStatus().getPhase()).isEqualTo(ArtifactPhase.Pending);
    assertThat(condition(a, "Ready").getStatus()).isEqualTo("False");
    assertThat(pods()).isEmpty();
  }

  @Test
  void artifactLargerThanAnyNodesMemoryFailsWithTheNumbers() {
    // Room for the first pod (overhead only, the size is unknown) but not for the artifact.
    node("small", Map.of(TensorcastConstants.RDMA_RESOURCE, "1", "memory", "65Mi"), Map.of());
    Map<String, Path> files = new LinkedHashMap<>();
    files.put(
        "a.safetensors",
        corpus("safetensors/burn__examples_import-model-weights_mnist.safetensors"));
    files.put(
        "b.safetensors", corpus("safetensors/pokemon-diffusers__pytorch_lora_weights.safetensors"));
    long total = files.values().stream().mapToLong(ModelArtifactIT::size).sum();
    String bucket = seed(files);

    create(artifact("too-big", "s3://" + bucket + "/model/", 1, RdmaPolicy.Required));

    ModelArtifact a = awaitPhase("too-big", ArtifactPhase.Failed);
    Condition scheduled = condition(a, "Scheduled");
    assertThat(scheduled.getStatus()).isEqualTo("False");
    assertThat(scheduled.getReason()).isEqualTo("InsufficientMemory");
    assertThat(scheduled.getMessage())
        .contains(
            "1 with too little free memory (most free: node "
                + ns
                + "-small 65.0 MiB (68157440 bytes) free (allocatable; no other Tensorcast pod"
                + " requests memory there) < ")
        .contains("(" + (total + OperatorEnvironment.OVERHEAD) + " bytes) needed per node")
        .contains("+ overhead 64.0 MiB")
        .contains(ns + "-small");
    assertThat(condition(a, "Ready").getReason()).isEqualTo("InsufficientMemory");
    assertThat(condition(a, "Resolved").getStatus()).isEqualTo("True");
    assertThat(a.getStatus().getTotalBytes()).isEqualTo(total);
    await().atMost(Duration.ofSeconds(30)).until(() -> pods().isEmpty());
  }

  @Test
  void brokenSafetensorsFailsNamingTheFile() {
    node("rdma", Map.of(TensorcastConstants.RDMA_RESOURCE, "1"), Map.of());
    String bucket =
        seed(
            Map.of(
                "ok.safetensors", corpus("safetensors/mlverse-safetensors__hello.safetensors"),
                "shards/abuse.safetensors",
                    corpus("broken/safetensors-cpp__safetensors_abuse_attempt_1.safetensors")));

    create(artifact("broken", "s3://" + bucket + "/model/", 1, RdmaPolicy.Required));

    ModelArtifact a = awaitPhase("broken", ArtifactPhase.Failed);
    Condition ready = condition(a, "Ready");
    assertThat(ready.getReason()).isEqualTo("InvalidSafetensors");
    assertThat(ready.getMessage())
        .contains("shards/abuse.safetensors")
        .contains("node " + ns + "-rdma");
    assertThat(condition(a, "Resolved").getReason()).isEqualTo("InvalidSafetensors");
    await().atMost(Duration.ofSeconds(30)).until(() -> pods().isEmpty());
    // Failed sticks for this generation: no new pod is started.
    assertThat(get("broken").getStatus().getPhase()).isEqualTo(ArtifactPhase.Failed);
    assertThat(pods()).isEmpty();
  }

  /**
   * A missing bucket fails the artifact with {@code BucketNotFound}, not stalled: the operator
   * loads it again by itself at {@code status.nextRetryTime} (30 s after the first failure), so
   * once the bucket exists the artifact becomes Ready without a spec change; a new value of
   * annotation {@code tensorcast.io/retry} retries at once, before that time.
   */
  @Test
  void aMissingBucketIsRetriedOnceItExistsAndTheRetryAnnotationRetriesNow() throws Exception {
    SimulatedNode n =
        env.cluster
            .kubelet()
            .addNode(
                NodeSpec.builder(ns + "-two", env.cluster.nextNodeAddress())
                    .label(GROUP_LABEL, ns)
                    .label(
                        TensorcastConstants.RDMA_NODE_LABEL,
                        TensorcastConstants.RDMA_NODE_LABEL_VALUE)
                    .allocatable("memory", "4Gi")
                    .podAddresses(env.cluster.nextNodeAddress(), env.cluster.nextNodeAddress())
                    .build());
    nodes.add(n);
    String bucket = ("e2e-" + ns).toLowerCase();
    create(artifact("waits", "s3://" + bucket + "/model/", 1, RdmaPolicy.Required));
    create(artifact("asks", "s3://" + bucket + "/model/", 1, RdmaPolicy.Required));

    Map<String, java.time.Instant> retryAt = new LinkedHashMap<>();
    for (String name : List.of("waits", "asks")) {
      ModelArtifact a = awaitPhase(name, ArtifactPhase.Failed);
      Condition ready = condition(a, "Ready");
      assertThat(ready.getReason()).isEqualTo("BucketNotFound");
      assertThat(ready.getMessage()).contains(bucket).contains("does not exist");
      assertThat(a.getStatus().getRetryAttempts()).isEqualTo(1);
      java.time.Instant at = java.time.Instant.parse(a.getStatus().getNextRetryTime());
      assertThat(at)
          .isBetween(
              java.time.Instant.now().plusSeconds(15), java.time.Instant.now().plusSeconds(31));
      Condition stalled = condition(a, "Stalled");
      assertThat(stalled.getStatus()).isEqualTo("False");
      assertThat(stalled.getMessage())
          .endsWith(
              "; loading again at "
                  + at
                  + " after 1 failed attempt(s) (annotate tensorcast.io/retry with a new value"
                  + " to retry now)");
      retryAt.put(name, at);
    }
    await().atMost(Duration.ofSeconds(30)).until(() -> pods().isEmpty());

    Map<String, Path> files = tinyShardedModel();
    seed(files);
    resource("asks")
        .edit(
            a -> {
              Map<String, String> annotations = new LinkedHashMap<>();
              if (a.getMetadata().getAnnotations() != null) {
                annotations.putAll(a.getMetadata().getAnnotations());
              }
              annotations.put(TensorcastConstants.ANNOTATION_RETRY, "now-1");
              a.getMetadata().setAnnotations(annotations);
              return a;
            });

    ModelArtifact asked = awaitPhase("asks", ArtifactPhase.Ready);
    assertThat(java.time.Instant.now())
        .as("Ready before its retry time")
        .isBefore(retryAt.get("asks"));
    assertThat(asked.getStatus().getRetryRequest()).isEqualTo("now-1");
    assertThat(asked.getStatus().getNextRetryTime()).isNull();
    assertThat(asked.getStatus().getRetryAttempts()).isNull();
    assertThat(asked.getMetadata().getGeneration()).isEqualTo(1L);
    assertStoreHolds(n, asked, files);

    ModelArtifact waited = awaitPhase("waits", ArtifactPhase.Ready);
    assertThat(java.time.Instant.now()).isAfterOrEqualTo(retryAt.get("waits"));
    assertThat(waited.getMetadata().getGeneration()).isEqualTo(1L);
    assertThat(condition(waited, "Stalled").getReason()).isEqualTo("AllReplicasReady");
    assertStoreHolds(n, waited, files);

    // Events: one per phase change with the condition's reason and message, each once. The
    // operator writes a phase's events after its status: the Ready one may come a moment later.
    await()
        .atMost(Duration.ofSeconds(10))
        .untilAsserted(
            () ->
                assertThat(events("waits"))
                    .extracting(e -> e.getType() + " " + e.getReason())
                    .contains("Warning BucketNotFound", "Normal AllReplicasReady"));
    Map<String, Integer> seen = eventCounts("waits");
    assertThat(events("waits"))
        .filteredOn(e -> "BucketNotFound".equals(e.getReason()))
        .singleElement()
        .satisfies(
            e -> {
              assertThat(e.getMessage()).contains(bucket).contains("does not exist");
              assertThat(e.getCount()).isEqualTo(1);
              assertThat(e.getInvolvedObject().getKind()).isEqualTo("ModelArtifact");
              assertThat(e.getInvolvedObject().getUid()).isEqualTo(waited.getMetadata().getUid());
            });
    assertThat(events("waits"))
        .filteredOn(e -> "AllReplicasReady".equals(e.getReason()))
        .singleElement()
        .satisfies(e -> assertThat(e.getMessage()).isEqualTo("1/1 replicas ready"));
    // Reconciles every 5 s while Ready add no event and count none again.
    await()
        .during(Duration.ofSeconds(7))
        .atMost(Duration.ofSeconds(10))
        .until(() -> eventCounts("waits").equals(seen));
    assertThat(kubectl("describe", "modelartifact", "waits"))
        .contains("BucketNotFound")
        .contains("AllReplicasReady");
  }

  /**
   * Scrapes the operator's {@code GET /metrics}: JOSDK's reconcile meters under the {@code
   * tensorcast_operator_} prefix (none left as {@code operator_sdk_}), JVM and process meters, the
   * time-to-Ready histogram of ModelArtifacts, and no series twice.
   */
  private void assertOperatorMetrics() throws IOException, InterruptedException {
    var resp =
        java.net.http.HttpClient.newHttpClient()
            .send(
                java.net.http.HttpRequest.newBuilder(
                        java.net.URI.create(
                            "http://127.0.0.1:" + env.metricsServer.port() + "/metrics"))
                    .timeout(Duration.ofSeconds(10))
                    .build(),
                java.net.http.HttpResponse.BodyHandlers.ofString());
    assertThat(resp.statusCode()).isEqualTo(200);
    List<String> series =
        resp.body().lines().filter(l -> !l.isBlank() && !l.startsWith("#")).toList();
    List<String> names = series.stream().map(l -> l.split("[{ ]", 2)[0]).distinct().toList();
    assertThat(names)
        .contains(
            "tensorcast_operator_reconciliations_started_total",
            "tensorcast_operator_reconciliations_success_total",
            "tensorcast_operator_events_received_total",
            "tensorcast_operator_controllers_execution_reconcile_seconds_count",
            "tensorcast_operator_time_to_ready_seconds_bucket",
            "tensorcast_operator_artifact_phase",
            "jvm_memory_used_bytes",
            "jvm_threads_live_threads",
            "process_cpu_usage",
            "process_uptime_seconds");
    assertThat(names).noneMatch(n -> n.startsWith("operator_sdk"));
    assertThat(series)
        .filteredOn(l -> l.startsWith("tensorcast_operator_reconciliations_started_total{"))
        .anyMatch(l -> l.contains("kind=\"ModelArtifact\""));
    assertThat(series)
        .filteredOn(
            l -> l.startsWith("tensorcast_operator_controllers_execution_reconcile_seconds_count{"))
        .anyMatch(l -> l.contains("controller=\"modelartifact\""));
    assertThat(series)
        .filteredOn(l -> l.startsWith("tensorcast_operator_time_to_ready_seconds_count{"))
        .filteredOn(l -> l.contains("kind=\"ModelArtifact\""))
        .singleElement()
        .satisfies(
            l -> {
              assertThat(Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1)))
                  .isGreaterThanOrEqualTo(1.0);
            });
    List<String> keys = series.stream().map(l -> l.substring(0, l.lastIndexOf(' '))).toList();
    assertThat(keys).as("every series once").doesNotHaveDuplicates();
  }

  /** The core/v1 Events about ModelArtifact {@code name} of this namespace. */
  private List<io.fabric8.kubernetes.api.model.Event> events(String name) {
    return client.v1().events().inNamespace(ns).list().getItems().stream()
        .filter(e -> "ModelArtifact".equals(e.getInvolvedObject().getKind()))
        .filter(e -> name.equals(e.getInvolvedObject().getName()))
        .toList();
  }

  private Map<String, Integer> eventCounts(String name) {
    return events(name).stream()
        .collect(
            Collectors.toMap(
                e -> e.getMetadata().getName(), io.fabric8.kubernetes.api.model.Event::getCount));
  }

  /**
   * A URI of another scheme is refused by the API server (1.20, no CEL) with a short message that
   * names the field and the schemes allowed, not the whole URI rule; a URI with a bad bucket passes
   * the schema there and the operator refuses it ({@code InvalidSpec}) saying what is allowed.
   */
  @Test
  void aBadUriIsRefusedWithAShortMessageSayingWhatIsAllowed() {
    ModelArtifact ftp = artifact("ftp", "ftp://models/llama/", 1, RdmaPolicy.Disabled);
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> create(ftp))
        .isInstanceOf(io.fabric8.kubernetes.client.KubernetesClientException.class)
        .satisfies(
            e -> {
              var ex = (io.fabric8.kubernetes.client.KubernetesClientException) e;
              assertThat(ex.getCode()).isEqualTo(422);
              String message = ex.getStatus().getMessage();
              assertThat(message)
                  .contains("spec.source.uri")
                  .contains("ftp://models/llama/")
                  .contains("should match '^(s3|oss|hf|file)://\\S+$'")
                  .doesNotContain("[a-z0-9][a-z0-9.-]");
              assertThat(message.length()).as(message).isLessThan(300);
            });

    create(artifact("badbucket", "s3://My_Bucket/model/", 1, RdmaPolicy.Disabled));
    ModelArtifact failed = awaitPhase("badbucket", ArtifactPhase.Failed);
    Condition ready = condition(failed, "Ready");
    assertThat(ready.getReason()).isEqualTo("InvalidSpec");
    assertThat(ready.getMessage())
        .startsWith(
            "invalid spec: spec.source.uri: 's3://My_Bucket/model/' is not one of"
                + " s3://bucket/prefix/");
    assertThat(pods()).isEmpty();
  }

  /**
   * The source is down when the artifact is created: the pod's loads fail with {@code
   * SourceUnavailable}, the pod loads again with back-off, the artifact is never {@code Failed} and
   * {@code kubectl describe} shows the reason; polls during one back-off write nothing. Once the
   * source is back the artifact becomes Ready, byte-identical.
   */
  @Test
  void aSourceOutageIsRetriedNotFailedAndReadyOnceTheSourceIsBack() throws Exception {
    SimulatedNode n = node("rdma", Map.of(TensorcastConstants.RDMA_RESOURCE, "1"), Map.of());
    Map<String, Path> files = tinyShardedModel();
    String bucket = seed(files);
    try (FaultInjectingProxy outage = new FaultInjectingProxy(env.s3.endpoint())) {
      outage.failRequests(500, 1_000_000, null);
      ModelArtifact spec = artifact("outage", "s3://" + bucket + "/model/", 1, RdmaPolicy.Required);
      spec.getSpec().getSource().setEndpoint(outage.endpoint().toString());
      create(spec);

      ModelArtifact waiting =
          awaitCondition(
              "outage",
              "Ready",
              c ->
                  "SourceUnavailable".equals(c.getReason())
                      && c.getMessage().endsWith("; retrying (attempt 2)"));
      assertThat(waiting.getStatus().getPhase()).isNotEqualTo(ArtifactPhase.Failed);
      assertThat(condition(waiting, "Resolved").getReason()).isEqualTo("SourceUnavailable");
      assertThat(condition(waiting, "Ready").getMessage())
          .contains("node " + ns + "-rdma")
          .contains("HTTP 500")
          .doesNotContain("retrying in");
      assertThat(kubectl("describe", "modelartifact", "outage"))
          .contains("SourceUnavailable")
          .contains("retrying (attempt ");

      // While one wait lasts every poll computes the same status: one resourceVersion per
      // Ready message (a new attempt may change the message once), and never Failed.
      Map<String, Set<String>> versionsByMessage = new LinkedHashMap<>();
      await()
          .during(Duration.ofSeconds(3))
          .atMost(Duration.ofSeconds(10))
          .pollInterval(Duration.ofMillis(200))
          .until(
              () -> {
                ModelArtifact a = get("outage");
                versionsByMessage
                    .computeIfAbsent(condition(a, "Ready").getMessage(), k -> new TreeSet<>())
                    .add(a.getMetadata().getResourceVersion());
                return a.getStatus().getPhase() != ArtifactPhase.Failed;
              });
      assertThat(versionsByMessage.values())
          .as("resourceVersions per Ready message: %s", versionsByMessage)
          .allSatisfy(v -> assertThat(v).hasSize(1));
      assertThat(versionsByMessage)
          .as("at most one more attempt (one write) in 3 s of 5-20 s waits")
          .hasSizeLessThanOrEqualTo(2);

      outage.reset(); // the source is back
      ModelArtifact ready = awaitPhase("outage", ArtifactPhase.Ready);
      assertThat(condition(ready, "Ready").getReason()).isEqualTo("AllReplicasReady");
      assertStoreHolds(n, ready, files);
    }
  }

  @Test
  void aMissingCredentialsSecretIsNamedInTheReadyCondition() {
    node("rdma", Map.of(TensorcastConstants.RDMA_RESOURCE, "1"), Map.of());
    ModelArtifact a = artifact("nosecret", "s3://whatever/model/", 1, RdmaPolicy.Required);
    a.getSpec().getSource().setCredentialsSecretRef(new CredentialsSecretRef("absent-secret"));

    create(a);

    // The operator never reads the Secret: the (simulated) kubelet cannot start the container,
    // and the operator reports the pod's CreateContainerConfigError, naming the Secret.
    ModelArtifact seen =
        awaitCondition(
            "nosecret",
            "Ready",
            c -> "False".equals(c.getStatus()) && "CredentialsNotFound".equals(c.getReason()));
    assertThat(condition(seen, "Ready").getMessage()).contains("absent-secret");
  }

  @Test
  void aPodKilledOrDeletedMidLoadIsReplacedAndTheArtifactBecomesReady() throws Exception {
    SimulatedNode n1 = node("rdma-1", Map.of(TensorcastConstants.RDMA_RESOURCE, "1"), Map.of());
    SimulatedNode n2 = node("rdma-2", Map.of(TensorcastConstants.RDMA_RESOURCE, "1"), Map.of());
    Map<String, Path> files = tinyShardedModel();
    String bucket = seed(files);
    try (FaultInjectingProxy slow = new FaultInjectingProxy(env.s3.endpoint())) {
      // Every request to the source waits, so a load takes seconds instead of milliseconds.
      slow.delay(Duration.ofMillis(600));
      ModelArtifact spec = artifact("slow", "s3://" + bucket + "/model/", 2, RdmaPolicy.Required);
      spec.getSpec().getSource().setEndpoint(slow.endpoint().toString());
      create(spec);

      // Both sized pods exist (the size is known) and one of them is still loading.
      Pod loading = await().atMost(LOAD_TIMEOUT).until(this::aLoadingSizedPod, p -> p != null);
      List<Long> killed = env.cluster.kubelet().killPodProcess(ns, loading.getMetadata().getName());
      assertThat(killed).isNotEmpty();
      Pod other =
          await()
              .atMost(LOAD_TIMEOUT)
              .until(
                  () ->
                      pods().stream()
                          .filter(
                              p ->
                                  !p.getMetadata()
                                      .getName()
                                      .equals(loading.getMetadata().getName()))
                          .filter(p -> !PodPlan.terminating(p))
                          .findFirst()
                          .orElse(null),
                  p -> p != null);
      String deletedUid = other.getMetadata().getUid();
      // No entry yet (its data plane has not answered) is not Ready either.
      assertThat(
              java.util.Optional.ofNullable(nodeEntry(get("slow"), other))
                  .map(ArtifactNodeStatus::getPhase))
          .as("the deleted pod had not finished loading")
          .isNotEqualTo(java.util.Optional.of(ArtifactPhase.Ready));
      client.resource(other).withGracePeriod(0).delete();

      ModelArtifact ready = awaitPhase("slow", ArtifactPhase.Ready);
      assertThat(ready.getStatus().getReady()).isEqualTo("2/2");
      assertThat(pods()).extracting(p -> p.getMetadata().getUid()).doesNotContain(deletedUid);
      Pod restarted = client.pods().inNamespace(ns).withName(loading.getMetadata().getName()).get();
      if (restarted != null) {
        assertThat(restarted.getStatus().getContainerStatuses().get(0).getRestartCount())
            .isGreaterThanOrEqualTo(1);
      }
      for (SimulatedNode n : List.of(n1, n2)) {
        assertStoreHolds(n, ready, files);
      }
    }
  }

  @Test
  void aSpecChangeRollsPodsToTheNewGeneration() throws Exception {
    SimulatedNode n = node("rdma", Map.of(TensorcastConstants.RDMA_RESOURCE, "1"), Map.of());
    Map<String, Path> files = tinyShardedModel();
    String bucket = seed(files);
    create(artifact("rolling", "s3://" + bucket + "/model/", 1, RdmaPolicy.Required));
    ModelArtifact first = awaitPhase("rolling", ArtifactPhase.Ready);
    assertThat(first.getStatus().getFiles()).isEqualTo(files.size());
    Set<String> firstPods = podNames();
    Map<String, String> firstSecret =
        client.secrets().inNamespace(ns).withName("rolling-tensorcast").get().getData();

    resource("rolling")
        .edit(
            a -> {
              a.getSpec().getSource().setInclude(List.of("model-0000[1-3]-of-00006.safetensors"));
              return a;
            });

    ModelArtifact second =
        await()
            .atMost(LOAD_TIMEOUT)
            .until(
                () -> get("rolling"),
                a ->
                    a.getStatus() != null
                        && Long.valueOf(2).equals(a.getStatus().getObservedGeneration())
                        && a.getStatus().getPhase() == ArtifactPhase.Ready);
    assertThat(second.getMetadata().getGeneration()).isEqualTo(2L);
    assertThat(second.getStatus().getFiles()).isEqualTo(3);
    assertThat(condition(second, "Ready").getObservedGeneration()).isEqualTo(2L);
    await().atMost(Duration.ofSeconds(30)).until(() -> pods().size() == 1);
    assertThat(podNames()).doesNotContainAnyElementsOf(firstPods);
    assertThat(pods())
        .allSatisfy(
            p ->
                assertThat(p.getMetadata().getLabels())
                    .containsEntry(DataPlanePod.LABEL_GENERATION, "2"));
    Map<String, Path> kept = new LinkedHashMap<>();
    files.forEach(
        (k, v) -> {
          if (k.matches("model-0000[1-3]-of-00006\\.safetensors")) {
            kept.put(k, v);
          }
        });
    assertStoreHolds(n, second, kept);
    assertThat(storeDir(n, first)).doesNotExist();
    // The new generation got a new peer secret (patched into the artifact's own Secret); the
    // tokens stay the artifact's.
    Map<String, String> secondSecret =
        client.secrets().inNamespace(ns).withName("rolling-tensorcast").get().getData();
    assertThat(secondSecret.get(TensorcastConstants.SECRET_PEER_SECRET))
        .isNotEqualTo(firstSecret.get(TensorcastConstants.SECRET_PEER_SECRET));
    assertThat(secondSecret.get(TensorcastConstants.SECRET_READ_TOKEN))
        .isEqualTo(firstSecret.get(TensorcastConstants.SECRET_READ_TOKEN));
    assertThat(secondSecret.get(TensorcastConstants.SECRET_ADMIN_TOKEN))
        .isEqualTo(firstSecret.get(TensorcastConstants.SECRET_ADMIN_TOKEN));
  }

  // ---------------------------------------------------------------------------------- helpers

  private SimulatedNode node(
      String suffix, Map<String, String> allocatable, Map<String, String> labels) {
    NodeSpec.Builder b =
        NodeSpec.builder(ns + "-" + suffix, env.cluster.nextNodeAddress())
            .label(GROUP_LABEL, ns)
            .labels(labels)
            .allocatable("memory", "4Gi");
    allocatable.forEach(b::allocatable);
    SimulatedNode node = env.cluster.kubelet().addNode(b.build());
    nodes.add(node);
    return node;
  }

  private ModelArtifact artifact(String name, String uri, int replicas, RdmaPolicy rdma) {
    ModelArtifact a = new ModelArtifact();
    a.getMetadata().setName(name);
    a.getMetadata().setNamespace(ns);
    ModelArtifactSpec spec = new ModelArtifactSpec();
    SourceSpec source = new SourceSpec();
    source.setUri(uri);
    source.setEndpoint(env.s3.endpoint().toString());
    source.setInsecureEndpoint(true);
    source.setRegion(S3MockServer.REGION);
    source.setPathStyle(true);
    source.setCredentialsSecretRef(new CredentialsSecretRef(CREDENTIALS));
    spec.setSource(source);
    spec.getPlacement().setReplicas(replicas);
    spec.getPlacement().setRdma(rdma);
    spec.getPlacement().setNodeSelector(Map.of(GROUP_LABEL, ns));
    a.setSpec(spec);
    return a;
  }

  private ModelArtifact create(ModelArtifact a) {
    return client.resource(a).create();
  }

  private Resource<ModelArtifact> resource(String name) {
    return client.resources(ModelArtifact.class).inNamespace(ns).withName(name);
  }

  private ModelArtifact get(String name) {
    return resource(name).get();
  }

  private ModelArtifact awaitPhase(String name, ArtifactPhase phase) {
    return await()
        .atMost(LOAD_TIMEOUT)
        .pollInterval(Duration.ofMillis(250))
        .until(() -> get(name), a -> a.getStatus() != null && a.getStatus().getPhase() == phase);
  }

  private ModelArtifact awaitCondition(
      String name, String type, java.util.function.Predicate<Condition> test) {
    return await()
        .atMost(LOAD_TIMEOUT)
        .until(
            () -> get(name),
            a ->
                a.getStatus() != null
                    && a.getStatus().getConditions().stream()
                        .anyMatch(c -> type.equals(c.getType()) && test.test(c)));
  }

  private static Condition condition(ModelArtifact a, String type) {
    return a.getStatus().getConditions().stream()
        .filter(c -> type.equals(c.getType()))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no condition " + type + " in " + a.getStatus()));
  }

  private List<Pod> pods() {
    return client
        .pods()
        .inNamespace(ns)
        .withLabel(TensorcastConstants.LABEL_ARTIFACT)
        .list()
        .getItems();
  }

  private Set<String> podNames() {
    return pods().stream().map(p -> p.getMetadata().getName()).collect(Collectors.toSet());
  }

  /** A running pod sized for the artifact whose node entry says it is not loaded yet, or null. */
  private Pod aLoadingSizedPod() {
    ModelArtifact a = get("slow");
    if (a.getStatus() == null || a.getStatus().getTotalBytes() == null) {
      return null;
    }
    long need = a.getStatus().getTotalBytes() + OperatorEnvironment.OVERHEAD;
    for (Pod p : pods()) {
      ArtifactNodeStatus e = nodeEntry(a, p);
      if (!PodPlan.terminating(p)
          && "Running".equals(p.getStatus().getPhase())
          && PodPlan.memoryRequest(p) == need
          && e != null
          && (e.getPhase() == ArtifactPhase.Resolving || e.getPhase() == ArtifactPhase.Loading)) {
        return p;
      }
    }
    return null;
  }

  private static ArtifactNodeStatus nodeEntry(ModelArtifact a, Pod p) {
    return a.getStatus().getNodes().stream()
        .filter(e -> p.getMetadata().getName().equals(e.getPod()))
        .findFirst()
        .orElse(null);
  }

  /** The artifact's store directory on a node for the artifact's current generation. */
  private Path storeDir(SimulatedNode node, ModelArtifact a) {
    return node.hostPath(DataPlanePod.storeRoot(a, env.config)).resolve(DataPlanePod.artifactId(a));
  }

  /** The node's store directory holds exactly {@code files}, each byte-identical to its source. */
  private void assertStoreHolds(SimulatedNode node, ModelArtifact a, Map<String, Path> files)
      throws IOException {
    Path dir = storeDir(node, a);
    assertThat(dir).isDirectory();
    Set<String> present;
    try (Stream<Path> walk = Files.walk(dir)) {
      present =
          walk.filter(Files::isRegularFile)
              .map(p -> dir.relativize(p).toString())
              .collect(Collectors.toCollection(TreeSet::new));
    }
    assertThat(present).as("files in %s", dir).isEqualTo(new TreeSet<>(files.keySet()));
    for (Map.Entry<String, Path> f : files.entrySet()) {
      assertThat(Files.mismatch(dir.resolve(f.getKey()), f.getValue()))
          .as("%s on %s differs from %s", f.getKey(), node.name(), f.getValue())
          .isEqualTo(-1L);
    }
  }

  /** A real tiny sharded model: six safetensors shards and their index, from the corpus. */
  private static Map<String, Path> tinyShardedModel() throws IOException {
    Map<String, Path> files = new LinkedHashMap<>();
    try (Stream<Path> list = Files.list(corpus("index/safetensorsjl-tiny-sharded"))) {
      list.sorted().forEach(p -> files.put(p.getFileName().toString(), p));
    }
    assertThat(files).hasSize(7).containsKey("model.safetensors.index.json");
    return files;
  }

  private static Path corpus(String relative) {
    return Corpus.file(relative);
  }

  private static long size(Path p) {
    try {
      return Files.size(p);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /** The JSON header length of a safetensors file (its first 8 bytes, little-endian). */
  private static long headerLength(Path f) throws IOException {
    try (var in = Files.newInputStream(f)) {
      return java.nio.ByteBuffer.wrap(in.readNBytes(8))
          .order(java.nio.ByteOrder.LITTLE_ENDIAN)
          .getLong();
    }
  }

  /**
   * GET on a pod's control endpoint (pod IP, the operator's control port) with the artifact's admin
   * token from its Secret, body as text.
   */
  private String controlGet(Pod p, String path) throws IOException, InterruptedException {
    String artifact = p.getMetadata().getLabels().get(TensorcastConstants.LABEL_ARTIFACT);
    var secret = client.secrets().inNamespace(ns).withName(artifact + "-tensorcast").get();
    String token =
        new String(
            java.util.Base64.getDecoder()
                .decode(secret.getData().get(TensorcastConstants.SECRET_ADMIN_TOKEN)),
            StandardCharsets.UTF_8);
    var resp =
        java.net.http.HttpClient.newHttpClient()
            .send(
                java.net.http.HttpRequest.newBuilder(
                        java.net.URI.create(
                            "http://"
                                + p.getStatus().getPodIP()
                                + ":"
                                + env.config.controlPort()
                                + path))
                    .header("Authorization", "Bearer " + token)
                    .timeout(Duration.ofSeconds(5))
                    .build(),
                java.net.http.HttpResponse.BodyHandlers.ofString());
    assertThat(resp.statusCode())
        .as("GET %s on %s", path, p.getMetadata().getName())
        .isEqualTo(200);
    return resp.body();
  }

  /** Puts the files under {@code model/} in a new bucket named after the test namespace. */
  private String seed(Map<String, Path> files) {
    String bucket = ("e2e-" + ns).toLowerCase();
    env.s3.createBucket(bucket);
    files.forEach((key, path) -> env.s3.putFile(bucket, "model/" + key, path));
    return bucket;
  }

  /** Runs the real kubectl against the local control plane in the test namespace. */
  private String kubectl(String... args) throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>();
    cmd.add("kubectl");
    cmd.add("--kubeconfig=" + env.cluster.controlPlane().kubeconfig());
    cmd.add("--namespace=" + ns);
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    byte[] out;
    try (var in = p.getInputStream()) {
      out = in.readAllBytes();
    }
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).as("kubectl %s finished", cmd).isTrue();
    String text = new String(out, StandardCharsets.UTF_8);
    assertThat(p.exitValue()).as("kubectl %s: %s", String.join(" ", args), text).isZero();
    return text;
  }

  /**
   * Reads a kubectl table by the header's column offsets (values such as {@code 8.0 MiB} hold
   * spaces): column name → value of the row of {@code name}.
   */
  static Map<String, String> row(String table, String name) {
    List<String> lines = table.lines().toList();
    String header = lines.get(0);
    List<String> columns = List.of(header.trim().split("\\s+"));
    List<Integer> starts = new ArrayList<>();
    int from = 0;
    for (String c : columns) {
      int at = header.indexOf(c, from);
      starts.add(at);
      from = at + c.length();
    }
    String line =
        lines.stream()
            .filter(l -> l.startsWith(name + " "))
            .findFirst()
            .orElseThrow(() -> new AssertionError("no row " + name + " in\n" + table));
    Map<String, String> out = new LinkedHashMap<>();
    for (int i = 0; i < columns.size(); i++) {
      int end = i + 1 < columns.size() ? starts.get(i + 1) : line.length();
      out.put(columns.get(i), line.substring(starts.get(i), Math.min(end, line.length())).trim());
    }
    return out;
  }
}
