package io.tensorcast.dataplane.pod;

import io.tensorcast.dataplane.format.FormatLimits;
import io.tensorcast.dataplane.load.ReadOptions;
import io.tensorcast.dataplane.source.SourceOptions.StaticCredentials;
import io.tensorcast.dataplane.store.LockPolicy;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * Everything one {@link DataPlaneServer} needs, resolved: what {@code dataplane serve} reads from
 * its command line and from the environment ({@code POD_IP}, {@code TENSORCAST_MEMORY_BUDGET},
 * {@code AWS_*}). Nothing here is read from the process, so several servers can run in one JVM.
 *
 * <p>Values that the server validates while starting (URI, include/exclude globs, budget) are kept
 * as given: a bad one turns into a {@code Failed} status on {@code /status}, as in a pod, rather
 * than an exception.
 *
 * @param artifactId store directory name of the artifact (unique per ModelArtifact generation)
 * @param listen address of the control endpoint (port 0 picks a free port)
 * @param uri artifact URI ({@code s3://bucket/prefix/}, {@code file:///dir}, ...); {@code null}
 *     when none was given, reported as {@code InvalidSource}
 * @param include globs of files to load (.gitignore rules); empty = every file
 * @param exclude globs of files to skip
 * @param endpoint S3-compatible endpoint, or {@code null} for AWS
 * @param region signing region, or {@code null} (us-east-1)
 * @param pathStyle path-style bucket addressing
 * @param credentials explicit S3 credentials; empty = the AWS SDK default chain, which reads the
 *     <em>process</em> environment and system properties (an embedded server should pass them)
 * @param read ranged-read settings (concurrency, range size in bytes, attempts per range)
 * @param storeRoot directory of the page-locked store (memory-backed file system)
 * @param budget most bytes the store may hold, a Kubernetes quantity such as {@code 2Gi}; {@code
 *     null} = measured from the memory cgroup, MemAvailable and the file system
 * @param memoryLimitBytes refuse an artifact larger than this many bytes; 0 = no limit
 * @param lockPolicy whether failing to {@code mlock} is an error
 * @param controlAuth the read and admin tokens of the control endpoint; {@code null}: two random
 *     tokens are generated ({@link DataPlaneServer#controlAuth()} hands them out)
 * @param peer peer-to-peer distribution settings, or {@code null} for source-only loading ({@code
 *     --distribution source-only} or {@code --peer-listen off})
 * @param loadRetry back-off between loads after a transient source failure ({@code
 *     --load-retry-backoff}, {@code --load-retry-max-backoff})
 * @param allowInsecureEndpoint credentials may be sent to a plain {@code http://} endpoint (an
 *     in-cluster store; {@code --allow-insecure-endpoint})
 * @param revision Hugging Face revision, or {@code null} for {@code main}
 * @param formatLimits bounds of the format readers ({@code --max-…} flags)
 * @param shards for a TensorShardSet's pod: the ranks to materialise instead of the whole artifact;
 *     {@code null} for a ModelArtifact's pod
 */
public record ServeSettings(
    String artifactId,
    InetSocketAddress listen,
    String uri,
    List<String> include,
    List<String> exclude,
    URI endpoint,
    String region,
    boolean pathStyle,
    Optional<StaticCredentials> credentials,
    ReadOptions read,
    Path storeRoot,
    String budget,
    long memoryLimitBytes,
    LockPolicy lockPolicy,
    io.tensorcast.dataplane.http.ControlAuth controlAuth,
    io.tensorcast.dataplane.p2p.PeerSettings peer,
    LoadRetry loadRetry,
    boolean allowInsecureEndpoint,
    String revision,
    FormatLimits formatLimits,
    io.tensorcast.dataplane.shards.ShardSettings shards) {

  /** Settings of a ModelArtifact's pod ({@code shards} null). */
  public ServeSettings(
      String artifactId,
      InetSocketAddress listen,
      String uri,
      List<String> include,
      List<String> exclude,
      URI endpoint,
      String region,
      boolean pathStyle,
      Optional<StaticCredentials> credentials,
      ReadOptions read,
      Path storeRoot,
      String budget,
      long memoryLimitBytes,
      LockPolicy lockPolicy,
      io.tensorcast.dataplane.http.ControlAuth controlAuth,
      io.tensorcast.dataplane.p2p.PeerSettings peer,
      LoadRetry loadRetry,
      boolean allowInsecureEndpoint,
      String revision,
      FormatLimits formatLimits) {
    this(
        artifactId,
        listen,
        uri,
        include,
        exclude,
        endpoint,
        region,
        pathStyle,
        credentials,
        read,
        storeRoot,
        budget,
        memoryLimitBytes,
        lockPolicy,
        controlAuth,
        peer,
        loadRetry,
        allowInsecureEndpoint,
        revision,
        formatLimits,
        null);
  }

  public ServeSettings {
    Objects.requireNonNull(artifactId, "artifactId");
    Objects.requireNonNull(listen, "listen");
    include = List.copyOf(include);
    exclude = List.copyOf(exclude);
    Objects.requireNonNull(credentials, "credentials");
    Objects.requireNonNull(read, "read");
    Objects.requireNonNull(storeRoot, "storeRoot");
    Objects.requireNonNull(lockPolicy, "lockPolicy");
    Objects.requireNonNull(loadRetry, "loadRetry");
    Objects.requireNonNull(formatLimits, "formatLimits");
    if (shards != null && peer != null) {
      throw new IllegalArgumentException(
          "a TensorShardSet pod does not join a peer swarm: use --distribution source-only with"
              + " --shards");
    }
    if (memoryLimitBytes < 0) {
      throw new IllegalArgumentException(
          "memoryLimitBytes must not be negative: " + memoryLimitBytes);
    }
  }
}
