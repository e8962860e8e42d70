package io.tensorcast.dataplane.cli;

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
    description = "Tensorcast data plane: load ML artifacts into page-locked host memory.",
    subcommands = {
      LoadCommand.class,
      InspectCommand.class,
      ServeCommand.class,
      ServeWritesCommand.class,
      GenerateCommand.class
    })
public final class DataplaneCli implements Runnable {

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public void run() {
    spec.commandLine().usage(System.out);
  }

  public static void main(String[] args) {
    System.exit(commandLine().execute(args));
  }

  /** The configured command line (also used by tests and in-process harnesses). */
  public static CommandLine commandLine() {
    return new CommandLine(new DataplaneCli())
        .setCaseInsensitiveEnumValuesAllowed(true)
        .setExitCodeExceptionMapper(e -> 1)
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
