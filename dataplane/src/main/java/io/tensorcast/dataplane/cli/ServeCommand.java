package io.tensorcast.dataplane.cli;

import io.tensorcast.api.wire.Membership;
import io.tensorcast.dataplane.http.ControlAuth;
import io.tensorcast.dataplane.http.ControlToken;
import io.tensorcast.dataplane.p2p.PeerSecret;
import io.tensorcast.dataplane.p2p.PeerSettings;
import io.tensorcast.dataplane.p2p.PieceMap;
import io.tensorcast.dataplane.pod.DataPlaneServer;
import io.tensorcast.dataplane.pod.LoadRetry;
import io.tensorcast.dataplane.pod.ServeSettings;
import io.tensorcast.dataplane.source.SourceOptions;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
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
  @Mixin FormatLimitArgs formatLimits;

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
      names = "--read-token-file",
      description =
          "File holding the bearer token of the read scope (GET /status, /v1/tensors), at least"
              + " 16 characters (a mounted Secret key; re-read when it changes). Without it a"
              + " random token is generated and written to --tokens-out.")
  Path readTokenFile;

  @Option(
      names = "--admin-token-file",
      description =
          "File holding the bearer token of the admin scope (PUT /v1/peers, and what read"
              + " allows). Without it a random token is generated and written to --tokens-out."
              + " /healthz, /readyz and /metrics need no token.")
  Path adminTokenFile;

  @Option(names = "--control-token-file", description = "Deprecated name of --admin-token-file.")
  Path legacyTokenFile;

  @Option(
      names = "--tokens-out",
      description =
          "Where tokens generated for a scope without a token file are written (mode 0600, lines"
              + " read=... and admin=...); default a new file tensorcast-control-<artifact-id>-*"
              + " in the temporary directory, named in the log.")
  Path tokensOut;

  @Option(
      names = "--peer-secret-file",
      description =
          "File holding the artifact's peer secret: base64 text of at least 32 random bytes"
              + " (a mounted Secret key; read again after a failed handshake, so a rotated"
              + " secret is picked up). Peers prove it before any piece moves. Without it the"
              + " peer port stays closed and this member loads from the source alone; required"
              + " with --peers.")
  Path peerSecretFile;

  @Option(
      names = "--peer-listen",
      description =
          "HOST:PORT of the peer transport (default $POD_IP:8472, else 0.0.0.0:8472); 'off'"
              + " disables peer-to-peer distribution.")
  String peerListen;

  @Option(
      names = "--peer-id",
      description = "This member's id in the swarm (default $POD_NAME, else the host name).")
  String peerId;

  @Option(
      names = "--piece-size",
      defaultValue = "1Mi",
      description =
          "Piece size, a byte quantity (default ${DEFAULT-VALUE}); the same on every member.")
  String pieceSize;

  @Option(
      names = "--peers",
      description =
          "Static membership ID=HOST:PORT,... including this member (tests and benchmarks"
              + " without an operator); otherwise PUT /v1/peers sets it.")
  String peers;

  @Option(
      names = "--distribution",
      defaultValue = "peer-to-peer",
      description = "peer-to-peer (default) or source-only (every byte from the source).")
  String distribution;

  @Option(
      names = "--membership-wait",
      defaultValue = "10s",
      description =
          "With no membership yet, load from the source alone after this long (default"
              + " ${DEFAULT-VALUE}; e.g. 500ms, 10s, 1m).")
  String membershipWait;

  @Option(
      names = "--peer-timeout",
      defaultValue = "10s",
      description =
          "A requested piece not received within this, from a peer that sent no piece bytes"
              + " meanwhile, is asked elsewhere; a silent connection is closed; a member"
              + " disconnected this long is lost; a source response whose body brings no byte"
              + " for half of it (at least 5 s) is cut and resumed (default ${DEFAULT-VALUE}).")
  String peerTimeout;

  @Option(
      names = "--load-retry-backoff",
      defaultValue = "10s",
      description =
          "After a load failed on a transient source error (SourceUnavailable, Throttled: the"
              + " source stayed down past --max-attempts), wait this long and load again; the"
              + " wait doubles per failed load up to --load-retry-max-backoff, jittered, with no"
              + " limit on attempts. Meanwhile /status is Pending with the failure's reason."
              + " Other failures stay Failed. Default ${DEFAULT-VALUE}.")
  String loadRetryBackoff;

  @Option(
      names = "--load-retry-max-backoff",
      defaultValue = "5m",
      description =
          "Longest wait between loads after transient failures (default ${DEFAULT-VALUE}).")
  String loadRetryMaxBackoff;

  @Option(
      names = "--shards",
      description =
          "Materialise TensorShardSet rank files instead of the whole artifact: the layout's axis"
              + " sizes, e.g. ep:2,tp:4 (axes dp, pp, ep, tp; absent = 1). Needs --ranks and"
              + " --distribution source-only.")
  String shards;

  @Option(
      names = "--ranks",
      split = ",",
      description = "With --shards: the global ranks this pod writes, e.g. 0,1.")
  java.util.List<Integer> ranks = new java.util.ArrayList<>();

  @Option(
      names = "--rules",
      description =
          "With --shards: the split rules as JSON, e.g. [{\"pattern\":\"q_proj\\\\.weight$\","
              + "\"splitDim\":0},{\"pattern\":\"norm\",\"replicate\":true}]; absent: the"
              + " built-in set of config.json's architectures.")
  String rules;

  @Option(
      names = "--fetch-latency",
      defaultValue = "20ms",
      description =
          "With --shards: cost model, time one source request costs besides its bytes (default"
              + " ${DEFAULT-VALUE}).")
  String fetchLatency;

  @Option(
      names = "--fetch-bandwidth",
      defaultValue = "200M",
      description =
          "With --shards: cost model, bytes per second of one request, a byte quantity (default"
              + " ${DEFAULT-VALUE}). Gaps under latency × bandwidth are read across.")
  String fetchBandwidth;

  @Option(
      names = "--fetch-max-request",
      defaultValue = "8Mi",
      description = "With --shards: the longest source request (default ${DEFAULT-VALUE}).")
  String fetchMaxRequest;

  @Option(
      names = "--copies",
      split = ",",
      description =
          "With --shards: ModelArtifact copies' control endpoints HOST:PORT to read slices from"
              + " (PUT /v1/peers replaces them).")
  java.util.List<String> copies = new java.util.ArrayList<>();

  @Option(
      names = "--copy-token-file",
      description =
          "With --shards: file holding the ModelArtifact's read token, presented to the copies'"
              + " /v1/tensors (a copy refuses any other token; its slices then come from the"
              + " source).")
  Path copyTokenFile;

  @Option(
      names = "--copy-wait",
      defaultValue = "0s",
      description =
          "With --shards: wait this long for copies from PUT /v1/peers before reading from the"
              + " source alone (default ${DEFAULT-VALUE}).")
  String copyWait;

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
        controlAuth(),
        peerSettings(env),
        new LoadRetry(
            duration(loadRetryBackoff, "--load-retry-backoff"),
            duration(loadRetryMaxBackoff, "--load-retry-max-backoff")),
        source.allowInsecureEndpoint,
        source.revision,
        formatLimits.limits(),
        shardSettings());
  }

  /**
   * The control endpoint's tokens: from {@code --read-token-file} and {@code --admin-token-file}
   * ({@code --control-token-file} is the admin token's old name); a scope without a file gets a
   * random token, written with the other generated one to {@code --tokens-out} (mode 0600) and
   * named in the log, so a data plane started by hand is never open.
   */
  private ControlAuth controlAuth() {
    if (legacyTokenFile != null && adminTokenFile != null) {
      throw new IllegalArgumentException(
          "--control-token-file is the old name of --admin-token-file; give only one of them");
    }
    Path adminFile = adminTokenFile != null ? adminTokenFile : legacyTokenFile;
    ControlToken read = readTokenFile != null ? token(readTokenFile, "--read-token-file") : null;
    ControlToken admin = adminFile != null ? token(adminFile, "--admin-token-file") : null;
    if (read != null && admin != null) {
      return new ControlAuth(read, admin);
    }
    ControlToken r = read != null ? read : ControlToken.random();
    ControlToken a = admin != null ? admin : ControlToken.random();
    ControlAuth auth = new ControlAuth(r, a);
    StringBuilder text =
        new StringBuilder(
            "# bearer tokens of the control endpoint of dataplane serve --artifact-id "
                + artifactId
                + " (generated at start, valid while it runs)\n");
    if (read == null) {
      text.append("read=").append(r.value()).append('\n');
    }
    if (admin == null) {
      text.append("admin=").append(a.value()).append('\n');
    }
    Path written = GeneratedTokens.write(tokensOut, artifactId, text.toString());
    org.slf4j.LoggerFactory.getLogger(ServeCommand.class)
        .info(
            "no {}: generated {} written to {} (mode 0600); send it as 'Authorization: Bearer"
                + " <token>'",
            read == null && admin == null
                ? "--read-token-file or --admin-token-file"
                : read == null ? "--read-token-file" : "--admin-token-file",
            read == null && admin == null
                ? "the read and admin tokens"
                : read == null ? "the read token" : "the admin token",
            written);
    return auth;
  }

  private static ControlToken token(Path file, String option) {
    try {
      return new ControlToken(file);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(option + ": " + e.getMessage(), e);
    }
  }

  /** The shard settings, or null without --shards. */
  private io.tensorcast.dataplane.shards.ShardSettings shardSettings() {
    if (shards == null) {
      if (!ranks.isEmpty() || rules != null) {
        throw new IllegalArgumentException("--ranks and --rules need --shards");
      }
      return null;
    }
    java.util.List<io.tensorcast.dataplane.shards.ShardRules.Spec> specs =
        new java.util.ArrayList<>();
    if (rules != null && !rules.isBlank()) {
      try {
        com.fasterxml.jackson.databind.JsonNode root =
            new com.fasterxml.jackson.databind.ObjectMapper().readTree(rules);
        if (root == null || !root.isArray()) {
          throw new IllegalArgumentException("--rules must be a JSON array of rules");
        }
        for (com.fasterxml.jackson.databind.JsonNode r : root) {
          specs.add(
              new io.tensorcast.dataplane.shards.ShardRules.Spec(
                  r.path("pattern").isTextual() ? r.get("pattern").asText() : null,
                  r.path("splitDim").isInt() ? r.get("splitDim").asInt() : null,
                  r.path("replicate").isBoolean() ? r.get("replicate").asBoolean() : null,
                  r.path("expertOwned").isBoolean() ? r.get("expertOwned").asBoolean() : null));
        }
      } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
        throw new IllegalArgumentException("--rules is not valid JSON: " + e.getOriginalMessage());
      }
    }
    long bandwidth = Quantities.bytes(fetchBandwidth, "--fetch-bandwidth");
    long maxRequest = Quantities.bytes(fetchMaxRequest, "--fetch-max-request");
    if (maxRequest < 1 || maxRequest > 1 << 30) {
      throw new IllegalArgumentException("--fetch-max-request must be between 1 and 1Gi");
    }
    java.util.List<InetSocketAddress> copyAddresses = new java.util.ArrayList<>();
    for (String c : copies) {
      copyAddresses.add(Membership.address(c, "--copies"));
    }
    return new io.tensorcast.dataplane.shards.ShardSettings(
        io.tensorcast.dataplane.shards.Parallelism.parse(shards),
        ranks,
        specs,
        new io.tensorcast.dataplane.shards.FetchPlanner.Costs(
            duration(fetchLatency, "--fetch-latency"), bandwidth, (int) maxRequest),
        copyAddresses,
        copyTokenFile,
        duration(copyWait, "--copy-wait"));
  }

  /** The peer settings, or null for source-only loading. */
  private PeerSettings peerSettings(Map<String, String> env) {
    String mode = distribution == null ? "peer-to-peer" : distribution.strip();
    if (!mode.equals("peer-to-peer") && !mode.equals("source-only")) {
      throw new IllegalArgumentException(
          "--distribution must be peer-to-peer or source-only, got '" + distribution + "'");
    }
    if (mode.equals("source-only") || "off".equals(peerListen) || shards != null) {
      return null;
    }
    String podIp = env.get("POD_IP");
    String listenSpec =
        peerListen != null
            ? peerListen
            : (podIp == null || podIp.isBlank() ? "0.0.0.0" : podIp)
                + ":"
                + PeerSettings.DEFAULT_PORT;
    String id = peerId;
    if (id == null || id.isBlank()) {
      id = env.get("POD_NAME");
    }
    if (id == null || id.isBlank()) {
      id = env.get("HOSTNAME");
    }
    if (id == null || id.isBlank()) {
      try {
        id = java.net.InetAddress.getLocalHost().getHostName();
      } catch (java.io.IOException e) {
        throw new IllegalArgumentException(
            "--peer-id not given, POD_NAME not set and the host name is unknown: " + e);
      }
    }
    long piece = Quantities.bytes(pieceSize, "--piece-size");
    if (piece < 1 || piece > PieceMap.MAX_PIECE_SIZE) {
      throw new IllegalArgumentException(
          "--piece-size must be between 1 byte and 64Mi, got " + pieceSize);
    }
    boolean staticPeers = peers != null && !peers.isBlank();
    Membership fixed = staticPeers ? Membership.parseStatic(peers) : null;
    if (staticPeers && peerSecretFile == null) {
      throw new IllegalArgumentException(
          "--peers needs --peer-secret-file: the members of a swarm prove a shared secret to each"
              + " other (write one with `head -c 32 /dev/urandom | base64 > FILE` and give every"
              + " member the same file)");
    }
    PeerSecret secret;
    try {
      secret = peerSecretFile == null ? null : PeerSecret.fromFile(peerSecretFile);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("--peer-secret-file: " + e.getMessage(), e);
    }
    return new PeerSettings(
        id,
        Membership.address(listenSpec, "--peer-listen"),
        (int) piece,
        fixed,
        duration(membershipWait, "--membership-wait"),
        duration(peerTimeout, "--peer-timeout"),
        PeerSettings.DEFAULT_MAX_IN_FLIGHT,
        secret);
  }

  /** {@code 500ms}, {@code 10s}, {@code 2m}, {@code 1h}, or an ISO-8601 duration. */
  static Duration duration(String value, String option) {
    String v = value.strip();
    try {
      if (v.startsWith("P") || v.startsWith("p")) {
        return Duration.parse(v);
      }
      if (v.endsWith("ms")) {
        return Duration.ofMillis(Long.parseLong(v.substring(0, v.length() - 2)));
      }
      long n = Long.parseLong(v.substring(0, v.length() - 1));
      switch (v.charAt(v.length() - 1)) {
        case 's':
          return Duration.ofSeconds(n);
        case 'm':
          return Duration.ofMinutes(n);
        case 'h':
          return Duration.ofHours(n);
        default:
          break;
      }
    } catch (RuntimeException e) {
      // fall through to the message below
    }
    throw new IllegalArgumentException(
        option + ": '" + value + "' is not a duration such as 500ms, 10s or 2m");
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
