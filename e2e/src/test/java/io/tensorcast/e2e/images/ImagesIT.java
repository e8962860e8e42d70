package io.tensorcast.e2e.images;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What the image builds rest on, checked without a Docker engine: every Dockerfile pins its base
 * image by digest and ends as a non-root user, copies the module's CycloneDX SBOM, whose file the
 * build wrote ({@code target/bom.json}, after {@code package}) and which lists the jar's
 * dependencies; every image starts its jar directly and carries no file capabilities. Building and
 * running the images is the k3s suite's (K3sE2E).
 */
class ImagesIT {

  static final Path ROOT =
      Path.of(System.getProperty("tensorcast.repo.dir", "..")).toAbsolutePath().normalize();
  static final Pattern BASE =
      Pattern.compile("(?m)^ARG BASE_IMAGE=eclipse-temurin:17-jre@sha256:[0-9a-f]{64}$");

  @ParameterizedTest
  @ValueSource(strings = {"operator", "dataplane", "rdma-device-plugin", "csi-driver"})
  void dockerfilePinsTheBaseByDigestRunsNonRootAndShipsTheSbom(String module) throws IOException {
    String dockerfile = Files.readString(ROOT.resolve(module).resolve("Dockerfile"));
    assertThat(dockerfile).containsPattern(BASE);
    List<String> from = lines(dockerfile, "FROM ");
    // Every stage (the data plane's training stage too) starts from the pinned base, so that a
    // class-data archive trained in one maps in the final one.
    assertThat(from).isNotEmpty().allMatch(l -> l.matches("FROM \\$\\{BASE_IMAGE}( AS [a-z]+)?"));
    assertThat(from.get(from.size() - 1)).isEqualTo("FROM ${BASE_IMAGE}");
    List<String> users = lines(dockerfile, "USER ");
    assertThat(users).isNotEmpty();
    String last = users.get(users.size() - 1).substring("USER ".length()).strip();
    assertThat(last).as("last USER of %s", module).matches("[1-9][0-9]{3,}:[1-9][0-9]{3,}");
    assertThat(dockerfile)
        .contains("COPY target/bom.json /opt/tensorcast/sbom/tensorcast-" + module + ".cdx.json");
  }

  @ParameterizedTest
  @ValueSource(strings = {"operator", "dataplane", "csi-driver"})
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
    } else if (module.equals("csi-driver")) {
      assertThat(names).contains("io.grpc:grpc-netty", "io.fabric8:kubernetes-client");
    } else {
      assertThat(names).contains("io.javaoperatorsdk:operator-framework-core");
    }
  }

  /**
   * Every image starts its jar directly (the data plane through its launcher, which chooses the JVM
   * flags of a command and execs {@code java -jar}), and none carries file capabilities: the pods
   * run with {@code allowPrivilegeEscalation: false} ({@code no_new_privs}), under which the kernel
   * grants no file capability, so a {@code setcap}'d binary could only mislead.
   */
  @ParameterizedTest
  @ValueSource(strings = {"operator", "dataplane", "rdma-device-plugin", "csi-driver"})
  void imageRunsItsJarWithoutFileCapabilities(String module) throws IOException {
    String dockerfile = Files.readString(ROOT.resolve(module).resolve("Dockerfile"));
    if (module.equals("dataplane")) {
      assertThat(lines(dockerfile, "ENTRYPOINT "))
          .containsExactly("ENTRYPOINT [\"/bin/sh\", \"/opt/tensorcast/bin/dataplane\"]");
      // Which flags each command gets: LauncherIT (data plane module).
    } else {
      assertThat(lines(dockerfile, "ENTRYPOINT "))
          .containsExactly(
              "ENTRYPOINT [\"java\", \"-jar\", \"/opt/tensorcast/tensorcast-" + module + ".jar\"]");
    }
    assertThat(dockerfile).doesNotContainPattern("(?m)^RUN .*setcap").doesNotContain("libcap2-bin");
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
