package io.tensorcast.dataplane.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import picocli.CommandLine;

/** Bad option values are usage errors: one line naming the option, exit code 2, no trace. */
class DataplaneCliTest {
  @TempDir Path tmp;

  private record Run(int code, String err) {}

  private Run run(String... args) {
    StringWriter err = new StringWriter();
    CommandLine cli = DataplaneCli.commandLine();
    cli.setErr(new PrintWriter(err, true));
    cli.setOut(new PrintWriter(new StringWriter(), true));
    int code = cli.execute(args);
    return new Run(code, err.toString());
  }

  @ParameterizedTest
  @CsvSource({
    "--concurrency, 0, '--concurrency must be between 1 and 1024, got 0'",
    "--max-attempts, 0, '--max-attempts must be between 1 and 100, got 0'",
    "--range-size, 0, '--range-size must be auto or between 1 byte and 1Gi, got 0'",
    "--range-size, abc, '--range-size: ''abc'' is not a byte quantity'",
    "--throttle-budget, 0s, '--throttle-budget must be positive, got 0s'",
    "--throttle-budget, soon, '--throttle-budget: ''soon'' is not a duration such as 500ms, 10s or 2m'"
  })
  void badNumericOptionsAreUsageErrorsNamingTheOption(String option, String value, String text)
      throws Exception {
    Files.write(tmp.resolve("a.bin"), new byte[] {1});

    Run r =
        run("load", tmp.toString(), option, value, "--store-root", tmp.resolve("store").toString());

    assertThat(r.code()).isEqualTo(2);
    assertThat(r.err()).contains(text).doesNotContain("\tat ");
    assertThat(tmp.resolve("store")).doesNotExist();
  }

  @Test
  void serveOnAnAddressInUseSaysSoWithoutATrace() throws Exception {
    Files.write(tmp.resolve("a.bin"), new byte[] {1});
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      Run r =
          run(
              "serve",
              tmp.toString(),
              "--artifact-id",
              "x",
              "--store-root",
              tmp.resolve("store").toString(),
              "--listen",
              "127.0.0.1:" + taken.getLocalPort());

      assertThat(r.code()).isEqualTo(2);
      assertThat(r.err())
          .contains("cannot listen on the control endpoint (--listen)")
          .doesNotContain("\tat ");
    }
  }

  @Test
  void aNamedSubcommandIsTheOnlyOneBuiltAndKeepsItsQualifiedName() {
    CommandLine load = DataplaneCli.commandLine("load");
    assertThat(load.getSubcommands().keySet()).containsExactly("load");
    assertThat(load.getSubcommands().get("load").getCommandSpec().qualifiedName())
        .isEqualTo("dataplane load");
    // Anything else (no argument, an option, a misspelt name) gets every subcommand, in order.
    for (String first : new String[] {null, "--help", "lod"}) {
      assertThat(DataplaneCli.commandLine(first).getSubcommands().keySet())
          .as(String.valueOf(first))
          .containsExactly("load", "inspect", "serve", "serve-writes", "generate");
    }
  }

  @Test
  void aMisspeltSubcommandOrAnUnknownOptionIsAUsageErrorWithExitCode2() {
    Run misspelt = run("lod");
    assertThat(misspelt.code()).isEqualTo(2);
    assertThat(misspelt.err()).contains("Did you mean: dataplane load");
    Run unknown = run("load", "--bogus", tmp.toString());
    assertThat(unknown.code()).isEqualTo(2);
    assertThat(unknown.err()).contains("Unknown option: '--bogus'").doesNotContain("\tat ");
  }
}
