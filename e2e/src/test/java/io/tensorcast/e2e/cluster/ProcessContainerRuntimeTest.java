package io.tensorcast.e2e.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ProcessContainerRuntimeTest {

  private static ContainerLaunch launch(String image, List<String> command, List<String> args) {
    return new ContainerLaunch(
        "ns",
        "pod",
        "uid",
        "node",
        "main",
        image,
        command,
        args,
        Map.of(),
        Path.of("/tmp"),
        Path.of("/tmp/log"));
  }

  @Test
  void imagePrefixMatchesOnlyAtAReferenceBoundaryAndLongestWins() {
    ProcessContainerRuntime rt =
        new ProcessContainerRuntime()
            .map("tensorcast/dataplane", "java", "-jar", "dp.jar")
            .map("tensorcast/dataplane:debug", "java", "-agentlib:jdwp", "-jar", "dp.jar")
            .map("registry.local/", "echo");

    assertThat(rt.commandPrefixFor("tensorcast/dataplane"))
        .contains(List.of("java", "-jar", "dp.jar"));
    assertThat(rt.commandPrefixFor("tensorcast/dataplane:0.1.0"))
        .contains(List.of("java", "-jar", "dp.jar"));
    assertThat(rt.commandPrefixFor("tensorcast/dataplane@sha256:abc"))
        .contains(List.of("java", "-jar", "dp.jar"));
    assertThat(rt.commandPrefixFor("tensorcast/dataplane:debug").orElseThrow())
        .contains("-agentlib:jdwp");
    assertThat(rt.commandPrefixFor("tensorcast/dataplane-v2")).isEmpty();
    assertThat(rt.commandPrefixFor("registry.local/anything:1")).contains(List.of("echo"));
  }

  @Test
  void argvIsPrefixThenCommandThenArgs() throws Exception {
    ProcessContainerRuntime rt = new ProcessContainerRuntime().map("img", "java", "-jar", "a.jar");
    assertThat(rt.argv(launch("img:1", List.of("serve"), List.of("--port", "80"))))
        .containsExactly("java", "-jar", "a.jar", "serve", "--port", "80");
    ProcessContainerRuntime exec = new ProcessContainerRuntime().map("local/exec");
    assertThat(exec.argv(launch("local/exec", List.of("python3", "-c", "1"), List.of())))
        .containsExactly("python3", "-c", "1");
  }

  @Test
  void unmappedImageIsErrImagePullListingTheKnownPrefixes() {
    ProcessContainerRuntime rt = new ProcessContainerRuntime().map("a/b", "x");
    assertThatThrownBy(() -> rt.argv(launch("c/d:1", List.of(), List.of())))
        .isInstanceOfSatisfying(
            ContainerStartException.class, e -> assertThat(e.reason()).isEqualTo("ErrImagePull"))
        .hasMessageContaining("\"c/d:1\"")
        .hasMessageContaining("[a/b]");
  }

  @Test
  void emptyArgvAndUnknownProgramAreRunContainerErrors() {
    ProcessContainerRuntime rt = new ProcessContainerRuntime().map("local/exec");
    assertThatThrownBy(() -> rt.argv(launch("local/exec", List.of(), List.of())))
        .hasMessageContaining("sets neither command nor args");
    assertThatThrownBy(
            () -> ProcessContainerRuntime.resolveOnPath("no-such-program-xyz", "/usr/bin:/bin"))
        .isInstanceOfSatisfying(
            ContainerStartException.class,
            e -> assertThat(e.reason()).isEqualTo("RunContainerError"))
        .hasMessageContaining("\"no-such-program-xyz\" not found");
  }

  @Test
  void aProgramOfTheImageReplacesTheEntrypointAsInKubernetes() throws Exception {
    ProcessContainerRuntime rt =
        new ProcessContainerRuntime()
            .map("tensorcast/dataplane", "java", "-jar", "dp.jar")
            .mapProgram("tensorcast/dataplane", "chown", "/bin/chown");

    assertThat(
            rt.argv(
                launch(
                    "tensorcast/dataplane:e2e",
                    List.of("chown", "-R", "10001:10001", "/store"),
                    List.of())))
        .containsExactly("/bin/chown", "-R", "10001:10001", "/store");
    // Another command still goes after the entrypoint; another image knows no chown.
    assertThat(rt.argv(launch("tensorcast/dataplane:e2e", List.of("serve"), List.of("--x"))))
        .containsExactly("java", "-jar", "dp.jar", "serve", "--x");
    assertThatThrownBy(() -> rt.argv(launch("other/image", List.of("chown", "a", "/b"), List.of())))
        .isInstanceOfSatisfying(
            ContainerStartException.class, e -> assertThat(e.reason()).isEqualTo("ErrImagePull"));
  }
}
