package io.tensorcast.dataplane.logging;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.Configurator;
import ch.qos.logback.classic.util.LogbackMDCAdapter;
import ch.qos.logback.core.status.Status;
import ch.qos.logback.core.status.StatusUtil;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

class ConsoleLogConfiguratorTest {
  private static final String LINE =
      "\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}(Z|[+-]\\d{2}:\\d{2}) %s \\[main\\]"
          + " %s - %s\n";

  @Test
  void logbackFindsItAsAService() {
    assertThat(ServiceLoader.load(Configurator.class).stream().map(p -> p.type().getName()))
        .containsExactly(ConsoleLogConfigurator.class.getName());
  }

  @Test
  void stepsAsideForALogbackTestXmlOnTheClassPath() {
    LoggerContext context = new LoggerContext();
    ConsoleLogConfigurator c = new ConsoleLogConfigurator();
    c.setContext(context);

    assertThat(c.configure(context)).isEqualTo(Configurator.ExecutionStatus.INVOKE_NEXT_IF_ANY);
    assertThat(context.getLogger("ROOT").iteratorForAppenders().hasNext()).isFalse();
  }

  @Test
  void byDefaultOneTimestampedLineOnStandardErrorAtInfo() {
    String err =
        log(
            Map.of(),
            context -> {
              context.getLogger("io.tensorcast.Example").info("store opened");
              context.getLogger("io.tensorcast.Example").debug("not shown");
              context.getLogger("software.amazon.awssdk.request").info("not shown either");
              context.getLogger("io.netty.channel").warn("shown");
            });

    assertThat(err)
        .matches(
            String.format(LINE, "INFO ", "io.tensorcast.Example", "store opened")
                + String.format(LINE, "WARN ", "io.netty.channel", "shown"));
  }

  @Test
  void jsonAndTheLevelFromTheSettings() {
    String err =
        log(
            Map.of("TENSORCAST_LOG_FORMAT", "json", "TENSORCAST_LOG_LEVEL", "debug"),
            context -> context.getLogger("io.tensorcast.Example").debug("range {} read", 3));

    assertThat(err.lines()).hasSize(1);
    assertThat(err)
        .startsWith("{")
        .contains("\"level\":\"DEBUG\"")
        .contains("\"loggerName\":\"io.tensorcast.Example\"")
        .contains("\"formattedMessage\":\"range 3 read\"");
  }

  @Test
  void anUnknownFormatOrLevelLogsTextAtInfoAndSaysSo() {
    String err =
        log(
            Map.of("TENSORCAST_LOG_FORMAT", "xml", "TENSORCAST_LOG_LEVEL", "chatty"),
            context -> context.getLogger("io.tensorcast.Example").info("store opened"));

    assertThat(err)
        .matches(
            String.format(
                    LINE,
                    "WARN ",
                    "i.t.d.l.ConsoleLogConfigurator",
                    "TENSORCAST_LOG_FORMAT=xml is neither text nor json: logging as text")
                + String.format(
                    LINE,
                    "WARN ",
                    "i.t.d.l.ConsoleLogConfigurator",
                    "TENSORCAST_LOG_LEVEL=chatty is not a level \\(TRACE, DEBUG, INFO, WARN, ERROR,"
                        + " OFF\\): logging at INFO")
                + String.format(LINE, "INFO ", "io.tensorcast.Example", "store opened"));
  }

  private static String log(Map<String, String> settings, Consumer<LoggerContext> body) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PrintStream saved = System.err;
    System.setErr(new PrintStream(bytes, true, StandardCharsets.UTF_8));
    try {
      LoggerContext context = new LoggerContext();
      context.setMDCAdapter(new LogbackMDCAdapter());
      ConsoleLogConfigurator.apply(context, settings::get);
      assertThat(context.getLogger("ROOT").getLevel()).isNotNull();
      assertThat(new StatusUtil(context).getHighestLevel(0)).isLessThan(Status.WARN);
      body.accept(context);
      context.stop();
    } finally {
      System.setErr(saved);
    }
    return bytes.toString(StandardCharsets.UTF_8);
  }

  @Test
  void librariesLogAtWarn() {
    assertThat(ConsoleLogConfigurator.LIBRARY_LEVELS)
        .containsOnlyKeys("software.amazon.awssdk", "org.apache.http", "io.netty", "io.micrometer")
        .allSatisfy((name, level) -> assertThat(level).isEqualTo(Level.WARN));
  }
}
