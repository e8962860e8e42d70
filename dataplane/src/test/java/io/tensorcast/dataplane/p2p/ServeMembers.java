package io.tensorcast.dataplane.p2p;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.tensorcast.api.wire.DataPlaneStatus;
import io.tensorcast.api.wire.DataPlaneStatus.Phase;
import io.tensorcast.dataplane.cli.ServeArguments;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.testing.ServeCommandLine;
import io.tensorcast.testing.TestFiles;
import io.tensorcast.testing.TestPorts;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * Real {@code serve} members of one test's swarm on loopback, in this JVM ({@link #startInProcess})
 * or as {@code dataplane serve} JVMs ({@link #startProcess}), each on a store root of its own under
 * /dev/shm; {@link #close} stops them all, closes {@link #closeables}, prints the processes' logs
 * and deletes the roots. The members of a test class share one peer secret and one pair of read and
 * admin tokens ({@link Swarm}).
 */
final class ServeMembers implements AutoCloseable {
  /** Members in this JVM; closed at once by {@link #close}. */
  final List<DataPlaneServer> servers = new ArrayList<>();

  /** {@code dataplane serve} JVMs; destroyed by {@link #close}. */
  final List<Process> processes = new ArrayList<>();

  /** Log files of the processes, printed by {@link #close}. */
  final List<Path> logs = new ArrayList<>();

  /** Whatever else the test started (proxies, rogue peers); closed by {@link #close}. */
  final List<AutoCloseable> closeables = new ArrayList<>();

  /** Store roots; deleted by {@link #close}. */
  final List<Path> dirs = new ArrayList<>();

  private final String name;
  private final Map<String, Path> files;
  private final Duration ready;
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  /**
   * The artifact every member of a test class loads ({@code artifactId} from {@code uri}) and the
   * files every member reads: the peer secret (base64 of the swarm's key), the read and admin
   * tokens, deleted at JVM exit.
   */
  record Swarm(
      String artifactId, String uri, Path secretFile, Path readTokenFile, Path adminTokenFile) {
    static Swarm write(String name, String artifactId, String uri, byte[] secret)
        throws IOException {
      Path dir = Files.createTempDirectory("tensorcast-" + name + "-secrets-");
      dir.toFile().deleteOnExit();
      Swarm s =
          new Swarm(
              artifactId,
              uri,
              Files.writeString(
                  dir.resolve("peer-secret"), Base64.getEncoder().encodeToString(secret)),
              Files.writeString(dir.resolve("read-token"), PeerToPeerLoadIT.READ_TOKEN),
              Files.writeString(dir.resolve("admin-token"), PeerToPeerLoadIT.ADMIN_TOKEN));
      for (Path f : List.of(s.secretFile, s.readTokenFile, s.adminTokenFile)) {
        f.toFile().deleteOnExit();
      }
      return s;
    }

    /**
     * {@code serve} of a member: the artifact from the S3-compatible {@code endpoint}, a store root
     * of 64 MiB budget, 2 source connections, peer {@code id} on {@code peerListen} with 64 KiB
     * pieces, the swarm's secret and tokens. No {@code --listen}, {@code --peers} or {@code
     * --peer-timeout}: the test adds those.
     */
    ServeCommandLine member(URI endpoint, Path root, String id, InetSocketAddress peerListen) {
      return ServeCommandLine.serve(artifactId, uri)
          .s3(endpoint)
          .flag("--allow-insecure-endpoint")
          .store(root, "64Mi")
          .option("--concurrency", "2")
          .option("--peer-id", id)
          .option("--peer-listen", hostPort(peerListen))
          .option("--piece-size", "64Ki")
          .option("--peer-secret-file", secretFile.toString())
          .tokenFiles(readTokenFile, adminTokenFile);
    }
  }

  /**
   * @param name names the store roots ({@code tensorcast-<name>-…}) and logs
   * @param files path in the artifact → the file it must equal byte for byte once Ready
   * @param ready how long {@link #awaitReady} waits
   */
  ServeMembers(String name, Map<String, Path> files, Duration ready) {
    this.name = name;
    this.files = files;
    this.ready = ready;
  }

  /** A new empty store root under /dev/shm, deleted by {@link #close}. */
  Path newRoot() throws IOException {
    Path root = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-" + name + "-");
    dirs.add(root);
    return root;
  }

  /**
   * Starts {@code args} in this JVM with {@code --listen 127.0.0.1:0} and S3Mock's credentials (not
   * added to {@link #servers}); each option of {@code extra} (name, value pairs) is put last in
   * place of the one already in {@code args}.
   */
  static DataPlaneServer startInProcess(List<String> args, String... extra) throws Exception {
    List<String> all = new ArrayList<>(args);
    all.addAll(List.of("--listen", "127.0.0.1:0"));
    replaceOptions(all, extra);
    return DataPlaneServer.start(ServeArguments.parse(all, ServeCommandLine.s3MockCredentials()));
  }

  /**
   * Puts each option of {@code extra} (name, value pairs) last in {@code args}, in place of the one
   * already there.
   */
  static void replaceOptions(List<String> args, String... extra) {
    for (int i = 0; i + 1 < extra.length; i += 2) {
      int at = args.indexOf(extra[i]);
      if (at >= 0) {
        args.remove(at + 1);
        args.remove(at);
      }
    }
    args.addAll(List.of(extra));
  }

  /**
   * Starts {@code java -jar <dataplane jar> <args>} with S3Mock's credentials as its only AWS
   * settings, its output in a log printed by {@link #close}; added to {@link #processes}.
   */
  Process startProcess(String member, List<String> args) throws IOException {
    Path log = Files.createTempFile("tensorcast-" + name + "-" + member + "-", ".log");
    logs.add(log);
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(List.of("-Xmx128m", "-XX:TieredStopAtLevel=1", "-jar", jar().toString()));
    cmd.addAll(args);
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.redirectOutput(log.toFile());
    Map<String, String> env = pb.environment();
    env.keySet().removeIf(k -> k.startsWith("AWS_"));
    env.putAll(ServeCommandLine.s3MockCredentials());
    env.put("AWS_EC2_METADATA_DISABLED", "true");
    env.remove("TENSORCAST_MEMORY_BUDGET");
    Process p = pb.start();
    processes.add(p);
    return p;
  }

  /** The dataplane jar ({@code mvn package} builds it before the ITs). */
  static Path jar() {
    String property = System.getProperty("tensorcast.dataplane.jar");
    Path p = property != null ? Path.of(property) : Path.of("target", "tensorcast-dataplane.jar");
    assertThat(p).as("the dataplane jar (built by mvn package before the ITs)").isRegularFile();
    return p.toAbsolutePath();
  }

  /** Waits until every one of {@code members} is Ready; fails at once when one is Failed. */
  void awaitReady(List<DataPlaneServer> members) {
    await("every member Ready")
        .atMost(ready)
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> {
              for (DataPlaneServer s : members) {
                DataPlaneStatus st = s.status();
                assertThat(st.phase()).as("%s", st).isNotEqualTo(Phase.Failed);
                if (st.phase() != Phase.Ready) {
                  return false;
                }
              }
              return true;
            });
  }

  /** Asserts a Ready member's store holds every file of the artifact byte for byte. */
  void assertByteIdentical(DataPlaneStatus st) throws IOException {
    assertThat(st.phase()).isEqualTo(Phase.Ready);
    Path dir = Path.of(st.storeDirectory());
    for (Map.Entry<String, Path> e : files.entrySet()) {
      assertThat(Files.mismatch(dir.resolve(e.getKey()), e.getValue()))
          .as("first differing byte of %s in %s", e.getKey(), dir)
          .isEqualTo(-1L);
    }
  }

  /** {@code GET http://127.0.0.1:<port><path>} with the read token. */
  HttpResponse<String> get(int port, String path) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .header("Authorization", "Bearer " + PeerToPeerLoadIT.READ_TOKEN)
            .timeout(Duration.ofSeconds(10))
            .build(),
        HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
  }

  /** The {@code /status} of the member whose control port is {@code port}. */
  DataPlaneStatus statusOf(int port) throws Exception {
    return new ObjectMapper().readValue(get(port, "/status").body(), DataPlaneStatus.class);
  }

  /** Peer addresses on distinct loopback addresses 127.0.0.(base+i), free ports. */
  static Map<String, InetSocketAddress> addresses(List<String> ids, int base) throws IOException {
    Map<String, InetSocketAddress> out = new LinkedHashMap<>();
    for (int i = 0; i < ids.size(); i++) {
      InetAddress a = InetAddress.getByName("127.0.0." + (base + i));
      out.put(ids.get(i), new InetSocketAddress(a, freePort(a)));
    }
    return out;
  }

  /** {@code id=host:port,…} as {@code --peers} takes it. */
  static String peersSpec(Map<String, InetSocketAddress> addresses) {
    return addresses.entrySet().stream()
        .map(e -> e.getKey() + "=" + hostPort(e.getValue()))
        .collect(Collectors.joining(","));
  }

  static String hostPort(InetSocketAddress a) {
    return a.getAddress().getHostAddress() + ":" + a.getPort();
  }

  static int freePort(InetAddress a) throws IOException {
    return TestPorts.freePort(a);
  }

  @Override
  public void close() throws Exception {
    // Close the members at once (each close waits for its event loops to wind down).
    servers.parallelStream().forEach(DataPlaneServer::close);
    for (AutoCloseable c : closeables) {
      c.close();
    }
    for (Process p : processes) {
      if (p.isAlive()) {
        p.destroy();
        if (!p.waitFor(20, TimeUnit.SECONDS)) {
          p.destroyForcibly();
        }
      }
    }
    for (Path log : logs) {
      System.out.println("---- " + log.getFileName() + " ----\n" + Files.readString(log));
    }
    for (Path d : dirs) {
      TestFiles.deleteTree(d);
    }
  }
}
