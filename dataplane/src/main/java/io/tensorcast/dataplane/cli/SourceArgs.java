package io.tensorcast.dataplane.cli;

import io.tensorcast.dataplane.load.ArtifactLoader;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.source.SourceUri;
import io.tensorcast.dataplane.source.Sources;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** Where to read from and how: shared by {@code load}, {@code inspect} and {@code serve}. */
final class SourceArgs {
  @Parameters(
      index = "0",
      paramLabel = "URI",
      arity = "0..1",
      description = "Artifact URI: file:///dir, /dir, s3://bucket/prefix/")
  String positionalUri;

  @Option(names = "--uri", description = "Artifact URI (alternative to the positional URI).")
  String uriOption;

  @Option(names = "--include", description = "Glob of files to load (.gitignore rules); repeat.")
  List<String> include = new ArrayList<>();

  @Option(names = "--exclude", description = "Glob of files to skip (.gitignore rules); repeat.")
  List<String> exclude = new ArrayList<>();

  @Option(names = "--endpoint", description = "S3-compatible endpoint URL, e.g. http://host:9000")
  URI endpoint;

  @Option(names = "--region", description = "Region of the bucket (default: SDK chain, us-east-1)")
  String region;

  @Option(
      names = "--revision",
      description =
          "Hugging Face branch, tag, commit or refs/pr/N (default main); resolved to one commit"
              + " sha for the whole load.")
  String revision;

  @Option(names = "--path-style", description = "Path-style bucket addressing (S3-compatible).")
  boolean pathStyle;

  @Option(
      names = "--allow-insecure-endpoint",
      description =
          "Allow credentials (AWS keys, a Hub token) to go to a plain http:// endpoint: an"
              + " in-cluster store without TLS. Without it such an endpoint is refused"
              + " (InsecureEndpoint) before any request.")
  boolean allowInsecureEndpoint;

  @Option(
      names = "--concurrency",
      defaultValue = "16",
      description =
          "The most ranged reads from the source in flight (default ${DEFAULT-VALUE}). The number"
              + " in flight starts at 4 and follows what the origin delivers: it grows while more"
              + " reads bring more bytes and drops by one per request the origin throttles (429, 503"
              + " SlowDown), to at most half per 500 ms;"
              + " --fixed-concurrency keeps it at this number.")
  int concurrency;

  @Option(
      names = "--fixed-concurrency",
      description =
          "Keep exactly --concurrency source reads in flight instead of adapting the number to"
              + " what the origin delivers.")
  boolean fixedConcurrency;

  @Option(
      names = "--range-size",
      defaultValue = AUTO_RANGE_SIZE,
      description =
          "Bytes per ranged read, a Kubernetes quantity, or auto (the default): 8Mi, and a load"
              + " that reads the source alone asks for up to four adjacent ranges (32Mi) in one"
              + " request where one connection delivers them in under half a second; a given size"
              + " is used for every request.")
  String rangeSize;

  /** {@code --range-size}'s default: {@link ReadOptions#DEFAULTS}' range and largest request. */
  static final String AUTO_RANGE_SIZE = "auto";

  @Option(
      names = "--max-attempts",
      defaultValue = "6",
      description = "Attempts per range before the load fails (default ${DEFAULT-VALUE}).")
  int maxAttempts;

  @Option(
      names = "--throttle-budget",
      defaultValue = "5m",
      description =
          "The longest the requests of one load (listing, HEADs, header reads, ranged and"
              + " peer-swarm source reads) may be held back by throttling (429, 503 SlowDown) in"
              + " total before the load fails as Throttled (default ${DEFAULT-VALUE}; 500ms, 30s,"
              + " 5m, 1h or ISO-8601). A throttled request does not use up one of --max-attempts:"
              + " every request of the load waits until the server's Retry-After.")
  String throttleBudget;

  String uri() {
    String u = uriOption != null ? uriOption : positionalUri;
    if (u == null) {
      throw new IllegalArgumentException("an artifact URI is required (positional or --uri)");
    }
    return u;
  }

  /** Checks the numeric options, naming them, before anything is opened. */
  void validate() {
    if (concurrency < 1 || concurrency > 1024) {
      throw new IllegalArgumentException(
          "--concurrency must be between 1 and 1024, got " + concurrency);
    }
    if (maxAttempts < 1 || maxAttempts > 100) {
      throw new IllegalArgumentException(
          "--max-attempts must be between 1 and 100, got " + maxAttempts);
    }
    Duration budget = ServeCommand.duration(throttleBudget, "--throttle-budget");
    if (budget.isNegative() || budget.isZero()) {
      throw new IllegalArgumentException(
          "--throttle-budget must be positive, got " + throttleBudget);
    }
    if (!AUTO_RANGE_SIZE.equalsIgnoreCase(rangeSize)) {
      long range = Quantities.bytes(rangeSize, "--range-size");
      if (range < 1 || range > 1L << 30) {
        throw new IllegalArgumentException(
            "--range-size must be auto or between 1 byte and 1Gi, got " + rangeSize);
      }
    }
  }

  /**
   * The source of a load: its metadata calls are not retried in place when throttled, the load's
   * throttling gate paces them with every other request of the load.
   */
  ArtifactSource open() throws SourceException {
    return open(uri(), include, false);
  }

  /**
   * Like {@link #open()}, but a URI naming one local file (a path or {@code file://}) opens that
   * file's folder with the file as the only include: the artifact of that one file.
   */
  ArtifactSource openFileOrFolder() throws SourceException {
    validate();
    SourceUri u = SourceUri.parse(uri());
    if (u.scheme() == SourceUri.Scheme.FILE && Files.isRegularFile(u.localPath())) {
      Path file = u.localPath().toAbsolutePath().normalize();
      Path folder = file.getParent();
      String only = "/" + escapeGlob(file.getFileName().toString());
      return open(folder.toUri().toString(), List.of(only), true);
    }
    return open(uri(), include, true);
  }

  /** A file name as a glob that matches exactly it (special characters escaped). */
  static String escapeGlob(String name) {
    return name.replaceAll("([*?\\[\\]{}!\\\\])", "\\\\$1");
  }

  private ArtifactSource open(String uri, List<String> include, boolean throttledRetriesInPlace)
      throws SourceException {
    validate();
    SourceOptions.Builder b =
        SourceOptions.builder()
            .include(include)
            .exclude(exclude)
            .pathStyle(pathStyle)
            .allowInsecureEndpoint(allowInsecureEndpoint)
            .maxConnections(Math.max(concurrency, ArtifactLoader.METADATA_CONCURRENCY))
            .throttledRetriesInPlace(throttledRetriesInPlace);
    if (endpoint != null) {
      b.endpoint(endpoint);
    }
    if (region != null) {
      b.region(region);
    }
    if (revision != null) {
      b.revision(revision);
    }
    return Sources.open(uri, b.build());
  }

  ReadOptions readOptions() {
    validate();
    ReadOptions read = ReadOptions.DEFAULTS;
    if (!AUTO_RANGE_SIZE.equalsIgnoreCase(rangeSize)) {
      read = read.withRangeSize(Math.toIntExact(Quantities.bytes(rangeSize, "--range-size")));
    }
    return read.withConcurrency(concurrency)
        .withAdaptiveConcurrency(!fixedConcurrency)
        .withMaxAttempts(maxAttempts)
        .withThrottleBudget(ServeCommand.duration(throttleBudget, "--throttle-budget"));
  }
}
