package io.tensorcast.dataplane.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.JsonEncoder;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.Configurator;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.util.ContextInitializer;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.encoder.Encoder;
import ch.qos.logback.core.spi.ContextAwareBase;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

/**
 * The data plane's logging configuration, in code: logback finds it through {@code
 * META-INF/services/ch.qos.logback.classic.spi.Configurator} before it looks for any XML. It sets
 * up what every Tensorcast component's {@code logback.xml} does with the shared console appenders,
 * without logback's XML parser and configuration model (a few hundred classes loaded and run
 * interpreted at every start of {@code dataplane load}).
 *
 * <p>One console appender to standard error: with {@code TENSORCAST_LOG_FORMAT=text} (the default)
 * the line {@value #PATTERN}, with {@code json} one JSON object a line (logback's {@link
 * JsonEncoder}, formatted message included). Root level {@code TENSORCAST_LOG_LEVEL} (default
 * {@code INFO}); the libraries in {@link #LIBRARY_LEVELS} log at {@code WARN}. Each setting is
 * looked up as logback's {@code ${NAME}} would be: a property of the logger context, a system
 * property, then the environment. An unknown format logs as text, an unknown level as {@code INFO},
 * each with one warning line through the configured appender.
 *
 * <p>It steps aside (logback's own configurators run next) when {@code -Dlogback.configurationFile}
 * names a file, or a {@code logback-test.xml} or {@code logback.xml} is on the class path — so
 * tests and a component that ships its own XML keep theirs.
 */
public final class ConsoleLogConfigurator extends ContextAwareBase implements Configurator {
  /** The text line: ISO-8601 time with offset, level, thread, logger, message. */
  public static final String PATTERN =
      "%d{yyyy-MM-dd'T'HH:mm:ss.SSSXXX} %-5level [%thread] %logger{30} - %msg%n";

  /** Libraries whose INFO lines are noise on the data plane's console. */
  static final Map<String, Level> LIBRARY_LEVELS =
      Map.of(
          "software.amazon.awssdk", Level.WARN,
          "org.apache.http", Level.WARN,
          "io.netty", Level.WARN,
          "io.micrometer", Level.WARN);

  @Override
  public ExecutionStatus configure(LoggerContext context) {
    if (otherConfigurationGiven()) {
      return ExecutionStatus.INVOKE_NEXT_IF_ANY;
    }
    Function<String, String> setting =
        name -> {
          String v = context.getProperty(name);
          if (v == null) {
            v = System.getProperty(name);
          }
          return v != null ? v : System.getenv(name);
        };
    apply(context, setting);
    return ExecutionStatus.DO_NOT_INVOKE_NEXT_IF_ANY;
  }

  /**
   * Configures {@code context} from the settings {@code TENSORCAST_LOG_FORMAT} and {@code
   * TENSORCAST_LOG_LEVEL} as {@code setting} gives them (null when unset), whatever else is on the
   * class path.
   */
  public static void apply(LoggerContext context, Function<String, String> setting) {
    String format = setting.apply("TENSORCAST_LOG_FORMAT");
    String levelName = setting.apply("TENSORCAST_LOG_LEVEL");
    boolean json = format != null && "json".equals(format.strip().toLowerCase(Locale.ROOT));
    boolean badFormat =
        format != null && !json && !"text".equals(format.strip().toLowerCase(Locale.ROOT));
    Level level = levelName == null ? Level.INFO : Level.toLevel(levelName.strip(), null);
    boolean badLevel = levelName != null && level == null;

    Encoder<ILoggingEvent> encoder;
    if (json) {
      JsonEncoder e = new JsonEncoder();
      e.setWithFormattedMessage(true);
      encoder = e;
    } else {
      PatternLayoutEncoder e = new PatternLayoutEncoder();
      e.setPattern(PATTERN);
      encoder = e;
    }
    encoder.setContext(context);
    encoder.start();
    ConsoleAppender<ILoggingEvent> console = new ConsoleAppender<>();
    console.setContext(context);
    console.setName("console");
    console.setTarget("System.err");
    console.setEncoder(encoder);
    console.start();

    ch.qos.logback.classic.Logger root = context.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    root.setLevel(badLevel ? Level.INFO : level);
    root.addAppender(console);
    LIBRARY_LEVELS.forEach((name, l) -> context.getLogger(name).setLevel(l));

    org.slf4j.Logger log = context.getLogger(ConsoleLogConfigurator.class);
    if (badFormat) {
      log.warn("TENSORCAST_LOG_FORMAT={} is neither text nor json: logging as text", format);
    }
    if (badLevel) {
      log.warn(
          "TENSORCAST_LOG_LEVEL={} is not a level (TRACE, DEBUG, INFO, WARN, ERROR, OFF):"
              + " logging at INFO",
          levelName);
    }
  }

  private static boolean otherConfigurationGiven() {
    if (System.getProperty(ContextInitializer.CONFIG_FILE_PROPERTY) != null) {
      return true;
    }
    ClassLoader loader = ConsoleLogConfigurator.class.getClassLoader();
    return loader.getResource(ContextInitializer.TEST_AUTOCONFIG_FILE) != null
        || loader.getResource(ContextInitializer.AUTOCONFIG_FILE) != null;
  }
}
