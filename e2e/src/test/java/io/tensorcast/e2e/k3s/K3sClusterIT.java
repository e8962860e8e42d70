package io.tensorcast.e2e.k3s;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.marcnuri.helm.Helm;
import io.fabric8.kubernetes.api.model.NamespaceBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.tensorcast.api.v1alpha1.ArtifactNodeStatus;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.CredentialsSecretRef;
import io.tensorcast.api.v1alpha1.DistributionMode;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import io.tensorcast.api.v1alpha1.ModelArtifactSpec;
import io.tensorcast.api.v1alpha1.RdmaPolicy;
import io.tensorcast.api.v1alpha1.SourceSpec;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.S3MockServer;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.Container;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.Network;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.images.builder.ImageFromDockerfile;
import org.testcontainers.k3s.K3sContainer;
import org.testcontainers.utility.DockerImageName;
import org.testcontainers.utility.MountableFile;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;

/**
 * The main scenarios on a real Kubernetes distribution, k3s, through Testcontainers: a k3s server
 * and a k3s agent (two nodes) in Docker, the images built by this build from the modules'
 * Dockerfiles (ImageFromDockerfile) and imported into both nodes' containerd, the chart installed
 * with Helm, S3Mock in a container on the same Docker network. A ModelArtifact from S3 becomes
 * Ready on both nodes peer to peer (each byte read from the source about once), and deleting it
 * removes its pods and frees the store on both nodes.
 *
 * <p>Needs a Docker engine (and the registry for rancher/k3s and eclipse-temurin). Without one the
 * every test is reported as skipped, with the reason, on the console ("[SKIPPED] K3sClusterIT") and
 * in the failsafe report; {@code ./tensorcast test} lists skipped tests after the build, so it is
 * never counted as passed. See README, "The k3s suite".
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 15, unit = java.util.concurrent.TimeUnit.MINUTES)
class K3sClusterIT {

  static final DockerImageName K3S = DockerImageName.parse("rancher/k3s:v1.31.4-k3s1");
  static final String TAG = "k3s-e2e";
  static final String TOKEN = "tensorcast-k3s-e2e";
  static final String NS = "models";
  static final Path ROOT =
      Path.of(System.getProperty("tensorcast.repo.dir", "..")).toAbsolutePath().normalize();
  static final long SHM = 2L * 1024 * 1024 * 1024;

  static Network network;
  static K3sContainer server;
  static GenericContainer<?> agent;
  static GenericContainer<?> s3;
  static KubernetesClient client;
  static Map<String, Path> model;

  /** Why the suite cannot run here (no Docker engine), or null. */
  static String skipReason;

  @BeforeAll
  static void startCluster() throws Exception {
    skipReason = dockerUnavailableReason();
    if (skipReason != null) {
      System.out.println(
          "[SKIPPED] K3sClusterIT: "
              + skipReason
              + " - the k3s suite did not run (README, \"The k3s suite\", says how to run it)");
      return;
    }
    String operatorImage = build("operator", "tensorcast-operator.jar", List.of());
    String dataplaneImage =
        build(
            "dataplane",
            "tensorcast-dataplane.jar",
            List.of(
                "src/main/launcher/dataplane",
                "src/main/launcher/load.jvm-options",
                "src/main/launcher/train-class-data",
                "target/test-servers/s3mock-exec.jar",
                "target/tensorcast-dataplane.natives"));
    String csiDriverImage = build("csi-driver", "tensorcast-csi-driver.jar", List.of());

    network = Network.newNetwork();
    server =
        new K3sContainer(K3S)
            .withNetwork(network)
            .withNetworkAliases("k3s-server")
            .withSharedMemorySize(SHM)
            .withCommand(
                "server",
                "--disable=traefik",
                "--disable=metrics-server",
                "--token=" + TOKEN,
                "--tls-san=" + DockerClientFactory.instance().dockerHostIpAddress(),
                "--tls-san=k3s-server");
    server.start();
    agent =
        new GenericContainer<>(K3S)
            .withNetwork(network)
            .withPrivilegedMode(true)
            .withSharedMemorySize(SHM)
            .withTmpFs(Map.of("/run", "rw", "/var/run", "rw"))
            .withEnv("K3S_URL", "https://k3s-server:6443")
            .withEnv("K3S_TOKEN", TOKEN)
            .withCommand("agent")
            .withCreateContainerCmdModifier(c -> c.withHostName("k3s-agent"));
    agent.start();

    Path s3mockJar =
        Path.of(System.getProperty("tensorcast.s3mock.jar", "target/test-servers/s3mock-exec.jar"));
    s3 =
        new GenericContainer<>(DockerImageName.parse(baseImage()))
            .withNetwork(network)
            .withNetworkAliases("s3")
            .withCopyFileToContainer(MountableFile.forHostPath(s3mockJar), "/opt/s3mock.jar")
            .withCommand(
                "java",
                "-Xmx512m",
                "-jar",
                "/opt/s3mock.jar",
                "--com.adobe.testing.s3mock.httpPort=9090",
                "--com.adobe.testing.s3mock.max-payload-size=512MB",
                "--spring.main.banner-mode=off")
            .withExposedPorts(9090)
            .waitingFor(Wait.forListeningPort().withStartupTimeout(Duration.ofMinutes(2)));
    s3.start();

    for (GenericContainer<?> node : List.of(server, agent)) {
      importImage(node, operatorImage);
      importImage(node, dataplaneImage);
      importImage(node, csiDriverImage);
    }
    String kubeconfig = server.getKubeConfigYaml();
    client = new KubernetesClientBuilder().withConfig(Config.fromKubeconfig(kubeconfig)).build();
    await()
        .atMost(Duration.ofMinutes(3))
        .until(
            () ->
                client.nodes().list().getItems().stream()
                        .filter(
                            n ->
                                n.getStatus().getConditions().stream()
                                    .anyMatch(
                                        c ->
                                            "Ready".equals(c.getType())
                                                && "True".equals(c.getStatus())))
                        .count()
                    == 2);

    Path kubeconfigFile = Files.createTempFile("k3s", ".kubeconfig");
    Files.writeString(kubeconfigFile, kubeconfig);
    new Helm(ROOT.resolve("charts/tensorcast"))
        .install()
        .withName("tensorcast")
        .withNamespace("tensorcast")
        .createNamespace()
        .withKubeConfig(kubeconfigFile)
        .set("operator.image.repository", "tensorcast/operator")
        .set("operator.image.tag", TAG)
        .set("operator.image.pullPolicy", "Never")
        .set("dataplane.image.repository", "tensorcast/dataplane")
        .set("dataplane.image.tag", TAG)
        .set("dataplane.image.pullPolicy", "Never")
        .set("dataplane.memoryOverhead", "192Mi")
        .set("rdmaDevicePlugin.enabled", "false")
        .set("csiDriver.image", csiDriverImage)
        .set("csiDriver.imagePullPolicy", "IfNotPresent")
        .waitReady()
        .withTimeout(300)
        .call();

    client
        .namespaces()
        .resource(new NamespaceBuilder().withNewMetadata().withName(NS).endMetadata().build())
        .create();
    client
        .resource(
            new SecretBuilder()
                .withNewMetadata()
                .withName("s3-credentials")
                .withNamespace(NS)
                .endMetadata()
                .withStringData(
                    Map.of(
                        CredentialsSecretRef.DEFAULT_ACCESS_KEY_ID_KEY, S3MockServer.ACCESS_KEY,
                        CredentialsSecretRef.DEFAULT_SECRET_ACCESS_KEY_KEY,
                            S3MockServer.SECRET_KEY))
                .build())
        .create();
    model = seed();
  }

  /**
   * Aborts each test, not the class, without a Docker engine: JUnit then reports every test as
   * skipped with the reason (an abort in {@code @BeforeAll} is reported as zero tests run).
   */
  @BeforeEach
  void requireDocker() {
    Assumptions.assumeTrue(skipReason == null, () -> "k3s suite skipped: " + skipReason);
  }

  @AfterAll
  static void stopCluster() {
    if (client != null) {
      client.close();
    }
    for (AutoCloseable c : new AutoCloseable[] {s3, agent, server, network}) {
      if (c != null) {
        try {
          c.close();
        } catch (Exception e) {
          System.err.println("K3sClusterIT: stopping " + c + ": " + e);
        }
      }
    }
  }

  @Test
  @Order(1)
  void modelArtifactFromS3IsReadyOnTwoNodesPeerToPeer() {
    ModelArtifact a = new ModelArtifact();
    a.getMetadata().setName("tiny");
    a.getMetadata().setNamespace(NS);
    ModelArtifactSpec spec = new ModelArtifactSpec();
    SourceSpec source = new SourceSpec();
    source.setUri("s3://models/tiny/");
    source.setEndpoint("http://" + s3NetworkAddress() + ":9090");
    source.setInsecureEndpoint(true);
    source.setRegion(S3MockServer.REGION);
    source.setPathStyle(true);
    source.setCredentialsSecretRef(new CredentialsSecretRef("s3-credentials"));
    spec.setSource(source);
    spec.getPlacement().setReplicas(2);
    spec.getPlacement().setRdma(RdmaPolicy.Disabled);
    // The non-root data plane page-locks only up to the memlock limit k3s' containerd gives it.
    spec.getMemory().setPinned(false);
    spec.getDistribution().setMode(DistributionMode.PeerToPeer);
    a.setSpec(spec);
    client.resource(a).create();

    ModelArtifact ready =
        await()
            .atMost(Duration.ofMinutes(5))
            .pollInterval(Duration.ofSeconds(1))
            .until(
                () -> client.resources(ModelArtifact.class).inNamespace(NS).withName("tiny").get(),
                m -> m.getStatus() != null && m.getStatus().getPhase() == ArtifactPhase.Ready);
    long total = model.values().stream().mapToLong(K3sClusterIT::size).sum();
    assertThat(ready.getStatus().getReady()).isEqualTo("2/2");
    assertThat(ready.getStatus().getTotalBytes()).isEqualTo(total);
    assertThat(ready.getStatus().getNodes())
        .extracting(ArtifactNodeStatus::getNode)
        .doesNotHaveDuplicates()
        .hasSize(2);
    assertThat(ready.getStatus().getNodes())
        .allSatisfy(n -> assertThat(n.getBytesLoaded()).isEqualTo(total));
    assertThat(ready.getStatus().getBytesFromSource())
        .as("bytes read from the source by both nodes together, peer to peer")
        .isBetween(total, total + total / 10);
  }

  @Test
  @Order(2)
  void deletingTheArtifactRemovesItsPodsAndFreesBothStores() throws Exception {
    client.resources(ModelArtifact.class).inNamespace(NS).withName("tiny").delete();
    await()
        .atMost(Duration.ofMinutes(2))
        .until(
            () ->
                client.resources(ModelArtifact.class).inNamespace(NS).withName("tiny").get() == null
                    && client.pods().inNamespace(NS).list().getItems().isEmpty());
    for (GenericContainer<?> node : List.of(server, agent)) {
      Container.ExecResult ls =
          node.execInContainer("sh", "-c", "ls -A /dev/shm/tensorcast 2>/dev/null || true");
      assertThat(ls.getStdout().strip())
          .as("store root on %s after delete", node.getContainerName())
          .isEmpty();
    }
    List<Pod> left = client.pods().inNamespace(NS).list().getItems();
    assertThat(left).isEmpty();
  }

  // ---------------------------------------------------------------------------------- helpers

  /** Why no Docker engine can be used, or null when one can. */
  static String dockerUnavailableReason() {
    try {
      return DockerClientFactory.instance().isDockerAvailable()
          ? null
          : "no Docker engine found (DOCKER_HOST unset and no /var/run/docker.sock)";
    } catch (RuntimeException | LinkageError e) {
      return "no Docker engine usable: " + e.getMessage();
    }
  }

  /** The base image the Dockerfiles pin (their {@code ARG BASE_IMAGE}). */
  static String baseImage() throws IOException {
    return Files.readAllLines(ROOT.resolve("operator/Dockerfile")).stream()
        .filter(l -> l.startsWith("ARG BASE_IMAGE="))
        .map(l -> l.substring("ARG BASE_IMAGE=".length()))
        .findFirst()
        .orElseThrow();
  }

  /** Builds {@code tensorcast/<module>:k3s-e2e} from the module's Dockerfile and build output. */
  static String build(String module, String jar, List<String> extra) {
    Path dir = ROOT.resolve(module);
    String name = "tensorcast/" + module + ":" + TAG;
    ImageFromDockerfile image =
        new ImageFromDockerfile(name, false)
            .withFileFromPath("Dockerfile", dir.resolve("Dockerfile"))
            .withFileFromPath("target/" + jar, dir.resolve("target").resolve(jar))
            .withFileFromPath("target/bom.json", dir.resolve("target/bom.json"));
    for (String f : extra) {
      image = image.withFileFromPath(f, dir.resolve(f));
    }
    image.get();
    return name;
  }

  /** Copies {@code image} out of the Docker engine into {@code node}'s containerd. */
  static void importImage(GenericContainer<?> node, String image) throws Exception {
    Path tar = Files.createTempFile("image", ".tar");
    try (InputStream in = DockerClientFactory.instance().client().saveImageCmd(image).exec()) {
      Files.copy(in, tar, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    }
    node.copyFileToContainer(MountableFile.forHostPath(tar), "/tmp/image.tar");
    Container.ExecResult r =
        node.execInContainer("ctr", "-n", "k8s.io", "images", "import", "/tmp/image.tar");
    assertThat(r.getExitCode()).as("ctr import %s: %s", image, r.getStderr()).isZero();
    Files.deleteIfExists(tar);
  }

  /** S3Mock's address on the Docker network, which pods reach through their node. */
  static String s3NetworkAddress() {
    return s3.getContainerInfo()
        .getNetworkSettings()
        .getNetworks()
        .values()
        .iterator()
        .next()
        .getIpAddress();
  }

  static Map<String, Path> seed() throws IOException {
    Map<String, Path> files = new LinkedHashMap<>();
    try (Stream<Path> list = Files.list(Corpus.dir().resolve("index/safetensorsjl-tiny-sharded"))) {
      list.sorted().forEach(p -> files.put(p.getFileName().toString(), p));
    }
    try (S3Client s3Client =
        S3Client.builder()
            .endpointOverride(URI.create("http://" + s3.getHost() + ":" + s3.getMappedPort(9090)))
            .region(Region.of(S3MockServer.REGION))
            .forcePathStyle(true)
            .credentialsProvider(
                StaticCredentialsProvider.create(
                    AwsBasicCredentials.create(S3MockServer.ACCESS_KEY, S3MockServer.SECRET_KEY)))
            .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
            .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED)
            .build()) {
      s3Client.createBucket(b -> b.bucket("models"));
      files.forEach(
          (name, path) ->
              s3Client.putObject(
                  b -> b.bucket("models").key("tiny/" + name), RequestBody.fromFile(path)));
    }
    return files;
  }

  static long size(Path p) {
    try {
      return Files.size(p);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }
}
