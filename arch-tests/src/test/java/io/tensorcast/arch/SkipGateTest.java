package io.tensorcast.arch;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The skip gate of {@code ./tensorcast test}: with {@code TENSORCAST_REQUIRE_ALL=1} a skipped test
 * fails the run unless its class is in {@code .ci/allowed-skips}, and so does a test class that ran
 * no test at all (a failed {@code @BeforeAll} assumption reports {@code tests="0"}, not a skip).
 */
class SkipGateTest {
  private static final Path SCRIPT =
      Path.of(System.getProperty("user.dir")).getParent().resolve("tensorcast");

  @TempDir Path tree;

  @Test
  void aClassThatRanNoTestFailsTheGate() throws Exception {
    report("a", "io.x.NeedsCorpusIT", "<testsuite name=\"io.x.NeedsCorpusIT\" tests=\"0\"/>");
    report(
        "a",
        "io.x.FineTest",
        suite("io.x.FineTest", "<testcase classname=\"io.x.FineTest\" name=\"t\"/>"));
    // A class whose tests are all in @Nested classes reports tests="0" with their test cases.
    report(
        "a",
        "io.x.OnlyNestedTest",
        "<testsuite name=\"io.x.OnlyNestedTest\" tests=\"0\"><testcase"
            + " classname=\"io.x.OnlyNestedTest$Inner\" name=\"t\"/></testsuite>");
    Result r = gate(Map.of());
    assertThat(r.exit).isEqualTo(1);
    assertThat(r.output)
        .contains("SKIPPED (not allowed): io.x.NeedsCorpusIT: ran no test")
        .contains("1 skipped test(s) are not in .ci/allowed-skips")
        .doesNotContain("OnlyNestedTest");
  }

  @Test
  void aSkippedTestOfAnAllowedClassPassesAndOthersFail() throws Exception {
    report(
        "b",
        "io.x.K3sIT",
        suite(
            "io.x.K3sIT",
            "<testcase classname=\"io.x.K3sIT\" name=\"t\"><skipped message=\"no Docker engine\"/>"
                + "</testcase>"));
    Files.createDirectories(tree.resolve(".ci"));
    Files.writeString(tree.resolve(".ci/allowed-skips"), "# comment\nio.x.K3sIT\n");
    assertThat(gate(Map.of()).exit).isZero();
    assertThat(gate(Map.of()).output).contains("SKIPPED: io.x.K3sIT.t: no Docker engine");

    Files.writeString(tree.resolve(".ci/allowed-skips"), "io.x.Other\n");
    Result r = gate(Map.of());
    assertThat(r.exit).isEqualTo(1);
    assertThat(r.output).contains("SKIPPED (not allowed): io.x.K3sIT.t: no Docker engine");
  }

  private static String suite(String name, String cases) {
    return "<testsuite name=\"" + name + "\" tests=\"1\">" + cases + "</testsuite>";
  }

  private void report(String module, String cls, String xml) throws IOException {
    Path dir = tree.resolve(module).resolve("target/failsafe-reports");
    Files.createDirectories(dir);
    Files.writeString(dir.resolve("TEST-" + cls + ".xml"), "<?xml version=\"1.0\"?>" + xml);
  }

  private record Result(int exit, String output) {}

  /** Runs the script's own gate functions (not a copy) in the temporary tree, as CI does. */
  private Result gate(Map<String, String> env) throws Exception {
    String functions =
        "source <(sed -n '/^skipped_summary()/,/^}/p;/^allowed_skip()/,/^}/p' '"
            + SCRIPT
            + "'); skipped_summary";
    ProcessBuilder pb =
        new ProcessBuilder("bash", "-c", functions)
            .directory(tree.toFile())
            .redirectErrorStream(true);
    pb.environment().put("TENSORCAST_REQUIRE_ALL", "1");
    pb.environment().putAll(env);
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
    return new Result(p.exitValue(), out);
  }
}
