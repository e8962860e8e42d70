package io.tensorcast.dataplane.cli;

import io.tensorcast.dataplane.pod.ServeSettings;
import java.util.List;
import java.util.Map;
import picocli.CommandLine;

/**
 * Reads a data-plane container's arguments the way {@code dataplane serve} does, for callers that
 * run the {@link io.tensorcast.dataplane.pod.DataPlaneServer} in their own JVM (the e2e harness's
 * in-process container runtime).
 */
public final class ServeArguments {
  private ServeArguments() {}

  /**
   * Parses {@code serve}'s options with its own picocli model and resolves them against {@code env}
   * instead of the process environment: {@code POD_IP} (default listen host), {@code
   * TENSORCAST_MEMORY_BUDGET} (budget) and {@code AWS_ACCESS_KEY_ID}/{@code
   * AWS_SECRET_ACCESS_KEY}/{@code AWS_SESSION_TOKEN} (passed as explicit credentials when the first
   * two are set).
   *
   * @param args the container's arguments; a leading {@code serve} (the subcommand, as the operator
   *     writes it) is skipped
   * @param env the container's resolved environment
   * @throws CommandLine.ParameterException naming the option when the arguments are not valid for
   *     {@code dataplane serve}
   * @throws IllegalArgumentException when a quantity option ({@code --range-size}, {@code
   *     --memory-limit}) is not a byte quantity
   */
  public static ServeSettings parse(List<String> args, Map<String, String> env) {
    List<String> rest =
        !args.isEmpty() && "serve".equals(args.get(0)) ? args.subList(1, args.size()) : args;
    ServeCommand cmd = new ServeCommand();
    new CommandLine(cmd).parseArgs(rest.toArray(String[]::new));
    return cmd.settings(env, true);
  }
}
