package io.tensorcast.operator.config;

import io.fabric8.kubernetes.api.model.Quantity;
import io.tensorcast.api.wire.FormatLimitFlags;
import io.tensorcast.operator.validation.EndpointAllowlist;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;
import java.util.function.Function;

/**
 * The operator's own settings: what the data-plane pods it creates look like and how often it looks
 * at them. Read once at start from environment variables, each overridable by a Java system
 * property of the name in parentheses (system property wins):
 *
 * <ul>
 *   <li>{@code TENSORCAST_DATAPLANE_IMAGE} ({@code tensorcast.dataplane.image}): image of the
 *       data-plane container; its entrypoint is the {@code dataplane} CLI, the operator passes
 *       {@code serve ...} as args. Default {@value #DEFAULT_IMAGE}.
 *   <li>{@code TENSORCAST_DATAPLANE_IMAGE_PULL_POLICY} ({@code
 *       tensorcast.dataplane.imagePullPolicy}): {@code Always}, {@code IfNotPresent} or {@code
 *       Never}. Default {@code IfNotPresent}.
 *   <li>{@code TENSORCAST_CONTROL_PORT} ({@code tensorcast.controlPort}): TCP port of the pods'
 *       control endpoint ({@code /healthz}, {@code /readyz}, {@code /status}). Default {@value
 *       #DEFAULT_CONTROL_PORT}.
 *   <li>{@code TENSORCAST_PEER_PORT} ({@code tensorcast.peerPort}): TCP port of the pods' peer
 *       transport, which other data-plane pods of the same artifact connect to (pod IP to pod IP;
 *       the artifact's NetworkPolicy admits it only from those pods). Default {@value
 *       #DEFAULT_PEER_PORT}.
 *   <li>{@code TENSORCAST_METRICS_PORT} ({@code tensorcast.metricsPort}): TCP port of the
 *       operator's own Prometheus endpoint {@code GET /metrics}; 0 turns it off. Default {@value
 *       #DEFAULT_METRICS_PORT}.
 *   <li>{@code TENSORCAST_STORE_ROOT} ({@code tensorcast.storeRoot}): host directory of the
 *       page-locked store, mounted into each pod at the same path. Default {@value
 *       #DEFAULT_STORE_ROOT}.
 *   <li>{@code TENSORCAST_MEMORY_OVERHEAD} ({@code tensorcast.memoryOverhead}): memory a data-plane
 *       process needs besides the artifact's bytes (JVM heap, staging buffers), as a Kubernetes
 *       quantity. Added to the artifact's size in each pod's memory request and limit. Default
 *       {@value #DEFAULT_MEMORY_OVERHEAD}.
 *   <li>{@code TENSORCAST_POLL_INTERVAL} ({@code tensorcast.pollInterval}): how soon a reconcile
 *       runs again while an artifact is not Ready (ISO-8601 duration such as {@code PT2S}, or
 *       seconds). Default 2 s.
 *   <li>{@code TENSORCAST_READY_RESYNC} ({@code tensorcast.readyResync}): how soon a Ready
 *       artifact's pods are looked at again without any event. Default 60 s.
 *   <li>{@code TENSORCAST_RETRY_INITIAL}, {@code TENSORCAST_RETRY_MAX} ({@code
 *       tensorcast.retryInitial}, {@code tensorcast.retryMax}): a Failed artifact whose cause may
 *       go away without a spec change (a missing bucket or prefix, refused credentials) is loaded
 *       again after {@code TENSORCAST_RETRY_INITIAL}, the wait doubling per failed attempt up to
 *       {@code TENSORCAST_RETRY_MAX}. Defaults 30 s and 10 min.
 *   <li>{@code TENSORCAST_STATUS_TIMEOUT} ({@code tensorcast.statusTimeout}): bound on one {@code
 *       GET /status} to a pod (connect plus response). Default 2 s.
 *   <li>{@code TENSORCAST_MASTER_KEY_FILE} ({@code tensorcast.masterKeyFile}): file holding the
 *       operator's master key (at least 32 bytes; the chart mounts a Secret there), from which
 *       every ModelArtifact's peer secret and tokens are derived ({@code
 *       io.tensorcast.operator.trust.ArtifactKeys}). Absent: a random key for the life of the
 *       process (every restart then replaces all data-plane pods).
 *   <li>{@code TENSORCAST_ALLOWED_ENDPOINTS} ({@code tensorcast.allowedEndpoints}): source
 *       endpoints ModelArtifacts may use, separated by commas or white space, e.g. {@code
 *       https://s3.*.amazonaws.com, https://huggingface.co} ({@link EndpointAllowlist}). Empty: any
 *       https endpoint (http only with {@code spec.source.insecureEndpoint}).
 *   <li>{@code TENSORCAST_DATAPLANE_USER} ({@code tensorcast.dataplaneUser}): the non-root uid (and
 *       gid, and fsGroup) data-plane containers run as. Default {@value #DEFAULT_DATAPLANE_USER}.
 *   <li>{@code TENSORCAST_NETWORK_POLICY} ({@code tensorcast.networkPolicy}): {@code true}
 *       (default) creates a NetworkPolicy per ModelArtifact; {@code false} leaves network isolation
 *       to the cluster admin.
 *   <li>{@code TENSORCAST_OPERATOR_NAMESPACE} ({@code tensorcast.operatorNamespace}): the
 *       operator's own namespace (the chart sets it from the downward API); the NetworkPolicies
 *       admit the control port from operator pods of this namespace only. Absent: operator pods of
 *       any namespace.
 *   <li>{@code TENSORCAST_FORMAT_LIMITS} ({@code tensorcast.formatLimits}): bounds of the data
 *       plane's format readers, passed to every data-plane pod as {@code --name=value} flags:
 *       {@code name=value} pairs separated by commas, e.g. {@code
 *       max-tensors=2000000,max-header-bytes=200Mi} (names: {@link FormatLimitFlags#NAMES}).
 *       Default: none, the data plane's defaults apply.
 *   <li>{@code TENSORCAST_HEALTH_PORT} ({@code tensorcast.healthPort}): TCP port of the operator's
 *       probes {@code GET /healthz} and {@code GET /readyz}; 0 turns them off. Default {@value
 *       #DEFAULT_HEALTH_PORT}.
 *   <li>{@code TENSORCAST_LEADER_ELECTION_LEASE} ({@code tensorcast.leaderElection.lease}): name of
 *       the {@code coordination.k8s.io} Lease the operator replicas elect a leader with; only the
 *       leader reconciles. Absent: no leader election (run one replica).
 *   <li>{@code TENSORCAST_LEADER_ELECTION_NAMESPACE} ({@code tensorcast.leaderElection.namespace}):
 *       namespace of that Lease. Absent: the namespace of the operator's service account (in a pod,
 *       its own namespace).
 *   <li>{@code TENSORCAST_LEADER_ELECTION_LEASE_DURATION} ({@code
 *       tensorcast.leaderElection.leaseDuration}): how long a Lease not renewed stays the leader's;
 *       a standby takes over at most this long after the leader stopped renewing. Renew deadline is
 *       2/3 of it, retry period 2/15 of it. Default 15 s (10 s, 2 s).
 *   <li>{@code TENSORCAST_DATAPLANE_IMAGE_PULL_SECRETS} ({@code
 *       tensorcast.dataplane.imagePullSecrets}): comma-separated names of Secrets of type {@code
 *       kubernetes.io/dockerconfigjson} the data-plane pods pull their image with; each must exist
 *       in every ModelArtifact's namespace. Default none.
 *   <li>{@code TENSORCAST_DATAPLANE_PRIORITY_CLASS} ({@code tensorcast.dataplane.priorityClass}):
 *       PriorityClass of the data-plane pods. Default none (the cluster's default priority).
 *   <li>{@code TENSORCAST_DATAPLANE_CPU_REQUEST} ({@code tensorcast.dataplane.cpuRequest}): CPU
 *       request of the data-plane container, a Kubernetes quantity such as {@code 500m}; no CPU
 *       limit is set (loading is bursty). Default none.
 * </ul>
 *
 * @param dataPlaneImage image reference of the data-plane container
 * @param imagePullPolicy pull policy of that container
 * @param controlPort control endpoint port, 1-65535
 * @param peerPort peer transport port, 1-65535
 * @param metricsPort operator's metrics port, 0 (off) or 1-65535
 * @param storeRoot absolute host path of the store
 * @param memoryOverheadBytes bytes added to the artifact's size in each pod's memory request, ≥ 0
 * @param pollInterval reschedule delay while not Ready
 * @param readyResync reschedule delay while Ready
 * @param statusTimeout bound on one status call
 * @param masterKeyFile file of the master key, or empty for a random one
 * @param allowedEndpoints source endpoints allowed ({@link EndpointAllowlist#ANY}: all)
 * @param dataPlaneUser uid of data-plane containers, 1-2147483647
 * @param networkPolicy whether a NetworkPolicy is created per ModelArtifact
 * @param operatorNamespace the operator's namespace, if known
 * @param formatLimits format-reader bounds for the data-plane pods, flag name → value, sorted
 * @param healthPort operator's probe port, 0 (off) or 1-65535
 * @param leaderElection Lease settings, or empty for no leader election
 * @param dataPlanePod pull secrets, priority class and CPU request of the data-plane pods
 * @param retryInitial wait before the first retry of a Failed artifact whose cause may go away
 * @param retryMax cap of that wait, which doubles per attempt; at least {@code retryInitial}
 */
public record OperatorConfig(
    String dataPlaneImage,
    String imagePullPolicy,
    int controlPort,
    int peerPort,
    int metricsPort,
    String storeRoot,
    long memoryOverheadBytes,
    Duration pollInterval,
    Duration readyResync,
    Duration statusTimeout,
    Optional<Path> masterKeyFile,
    EndpointAllowlist allowedEndpoints,
    long dataPlaneUser,
    boolean networkPolicy,
    Optional<String> operatorNamespace,
    Map<String, String> formatLimits,
    int healthPort,
    Optional<LeaderElection> leaderElection,
    DataPlanePodSettings dataPlanePod,
    Duration retryInitial,
    Duration retryMax) {

  public static final String DEFAULT_IMAGE = "tensorcast/dataplane:0.1.0";
  public static final int DEFAULT_CONTROL_PORT = 8471;
  public static final int DEFAULT_PEER_PORT = 8472;
  public static final int DEFAULT_METRICS_PORT = 8080;
  public static final String DEFAULT_STORE_ROOT = "/dev/shm/tensorcast";
  public static final String DEFAULT_MEMORY_OVERHEAD = "256Mi";
  public static final int DEFAULT_HEALTH_PORT = 8081;

  /** First wait before a Failed artifact whose cause may go away is loaded again. */
  public static final Duration DEFAULT_RETRY_INITIAL = Duration.ofSeconds(30);

  /** Cap of the doubling wait between such retries. */
  public static final Duration DEFAULT_RETRY_MAX = Duration.ofMinutes(10);

  public static final Duration DEFAULT_LEASE_DURATION = Duration.ofSeconds(15);

  /** Kubernetes object names (DNS-1123 subdomain, RFC 1123), at most 253 characters. */
  private static final java.util.regex.Pattern OBJECT_NAME =
      java.util.regex.Pattern.compile(
          "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");

  /**
   * Leader election among operator replicas through a {@code coordination.k8s.io/v1} Lease.
   *
   * @param lease name of the Lease, a DNS-1123 subdomain
   * @param namespace namespace of the Lease; empty for the service account's namespace
   * @param leaseDuration how long a Lease not renewed stays the holder's, positive
   * @param identity this replica's holder identity; empty for {@code HOSTNAME} or a random UUID
   */
  public record LeaderElection(
      String lease, Optional<String> namespace, Duration leaseDuration, Optional<String> identity) {
    public LeaderElection {
      Objects.requireNonNull(lease, "lease");
      Objects.requireNonNull(namespace, "namespace");
      Objects.requireNonNull(leaseDuration, "leaseDuration");
      Objects.requireNonNull(identity, "identity");
      objectName("TENSORCAST_LEADER_ELECTION_LEASE", lease);
      namespace.ifPresent(n -> objectName("TENSORCAST_LEADER_ELECTION_NAMESPACE", n));
      if (leaseDuration.compareTo(Duration.ofSeconds(1)) < 0) {
        throw new IllegalArgumentException(
            "lease duration "
                + leaseDuration
                + " is shorter than 1 s (TENSORCAST_LEADER_ELECTION_LEASE_DURATION)");
      }
    }

    /** How long the leader keeps trying to renew before it gives up: 2/3 of the lease. */
    public Duration renewDeadline() {
      return leaseDuration.multipliedBy(2).dividedBy(3);
    }

    /** How often candidates try to acquire and the leader to renew: 2/15 of the lease. */
    public Duration retryPeriod() {
      return leaseDuration.multipliedBy(2).dividedBy(15);
    }
  }

  /**
   * What the data-plane pods get besides the artifact's own needs.
   *
   * @param imagePullSecrets names of pull Secrets, in every artifact's namespace; may be empty
   * @param priorityClassName PriorityClass of the pods, if any
   * @param cpuRequest CPU request of the data-plane container (a quantity such as 500m), if any
   */
  public record DataPlanePodSettings(
      List<String> imagePullSecrets,
      Optional<String> priorityClassName,
      Optional<Quantity> cpuRequest) {
    public DataPlanePodSettings {
      imagePullSecrets = List.copyOf(imagePullSecrets);
      Objects.requireNonNull(priorityClassName, "priorityClassName");
      Objects.requireNonNull(cpuRequest, "cpuRequest");
      imagePullSecrets.forEach(n -> objectName("TENSORCAST_DATAPLANE_IMAGE_PULL_SECRETS", n));
      priorityClassName.ifPresent(n -> objectName("TENSORCAST_DATAPLANE_PRIORITY_CLASS", n));
      cpuRequest.ifPresent(
          q -> {
            java.math.BigDecimal cores;
            try {
              cores = Quantity.getAmountInBytes(q);
            } catch (RuntimeException e) {
              throw new IllegalArgumentException(
                  "TENSORCAST_DATAPLANE_CPU_REQUEST='"
                      + q
                      + "' is not a Kubernetes quantity (e.g. 500m or 2)",
                  e);
            }
            if (cores.signum() <= 0) {
              throw new IllegalArgumentException(
                  "TENSORCAST_DATAPLANE_CPU_REQUEST='" + q + "' must be more than 0");
            }
          });
    }

    /** None of the settings. */
    public static DataPlanePodSettings none() {
      return new DataPlanePodSettings(List.of(), Optional.empty(), Optional.empty());
    }
  }

  public static final long DEFAULT_DATAPLANE_USER = 10001;

  public OperatorConfig {
    Objects.requireNonNull(dataPlaneImage, "dataPlaneImage");
    Objects.requireNonNull(imagePullPolicy, "imagePullPolicy");
    Objects.requireNonNull(storeRoot, "storeRoot");
    Objects.requireNonNull(pollInterval, "pollInterval");
    Objects.requireNonNull(readyResync, "readyResync");
    Objects.requireNonNull(statusTimeout, "statusTimeout");
    Objects.requireNonNull(leaderElection, "leaderElection");
    Objects.requireNonNull(dataPlanePod, "dataPlanePod");
    Objects.requireNonNull(masterKeyFile, "masterKeyFile");
    Objects.requireNonNull(allowedEndpoints, "allowedEndpoints");
    Objects.requireNonNull(operatorNamespace, "operatorNamespace");
    formatLimits = Collections.unmodifiableMap(new TreeMap<>(formatLimits));
    for (Map.Entry<String, String> e : formatLimits.entrySet()) {
      FormatLimitFlags.parse(e.getKey() + "=" + e.getValue()); // checks name and value
    }
    if (dataPlaneImage.isBlank()) {
      throw new IllegalArgumentException(
          "data-plane image is empty; set TENSORCAST_DATAPLANE_IMAGE");
    }
    if (!java.util.Set.of("Always", "IfNotPresent", "Never").contains(imagePullPolicy)) {
      throw new IllegalArgumentException(
          "image pull policy '"
              + imagePullPolicy
              + "' is not one of Always, IfNotPresent, Never (TENSORCAST_DATAPLANE_IMAGE_PULL_POLICY)");
    }
    if (controlPort < 1 || controlPort > 65535) {
      throw new IllegalArgumentException(
          "control port " + controlPort + " is outside 1-65535 (TENSORCAST_CONTROL_PORT)");
    }
    if (peerPort < 1 || peerPort > 65535) {
      throw new IllegalArgumentException(
          "peer port " + peerPort + " is outside 1-65535 (TENSORCAST_PEER_PORT)");
    }
    if (peerPort == controlPort) {
      throw new IllegalArgumentException(
          "peer port and control port are both "
              + peerPort
              + "; they must differ (TENSORCAST_PEER_PORT, TENSORCAST_CONTROL_PORT)");
    }
    if (metricsPort < 0 || metricsPort > 65535) {
      throw new IllegalArgumentException(
          "metrics port "
              + metricsPort
              + " is outside 0 (off) and 1-65535 (TENSORCAST_METRICS_PORT)");
    }
    if (healthPort < 0 || healthPort > 65535) {
      throw new IllegalArgumentException(
          "health port " + healthPort + " is outside 0 (off) and 1-65535 (TENSORCAST_HEALTH_PORT)");
    }
    if (healthPort != 0 && healthPort == metricsPort) {
      throw new IllegalArgumentException(
          "health port and metrics port are both "
              + healthPort
              + "; they must differ (TENSORCAST_HEALTH_PORT, TENSORCAST_METRICS_PORT)");
    }
    if (!storeRoot.startsWith("/")) {
      throw new IllegalArgumentException(
          "store root '" + storeRoot + "' is not an absolute path (TENSORCAST_STORE_ROOT)");
    }
    if (memoryOverheadBytes < 0) {
      throw new IllegalArgumentException(
          "memory overhead " + memoryOverheadBytes + " is negative (TENSORCAST_MEMORY_OVERHEAD)");
    }
    for (Duration d :
        new Duration[] {pollInterval, readyResync, statusTimeout, retryInitial, retryMax}) {
      if (d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException("durations must be positive, got " + d);
      }
    }
    if (retryMax.compareTo(retryInitial) < 0) {
      throw new IllegalArgumentException(
          "retry cap "
              + retryMax
              + " is below the first retry wait "
              + retryInitial
              + " (TENSORCAST_RETRY_MAX, TENSORCAST_RETRY_INITIAL)");
    }
    if (dataPlaneUser < 1 || dataPlaneUser > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(
          "data-plane user "
              + dataPlaneUser
              + " is not a non-root uid 1-2147483647 (TENSORCAST_DATAPLANE_USER)");
    }
  }

  /** The defaults, as documented on the class. */
  public static OperatorConfig defaults() {
    return fromLookup(name -> null);
  }

  /** Reads the settings from system properties, then the environment, then the defaults. */
  public static OperatorConfig fromEnvironment() {
    Map<String, String> env = System.getenv();
    return fromLookup(
        name -> {
          String prop = System.getProperty(PROPERTIES.get(name));
          return prop != null ? prop : env.get(name);
        });
  }

  private static final Map<String, String> PROPERTIES =
      Map.ofEntries(
          Map.entry("TENSORCAST_DATAPLANE_IMAGE", "tensorcast.dataplane.image"),
          Map.entry(
              "TENSORCAST_DATAPLANE_IMAGE_PULL_POLICY", "tensorcast.dataplane.imagePullPolicy"),
          Map.entry("TENSORCAST_CONTROL_PORT", "tensorcast.controlPort"),
          Map.entry("TENSORCAST_PEER_PORT", "tensorcast.peerPort"),
          Map.entry("TENSORCAST_METRICS_PORT", "tensorcast.metricsPort"),
          Map.entry("TENSORCAST_STORE_ROOT", "tensorcast.storeRoot"),
          Map.entry("TENSORCAST_MEMORY_OVERHEAD", "tensorcast.memoryOverhead"),
          Map.entry("TENSORCAST_POLL_INTERVAL", "tensorcast.pollInterval"),
          Map.entry("TENSORCAST_READY_RESYNC", "tensorcast.readyResync"),
          Map.entry("TENSORCAST_STATUS_TIMEOUT", "tensorcast.statusTimeout"),
          Map.entry("TENSORCAST_MASTER_KEY_FILE", "tensorcast.masterKeyFile"),
          Map.entry("TENSORCAST_ALLOWED_ENDPOINTS", "tensorcast.allowedEndpoints"),
          Map.entry("TENSORCAST_DATAPLANE_USER", "tensorcast.dataplaneUser"),
          Map.entry("TENSORCAST_NETWORK_POLICY", "tensorcast.networkPolicy"),
          Map.entry("TENSORCAST_OPERATOR_NAMESPACE", "tensorcast.operatorNamespace"),
          Map.entry("TENSORCAST_FORMAT_LIMITS", "tensorcast.formatLimits"),
          Map.entry("TENSORCAST_HEALTH_PORT", "tensorcast.healthPort"),
          Map.entry("TENSORCAST_LEADER_ELECTION_LEASE", "tensorcast.leaderElection.lease"),
          Map.entry("TENSORCAST_LEADER_ELECTION_NAMESPACE", "tensorcast.leaderElection.namespace"),
          Map.entry(
              "TENSORCAST_LEADER_ELECTION_LEASE_DURATION",
              "tensorcast.leaderElection.leaseDuration"),
          Map.entry("TENSORCAST_LEADER_ELECTION_IDENTITY", "tensorcast.leaderElection.identity"),
          Map.entry(
              "TENSORCAST_DATAPLANE_IMAGE_PULL_SECRETS", "tensorcast.dataplane.imagePullSecrets"),
          Map.entry("TENSORCAST_DATAPLANE_PRIORITY_CLASS", "tensorcast.dataplane.priorityClass"),
          Map.entry("TENSORCAST_DATAPLANE_CPU_REQUEST", "tensorcast.dataplane.cpuRequest"),
          Map.entry("TENSORCAST_RETRY_INITIAL", "tensorcast.retryInitial"),
          Map.entry("TENSORCAST_RETRY_MAX", "tensorcast.retryMax"));

  /**
   * Builds the settings from a lookup of the environment variable names listed on the class ({@code
   * null} for unset).
   *
   * @throws IllegalArgumentException naming the variable and the rule its value breaks
   */
  public static OperatorConfig fromLookup(Function<String, String> lookup) {
    Function<String, Optional<String>> get =
        name ->
            Optional.ofNullable(lookup.apply(name)).map(String::strip).filter(s -> !s.isEmpty());
    return new OperatorConfig(
        get.apply("TENSORCAST_DATAPLANE_IMAGE").orElse(DEFAULT_IMAGE),
        get.apply("TENSORCAST_DATAPLANE_IMAGE_PULL_POLICY").orElse("IfNotPresent"),
        get.apply("TENSORCAST_CONTROL_PORT")
            .map(v -> parseInt("TENSORCAST_CONTROL_PORT", v))
            .orElse(DEFAULT_CONTROL_PORT),
        get.apply("TENSORCAST_PEER_PORT")
            .map(v -> parseInt("TENSORCAST_PEER_PORT", v))
            .orElse(DEFAULT_PEER_PORT),
        get.apply("TENSORCAST_METRICS_PORT")
            .map(v -> parseInt("TENSORCAST_METRICS_PORT", v))
            .orElse(DEFAULT_METRICS_PORT),
        get.apply("TENSORCAST_STORE_ROOT").orElse(DEFAULT_STORE_ROOT),
        bytes(
            "TENSORCAST_MEMORY_OVERHEAD",
            get.apply("TENSORCAST_MEMORY_OVERHEAD").orElse(DEFAULT_MEMORY_OVERHEAD)),
        get.apply("TENSORCAST_POLL_INTERVAL")
            .map(v -> duration("TENSORCAST_POLL_INTERVAL", v))
            .orElse(Duration.ofSeconds(2)),
        get.apply("TENSORCAST_READY_RESYNC")
            .map(v -> duration("TENSORCAST_READY_RESYNC", v))
            .orElse(Duration.ofSeconds(60)),
        get.apply("TENSORCAST_STATUS_TIMEOUT")
            .map(v -> duration("TENSORCAST_STATUS_TIMEOUT", v))
            .orElse(Duration.ofSeconds(2)),
        get.apply("TENSORCAST_MASTER_KEY_FILE").map(Path::of),
        get.apply("TENSORCAST_ALLOWED_ENDPOINTS")
            .map(v -> allowlist("TENSORCAST_ALLOWED_ENDPOINTS", v))
            .orElse(EndpointAllowlist.ANY),
        get.apply("TENSORCAST_DATAPLANE_USER")
            .map(v -> (long) parseInt("TENSORCAST_DATAPLANE_USER", v))
            .orElse(DEFAULT_DATAPLANE_USER),
        get.apply("TENSORCAST_NETWORK_POLICY")
            .map(v -> bool("TENSORCAST_NETWORK_POLICY", v))
            .orElse(true),
        get.apply("TENSORCAST_OPERATOR_NAMESPACE"),
        formatLimits(get.apply("TENSORCAST_FORMAT_LIMITS").orElse(null)),
        get.apply("TENSORCAST_HEALTH_PORT")
            .map(v -> parseInt("TENSORCAST_HEALTH_PORT", v))
            .orElse(DEFAULT_HEALTH_PORT),
        get.apply("TENSORCAST_LEADER_ELECTION_LEASE")
            .map(
                lease ->
                    new LeaderElection(
                        lease,
                        get.apply("TENSORCAST_LEADER_ELECTION_NAMESPACE"),
                        get.apply("TENSORCAST_LEADER_ELECTION_LEASE_DURATION")
                            .map(v -> duration("TENSORCAST_LEADER_ELECTION_LEASE_DURATION", v))
                            .orElse(DEFAULT_LEASE_DURATION),
                        get.apply("TENSORCAST_LEADER_ELECTION_IDENTITY"))),
        new DataPlanePodSettings(
            get.apply("TENSORCAST_DATAPLANE_IMAGE_PULL_SECRETS")
                .map(
                    v ->
                        java.util.Arrays.stream(v.split(","))
                            .map(String::strip)
                            .filter(n -> !n.isEmpty())
                            .toList())
                .orElse(List.of()),
            get.apply("TENSORCAST_DATAPLANE_PRIORITY_CLASS"),
            get.apply("TENSORCAST_DATAPLANE_CPU_REQUEST").map(Quantity::new)),
        get.apply("TENSORCAST_RETRY_INITIAL")
            .map(v -> duration("TENSORCAST_RETRY_INITIAL", v))
            .orElse(DEFAULT_RETRY_INITIAL),
        get.apply("TENSORCAST_RETRY_MAX")
            .map(v -> duration("TENSORCAST_RETRY_MAX", v))
            .orElse(DEFAULT_RETRY_MAX));
  }

  private static void objectName(String variable, String value) {
    if (value.length() > 253 || !OBJECT_NAME.matcher(value).matches()) {
      throw new IllegalArgumentException(
          variable
              + "='"
              + value
              + "' is not a Kubernetes object name (lowercase letters, digits, '-' and '.',"
              + " at most 253 characters)");
    }
  }

  /** A copy with another data-plane image. */
  public OperatorConfig withDataPlaneImage(String image) {
    return new OperatorConfig(
        image,
        imagePullPolicy,
        controlPort,
        peerPort,
        metricsPort,
        storeRoot,
        memoryOverheadBytes,
        pollInterval,
        readyResync,
        statusTimeout,
        masterKeyFile,
        allowedEndpoints,
        dataPlaneUser,
        networkPolicy,
        operatorNamespace,
        formatLimits,
        healthPort,
        leaderElection,
        dataPlanePod,
        retryInitial,
        retryMax);
  }

  /** A copy with other leader-election settings (empty: none). */
  public OperatorConfig withLeaderElection(Optional<LeaderElection> election) {
    return new OperatorConfig(
        dataPlaneImage,
        imagePullPolicy,
        controlPort,
        peerPort,
        metricsPort,
        storeRoot,
        memoryOverheadBytes,
        pollInterval,
        readyResync,
        statusTimeout,
        masterKeyFile,
        allowedEndpoints,
        dataPlaneUser,
        networkPolicy,
        operatorNamespace,
        formatLimits,
        healthPort,
        election,
        dataPlanePod,
        retryInitial,
        retryMax);
  }

  private static EndpointAllowlist allowlist(String name, String value) {
    try {
      return EndpointAllowlist.parse(value);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(name + ": " + e.getMessage(), e);
    }
  }

  private static boolean bool(String name, String value) {
    return switch (value.toLowerCase(java.util.Locale.ROOT)) {
      case "true" -> true;
      case "false" -> false;
      default -> throw new IllegalArgumentException(name + "='" + value + "' is not true or false");
    };
  }

  private static Map<String, String> formatLimits(String value) {
    try {
      return FormatLimitFlags.parse(value);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("TENSORCAST_FORMAT_LIMITS: " + e.getMessage(), e);
    }
  }

  private static int parseInt(String name, String value) {
    try {
      return Integer.parseInt(value);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(name + "='" + value + "' is not an integer", e);
    }
  }

  private static long bytes(String name, String value) {
    try {
      return Quantity.getAmountInBytes(new Quantity(value)).longValueExact();
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(
          name + "='" + value + "' is not a Kubernetes quantity of whole bytes (e.g. 256Mi)", e);
    }
  }

  private static Duration duration(String name, String value) {
    try {
      if (value.chars().allMatch(Character::isDigit)) {
        return Duration.ofSeconds(Long.parseLong(value));
      }
      return Duration.parse(value);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(
          name + "='" + value + "' is neither seconds nor an ISO-8601 duration (e.g. PT2S)", e);
    }
  }
}
