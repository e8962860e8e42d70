package io.tensorcast.dataplane.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The launcher ({@code src/main/launcher/dataplane}, the image's entry point) starts the built jar
 * with {@code load.jvm-options} for {@code load} (C1 only) and with the JVM's defaults for every
 * other command ({@code serve} keeps both compilers). Read from the real JVM's final flags.
 */
class LauncherIT {

  private static final Path LAUNCHER = Path.of("src", "main", "launcher", "dataplane");
  private static final Pattern TIERED =
      Pattern.compile("(?m)^\\s*intx TieredStopAtLevel\\s+= (\\d+)\\s+\\{product\\} \\{([^}]*)\\}");

  @Test
  @Timeout(120)
  void loadRunsOnC1OnlyAndServeKeepsBothCompilers() throws Exception {
    assertThat(Files.readAllLines(LAUNCHER.resolveSibling("load.jvm-options")))
        .containsExactly("-XX:TieredStopAtLevel=1");
    assertThat(tieredStopAtLevel("load", "--help")).isEqualTo("1 command line");
    assertThat(tieredStopAtLevel("serve", "--help")).isEqualTo("4 default");
    assertThat(tieredStopAtLevel("inspect", "--help")).isEqualTo("4 default");
  }

  /** TieredStopAtLevel and where it came from, as the JVM the launcher started reports it. */
  private static String tieredStopAtLevel(String... args) throws Exception {
    List<String> cmd = new java.util.ArrayList<>(List.of("/bin/sh", LAUNCHER.toString()));
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    Map<String, String> env = pb.environment();
    env.put("TENSORCAST_DATAPLANE_JAR", ServeIT.dataplaneJar().toString());
    env.put("JAVA", Path.of(System.getProperty("java.home"), "bin", "java").toString());
    env.put("JAVA_TOOL_OPTIONS", "-XX:+PrintFlagsFinal");
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(out).isZero();
    Matcher m = TIERED.matcher(out);
    assertThat(m.find()).as(out).isTrue();
    return m.group(1) + " " + m.group(2);
  }
}
