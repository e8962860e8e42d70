package io.tensorcast.e2e.operator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.Pod;
import io.tensorcast.api.TensorcastConstants;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ArtifactRef;
import io.tensorcast.api.v1alpha1.CredentialsSecretRef;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.ParallelismSpec;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.v1alpha1.ShardRankStatus;
import io.tensorcast.api.v1alpha1.ShardRule;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.api.v1alpha1.TensorShardSet;
import io.tensorcast.api.v1alpha1.TensorShardSetSpec;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.TensorInfo;
import io.tensorcast.dataplane.testing.ScaledModel;
import io.tensorcast.e2e.cluster.NodeSpec;
import io.tensorcast.e2e.cluster.SimulatedNode;
import io.tensorcast.operator.desired.ShardSetPod;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * TensorShardSets end to end on the local control plane: rank files of a model with a real
 * checkpoint's tensor names (scaled down) on two simulated RDMA nodes, each equal to the slice the
 * test cuts from the full tensor; a new parallelism re-materialises; deleting the set frees every
 * node's store; an MoE model with ep places each expert only on its owners; bad rules fail before
 * anything is stored.
 */
class TensorShardSetIT extends OperatorTestBase {
  static final Duration TIMEOUT = Duration.ofSeconds(120);

  @TempDir Path tmp;

  @BeforeEach
  void setUp() {
    for (int i = 1; i <= 2; i++) {
      nodes.add(
          env.cluster
              .kubelet()
              .addNode(
                  NodeSpec.builder(ns + "-rdma-" + i, env.cluster.nextNodeAddress())
                      .label(GROUP_LABEL, ns)
                      .allocatable("memory", "4Gi")
                      .allocatable(TensorcastConstants.RDMA_RESOURCE, "8")
                      // several data-plane pods per node (the ModelArtifact's, each set's)
                      .podAddresses(
                          env.cluster.nextNodeAddress(),
                          env.cluster.nextNodeAddress(),
                          env.cluster.nextNodeAddress(),
                          env.cluster.nextNodeAddress())
                      .build()));
    }
  }

  /** The split dim of the Llama architecture, written out independently of the rule code. */
  static Integer llamaDim(String name) {
    if (name.endsWith("norm.weight")) {
      return null;
    }
    return name.endsWith("o_proj.weight") || name.endsWith("down_proj.weight") ? 1 : 0;
  }

  @Test
  void tp4OverTwoRdmaNodesThenTp2ThenDeleteFreesTheMemory() throws Exception {
    ScaledModel.Model llama =
        ScaledModel.write("reflection-llama-3-1-70b", 2, tmp.resolve("llama"));
    String uri = seed("llama", llama.files());
    ModelArtifact ma = new ModelArtifact();
    ma.getMetadata().setName("llama");
    ma.getMetadata().setNamespace(ns);
    ModelArtifactSpec maSpec = new ModelArtifactSpec();
    maSpec.setSource(source(uri));
    maSpec.getPlacement().setReplicas(1);
    maSpec.getPlacement().setNodeSelector(Map.of(GROUP_LABEL, ns));
    ma.setSpec(maSpec);

    // The set waits for its ModelArtifact, and says so.
    TensorShardSet set = new TensorShardSet();
    set.getMetadata().setName("llama-tp4");
    set.getMetadata().setNamespace(ns);
    TensorShardSetSpec spec = new TensorShardSetSpec();
    spec.setArtifactRef(new ArtifactRef("llama"));
    spec.setParallelism(new ParallelismSpec(4, 1, 1, 1));
    spec.getPlacement().setRanksPerNode(2);
    spec.getPlacement().setRdma(RdmaPolicy.Required);
    spec.getPlacement().setNodeSelector(Map.of(GROUP_LABEL, ns));
    set.setSpec(spec);
    client.resource(set).create();
    TensorShardSet waiting = awaitSet("llama-tp4", s -> hasReason(s, "Ready", "ArtifactNotFound"));
    assertThat(waiting.getStatus().getPhase()).isEqualTo(ArtifactPhase.Pending);
    assertThat(shardPods()).isEmpty();

    client.resource(ma).create();
    TensorShardSet ready =
        awaitSet("llama-tp4", s -> s.getStatus().getPhase() == ArtifactPhase.Ready);
    var st = ready.getStatus();
    assertThat(st.getRanksReady()).isEqualTo("4/4");
    assertThat(st.getRuleSet()).isEqualTo("built-in Llama (LlamaForCausalLM)");
    assertThat(st.getParallelism()).isEqualTo("tp:4");
    assertThat(st.getRanks()).hasSize(4);
    Set<String> nodesUsed = new TreeSet<>();
    for (ShardRankStatus r : st.getRanks()) {
      assertThat(r.getPhase()).isEqualTo(ArtifactPhase.Ready);
      assertThat(r.getBytesFetched()).isGreaterThan(0);
      assertThat(r.getFile()).endsWith(String.format("rank_%05d.safetensors", r.getRank()));
      nodesUsed.add(r.getNode());
    }
    assertThat(nodesUsed).hasSize(2);
    assertThat(st.getRanks().get(0).getNode()).isEqualTo(st.getRanks().get(1).getNode());
    assertThat(st.getRanks().get(2).getNode()).isEqualTo(st.getRanks().get(3).getNode());
    // Read from the ModelArtifact's copy: every slice cut there, nothing extra crossed.
    assertThat(st.getRanks().stream().mapToLong(ShardRankStatus::getBytesFromPeers).sum())
        .isEqualTo(st.getRanks().stream().mapToLong(ShardRankStatus::getBytesNeeded).sum());
    assertThat(st.getFetchAmplification()).isEqualTo("1.000");
    for (ShardRankStatus r : st.getRanks()) {
      assertRankFile(ready, r, llama, 4, true);
    }
    // The amplification is a metric of each rank too.
    Pod pod =
        shardPods().stream()
            .filter(p -> ShardSetPod.ranks(p).contains(0))
            .findFirst()
            .orElseThrow();
    String metrics = controlGet(pod, "/metrics");
    assertThat(metrics)
        .containsPattern(
            "tensorcast_dataplane_shard_fetch_amplification\\{artifact=\"[^\"]+\",rank=\"0\",?\\} 1\\.0");
    Map<String, String> row = row(kubectl("get", "tss"), "llama-tp4");
    assertThat(row).containsEntry("RANKS READY", "4/4").containsEntry("PHASE", "Ready");
    assertThat(row.get("SIZE PER RANK")).isEqualTo(st.getSizePerRank()).isNotBlank();
    assertThat(kubectl("get", "tensorcast")).contains("llama-tp4").contains("llama");

    assertSetIsolation(ready, pod);

    // tp 4 -> 2: a new generation, new rank files; the old ones go.
    Path oldDir = setDir(nodeOf(st.getRanks().get(0).getNode()), ready);
    TensorShardSet fresh = resource("llama-tp4").get();
    fresh.getSpec().getParallelism().setTp(2);
    fresh.getSpec().getPlacement().setRanksPerNode(1);
    client.resource(fresh).update();
    TensorShardSet tp2 =
        awaitSet(
            "llama-tp4",
            s ->
                s.getStatus().getObservedGeneration() == 2
                    && s.getStatus().getPhase() == ArtifactPhase.Ready);
    assertThat(tp2.getStatus().getRanksReady()).isEqualTo("2/2");
    for (ShardRankStatus r : tp2.getStatus().getRanks()) {
      assertRankFile(tp2, r, llama, 2, false);
    }
    await().atMost(TIMEOUT).until(() -> !Files.exists(oldDir));

    // Delete frees the memory: pods gone, stores empty.
    List<Path> dirs = new ArrayList<>();
    for (ShardRankStatus r : tp2.getStatus().getRanks()) {
      dirs.add(setDir(nodeOf(r.getNode()), tp2));
    }
    kubectl("delete", "tss", "llama-tp4", "--wait=false");
    await()
        .atMost(TIMEOUT)
        .until(() -> resource("llama-tp4").get() == null && shardPods().isEmpty());
    for (Path d : dirs) {
      assertThat(d).doesNotExist();
    }
  }

  @Test
  void moeWithEpPlacesEachExpertOnlyOnItsOwnersAndBadRulesFailBeforeLoading() throws Exception {
    ScaledModel.Model mixtral =
        ScaledModel.write("mixtral-dolphin-v2-5", 1, tmp.resolve("mixtral"));
    assertThat(mixtral.experts()).isEqualTo(8);
    String uri = seed("mixtral", mixtral.files());
    TensorShardSet set = new TensorShardSet();
    set.getMetadata().setName("mixtral-ep2");
    set.getMetadata().setNamespace(ns);
    TensorShardSetSpec spec = new TensorShardSetSpec();
    spec.setSource(source(uri));
    spec.setParallelism(new ParallelismSpec(2, 1, 1, 2));
    spec.getPlacement().setRanksPerNode(2);
    spec.getPlacement().setNodeSelector(Map.of(GROUP_LABEL, ns));
    set.setSpec(spec);
    client.resource(set).create();
    TensorShardSet ready =
        awaitSet("mixtral-ep2", s -> s.getStatus().getPhase() == ArtifactPhase.Ready);
    assertThat(ready.getStatus().getRuleSet()).isEqualTo("built-in Mixtral (MixtralForCausalLM)");
    assertThat(ready.getStatus().getParallelism()).isEqualTo("ep:2,tp:2");
    for (ShardRankStatus r : ready.getStatus().getRanks()) {
      int ep = r.getRank() / 2;
      Path file =
          setDir(nodeOf(r.getNode()), ready)
              .resolve("ep" + ep)
              .resolve(String.format("rank_%05d.safetensors", r.getRank() % 2));
      SafetensorsHeader h = SafetensorsHeader.read(file);
      Set<Integer> experts = new TreeSet<>();
      for (TensorInfo t : h.tensors()) {
        var m = java.util.regex.Pattern.compile("experts\\.([0-9]+)\\.").matcher(t.name());
        if (m.find()) {
          experts.add(Integer.parseInt(m.group(1)));
        }
      }
      assertThat(experts)
          .as("experts of rank %d", r.getRank())
          .containsExactlyElementsOf(ep == 0 ? List.of(0, 1, 2, 3) : List.of(4, 5, 6, 7));
      assertThat(h.tensor("model.norm.weight")).isPresent();
      assertThat(Files.exists(file.resolveSibling("manifest.json"))).isTrue();
    }

    // ep 3 does not divide 8 experts: Failed with the numbers, no rank file stored.
    TensorShardSet bad = new TensorShardSet();
    bad.getMetadata().setName("mixtral-ep3");
    bad.getMetadata().setNamespace(ns);
    TensorShardSetSpec badSpec = new TensorShardSetSpec();
    badSpec.setSource(source(uri));
    badSpec.setParallelism(new ParallelismSpec(1, 1, 1, 3)); // tp 1, pp 1, dp 1, ep 3
    badSpec.getPlacement().setRanksPerNode(3);
    badSpec.getPlacement().setNodeSelector(Map.of(GROUP_LABEL, ns));
    bad.setSpec(badSpec);
    client.resource(bad).create();
    TensorShardSet failed =
        awaitSet("mixtral-ep3", s -> s.getStatus().getPhase() == ArtifactPhase.Failed);
    var readyCond = condition(failed, "Ready");
    assertThat(readyCond.getReason()).isEqualTo("ExpertsNotDivisible");
    assertThat(readyCond.getMessage()).contains("8 experts").contains("ep 3");
    // The failure is a Warning event with the condition's reason and message, written once.
    List<io.fabric8.kubernetes.api.model.Event> events =
        await()
            .atMost(Duration.ofSeconds(30))
            .until(
                () ->
                    client.v1().events().inNamespace(ns).list().getItems().stream()
                        .filter(e -> "TensorShardSet".equals(e.getInvolvedObject().getKind()))
                        .filter(e -> "mixtral-ep3".equals(e.getInvolvedObject().getName()))
                        .filter(e -> "ExpertsNotDivisible".equals(e.getReason()))
                        .toList(),
                l -> !l.isEmpty());
    assertThat(events)
        .singleElement()
        .satisfies(
            e -> {
              assertThat(e.getType()).isEqualTo("Warning");
              assertThat(e.getMessage()).isEqualTo(readyCond.getMessage());
              assertThat(e.getCount()).isEqualTo(1);
              assertThat(e.getInvolvedObject().getUid()).isEqualTo(failed.getMetadata().getUid());
            });

    // An explicit rule that matches nothing.
    TensorShardSet stray = new TensorShardSet();
    stray.getMetadata().setName("mixtral-stray");
    stray.getMetadata().setNamespace(ns);
    TensorShardSetSpec straySpec = new TensorShardSetSpec();
    straySpec.setSource(source(uri));
    straySpec.setParallelism(new ParallelismSpec(2, 1, 1, 1));
    straySpec.setRules(List.of(ShardRule.replicated("."), ShardRule.split("no_such_tensor$", 0)));
    straySpec.getPlacement().setNodeSelector(Map.of(GROUP_LABEL, ns));
    stray.setSpec(straySpec);
    client.resource(stray).create();
    TensorShardSet strayFailed =
        awaitSet("mixtral-stray", s -> s.getStatus().getPhase() == ArtifactPhase.Failed);
    assertThat(condition(strayFailed, "Ready").getReason()).isEqualTo("RuleMatchesNoTensor");
    assertThat(condition(strayFailed, "Ready").getMessage()).contains("no_such_tensor$");
    await()
        .atMost(TIMEOUT)
        .until(
            () ->
                shardPods().stream()
                    .noneMatch(
                        p ->
                            !p.getMetadata()
                                .getLabels()
                                .get(ShardSetPod.LABEL_SHARD_SET)
                                .equals("mixtral-ep2")));
  }

  // ---------------------------------------------------------------------------------- helpers

  private void assertRankFile(
      TensorShardSet set, ShardRankStatus r, ScaledModel.Model model, int tp, boolean all)
      throws Exception {
    Path file =
        setDir(nodeOf(r.getNode()), set)
            .resolve(String.format("rank_%05d.safetensors", r.getRank()));
    assertThat(file).isRegularFile();
    byte[] bytes = Files.readAllBytes(file);
    SafetensorsHeader h = SafetensorsHeader.read(file);
    assertThat(h.tensors())
        .extracting(TensorInfo::name)
        .containsExactlyInAnyOrderElementsOf(model.tensors().keySet());
    for (TensorInfo t : h.tensors()) {
      byte[] got =
          Arrays.copyOfRange(
              bytes, (int) (h.dataOffset() + t.begin()), (int) (h.dataOffset() + t.end()));
      assertThat(got)
          .as("rank %d of %d, tensor %s on %s", r.getRank(), tp, t.name(), r.getNode())
          .isEqualTo(
              ScaledModel.slice(
                  model.tensors().get(t.name()), llamaDim(t.name()), r.getRank(), tp));
    }
    if (all) {
      assertThat(h.tensor("model.norm.weight")).isPresent();
    }
  }

  private SimulatedNode nodeOf(String name) {
    return nodes.stream().filter(n -> n.name().equals(name)).findFirst().orElseThrow();
  }

  private Path setDir(SimulatedNode node, TensorShardSet set) {
    return node.hostPath(ShardSetPod.storeRoot(set, env.config))
        .resolve(ShardSetPod.artifactId(set));
  }

  private SourceSpec source(String uri) {
    SourceSpec s = new SourceSpec();
    s.setUri(uri);
    s.setEndpoint(env.s3.endpoint().toString());
    s.setRegion(S3MockServer.REGION);
    s.setPathStyle(true);
    s.setCredentialsSecretRef(new CredentialsSecretRef(CREDENTIALS));
    s.setInsecureEndpoint(true); // S3Mock serves plain http on loopback
    return s;
  }

  private String seed(String prefix, Map<String, Path> files) {
    String bucket = ("tss-" + ns).toLowerCase();
    if (!env.s3.client().listBuckets().buckets().stream().anyMatch(b -> b.name().equals(bucket))) {
      env.s3.createBucket(bucket);
    }
    files.forEach((k, p) -> env.s3.putFile(bucket, prefix + "/" + k, p));
    return "s3://" + bucket + "/" + prefix + "/";
  }

  private io.fabric8.kubernetes.client.dsl.Resource<TensorShardSet> resource(String name) {
    return client.resources(TensorShardSet.class).inNamespace(ns).withName(name);
  }

  private TensorShardSet awaitSet(String name, Predicate<TensorShardSet> test) {
    return await()
        .atMost(TIMEOUT)
        .pollInterval(Duration.ofMillis(250))
        .until(() -> resource(name).get(), s -> s != null && s.getStatus() != null && test.test(s));
  }

  private static boolean hasReason(TensorShardSet s, String type, String reason) {
    return s.getStatus().getConditions().stream()
        .anyMatch(c -> type.equals(c.getType()) && reason.equals(c.getReason()));
  }

  private static io.fabric8.kubernetes.api.model.Condition condition(
      TensorShardSet s, String type) {
    return s.getStatus().getConditions().stream()
        .filter(c -> type.equals(c.getType()))
        .findFirst()
        .orElseThrow();
  }

  private List<Pod> shardPods() {
    return client.pods().inNamespace(ns).withLabel(ShardSetPod.LABEL_SHARD_SET).list().getItems();
  }

  /**
   * The set's own Secret and NetworkPolicy (owned by it, not the ModelArtifact's of the same
   * namespace), its pod's mounts (the set's folder only, the artifact's read token alone and
   * read-only), and on the real sockets: the artifact's pod refuses {@code /v1/tensors} without a
   * token and with the set's own read token, and serves it with the artifact's read token that the
   * set's pod holds.
   */
  private void assertSetIsolation(TensorShardSet set, Pod pod) throws Exception {
    String uid = set.getMetadata().getUid();
    io.fabric8.kubernetes.api.model.Secret own =
        client.secrets().inNamespace(ns).withName("llama-tp4-tss-tensorcast").get();
    assertThat(own).as("Secret llama-tp4-tss-tensorcast").isNotNull();
    assertThat(own.getMetadata().getOwnerReferences())
        .singleElement()
        .satisfies(
            o -> {
              assertThat(o.getKind()).isEqualTo("TensorShardSet");
              assertThat(o.getUid()).isEqualTo(uid);
            });
    io.fabric8.kubernetes.api.model.Secret artifactSecret =
        client.secrets().inNamespace(ns).withName("llama-tensorcast").get();
    Map<String, String> setValues = decoded(own);
    Map<String, String> artifactValues = decoded(artifactSecret);
    assertThat(setValues).containsOnlyKeys("peer-secret", "read-token", "admin-token");
    for (String k : List.of("peer-secret", "read-token", "admin-token")) {
      assertThat(setValues.get(k)).as(k).isNotEqualTo(artifactValues.get(k));
    }
    var np =
        client
            .network()
            .v1()
            .networkPolicies()
            .inNamespace(ns)
            .withName("llama-tp4-tss-tensorcast")
            .get();
    assertThat(np).as("NetworkPolicy llama-tp4-tss-tensorcast").isNotNull();
    assertThat(np.getMetadata().getOwnerReferences().get(0).getUid()).isEqualTo(uid);
    assertThat(np.getSpec().getPodSelector().getMatchLabels())
        .containsEntry(ShardSetPod.LABEL_SHARD_SET, "llama-tp4");
    assertThat(np.getSpec().getIngress())
        .singleElement()
        .satisfies(
            r ->
                assertThat(r.getPorts().get(0).getPort().getIntVal())
                    .isEqualTo(env.config.controlPort()));

    // The pod: one host directory (the set's), its own Secret, the artifact's read token only.
    String root = ShardSetPod.storeRoot(set, env.config);
    assertThat(pod.getSpec().getVolumes())
        .filteredOn(v -> v.getHostPath() != null)
        .extracting(v -> v.getHostPath().getPath())
        .containsExactly(root);
    assertThat(pod.getSpec().getVolumes())
        .filteredOn(v -> v.getSecret() != null)
        .extracting(v -> v.getSecret().getSecretName())
        .containsExactlyInAnyOrder("llama-tp4-tss-tensorcast", "llama-tensorcast");
    assertThat(pod.getSpec().getVolumes())
        .filteredOn(
            v -> v.getSecret() != null && "llama-tensorcast".equals(v.getSecret().getSecretName()))
        .singleElement()
        .satisfies(
            v ->
                assertThat(v.getSecret().getItems())
                    .extracting(i -> i.getKey())
                    .containsExactly("read-token"));
    assertThat(pod.getMetadata().getLabels())
        .containsEntry(TensorcastConstants.CONSUMER_LABEL_PREFIX + "llama", "true");
    assertThat(pod.getSpec().getSecurityContext().getRunAsNonRoot()).isTrue();

    // Real sockets: the artifact's pod admits only its own read token.
    Pod artifactPod =
        client
            .pods()
            .inNamespace(ns)
            .withLabel(TensorcastConstants.LABEL_ARTIFACT, "llama")
            .list()
            .getItems()
            .stream()
            .filter(p -> p.getStatus().getPodIP() != null)
            .findFirst()
            .orElseThrow();
    assertThat(tensorsStatus(artifactPod, null)).isEqualTo(401);
    assertThat(tensorsStatus(artifactPod, setValues.get("read-token"))).isEqualTo(401);
    assertThat(tensorsStatus(artifactPod, artifactValues.get("read-token"))).isEqualTo(200);
    // And the set's pod, in turn, refuses the artifact's token on its own endpoint.
    assertThat(tensorsStatus(pod, artifactValues.get("read-token"))).isEqualTo(401);
    assertThat(tensorsStatus(pod, setValues.get("read-token"))).isEqualTo(200);
  }

  private int tensorsStatus(Pod p, String token) throws IOException, InterruptedException {
    var req =
        java.net.http.HttpRequest.newBuilder(
                java.net.URI.create(
                    "http://"
                        + p.getStatus().getPodIP()
                        + ":"
                        + env.config.controlPort()
                        + "/v1/tensors"))
            .timeout(Duration.ofSeconds(5));
    if (token != null) {
      req.header("Authorization", "Bearer " + token);
    }
    return java.net.http.HttpClient.newHttpClient()
        .send(req.build(), java.net.http.HttpResponse.BodyHandlers.discarding())
        .statusCode();
  }

  private static Map<String, String> decoded(io.fabric8.kubernetes.api.model.Secret s) {
    Map<String, String> out = new java.util.TreeMap<>();
    s.getData()
        .forEach(
            (k, v) ->
                out.put(
                    k,
                    new String(
                        java.util.Base64.getDecoder().decode(v),
                        java.nio.charset.StandardCharsets.UTF_8)));
    return out;
  }

  private String controlGet(Pod p, String path) throws IOException, InterruptedException {
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
                    .timeout(Duration.ofSeconds(5))
                    .build(),
                java.net.http.HttpResponse.BodyHandlers.ofString());
    assertThat(resp.statusCode()).isEqualTo(200);
    return resp.body();
  }

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
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
    String text = new String(out, java.nio.charset.StandardCharsets.UTF_8);
    assertThat(p.exitValue()).as("kubectl %s: %s", String.join(" ", args), text).isZero();
    return text;
  }

  /** A kubectl table row by the header's column offsets; column names may hold one space. */
  static Map<String, String> row(String table, String name) {
    List<String> lines = table.lines().toList();
    String header = lines.get(0);
    List<String> columns = List.of(header.trim().split("\\s{2,}"));
    List<Integer> starts = new ArrayList<>();
    int from = 0;
    for (String c : columns) {
      int at = header.indexOf(c, from);
      starts.add(at);
      from = at + c.length();
    }
    String line = lines.stream().filter(l -> l.startsWith(name + " ")).findFirst().orElseThrow();
    Map<String, String> out = new java.util.LinkedHashMap<>();
    for (int i = 0; i < columns.size(); i++) {
      int end = i + 1 < columns.size() ? starts.get(i + 1) : line.length();
      out.put(columns.get(i), line.substring(starts.get(i), Math.min(end, line.length())).trim());
    }
    return out;
  }
}
