package io.tensorcast.e2e.demo;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The demo as a user runs it ({@code java -jar target/tensorcast-demo.jar}, what {@code
 * ./tensorcast demo} execs), stopped with SIGTERM while its cluster runs: every process it started
 * (S3Mock, etcd, kube-apiserver, controller-manager, scheduler, the data-plane pods) is gone, the
 * nodes' file systems under the node root are removed and nothing is left in its temporary
 * directory. While it runs, S3Mock listens on loopback only.
 */
class DemoSignalIT {
  private final Path nodeRoot = Path.of("/dev/shm", "tensorcast-demo-it-" + UUID.randomUUID());
  private Path workDir;
  private Path tmpDir;
  private Process demo;

  @AfterEach
  void cleanUp() throws IOException {
    if (demo != null && demo.isAlive()) {
      demo.descendants().forEach(ProcessHandle::destroyForcibly);
      demo.destroyForcibly();
    }
    TestFiles.deleteTreeQuietly(nodeRoot);
    TestFiles.deleteTreeQuietly(tmpDir);
  }

  @Test
  @Timeout(value = 6, unit = TimeUnit.MINUTES)
  void sigtermStopsEveryProcessAndRemovesTheTemporaryData() throws Exception {
    Path target = Path.of("target").toAbsolutePath();
    workDir = Files.createDirectories(target.resolve("demo-signal-it"));
    tmpDir = Files.createTempDirectory(target, "demo-signal-tmp");
    Path output = workDir.resolve("output.txt");
    List<String> command =
        List.of(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-Djava.io.tmpdir=" + tmpDir,
            "-Dlogback.statusListenerClass=ch.qos.logback.core.status.NopStatusListener",
            "-jar",
            target.resolve("tensorcast-demo.jar").toString(),
            "--preset",
            "tiny",
            "--replicas",
            "1",
            "--keep-running",
            "--workdir",
            workDir.toString(),
            "--node-root",
            nodeRoot.toString(),
            "--dataplane-jar",
            System.getProperty("tensorcast.dataplane.jar"),
            "--s3mock-jar",
            System.getProperty("tensorcast.s3mock.jar"));
    demo =
        new ProcessBuilder(command)
            .redirectErrorStream(true)
            .redirectOutput(output.toFile())
            .start();

    await("the demo's cluster running (output in " + output + ")")
        .atMost(Duration.ofMinutes(4))
        .pollInterval(Duration.ofSeconds(1))
        .until(
            () -> {
              assertThat(demo.isAlive()).as(() -> read(output)).isTrue();
              return read(output).contains("cluster left running");
            });
    List<ProcessHandle> started = demo.descendants().toList();
    List<String> commands = new ArrayList<>();
    started.forEach(p -> commands.add(p.info().commandLine().orElse("?")));
    assertThat(String.join("\n", commands))
        .contains("s3mock-exec.jar")
        .contains("etcd")
        .contains("kube-apiserver")
        .contains("tensorcast-dataplane.jar");
    assertThat(Files.isDirectory(nodeRoot)).isTrue();

    ProcessHandle s3mock =
        started.stream()
            .filter(p -> p.info().commandLine().orElse("").contains("s3mock-exec.jar"))
            .filter(p -> p.info().command().orElse("").endsWith("java"))
            .findFirst()
            .orElseThrow();
    Set<InetAddress> bound = ListeningSockets.addressesOf(s3mock.pid());
    assertThat(bound).as("S3Mock's listening addresses").isNotEmpty();
    assertThat(bound).allMatch(InetAddress::isLoopbackAddress, "loopback");

    demo.destroy(); // SIGTERM
    assertThat(demo.waitFor(90, TimeUnit.SECONDS)).as(() -> read(output)).isTrue();

    await("every process the demo started gone")
        .atMost(Duration.ofSeconds(60))
        .untilAsserted(
            () ->
                assertThat(started.stream().filter(ProcessHandle::isAlive).map(DemoSignalIT::cmd))
                    .isEmpty());
    assertThat(read(output)).contains("==> stopping").contains("stopped; removed " + nodeRoot);
    assertThat(nodeRoot).doesNotExist();
    try (Stream<Path> left = Files.list(tmpDir)) {
      assertThat(left.map(Path::toString)).as("left in the demo's temporary directory").isEmpty();
    }
  }

  private static String cmd(ProcessHandle p) {
    return p.pid() + " " + p.info().commandLine().orElse("?");
  }

  private static String read(Path file) {
    try {
      return Files.readString(file, StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "(unreadable: " + e + ")";
    }
  }

  /** The TCP listening sockets of a process, from {@code /proc} (Linux). */
  static final class ListeningSockets {
    private ListeningSockets() {}

    /** The local addresses the process {@code pid} listens on (TCP, IPv4 and IPv6). */
    static Set<InetAddress> addressesOf(long pid) throws IOException {
      Set<String> inodes = new HashSet<>();
      try (Stream<Path> fds = Files.list(Path.of("/proc", Long.toString(pid), "fd"))) {
        for (Path fd : fds.toList()) {
          try {
            String link = Files.readSymbolicLink(fd).toString();
            if (link.startsWith("socket:[")) {
              inodes.add(link.substring(8, link.length() - 1));
            }
          } catch (IOException closedMeanwhile) {
            // the descriptor went away while listing
          }
        }
      }
      Set<InetAddress> out = new HashSet<>();
      for (String table : List.of("/proc/net/tcp", "/proc/net/tcp6")) {
        List<String> lines = Files.readAllLines(Path.of(table));
        for (String line : lines.subList(1, lines.size())) {
          String[] f = line.trim().split("\\s+");
          if ("0A".equals(f[3]) && inodes.contains(f[9])) {
            out.add(address(f[1].substring(0, f[1].indexOf(':'))));
          }
        }
      }
      return out;
    }

    /** {@code /proc/net/tcp*} writes each 32-bit word of the address in host (little) order. */
    static InetAddress address(String hex) throws IOException {
      byte[] bytes = new byte[hex.length() / 2];
      for (int word = 0; word < bytes.length / 4; word++) {
        for (int i = 0; i < 4; i++) {
          int at = (word * 4 + (3 - i)) * 2;
          bytes[word * 4 + i] = (byte) Integer.parseInt(hex.substring(at, at + 2), 16);
        }
      }
      return InetAddress.getByAddress(bytes);
    }
  }
}
