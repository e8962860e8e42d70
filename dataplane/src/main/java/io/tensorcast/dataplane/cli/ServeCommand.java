package io.tensorcast.dataplane.cli;

import io.tensorcast.dataplane.serve.DataPlaneServer;
import io.tensorcast.dataplane.serve.ServeSettings;
import io.tensorcast.dataplane.source.SourceOptions;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code dataplane serve}: the long-running data-plane pod. Loads one artifact (fixed by the
 * command line, so the pod spec is the whole desired state), serves the control endpoint, and on
 * SIGTERM stops a load in flight, releases the artifact's memory and exits.
 */
@Command(
    name = "serve",
    mixinStandardHelpOptions = true,
    description =
        "Load an artifact and keep it in the page-locked store; serve health, status and metrics"
            + " over HTTP until terminated, then free the store.")
final class ServeCommand implements Callable<Integer> {
  static final int DEFAULT_PORT = 8471;

  @Mixin SourceArgs source;
  @Mixin StoreArgs store;

  @Option(
      names = "--artifact-id",
      required = true,
      description = "Store directory name for the artifact (unique per ModelArtifact generation).")
  String artifactId;

  @Option(
      names = "--listen",
      description = "HOST:PORT of the control endpoint (default $POD_IP:8471, else 0.0.0.0:8471).")
  String listen;

  @Option(
      names = "--control-token-file",
      description =
          "File holding the bearer token that GET /status requires (a mounted Secret key;"
              + " re-read when it changes).")
  Path tokenFile;

  @Override
  public Integer call() throws Exception {
    DataPlaneServer server = DataPlaneServer.start(settings(System.getenv(), false));
    // On SIGTERM: stop a load in flight, unload, close (see DataPlaneServer.close()). call()
    // returns only once that is done, so the JVM does not exit under an unload.
    Runtime.getRuntime().addShutdownHook(new Thread(server::close, "unload-on-exit"));
    boolean interrupted = false;
    while (true) {
      try {
        server.awaitClosed();
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
    return 0;
  }

  /**
   * The resolved settings of this command line.
   *
   * @param env the environment to read {@code POD_IP}, {@link StoreArgs#BUDGET_ENV} and (when
   *     {@code credentialsFromEnv}) the {@code AWS_*} keys from
   * @param credentialsFromEnv pass {@code AWS_ACCESS_KEY_ID}/{@code AWS_SECRET_ACCESS_KEY}/{@code
   *     AWS_SESSION_TOKEN} from {@code env} explicitly; otherwise the SDK default chain reads the
   *     process's own (what {@code dataplane serve} does)
   */
  ServeSettings settings(Map<String, String> env, boolean credentialsFromEnv) {
    Optional<SourceOptions.StaticCredentials> credentials = Optional.empty();
    String keyId = env.get("AWS_ACCESS_KEY_ID");
    String secret = env.get("AWS_SECRET_ACCESS_KEY");
    if (credentialsFromEnv && keyId != null && !keyId.isBlank() && secret != null) {
      String token = env.get("AWS_SESSION_TOKEN");
      credentials =
          Optional.of(
              new SourceOptions.StaticCredentials(
                  keyId,
                  secret,
                  token == null || token.isEmpty() ? Optional.empty() : Optional.of(token)));
    }
    return new ServeSettings(
        artifactId,
        listenAddress(env.get("POD_IP")),
        source.uriOption != null ? source.uriOption : source.positionalUri,
        source.include,
        source.exclude,
        source.endpoint,
        source.region,
        source.pathStyle,
        credentials,
        source.readOptions(),
        store.root,
        store.budget != null ? store.budget : env.get(StoreArgs.BUDGET_ENV),
        store.memoryLimitBytes(),
        store.lockPolicy,
        tokenFile);
  }

  private InetSocketAddress listenAddress(String podIp) {
    String spec = listen;
    if (spec == null) {
      spec = (podIp == null || podIp.isBlank() ? "0.0.0.0" : podIp) + ":" + DEFAULT_PORT;
    }
    int colon = spec.lastIndexOf(':');
    if (colon < 0) {
      throw new IllegalArgumentException("--listen must be HOST:PORT, got " + spec);
    }
    String host = spec.substring(0, colon);
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    return new InetSocketAddress(host, Integer.parseInt(spec.substring(colon + 1)));
  }
}
