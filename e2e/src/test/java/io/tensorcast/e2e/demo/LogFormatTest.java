package io.tensorcast.e2e.demo;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.joran.JoranConfigurator;
import ch.qos.logback.classic.util.LogbackMDCAdapter;
import ch.qos.logback.core.status.Status;
import ch.qos.logback.core.status.StatusUtil;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.tensorcast.dataplane.logging.ConsoleLogConfigurator;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every component's logback configuration (its {@code logback.xml} read from the source tree, or
 * the data plane's {@link ConsoleLogConfigurator}) logs in the one pattern, to standard error, and
 * as one JSON object a line with {@code TENSORCAST_LOG_FORMAT=json}; in either format the
 * configuration leaves logback nothing to warn about, since a warning or error during configuration
 * makes logback print its whole internal status (some 30 lines) at every start.
 */
class LogFormatTest {
  private static final String LINE =
      "\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}(Z|[+-]\\d{2}:\\d{2}) WARN  \\[main\\]"
          + " [a-z.]*tensorcast\\.Example - source throttled, retrying in 2 s\n";

  @ParameterizedTest
  @ValueSource(strings = {"operator", "dataplane", "csi-driver", "rdma-device-plugin"})
  void oneTimestampedPatternOnStandardError(String module) throws Exception {
    String err = logOneLine(module, null);
    assertThat(err).matches(LINE);
  }

  @ParameterizedTest
  @ValueSource(strings = {"operator", "dataplane", "csi-driver", "rdma-device-plugin"})
  void jsonLinesWhenAskedFor(String module) throws Exception {
    String err = logOneLine(module, "json");

    assertThat(err.lines()).hasSize(1);
    JsonNode event = new ObjectMapper().readTree(err);
    assertThat(event.path("level").asText()).isEqualTo("WARN");
    assertThat(event.path("loggerName").asText()).isEqualTo("io.tensorcast.Example");
    assertThat(event.path("formattedMessage").asText())
        .isEqualTo("source throttled, retrying in 2 s");
    assertThat(event.path("timestamp").asLong()).isPositive();
  }

  private static String logOneLine(String module, String format) throws Exception {
    Path config = Path.of("..", module, "src", "main", "resources", "logback.xml");
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PrintStream saved = System.err;
    System.setErr(new PrintStream(bytes, true, StandardCharsets.UTF_8));
    try {
      LoggerContext context = new LoggerContext();
      context.setMDCAdapter(new LogbackMDCAdapter());
      if (format != null) {
        context.putProperty("TENSORCAST_LOG_FORMAT", format);
      }
      if (Files.exists(config)) {
        JoranConfigurator configurator = new JoranConfigurator();
        configurator.setContext(context);
        configurator.doConfigure(config.toFile());
      } else {
        // The data plane configures logback in code (no XML parser at start).
        assertThat(module).isEqualTo("dataplane");
        ConsoleLogConfigurator.apply(context, context::getProperty);
      }
      assertThat(new StatusUtil(context).getHighestLevel(0))
          .as(
              "highest logback status level while reading %s (%s)",
              config, context.getStatusManager().getCopyOfStatusList())
          .isLessThan(Status.WARN);
      context.getLogger("io.tensorcast.Example").warn("source throttled, retrying in {} s", 2);
      context.stop();
    } finally {
      System.setErr(saved);
    }
    return bytes.toString(StandardCharsets.UTF_8);
  }
}
