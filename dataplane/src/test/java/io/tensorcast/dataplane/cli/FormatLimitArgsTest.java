package io.tensorcast.dataplane.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.api.wire.FormatLimitFlags;
import io.tensorcast.dataplane.format.FormatLimits;
import io.tensorcast.dataplane.format.safetensors.SafetensorsLimits;
import io.tensorcast.dataplane.format.torch.TorchLimits;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import picocli.CommandLine;

/**
 * The format limits as flags: one vocabulary with the operator, defaults of the readers, ranges.
 */
class FormatLimitArgsTest {
  @TempDir Path tmp;

  private record Run(int code, String out, String err) {}

  private static Run run(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    CommandLine cli = DataplaneCli.commandLine();
    cli.setOut(new PrintWriter(out, true));
    cli.setErr(new PrintWriter(err, true));
    return new Run(cli.execute(args), out.toString(), err.toString());
  }

  @ParameterizedTest
  @ValueSource(strings = {"load", "inspect", "serve"})
  void theFlagsAreTheNamesTheOperatorPasses(String command) {
    CommandLine cli = DataplaneCli.commandLine().getSubcommands().get(command);

    List<String> limitFlags =
        cli.getCommandSpec().mixins().get("formatLimits").options().stream()
            .map(o -> o.longestName().substring(2))
            .toList();

    assertThat(limitFlags).containsExactlyInAnyOrderElementsOf(FormatLimitFlags.NAMES);
  }

  @Test
  void theDefaultsAreTheReaders() {
    assertThat(FormatLimits.DEFAULT.torch()).isEqualTo(TorchLimits.DEFAULT);
    assertThat(FormatLimits.DEFAULT.safetensors()).isEqualTo(SafetensorsLimits.DEFAULT);
  }

  @Test
  void aValueOutOfRangeIsAUsageErrorNamingTheFlag() {
    Run r = run("inspect", tmp.toString(), "--max-rank", "0");

    assertThat(r.code()).isEqualTo(2);
    assertThat(r.err()).contains("--max-rank must be between 1 and 1024, got 0");
  }

  @Test
  void theFlagsReachTheReaders() throws Exception {
    Files.write(tmp.resolve("m.safetensors"), threeTensors());

    Run defaults = run("inspect", tmp.toString());
    Run two = run("inspect", tmp.toString(), "--max-tensors", "2");
    Run small = run("inspect", tmp.toString(), "--max-header-bytes", "64");

    assertThat(defaults.code()).as(defaults.err()).isZero();
    assertThat(two.code()).isEqualTo(1);
    assertThat(two.err())
        .contains(
            "inspect failed: InvalidSafetensors: m.safetensors: header declares more than 2"
                + " tensors (--max-tensors); refused at \"c\"");
    assertThat(small.code()).isEqualTo(1);
    assertThat(small.err()).contains("above the limit of 64 bytes (--max-header-bytes");
  }

  private static byte[] threeTensors() {
    StringBuilder json = new StringBuilder("{");
    int i = 0;
    for (String name : Map.of("a", 0, "b", 1, "c", 2).keySet().stream().sorted().toList()) {
      json.append(i == 0 ? "" : ",")
          .append('"')
          .append(name)
          .append("\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[")
          .append(i)
          .append(',')
          .append(i + 1)
          .append("]}");
      i++;
    }
    byte[] header = json.append('}').toString().getBytes(StandardCharsets.US_ASCII);
    return ByteBuffer.allocate(8 + header.length + 3)
        .order(ByteOrder.LITTLE_ENDIAN)
        .putLong(header.length)
        .put(header)
        .put(new byte[] {1, 2, 3})
        .array();
  }
}
