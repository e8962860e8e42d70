package io.tensorcast.e2e.demo;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.joran.JoranConfigurator;
import ch.qos.logback.classic.util.LogbackMDCAdapter;
import io.tensorcast.api.v1alpha1.ArtifactPhase;
import io.tensorcast.api.v1alpha1.ModelArtifactStatus;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

class ClusterDemoTest {

  /** Before the size is known the demo's progress line says so, never {@code null}. */
  @Test
  void aProgressLineBeforeTheSizeIsKnownHasNoNull() {
    ModelArtifactStatus s = new ModelArtifactStatus();
    s.setPhase(ArtifactPhase.Pending);
    s.setReady("0/2");

    String line = ClusterDemo.describe(s);

    assertThat(line)
        .doesNotContain("null")
        .contains("size=unknown")
        .contains("progress=-")
        .startsWith("phase=Pending");
  }

  /**
   * {@code ./tensorcast demo --help} prints a checked-in copy of the usage without building
   * anything; it must be the demo's real usage, naming the real command. To refresh it after
   * changing an option: copy {@code e2e/target/tensorcast-demo-usage.txt} (written by this test)
   * over {@code e2e/src/main/resources/tensorcast-demo-usage.txt}.
   */
  @Test
  void theCheckedInUsageIsTheDemosUsage() throws Exception {
    String usage = new CommandLine(new ClusterDemo()).getUsageMessage();
    Files.writeString(Path.of("target", "tensorcast-demo-usage.txt"), usage);

    String checkedIn =
        Files.readString(
            Path.of("src", "main", "resources", "tensorcast-demo-usage.txt"),
            StandardCharsets.UTF_8);

    assertThat(checkedIn).isEqualTo(usage);
    assertThat(usage).startsWith("Usage: ./tensorcast demo ").doesNotContain("tensorcast-demo ");
  }

  /**
   * The demo's log configuration writes to the file it names, in the one pattern of every component
   * (ISO-8601 time with offset, level, thread, logger), and nothing to the console.
   */
  @Test
  void theDemosLogsGoToItsFileInTheCommonPattern(@TempDir Path dir) throws Exception {
    Path file = dir.resolve("demo.log");
    LoggerContext context = new LoggerContext();
    context.setMDCAdapter(new LogbackMDCAdapter());
    context.putProperty(ClusterDemo.LOG_FILE_PROPERTY, file.toString());
    JoranConfigurator configurator = new JoranConfigurator();
    configurator.setContext(context);
    configurator.doConfigure(getClass().getClassLoader().getResource(ClusterDemo.LOGBACK_CONFIG));

    context.getLogger("io.tensorcast.operator.Example").info("reconciled {}", "llama-small");
    context.stop();

    assertThat(Files.readString(file))
        .matches(
            "\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}(Z|[+-]\\d{2}:\\d{2}) INFO "
                + " \\[main\\] [a-z.]*operator\\.Example - reconciled llama-small\n");
  }
}
