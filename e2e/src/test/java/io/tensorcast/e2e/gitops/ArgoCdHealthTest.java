package io.tensorcast.e2e.gitops;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.tensorcast.api.v1alpha1.ModelArtifact;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The chart's Argo CD health checks on their {@code health_test.yaml} cases (Argo CD's own test
 * layout), run by a Lua interpreter: each fixture (an object taken from a real run, see GitOpsIT)
 * gets the status and message the file says. Also: the copy in {@code argocd-cm.yaml} is the same
 * script, and every custom resource of the chart has a check.
 */
class ArgoCdHealthTest {

  static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

  /** The kinds with a health check. */
  static final List<String> KINDS = List.of("ModelArtifact", "TensorShardSet");

  static Stream<Arguments> cases(String kind) throws IOException {
    List<Arguments> out = new ArrayList<>();
    Path dir = ArgoCdHealth.checksDir().resolve(ModelArtifact.GROUP).resolve(kind);
    JsonNode tests = YAML.readTree(dir.resolve("health_test.yaml").toFile()).get("tests");
    for (JsonNode t : tests) {
      out.add(
          Arguments.of(
              t.get("inputPath").asText(),
              t.get("healthStatus").get("status").asText(),
              t.get("healthStatus").get("message").asText()));
    }
    return out.stream();
  }

  static Stream<Arguments> cases() throws IOException {
    return cases("ModelArtifact");
  }

  static Stream<Arguments> shardSetCases() throws IOException {
    return cases("TensorShardSet");
  }

  @ParameterizedTest(name = "{0} is {1}")
  @MethodSource("cases")
  void modelArtifactFixtures(String input, String status, String message) throws IOException {
    assertFixture("ModelArtifact", input, status, message);
  }

  @ParameterizedTest(name = "{0} is {1}")
  @MethodSource("shardSetCases")
  void tensorShardSetFixtures(String input, String status, String message) throws IOException {
    assertFixture("TensorShardSet", input, status, message);
  }

  private static void assertFixture(String kind, String input, String status, String message)
      throws IOException {
    ArgoCdHealth check = ArgoCdHealth.of(ModelArtifact.GROUP, kind);
    Path file = ArgoCdHealth.checksDir().resolve(ModelArtifact.GROUP).resolve(kind).resolve(input);
    ArgoCdHealth.Result r = check.evaluate(YAML.readTree(file.toFile()));
    assertThat(r.status()).as("health of %s %s", kind, input).isEqualTo(status);
    assertThat(r.message()).as("message of %s %s", kind, input).isEqualTo(message);
  }

  @Test
  void everyOutcomeIsCovered() throws IOException {
    for (String kind : KINDS) {
      assertThat(cases(kind).map(a -> (String) a.get()[1]).distinct())
          .as(kind)
          .containsExactlyInAnyOrder("Healthy", "Progressing", "Degraded");
    }
  }

  /** The argocd-cm snippet carries exactly health.lua, indented under its key. */
  @Test
  void argoCdConfigMapSnippetIsTheTestedScript() throws IOException {
    JsonNode cm = YAML.readTree(ArgoCdHealth.checksDir().resolve("argocd-cm.yaml").toFile());
    for (String kind : KINDS) {
      String embedded =
          cm.get("data").get("resource.customizations.health.tensorcast.io_" + kind).asText();
      assertThat(embedded).as(kind).isEqualTo(ArgoCdHealth.of(ModelArtifact.GROUP, kind).script());
    }
    assertThat(cm.get("data").size()).as("one check per custom resource").isEqualTo(KINDS.size());
  }

  /** Every CRD the chart ships has a health check. */
  @Test
  void everyChartCrdHasAHealthCheck() throws IOException {
    Path crds = ArgoCdHealth.checksDir().getParent().resolve("files/crds");
    try (Stream<Path> files = Files.list(crds)) {
      for (Path f : files.filter(p -> p.toString().endsWith("-v1.yml")).toList()) {
        JsonNode crd = YAML.readTree(f.toFile());
        String group = crd.at("/spec/group").asText();
        String kind = crd.at("/spec/names/kind").asText();
        assertThat(ArgoCdHealth.checksDir().resolve(group).resolve(kind).resolve("health.lua"))
            .as("health check of %s/%s", group, kind)
            .isRegularFile();
      }
    }
  }
}
