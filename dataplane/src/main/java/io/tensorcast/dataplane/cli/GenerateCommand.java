package io.tensorcast.dataplane.cli;

import io.tensorcast.dataplane.synthetic.SyntheticModel;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** {@code dataplane generate DIR}: write a deterministic synthetic model directory. */
@Command(
    name = "generate",
    mixinStandardHelpOptions = true,
    description =
        "Write a deterministic Llama-shaped model directory (config.json, sharded safetensors,"
            + " index) to try Tensorcast without downloading weights.")
final class GenerateCommand implements Callable<Integer> {
  @Parameters(index = "0", paramLabel = "DIR", description = "Directory to write.")
  Path dir;

  @Option(
      names = "--preset",
      defaultValue = "small-llama",
      description =
          "tiny (KiB), small-llama (~400 MiB), medium-llama (~1.1 GiB); default ${DEFAULT-VALUE}.")
  String preset;

  @Option(
      names = "--seed",
      defaultValue = "1",
      description = "PRNG seed (default ${DEFAULT-VALUE}).")
  long seed;

  @Override
  public Integer call() throws Exception {
    long bytes = SyntheticModel.write(dir, SyntheticModel.Config.preset(preset), seed);
    System.out.printf("wrote %s: %s of safetensors%n", dir, Quantities.human(bytes));
    return 0;
  }
}
