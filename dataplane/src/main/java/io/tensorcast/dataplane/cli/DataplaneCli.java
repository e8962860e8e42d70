package io.tensorcast.dataplane.cli;

import io.tensorcast.dataplane.source.BundledNatives;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code dataplane} executable: {@code load}, {@code inspect}, {@code serve}.
 *
 * <p>Exit codes: 0 success, 1 the artifact failed to load or inspect (reason printed), 2 usage
 * error.
 */
@Command(
    name = "dataplane",
    mixinStandardHelpOptions = true,
    versionProvider = DataplaneCli.Version.class,
    description = "Tensorcast data plane: load ML artifacts into page-locked host memory.")
public final class DataplaneCli implements Runnable {
  /**
   * The subcommands, in the order {@code --help} lists them. Registered by {@link #commandLine}
   * rather than named in {@code @Command}: picocli builds the model of every registered command by
   * reflection before it parses, and {@link #main} registers only the one the arguments name (a
   * one-shot {@code load} then does not pay for {@code serve}'s dozens of options at start-up).
   */
  private static final Map<String, Supplier<Object>> SUBCOMMANDS = subcommands();

  private static Map<String, Supplier<Object>> subcommands() {
    Map<String, Supplier<Object>> m = new LinkedHashMap<>();
    m.put("load", LoadCommand::new);
    m.put("inspect", InspectCommand::new);
    m.put("serve", ServeCommand::new);
    m.put("serve-writes", ServeWritesCommand::new);
    m.put("generate", GenerateCommand::new);
    return m;
  }

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public void run() {
    spec.commandLine().usage(System.out);
  }

  public static void main(String[] args) {
    BundledNatives.checkJnaBootPath(); // before anything uses JNA
    System.exit(commandLine(args.length > 0 ? args[0] : null).execute(args));
  }

  /** The configured command line with every subcommand (also used by tests and harnesses). */
  public static CommandLine commandLine() {
    return commandLine(null);
  }

  /**
   * The configured command line with only the subcommand {@code name} when there is one of that
   * name, else with all of them (for {@code --help}, a misspelt name's suggestions, and the rest).
   */
  static CommandLine commandLine(String name) {
    CommandLine cli = new CommandLine(new DataplaneCli());
    SUBCOMMANDS.forEach(
        (n, command) -> {
          if (name == null || !SUBCOMMANDS.containsKey(name) || n.equals(name)) {
            cli.addSubcommand(command.get());
          }
        });
    return cli.setCaseInsensitiveEnumValuesAllowed(true)
        .setExitCodeExceptionMapper(e -> e instanceof CommandLine.ParameterException ? 2 : 1)
        .setExecutionExceptionHandler(DataplaneCli::handle);
  }

  /**
   * Option values that fail validation (an {@link IllegalArgumentException}, whose message names
   * the value and the allowed range) and an endpoint that cannot bind are usage problems: one line
   * on stderr, exit code 2, no stack trace. Anything else stays an error with its trace.
   */
  private static int handle(Exception e, CommandLine cmd, CommandLine.ParseResult parsed)
      throws Exception {
    Throwable bind = e;
    while (bind != null && !(bind instanceof java.net.BindException)) {
      bind = bind.getCause();
    }
    if (bind != null) {
      cmd.getErr()
          .printf(
              "%s: cannot listen on the control endpoint (--listen): %s%n",
              cmd.getCommandName(), bind.getMessage());
      return 2;
    }
    if (e instanceof IllegalArgumentException) {
      cmd.getErr().printf("%s: invalid option value: %s%n", cmd.getCommandName(), e.getMessage());
      cmd.getErr().printf("Try '%s --help'.%n", cmd.getCommandSpec().qualifiedName());
      return 2;
    }
    throw e;
  }

  static final class Version implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      String v = DataplaneCli.class.getPackage().getImplementationVersion();
      return new String[] {"tensorcast dataplane " + (v == null ? "dev" : v)};
    }
  }
}
