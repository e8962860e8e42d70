package io.tensorcast.dataplane.testing;

import io.tensorcast.dataplane.cli.ServeArguments;
import io.tensorcast.dataplane.pod.ServeSettings;
import io.tensorcast.testing.S3MockServer;
import java.net.URI;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The argument list of a {@code serve} command for tests, built up option by option: {@code serve
 * --artifact-id <id> --uri <uri>}, then whatever the test needs, in the order given. Run it in this
 * JVM with {@link #parse()} (the S3Mock server's credentials as the environment) or hand {@link
 * #args()} to a process after {@code java -jar <dataplane jar>}.
 */
public final class ServeCommandLine {
  private final List<String> args = new ArrayList<>();

  private ServeCommandLine(String artifactId, String uri) {
    args.add("serve");
    option("--artifact-id", artifactId);
    option("--uri", uri);
  }

  /** {@code serve --artifact-id <artifactId> --uri <uri>}. */
  public static ServeCommandLine serve(String artifactId, String uri) {
    return new ServeCommandLine(artifactId, uri);
  }

  /**
   * An S3-compatible endpoint addressed the way S3Mock (or a proxy in front of it) wants: {@code
   * --endpoint <endpoint> --path-style --region <S3MockServer.REGION>}.
   */
  public ServeCommandLine s3(URI endpoint) {
    option("--endpoint", endpoint.toString());
    flag("--path-style");
    return option("--region", S3MockServer.REGION);
  }

  /** {@code --store-root <root> --budget <budget>} (a size such as {@code 64Mi}). */
  public ServeCommandLine store(Path root, String budget) {
    option("--store-root", root.toString());
    return option("--budget", budget);
  }

  /** {@code --listen <hostPort>}, e.g. {@code 127.0.0.1:0}. */
  public ServeCommandLine listen(String hostPort) {
    return option("--listen", hostPort);
  }

  /** {@code --distribution <mode>}: {@code source-only} or {@code peer-to-peer}. */
  public ServeCommandLine distribution(String mode) {
    return option("--distribution", mode);
  }

  /**
   * {@code --load-retry-backoff <first> --load-retry-max-backoff <max>}: how long a failed load
   * waits before it is loaded again (durations such as {@code 100ms}).
   */
  public ServeCommandLine loadRetryBackoff(String first, String max) {
    option("--load-retry-backoff", first);
    return option("--load-retry-max-backoff", max);
  }

  /** {@code --read-token-file <read> --admin-token-file <admin>}. */
  public ServeCommandLine tokenFiles(Path read, Path admin) {
    option("--read-token-file", read.toString());
    return option("--admin-token-file", admin.toString());
  }

  /** {@code <name> <value>}. */
  public ServeCommandLine option(String name, String value) {
    args.add(name);
    args.add(value);
    return this;
  }

  /** {@code <name>}, an option without a value (e.g. {@code --allow-insecure-endpoint}). */
  public ServeCommandLine flag(String name) {
    args.add(name);
    return this;
  }

  /** The arguments so far, {@code serve} first. */
  public List<String> args() {
    return List.copyOf(args);
  }

  /** The settings of these arguments with the S3Mock server's credentials as the environment. */
  public ServeSettings parse() {
    return ServeArguments.parse(args, s3MockCredentials());
  }

  /** {@code AWS_ACCESS_KEY_ID} and {@code AWS_SECRET_ACCESS_KEY} of the S3Mock server. */
  public static Map<String, String> s3MockCredentials() {
    return Map.of(
        "AWS_ACCESS_KEY_ID", S3MockServer.ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY", S3MockServer.SECRET_KEY);
  }
}
