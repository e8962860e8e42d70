package io.tensorcast.e2e.images;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What the image builds rest on, checked without a Docker engine: every Dockerfile pins its base
 * image by digest and ends as a non-root user, copies the module's CycloneDX SBOM, whose file the
 * build wrote ({@code target/bom.json}, after {@code package}) and which lists the jar's
 * dependencies; the data-plane entrypoint picks the JVM with the IPC_LOCK file capability exactly
 * when the container's bounding set holds CAP_IPC_LOCK (run for real, with {@code setpriv}).
 * Building and running the images is the k3s suite's (K3sE2E).
 */
class ImagesIT {

  static final Path ROOT =
      Path.of(System.getProperty("tensorcast.repo.dir", "..")).toAbsolutePath().normalize();
  static final Pattern BASE =
      Pattern.compile("(?m)^ARG BASE_IMAGE=eclipse-temurin:17-jre@sha256:[0-9a-f]{64}$");

  @ParameterizedTest
  @ValueSource(strings = {"operator", "dataplane", "rdma-device-plugin"})
  void dockerfilePinsTheBaseByDigestRunsNonRootAndShipsTheSbom(String module) throws IOException {
    String dockerfile = Files.readString(ROOT.resolve(module).resolve("Dockerfile"));
    assertThat(dockerfile).containsPattern(BASE);
    List<String> from = lines(dockerfile, "FROM ");
    assertThat(from).containsExactly("FROM ${BASE_IMAGE}");
    List<String> users = lines(dockerfile, "USER ");
    assertThat(users).isNotEmpty();
    String last = users.get(users.size() - 1).substring("USER ".length()).strip();
    assertThat(last).as("last USER of %s", module).matches("[1-9][0-9]{3,}:[1-9][0-9]{3,}");
    assertThat(dockerfile)
        .contains("COPY target/bom.json /opt/tensorcast/sbom/tensorcast-" + module + ".cdx.json");
  }

  @ParameterizedTest
  @ValueSource(strings = {"operator", "dataplane"})
  void theBuildWritesACycloneDxSbomListingTheJarsDependencies(String module) throws IOException {
    Path bom = ROOT.resolve(module).resolve("target/bom.json");
    assertThat(bom)
        .as(
            "%s, written at package by cyclonedx-maven-plugin (which skips in offline mode: build"
                + " without -o)",
            bom)
        .isRegularFile();
    JsonNode json = new ObjectMapper().readTree(bom.toFile());
    assertThat(json.get("bomFormat").asText()).isEqualTo("CycloneDX");
    assertThat(json.at("/metadata/component/name").asText()).isEqualTo("tensorcast-" + module);
    List<String> names = new ArrayList<>();
    json.get("components")
        .forEach(c -> names.add(c.get("group").asText() + ":" + c.get("name").asText()));
    assertThat(names)
        .contains("io.tensorcast:tensorcast-crds", "io.fabric8:kubernetes-model-core")
        .noneMatch(n -> n.startsWith("org.junit") || n.startsWith("org.assertj"));
    if (module.equals("dataplane")) {
      assertThat(names).contains("io.netty:netty-buffer", "software.amazon.awssdk:s3");
    } else {
      assertThat(names).contains("io.javaoperatorsdk:operator-framework-core");
    }
  }

  /**
   * The entrypoint runs {@code $JAVA_HOME/bin/java-ipc-lock} when CAP_IPC_LOCK is in the bounding
   * set and plain {@code java} when it is not (stand-in JVMs that print their name).
   */
  @Test
  void dataPlaneEntrypointUsesTheCapableJvmOnlyWhenIpcLockMayBeHeld(@TempDir Path dir)
      throws Exception {
    Path bin = Files.createDirectories(dir.resolve("jdk/bin"));
    for (String name : List.of("java", "java-ipc-lock")) {
      Path f = bin.resolve(name);
      Files.writeString(f, "#!/bin/sh\necho \"" + name + " $*\"\n");
      Files.setPosixFilePermissions(f, PosixFilePermissions.fromString("rwxr-xr-x"));
    }
    Path entrypoint = ROOT.resolve("dataplane/docker/entrypoint.sh");
    assertThat(run(dir, List.of("/bin/sh", entrypoint.toString(), "serve", "--help")))
        .as("with CAP_IPC_LOCK in the bounding set (root here)")
        .isEqualTo("java-ipc-lock -jar /opt/tensorcast/tensorcast-dataplane.jar serve --help");
    assertThat(
            run(
                dir,
                List.of(
                    "setpriv",
                    "--bounding-set",
                    "-ipc_lock",
                    "/bin/sh",
                    entrypoint.toString(),
                    "inspect")))
        .as("without it")
        .isEqualTo("java -jar /opt/tensorcast/tensorcast-dataplane.jar inspect");
  }

  private static String run(Path dir, List<String> cmd) throws Exception {
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.environment().put("JAVA_HOME", dir.resolve("jdk").toString());
    pb.environment().put("PATH", dir.resolve("jdk/bin") + ":/usr/bin:/bin");
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
    assertThat(p.waitFor(20, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(out).isZero();
    return out;
  }

  private static List<String> lines(String text, String prefix) {
    List<String> out = new ArrayList<>();
    Matcher m = Pattern.compile("(?m)^" + Pattern.quote(prefix) + ".*$").matcher(text);
    while (m.find()) {
      out.add(m.group());
    }
    return out;
  }
}
