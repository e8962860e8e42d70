package io.tensorcast.dataplane.bench;

import static io.tensorcast.dataplane.bench.BenchSupport.check;
import static io.tensorcast.dataplane.bench.BenchSupport.loadAverage;
import static io.tensorcast.dataplane.bench.BenchSupport.log;
import static io.tensorcast.dataplane.bench.BenchSupport.machine;
import static io.tensorcast.dataplane.bench.BenchSupport.s3Client;
import static io.tensorcast.dataplane.bench.BenchSupport.sha256;

import io.tensorcast.dataplane.format.safetensors.Dtype;
import io.tensorcast.dataplane.format.safetensors.SafetensorsWriter;
import io.tensorcast.dataplane.format.safetensors.TensorDeclaration;
import io.tensorcast.dataplane.source.Crc64Nvme;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.io.IOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.zip.CRC32;
import software.amazon.awssdk.core.ResponseInputStream;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;

/**
 * A cold load of one artifact by Tensorcast, rclone and the AWS CLI against the same S3-compatible
 * server, in one run (a benchmark, not a test; run it with {@code bench/load-throughput.sh}).
 *
 * <ol>
 *   <li>Starts a private S3Mock, writes an artifact of {@code --gib} GiB as {@code --shards}
 *       safetensors shards (BF16 tensors of 16 MiB filled from a xorshift PRNG) plus a {@code
 *       config.json}, uploads each object in one PUT with the full-object checksum {@code
 *       --checksum} (default {@code crc64nvme}, the checksum S3 stores for new objects; {@code
 *       none} leaves the single-part ETag MD5 as the only digest) and writes {@code SHA256SUMS}.
 *   <li>Sweeps rclone's settings once each ({@code --transfers}, {@code --multi-thread-streams})
 *       and raw parallel ranged GETs in this JVM (concurrency × range size); the fastest of each is
 *       "best".
 *   <li>{@code --reps} interleaved rounds (the order rotates each round): rclone at its defaults,
 *       rclone at its best, {@code aws s3 cp --recursive} (Debian's awscli v2, {@code
 *       /usr/bin/aws}) at its defaults, every Tensorcast variant ({@code dataplane load} as its own
 *       process, a page-locked store under {@code /dev/shm}), and the raw passes (a) single-stream
 *       GETs of whole objects and (b) parallel ranged GETs at the best raw configuration. Each tool
 *       writes into a fresh directory under {@code /dev/shm}; its copy is checked with {@code
 *       sha256sum -c SHA256SUMS} and deleted. Wall time is measured here; CPU time (user + sys) of
 *       each tool by {@code /usr/bin/time -f '%U %S'}; the server's CPU time from its {@code
 *       /proc/PID/stat}.
 *   <li>With {@code --adaptive}: an origin limited per connection, one limited in total (and
 *       answering {@code 503 SlowDown} above a number of requests in flight) and one limited in
 *       requests per second (a token bucket answering {@code 429} with {@code Retry-After}), made
 *       by {@link FaultInjectingProxy} in front of S3Mock, each loaded by Tensorcast with a fixed
 *       number of ranged reads in flight and with the number following the origin. With {@code
 *       --adaptive-only} the cold-load rounds are left out and the whole artifact is what the
 *       origins serve.
 * </ol>
 *
 * <p>Prints Markdown tables: per round and tool MB/s (10^6 bytes per second) and CPU-seconds per
 * GiB, medians, and the ratios Tensorcast / rclone-best, Tensorcast / rclone-default and Tensorcast
 * / aws of throughput and of CPU per GiB.
 */
public final class LoadThroughputBench {
  private static final String BUCKET = "bench";
  private static final String PREFIX = "model/";
  private static final String SMALL_PREFIX = "small/";
  private static final int TENSOR_COLS = 4096;
  private static final int TENSOR_ROWS = 2048; // BF16 [2048, 4096] = 16 MiB per tensor
  private static final long TENSOR_BYTES = 2L * TENSOR_ROWS * TENSOR_COLS;
  private static final double GIB = 1L << 30;
  private static final Duration RUN_TIMEOUT = Duration.ofMinutes(20);
  private static final int[] SWEEP_CONCURRENCY = {4, 8, 16};
  private static final int[] SWEEP_RANGE_MIB = {8, 32};
  private static final List<List<String>> RCLONE_SWEEP =
      List.of(
          List.of(),
          List.of("--transfers", "8"),
          List.of("--transfers", "16"),
          List.of("--multi-thread-cutoff", "16M", "--multi-thread-streams", "4"),
          List.of(
              "--transfers", "8", "--multi-thread-cutoff", "16M", "--multi-thread-streams", "4"),
          List.of(
              "--transfers", "2", "--multi-thread-cutoff", "16M", "--multi-thread-streams", "8"));

  private LoadThroughputBench() {}

  /** What the bench was asked to do. */
  record Settings(
      double gib,
      int shards,
      int reps,
      String checksum,
      List<Variant> variants,
      boolean adaptive,
      boolean adaptiveOnly,
      boolean sweep,
      Path work) {}

  /**
   * One way to run Tensorcast: {@code java JVM_FLAGS -jar JAR load URI ... ARGS}.
   *
   * @param name column name
   * @param jar the data plane's runnable jar
   * @param jvmFlags flags before {@code -jar}
   * @param args extra arguments of {@code dataplane load}
   */
  /**
   * One way of starting Tensorcast's load: {@code java JVM FLAGS -jar JAR load ... LOAD ARGS}, or,
   * with a launcher, {@code sh LAUNCHER load ... LOAD ARGS} with {@code
   * TENSORCAST_DATAPLANE_JAR=JAR} (what a user runs: the launcher picks the JVM flags and the
   * class-data archive).
   */
  record Variant(String name, Path jar, List<String> jvmFlags, List<String> args, Path launcher) {
    /** {@code NAME|JAR|JVM FLAGS|LOAD ARGS|LAUNCHER}, the last three optional. */
    static Variant parse(String spec) {
      String[] p = spec.split("\\|", -1);
      if (p.length < 2) {
        throw new IllegalArgumentException(
            "--tensorcast wants NAME|JAR[|JVM FLAGS[|LOAD ARGS[|LAUNCHER]]], got " + spec);
      }
      Path launcher = p.length > 4 && !p[4].isBlank() ? Path.of(p[4].strip()) : null;
      List<String> flags = words(p.length > 2 ? p[2] : "");
      if (launcher != null && !flags.isEmpty()) {
        throw new IllegalArgumentException(
            "--tensorcast " + spec + ": the launcher picks the JVM flags; give none");
      }
      return new Variant(p[0], Path.of(p[1]), flags, words(p.length > 3 ? p[3] : ""), launcher);
    }

    private static List<String> words(String s) {
      return s.isBlank() ? List.of() : List.of(s.strip().split("\\s+"));
    }
  }

  /** One measured run of one tool. */
  record Run(
      String tool,
      String config,
      long bytes,
      long nanos,
      double userSeconds,
      double sysSeconds,
      double serverCpuSeconds,
      boolean verified,
      String note) {
    double mbps() {
      return bytes / (nanos / 1e9) / 1e6;
    }

    double cpuPerGib() {
      return (userSeconds + sysSeconds) / (bytes / GIB);
    }

    double serverCpuPerGib() {
      return serverCpuSeconds / (bytes / GIB);
    }

    boolean measuredCpu() {
      return !Double.isNaN(userSeconds);
    }
  }

  public static void main(String[] args) throws Exception {
    Settings s = settings(args);
    String started = Instant.now().toString();
    String loadAtStart = loadAverage();
    long t0 = System.nanoTime();
    Files.createDirectories(s.work());
    Path work = Files.createTempDirectory(s.work(), "load-throughput-");
    Path shm = Files.createTempDirectory(Path.of("/dev/shm"), "tensorcast-bench-");
    StringBuilder out = new StringBuilder();
    try (S3MockServer s3 = S3MockServer.start()) {
      ProcessHandle server = s3mockProcess();
      s3.createBucket(BUCKET);
      Artifact artifact = seed(s3, s, work);
      long seeded = System.nanoTime();
      Tools tools = new Tools(s3.endpoint(), work, shm, server, artifact);
      for (Variant v : s.variants()) {
        // --adaptive-only uploads the small prefix only
        tools.prepare(
            v,
            s.adaptiveOnly() ? SMALL_PREFIX : PREFIX,
            s.adaptiveOnly() ? artifact.smallTotal() : artifact.total());
      }
      out.append(header(s, started, loadAtStart, artifact, tools));

      if (!s.adaptiveOnly()) {
        coldLoad(s, s3, tools, artifact, out);
      }
      if (s.adaptive()) {
        out.append(adaptive(s, s3, tools, artifact));
      }
      out.append(
          String.format(
              Locale.ROOT,
              "%nrun took %.0f s (%.0f s generating and uploading); load average at end: %s%n",
              (System.nanoTime() - t0) / 1e9,
              (seeded - t0) / 1e9,
              loadAverage()));
      System.out.print(out);
    } finally {
      TestFiles.deleteTree(shm);
      TestFiles.deleteTree(work);
    }
  }

  /** The sweeps and rounds of rclone, the AWS CLI, Tensorcast and the raw passes. */
  private static void coldLoad(
      Settings s, S3MockServer s3, Tools tools, Artifact artifact, StringBuilder out)
      throws Exception {
    List<Run> rcloneSweep = new ArrayList<>();
    List<BenchPass> rawSweep = new ArrayList<>();
    List<String> bestRclone = List.of();
    BenchPass.Config bestRaw = new BenchPass.Config(8, 32);
    try (S3Client client = s3Client(s3)) {
      log("warm-up: one parallel pass (8 x 8 MiB), not measured");
      BenchPass.parallel(client, artifact, new BenchPass.Config(8, 8));
      if (s.sweep()) {
        for (List<String> flags : RCLONE_SWEEP) {
          Run r = tools.rclone(flags, PREFIX, artifact.total());
          rcloneSweep.add(r);
          log("sweep: %s", describe(r));
        }
        bestRclone =
            RCLONE_SWEEP.get(
                rcloneSweep.indexOf(
                    rcloneSweep.stream().max(Comparator.comparingDouble(Run::mbps)).get()));
        for (int c : SWEEP_CONCURRENCY) {
          for (int mib : SWEEP_RANGE_MIB) {
            BenchPass p = BenchPass.parallel(client, artifact, new BenchPass.Config(c, mib));
            rawSweep.add(p);
            log("sweep: %s", p);
          }
        }
        bestRaw = rawSweep.stream().max(Comparator.comparingDouble(BenchPass::mbps)).get().config();
      }

      List<String> order = new ArrayList<>();
      order.add("rclone");
      if (!bestRclone.isEmpty()) {
        order.add("rclone-best");
      }
      order.add("aws");
      for (Variant v : s.variants()) {
        order.add("tc:" + v.name());
      }
      order.add("raw-a");
      order.add("raw-b");
      List<Map<String, Run>> rounds = new ArrayList<>();
      for (int round = 1; round <= s.reps(); round++) {
        List<String> now = new ArrayList<>(order);
        Collections.rotate(now, -(round - 1));
        Map<String, Run> results = new LinkedHashMap<>();
        for (String tool : now) {
          Run r =
              switch (tool) {
                case "rclone" -> tools.rclone(List.of(), PREFIX, artifact.total());
                case "rclone-best" -> tools.rclone(bestRclone, PREFIX, artifact.total());
                case "aws" -> tools.aws(PREFIX, artifact.total());
                case "raw-a" -> BenchPass.sequential(client, artifact).asRun("raw-a");
                case "raw-b" -> BenchPass.parallel(client, artifact, bestRaw).asRun("raw-b");
                default ->
                    tools.tensorcast(
                        variant(s, tool.substring(3)),
                        s3.endpoint(),
                        PREFIX,
                        artifact.total(),
                        List.of());
              };
          results.put(tool, r);
          log("round %d: %s", round, describe(r));
        }
        Map<String, Run> ordered = new LinkedHashMap<>();
        for (String tool : order) {
          ordered.put(tool, results.get(tool));
        }
        rounds.add(ordered);
      }
      out.append(report(s, order, rcloneSweep, rawSweep, bestRclone, bestRaw, rounds, tools));
    }
  }

  private static Settings settings(String[] args) {
    double gib = 1.0;
    int shards = 8;
    int reps = 3;
    String checksum = "crc64nvme";
    List<Variant> variants = new ArrayList<>();
    boolean adaptive = false;
    boolean adaptiveOnly = false;
    boolean sweep = true;
    Path work = Path.of(System.getProperty("java.io.tmpdir"));
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--gib" -> gib = Double.parseDouble(args[++i]);
        case "--shards" -> shards = Integer.parseInt(args[++i]);
        case "--reps" -> reps = Integer.parseInt(args[++i]);
        case "--checksum" -> checksum = args[++i];
        case "--tensorcast" -> variants.add(Variant.parse(args[++i]));
        case "--adaptive" -> adaptive = true;
        case "--adaptive-only" -> {
          adaptive = true;
          adaptiveOnly = true;
        }
        case "--no-sweep" -> sweep = false;
        case "--work" -> work = Path.of(args[++i]);
        default ->
            throw new IllegalArgumentException(
                "unknown argument "
                    + args[i]
                    + "; usage: [--gib N] [--shards N] [--reps N] [--checksum"
                    + " crc64nvme|crc32|sha256|none] [--tensorcast NAME|JAR|JVM FLAGS|LOAD ARGS]..."
                    + " [--adaptive | --adaptive-only] [--no-sweep] [--work DIR]");
      }
    }
    if (!List.of("crc64nvme", "crc32", "sha256", "none").contains(checksum)) {
      throw new IllegalArgumentException("--checksum " + checksum + " is not one of those");
    }
    if (variants.isEmpty()) {
      throw new IllegalArgumentException("at least one --tensorcast variant is required");
    }
    return new Settings(gib, shards, reps, checksum, variants, adaptive, adaptiveOnly, sweep, work);
  }

  private static Variant variant(Settings s, String name) {
    return s.variants().stream().filter(v -> v.name().equals(name)).findFirst().orElseThrow();
  }

  private static ProcessHandle s3mockProcess() {
    return ProcessHandle.current()
        .children()
        .filter(p -> p.info().commandLine().orElse("").contains("s3mock"))
        .findFirst()
        .orElseThrow(() -> new IllegalStateException("S3Mock's process is not a child of this"));
  }

  // ------------------------------------------------------------------ the artifact

  /** The uploaded artifact: name → size, the small subset's names, the sums file. */
  record Artifact(Map<String, Long> sizes, List<String> small, Path sums, Path smallSums) {
    long total() {
      return sizes.values().stream().mapToLong(Long::longValue).sum();
    }

    long smallTotal() {
      return small.stream().mapToLong(sizes::get).sum();
    }
  }

  private static Artifact seed(S3MockServer s3, Settings s, Path work) throws Exception {
    long tensorsPerShard = Math.max(1, Math.round(s.gib() * GIB / TENSOR_BYTES / s.shards()));
    Map<String, Long> sizes = new LinkedHashMap<>();
    Map<String, String> sha = new LinkedHashMap<>();
    Path gen = Files.createDirectories(work.resolve("generated"));
    log("writing %d shards of %d x 16 MiB tensors to %s", s.shards(), tensorsPerShard, gen);
    long seed = 0x7E15_0CA5_7L;
    List<String> small = new ArrayList<>();
    for (int i = 0; i < s.shards(); i++) {
      String name = String.format(Locale.ROOT, "model-%05d-of-%05d.safetensors", i + 1, s.shards());
      Path f = gen.resolve(name);
      sha.put(name, writeShard(f, i, tensorsPerShard, seed + i));
      sizes.put(name, Files.size(f));
      if (!s.adaptiveOnly()) {
        put(s3, PREFIX + name, f, s.checksum());
      }
      if (s.adaptiveOnly() || i < Math.max(1, s.shards() / 4)) {
        put(s3, SMALL_PREFIX + name, f, s.checksum());
        small.add(name);
      }
      Files.delete(f);
      log("uploaded %s (%d bytes)", name, sizes.get(name));
    }
    byte[] config =
        ("{\"model_type\":\"tensorcast-bench\",\"num_hidden_layers\":" + s.shards() + "}\n")
            .getBytes(StandardCharsets.UTF_8);
    Path cf = gen.resolve("config.json");
    Files.write(cf, config);
    put(s3, PREFIX + "config.json", cf, s.checksum());
    sha.put("config.json", HexFormat.of().formatHex(sha256().digest(config)));
    sizes.put("config.json", (long) config.length);
    Files.delete(cf);
    Path sums = work.resolve("SHA256SUMS");
    Files.writeString(sums, sumsText(sha, sha.keySet()));
    Path smallSums = work.resolve("SHA256SUMS.small");
    Files.writeString(smallSums, sumsText(sha, small));
    return new Artifact(sizes, small, sums, smallSums);
  }

  private static String sumsText(Map<String, String> sha, java.util.Collection<String> names) {
    return names.stream().map(n -> sha.get(n) + "  " + n + "\n").collect(Collectors.joining());
  }

  /** One PUT per object, with the full-object checksum asked for (or none: the ETag MD5 only). */
  private static void put(S3MockServer s3, String key, Path f, String checksum) throws IOException {
    PutObjectRequest.Builder b = PutObjectRequest.builder().bucket(BUCKET).key(key);
    switch (checksum) {
      case "crc64nvme" -> b.checksumCRC64NVME(crc64(f));
      case "crc32" -> b.checksumCRC32(crc32(f));
      case "sha256" -> b.checksumSHA256(Base64.getEncoder().encodeToString(digest(f)));
      default -> {}
    }
    for (int attempt = 1; ; attempt++) {
      try {
        s3.client().putObject(b.build(), RequestBody.fromFile(f));
        return;
      } catch (RuntimeException e) {
        if (attempt == 3) {
          throw e;
        }
        log("upload of %s failed (%s); again", key, e);
      }
    }
  }

  private static String crc64(Path f) throws IOException {
    Crc64Nvme c = new Crc64Nvme();
    eachChunk(f, c::update);
    return Base64.getEncoder().encodeToString(ByteBuffer.allocate(8).putLong(c.getValue()).array());
  }

  private static String crc32(Path f) throws IOException {
    CRC32 c = new CRC32();
    eachChunk(f, c::update);
    return Base64.getEncoder()
        .encodeToString(ByteBuffer.allocate(4).putInt((int) c.getValue()).array());
  }

  private static byte[] digest(Path f) throws IOException {
    MessageDigest md = sha256();
    eachChunk(f, md::update);
    return md.digest();
  }

  private static void eachChunk(Path f, java.util.function.Consumer<ByteBuffer> each)
      throws IOException {
    try (var ch = java.nio.channels.FileChannel.open(f)) {
      ByteBuffer buf = ByteBuffer.allocateDirect(4 << 20);
      while (ch.read(buf.clear()) >= 0) {
        each.accept(buf.flip());
      }
    }
  }

  /** Writes one shard; returns its SHA-256 (hashed as written). */
  private static String writeShard(Path f, int shard, long tensors, long seed) throws IOException {
    List<TensorDeclaration> decls = new ArrayList<>();
    for (int t = 0; t < tensors; t++) {
      decls.add(
          new TensorDeclaration(
              "model.layers." + shard + ".w" + t,
              Dtype.BF16,
              new long[] {TENSOR_ROWS, TENSOR_COLS}));
    }
    Map<String, String> metadata =
        Map.of("format", "pt", "generator", "tensorcast LoadThroughputBench");
    MessageDigest md = sha256();
    md.update(SafetensorsWriter.headerBytes(decls, metadata));
    ByteBuffer chunk = ByteBuffer.allocateDirect(4 << 20).order(ByteOrder.LITTLE_ENDIAN);
    long[] state = {seed | 1};
    SafetensorsWriter.write(
        f,
        decls,
        metadata,
        (tensor, out) -> {
          long left = tensor.byteLength();
          while (left > 0) {
            chunk.clear();
            LongBuffer longs = chunk.asLongBuffer();
            long x = state[0];
            while (longs.hasRemaining()) {
              x ^= x << 13; // xorshift64
              x ^= x >>> 7;
              x ^= x << 17;
              longs.put(x);
            }
            state[0] = x;
            chunk.limit((int) Math.min(chunk.capacity(), left));
            md.update(chunk.duplicate());
            while (chunk.hasRemaining()) {
              left -= out.write(chunk);
            }
          }
        });
    return HexFormat.of().formatHex(md.digest());
  }

  // ------------------------------------------------------------------ the tools

  /** Runs rclone, the AWS CLI and Tensorcast as processes, each timed and its copy checked. */
  static final class Tools {
    private final URI endpoint;
    private final Path work;
    private final Path shm;
    private final ProcessHandle server;
    private final Artifact artifact;
    private final Path rcloneConfig;
    private final Path awsConfig;
    private final Map<String, String> lastTensorcastLog = new LinkedHashMap<>();
    private int runs;

    Tools(URI endpoint, Path work, Path shm, ProcessHandle server, Artifact artifact)
        throws IOException {
      this.endpoint = endpoint;
      this.work = work;
      this.shm = shm;
      this.server = server;
      this.artifact = artifact;
      this.rcloneConfig = work.resolve("rclone.conf");
      Files.writeString(
          rcloneConfig,
          "[bench]\ntype = s3\nprovider = Other\naccess_key_id = "
              + S3MockServer.ACCESS_KEY
              + "\nsecret_access_key = "
              + S3MockServer.SECRET_KEY
              + "\nendpoint = "
              + endpoint
              + "\nforce_path_style = true\nregion = "
              + S3MockServer.REGION
              + "\n");
      this.awsConfig = work.resolve("aws.config");
      Files.writeString(awsConfig, "[default]\nregion = " + S3MockServer.REGION + "\n");
    }

    /** Checks that the variant's jar exists. */
    void prepare(Variant v, String prefix, long bytes) throws Exception {
      if (!Files.isRegularFile(v.jar())) {
        throw new IllegalArgumentException("no jar at " + v.jar() + " for variant " + v.name());
      }
      if (v.launcher() != null) {
        // A user's first load on a machine writes the class-data archive the later ones map
        // (dataplane/src/main/launcher/dataplane): run it here, report it, keep it out of the
        // rounds.
        Run first = tensorcast(v, endpoint, prefix, bytes, List.of());
        firstLoads.put(v.name(), first);
        log("first load of %s (writes the class-data archive): %s", v.name(), describe(first));
      }
    }

    private final Map<String, Run> firstLoads = new LinkedHashMap<>();

    /** The first load of each launcher variant (it wrote the class-data archive). */
    Map<String, Run> firstLoads() {
      return firstLoads;
    }

    /** The log lines of the last run of each Tensorcast variant. */
    Map<String, String> lastTensorcastLog() {
      return lastTensorcastLog;
    }

    Run rclone(List<String> flags, String prefix, long bytes) throws Exception {
      Path dest = shm.resolve("rclone-" + (++runs));
      List<String> cmd = new ArrayList<>(List.of("rclone", "--config", rcloneConfig.toString()));
      cmd.add("copy");
      cmd.addAll(flags);
      cmd.add("bench:" + BUCKET + "/" + prefix);
      cmd.add(dest.toString());
      String config = flags.isEmpty() ? "defaults" : String.join(" ", flags);
      return timed("rclone", config, cmd, Map.of(), dest, bytes, prefix);
    }

    Run aws(String prefix, long bytes) throws Exception {
      Path dest = shm.resolve("aws-" + (++runs));
      List<String> cmd =
          List.of(
              "/usr/bin/aws",
              "--endpoint-url",
              endpoint.toString(),
              "s3",
              "cp",
              "--recursive",
              "--quiet",
              "s3://" + BUCKET + "/" + prefix,
              dest.toString());
      return timed(
          "aws",
          "defaults",
          cmd,
          Map.of("AWS_CONFIG_FILE", awsConfig.toString(), "AWS_PAGER", ""),
          dest,
          bytes,
          prefix);
    }

    Run tensorcast(Variant v, URI from, String prefix, long bytes, List<String> extra)
        throws Exception {
      Path root = shm.resolve("tc-" + (++runs));
      List<String> cmd = new ArrayList<>();
      Map<String, String> env = new LinkedHashMap<>();
      String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      if (v.launcher() != null) {
        cmd.addAll(List.of("/bin/sh", v.launcher().toString(), "load"));
        env.put("TENSORCAST_DATAPLANE_JAR", v.jar().toString());
        env.put("JAVA", java);
        env.put("TENSORCAST_CDS_DIR", work.resolve("cds-" + v.name()).toString());
      } else {
        cmd.add(java);
        cmd.addAll(v.jvmFlags());
        cmd.addAll(List.of("-jar", v.jar().toString(), "load"));
      }
      cmd.add("s3://" + BUCKET + "/" + prefix);
      cmd.addAll(
          List.of(
              "--endpoint",
              from.toString(),
              "--allow-insecure-endpoint",
              "--path-style",
              "--store-root",
              root.toString(),
              "--artifact-id",
              "bench"));
      cmd.addAll(v.args());
      cmd.addAll(extra);
      String config =
          (v.args().isEmpty() && extra.isEmpty() ? "defaults" : "")
              + String.join(" ", v.args())
              + (extra.isEmpty() ? "" : " " + String.join(" ", extra));
      Run r =
          timed("tc:" + v.name(), config.strip(), cmd, env, root.resolve("bench"), bytes, prefix);
      lastTensorcastLog.put(v.name(), lastLog);
      TestFiles.deleteTree(root);
      return r;
    }

    private String lastLog = "";

    private Run timed(
        String tool,
        String config,
        List<String> command,
        Map<String, String> env,
        Path copy,
        long bytes,
        String prefix)
        throws Exception {
      Path timeFile = work.resolve("time.txt");
      Path logFile = work.resolve("run.log");
      List<String> cmd = new ArrayList<>(List.of("/usr/bin/time", "-f", "%U %S", "-o"));
      cmd.add(timeFile.toString());
      cmd.addAll(command);
      ProcessBuilder pb =
          new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(logFile.toFile());
      Map<String, String> e = pb.environment();
      e.remove("AWS_CA_BUNDLE"); // plain http; rclone refuses a CA bundle it cannot apply
      e.put("AWS_ACCESS_KEY_ID", S3MockServer.ACCESS_KEY);
      e.put("AWS_SECRET_ACCESS_KEY", S3MockServer.SECRET_KEY);
      e.put("AWS_REGION", S3MockServer.REGION);
      e.put("AWS_EC2_METADATA_DISABLED", "true");
      e.putAll(env);
      Files.deleteIfExists(timeFile);
      long cpu0 = cpuTicks(server);
      long start = System.nanoTime();
      Process p = pb.start();
      if (!p.waitFor(RUN_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
        p.descendants().forEach(ProcessHandle::destroyForcibly);
        p.destroyForcibly();
        throw new IllegalStateException(tool + " did not finish within " + RUN_TIMEOUT);
      }
      long nanos = System.nanoTime() - start;
      double serverCpu = (cpuTicks(server) - cpu0) / 100.0;
      lastLog = Files.readString(logFile);
      String note = "";
      double user = Double.NaN;
      double sys = Double.NaN;
      List<String> time = Files.exists(timeFile) ? Files.readAllLines(timeFile) : List.of();
      String last = time.isEmpty() ? "" : time.get(time.size() - 1).strip();
      if (last.matches("[0-9.]+ [0-9.]+")) {
        user = Double.parseDouble(last.split(" ")[0]);
        sys = Double.parseDouble(last.split(" ")[1]);
      }
      boolean ok = p.exitValue() == 0;
      if (!ok) {
        note = "exit " + p.exitValue() + ": " + tail(lastLog, 3);
      } else {
        Path sums = prefix.equals(SMALL_PREFIX) ? artifact.smallSums() : artifact.sums();
        Process check =
            new ProcessBuilder("sha256sum", "-c", "--quiet", sums.toString())
                .directory(copy.toFile())
                .redirectErrorStream(true)
                .redirectOutput(work.resolve("sha256sum.log").toFile())
                .start();
        ok = check.waitFor(10, TimeUnit.MINUTES) && check.exitValue() == 0;
        long files;
        try (var list = Files.list(copy)) {
          files = list.count();
        }
        long expected = Files.readAllLines(sums).size();
        if (!ok || files != expected) {
          ok = false;
          note =
              "sha256sum -c failed or "
                  + files
                  + " files instead of "
                  + expected
                  + ": "
                  + tail(Files.readString(work.resolve("sha256sum.log")), 3);
        }
      }
      TestFiles.deleteTree(copy);
      return new Run(tool, config, bytes, nanos, user, sys, serverCpu, ok, note);
    }

    /** utime + stime of a process in clock ticks (USER_HZ, 100 on Linux). */
    static long cpuTicks(ProcessHandle p) throws IOException {
      String stat = Files.readString(Path.of("/proc", Long.toString(p.pid()), "stat"));
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      return Long.parseLong(f[11]) + Long.parseLong(f[12]);
    }
  }

  private static String tail(String text, int lines) {
    List<String> all = text.lines().toList();
    return String.join(" / ", all.subList(Math.max(0, all.size() - lines), all.size()));
  }

  // ------------------------------------------------------------------ raw passes in this JVM

  /** A raw pass of S3 GETs in this JVM (no store, no checks but lengths). */
  record BenchPass(String what, Config config, long bytes, long nanos) {
    record Config(int concurrency, int rangeMib) {
      @Override
      public String toString() {
        return "c=" + concurrency + ", " + rangeMib + " MiB";
      }
    }

    double mbps() {
      return bytes / (nanos / 1e9) / 1e6;
    }

    Run asRun(String tool) {
      return new Run(
          tool,
          config == null ? "1 stream, whole objects" : config.toString(),
          bytes,
          nanos,
          Double.NaN,
          Double.NaN,
          Double.NaN,
          true,
          "");
    }

    @Override
    public String toString() {
      return String.format(
          Locale.ROOT, "(%s) %s: %.0f MB/s (%.2f s)", what, config, mbps(), nanos / 1e9);
    }

    static BenchPass sequential(S3Client client, Artifact a) throws IOException {
      byte[] buf = new byte[1 << 20];
      long bytes = 0;
      long start = System.nanoTime();
      for (Map.Entry<String, Long> e : a.sizes().entrySet()) {
        long n = 0;
        try (ResponseInputStream<GetObjectResponse> in =
            client.getObject(b -> b.bucket(BUCKET).key(PREFIX + e.getKey()))) {
          for (int r = in.read(buf); r >= 0; r = in.read(buf)) {
            n += r;
          }
        }
        check(n, e.getValue(), e.getKey());
        bytes += n;
      }
      return new BenchPass("a", null, bytes, System.nanoTime() - start);
    }

    static BenchPass parallel(S3Client client, Artifact a, Config c) throws Exception {
      long nanos =
          BenchSupport.parallelRangedGets(
              (key, off, len) ->
                  client.getObject(
                      b ->
                          b.bucket(BUCKET)
                              .key(PREFIX + key)
                              .range("bytes=" + off + "-" + (off + len - 1))),
              a.sizes(),
              c.concurrency(),
              c.rangeMib() << 20,
              null);
      return new BenchPass("b", c, a.total(), nanos);
    }
  }

  // ------------------------------------------------------------------ report

  private static String describe(Run r) {
    return String.format(
        Locale.ROOT,
        "%s [%s]: %.0f MB/s (%.2f s)%s%s%s",
        r.tool(),
        r.config(),
        r.mbps(),
        r.nanos() / 1e9,
        r.measuredCpu()
            ? String.format(
                Locale.ROOT,
                ", CPU %.2f + %.2f s = %.2f s/GiB, server %.2f s/GiB",
                r.userSeconds(),
                r.sysSeconds(),
                r.cpuPerGib(),
                r.serverCpuPerGib())
            : "",
        r.verified() ? "" : " NOT VERIFIED",
        r.note().isEmpty() ? "" : " (" + r.note() + ")");
  }

  private static String header(
      Settings s, String started, String loadAtStart, Artifact a, Tools tools) throws IOException {
    StringBuilder out = new StringBuilder();
    out.append("\n## Cold load: Tensorcast, rclone and the AWS CLI (bench/load-throughput.sh)\n\n");
    out.append("started ").append(started).append("; ").append(machine()).append('\n');
    out.append("load average at start: ").append(loadAtStart).append('\n');
    out.append(
        String.format(
            Locale.ROOT,
            "artifact: %d safetensors shards of %d bytes + config.json = %d bytes (%.2f GiB) on"
                + " S3Mock 5.2.0 (own JVM, objects under %s), one PUT each, full-object checksum:"
                + " %s%n",
            s.shards(),
            a.sizes().values().iterator().next(),
            a.total(),
            a.total() / GIB,
            System.getProperty("java.io.tmpdir"),
            s.checksum().equals("none") ? "none (ETag = MD5)" : s.checksum()));
    out.append(toolVersions()).append('\n');
    for (Variant v : s.variants()) {
      out.append(
          v.launcher() != null
              ? String.format(
                  "Tensorcast %s: TENSORCAST_DATAPLANE_JAR=%s sh %s load ... %s (the launcher's JVM"
                      + " flags and class-data archive)%n",
                  v.name(), v.jar(), v.launcher(), String.join(" ", v.args()))
              : String.format(
                  "Tensorcast %s: java %s -jar %s load ... %s%n",
                  v.name(), String.join(" ", v.jvmFlags()), v.jar(), String.join(" ", v.args())));
    }
    for (Map.Entry<String, Run> e : tools.firstLoads().entrySet()) {
      out.append(
          String.format(
              Locale.ROOT,
              "Tensorcast %s, first load on this machine (writes the class-data archive; not in"
                  + " the rounds): %s%n",
              e.getKey(),
              describe(e.getValue())));
    }
    out.append('\n');
    return out.toString();
  }

  private static String toolVersions() {
    List<String> v = new ArrayList<>();
    v.add(firstLine("rclone", "version"));
    v.add(firstLine("/usr/bin/aws", "--version"));
    return "tools: " + String.join("; ", v);
  }

  private static String firstLine(String... cmd) {
    try {
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String s = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      p.waitFor(30, TimeUnit.SECONDS);
      return s.lines().findFirst().orElse("?").strip();
    } catch (IOException | InterruptedException e) {
      return cmd[0] + ": " + e;
    }
  }

  private static double median(List<Double> values) {
    List<Double> sorted = values.stream().filter(d -> !Double.isNaN(d)).sorted().toList();
    int n = sorted.size();
    if (n == 0) {
      return Double.NaN;
    }
    return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
  }

  private static String report(
      Settings s,
      List<String> order,
      List<Run> rcloneSweep,
      List<BenchPass> rawSweep,
      List<String> bestRclone,
      BenchPass.Config bestRaw,
      List<Map<String, Run>> rounds,
      Tools tools) {
    StringBuilder out = new StringBuilder();
    if (!rcloneSweep.isEmpty()) {
      out.append("rclone settings, each once (best: ")
          .append(bestRclone.isEmpty() ? "defaults" : String.join(" ", bestRclone))
          .append("):\n\n| rclone flags | MB/s | CPU-s/GiB |\n|---|---:|---:|\n");
      for (Run r : rcloneSweep) {
        out.append(
            String.format(
                Locale.ROOT, "| %s | %.0f | %.2f |%n", r.config(), r.mbps(), r.cpuPerGib()));
      }
      out.append("\nRaw parallel ranged GETs in the bench's JVM, each once (best: ")
          .append(bestRaw)
          .append("): ");
      out.append(
          rawSweep.stream()
              .map(p -> String.format(Locale.ROOT, "%s %.0f MB/s", p.config(), p.mbps()))
              .collect(Collectors.joining("; ")));
      out.append("\n\n");
    }
    out.append(
        "Rounds (order rotated each round); MB/s, and CPU-s/GiB of the tool (user + sys):\n\n");
    out.append("| round |");
    for (String t : order) {
      out.append(' ').append(label(t)).append(" |");
    }
    out.append("\n|---:|");
    out.append("---:|".repeat(order.size()));
    out.append('\n');
    for (int i = 0; i < rounds.size(); i++) {
      out.append("| ").append(i + 1).append(" |");
      for (String t : order) {
        Run r = rounds.get(i).get(t);
        out.append(
            String.format(
                Locale.ROOT,
                " %.0f%s%s |",
                r.mbps(),
                r.measuredCpu() ? String.format(Locale.ROOT, " (%.2f)", r.cpuPerGib()) : "",
                r.verified() ? "" : " FAILED"));
      }
      out.append('\n');
    }
    Map<String, Double> mbps = new LinkedHashMap<>();
    Map<String, Double> cpu = new LinkedHashMap<>();
    Map<String, Double> serverCpu = new LinkedHashMap<>();
    for (String t : order) {
      mbps.put(t, median(rounds.stream().map(m -> m.get(t).mbps()).toList()));
      cpu.put(t, median(rounds.stream().map(m -> m.get(t).cpuPerGib()).toList()));
      serverCpu.put(t, median(rounds.stream().map(m -> m.get(t).serverCpuPerGib()).toList()));
    }
    out.append("| **median** |");
    for (String t : order) {
      out.append(
          String.format(
              Locale.ROOT,
              " **%.0f**%s |",
              mbps.get(t),
              Double.isNaN(cpu.get(t)) ? "" : String.format(Locale.ROOT, " (%.2f)", cpu.get(t))));
    }
    out.append("\n| server CPU-s/GiB |");
    for (String t : order) {
      out.append(
          Double.isNaN(serverCpu.get(t))
              ? " |"
              : String.format(Locale.ROOT, " %.2f |", serverCpu.get(t)));
    }
    out.append("\n\n");
    long failed =
        rounds.stream().flatMap(m -> m.values().stream()).filter(r -> !r.verified()).count();
    out.append(
        failed == 0
            ? "every copy passed sha256sum -c\n\n"
            : failed + " runs FAILED (exit status or sha256sum -c); see the log\n\n");
    out.append(
        "Ratios of the medians (throughput: higher is better for Tensorcast; CPU per GiB: lower"
            + " is better):\n\n| Tensorcast | / rclone-best | / rclone | / aws | / (a) | / (b) |"
            + " CPU / rclone-best | CPU / rclone | CPU / aws |\n|---|---:|---:|---:|---:|---:|---:|"
            + "---:|---:|\n");
    String best = mbps.containsKey("rclone-best") ? "rclone-best" : "rclone";
    for (String t : order) {
      if (!t.startsWith("tc:")) {
        continue;
      }
      out.append(
          String.format(
              Locale.ROOT,
              "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |%n",
              t.substring(3),
              mbps.get(t) / mbps.get(best),
              mbps.get(t) / mbps.get("rclone"),
              mbps.get(t) / mbps.get("aws"),
              mbps.get(t) / mbps.get("raw-a"),
              mbps.get(t) / mbps.get("raw-b"),
              cpu.get(t) / cpu.get(best),
              cpu.get(t) / cpu.get("rclone"),
              cpu.get(t) / cpu.get("aws")));
    }
    out.append("\nLog of the last run of each Tensorcast variant (its own timings):\n\n```\n");
    for (Map.Entry<String, String> e : tools.lastTensorcastLog().entrySet()) {
      out.append("# ").append(e.getKey()).append('\n');
      e.getValue()
          .lines()
          .filter(l -> l.contains(" INFO ") || l.contains(" WARN "))
          .map(LoadThroughputBench::logLine)
          .forEach(l -> out.append(l).append('\n'));
    }
    out.append("```\n");
    return out.toString();
  }

  /** A log line without the progress text the CLI printed before it on the same line. */
  private static String logLine(String line) {
    return line.replaceAll("^.*?(\\d\\d:\\d\\d:\\d\\d\\.\\d{3} (INFO|WARN))", "$1");
  }

  private static String label(String tool) {
    return switch (tool) {
      case "rclone" -> "rclone defaults";
      case "rclone-best" -> "rclone best";
      case "aws" -> "aws";
      case "raw-a" -> "(a) 1 stream";
      case "raw-b" -> "(b) raw best";
      default -> "Tensorcast " + tool.substring(3);
    };
  }

  // ------------------------------------------------------------------ adaptive concurrency

  /** One origin the adaptive section loads from, made by the proxy. */
  record Origin(String name, Function<FaultInjectingProxy, FaultInjectingProxy> limits) {}

  private static String adaptive(Settings s, S3MockServer s3, Tools tools, Artifact a)
      throws Exception {
    Variant v = s.variants().get(0);
    List<Origin> origins =
        List.of(
            new Origin("4 MB/s per connection", p -> p.throttleBodies(4_000_000).throttleTotal(0)),
            new Origin(
                "40 MB/s in total, 503 SlowDown above 8 GETs in flight",
                p -> p.throttleBodies(0).throttleTotal(40_000_000).slowDownAbove(8)),
            new Origin(
                "4 MB/s per connection, 4 requests/s (bursts of 8), 429 + Retry-After above",
                p -> p.throttleBodies(4_000_000).throttleTotal(0).limitRequestRate(4, 8)));
    List<List<String>> fixed =
        List.of(
            List.of("--fixed-concurrency", "--concurrency", "4"),
            List.of("--fixed-concurrency", "--concurrency", "16"),
            List.of("--fixed-concurrency", "--concurrency", "64"));
    List<String> fixedDefault = fixed.get(1);
    List<List<String>> modes = new ArrayList<>(fixed);
    modes.add(List.of("--concurrency", "64"));
    modes.add(List.of());
    StringBuilder out = new StringBuilder();
    out.append(
        String.format(
            Locale.ROOT,
            "%n### Adaptive source concurrency%n%n%d shards (%d bytes) through"
                + " FaultInjectingProxy in front of S3Mock (one request per connection), loaded by"
                + " Tensorcast %s with a fixed number of ranged reads in flight and with the"
                + " number following the origin (ceiling 64, and the defaults: ceiling 16); %d"
                + " rounds, order rotated. MB/s, CPU-seconds per GiB of the load process (user +"
                + " sys), the median throughput against the best fixed setting and against the"
                + " fixed default (16) of the same origin, requests refused (503 SlowDown or 429,"
                + " all rounds), most ranged GETs in flight at once:%n%n",
            a.small().size(),
            a.smallTotal(),
            v.name(),
            s.reps()));
    out.append(
        "| origin | load flags | MB/s per round | median MB/s | CPU s/GiB | / best fixed |"
            + " / fixed 16 | refused | most in flight |"
            + "\n|---|---|---|---:|---:|---:|---:|---:|---:|\n");
    try (FaultInjectingProxy proxy = new FaultInjectingProxy(s3.endpoint())) {
      proxy.countInFlightOnly(r -> r.range().isPresent());
      for (Origin o : origins) {
        Map<List<String>, List<Run>> runs = new LinkedHashMap<>();
        Map<List<String>, int[]> counts = new LinkedHashMap<>();
        for (int round = 1; round <= s.reps(); round++) {
          List<List<String>> now = new ArrayList<>(modes);
          Collections.rotate(now, -(round - 1));
          for (List<String> m : now) {
            o.limits().apply(proxy.reset().countInFlightOnly(r -> r.range().isPresent()));
            Run r = tools.tensorcast(v, proxy.endpoint(), SMALL_PREFIX, a.smallTotal(), m);
            int refused = proxy.slowDowns() + proxy.tooManyRequests();
            log(
                "adaptive, %s, round %d: %s; %d refused, most in flight %d",
                o.name(), round, describe(r), refused, proxy.maxInFlightGets());
            runs.computeIfAbsent(m, k -> new ArrayList<>()).add(r);
            int[] c = counts.computeIfAbsent(m, k -> new int[2]);
            c[0] += refused;
            c[1] = Math.max(c[1], proxy.maxInFlightGets());
          }
        }
        Map<List<String>, Double> medians = new LinkedHashMap<>();
        for (List<String> m : modes) {
          medians.put(
              m, median(runs.get(m).stream().filter(Run::verified).map(Run::mbps).toList()));
        }
        double bestFixed =
            fixed.stream().mapToDouble(medians::get).filter(d -> !Double.isNaN(d)).max().orElse(0);
        for (List<String> m : modes) {
          List<Run> rs = runs.get(m);
          out.append(
              String.format(
                  Locale.ROOT,
                  "| %s | %s | %s | %.0f | %.1f | %.2f | %.2f | %d | %d |%n",
                  o.name(),
                  m.isEmpty() ? "(defaults: adaptive, ceiling 16)" : String.join(" ", m),
                  rs.stream()
                      .map(
                          r ->
                              String.format(
                                  Locale.ROOT, "%.0f%s", r.mbps(), r.verified() ? "" : " FAILED"))
                      .collect(Collectors.joining(", ")),
                  medians.get(m),
                  median(rs.stream().map(Run::cpuPerGib).toList()),
                  medians.get(m) / bestFixed,
                  medians.get(m) / medians.get(fixedDefault),
                  counts.get(m)[0],
                  counts.get(m)[1]));
        }
      }
      proxy.reset();
    }
    Optional.ofNullable(tools.lastTensorcastLog().get(v.name()))
        .ifPresent(
            l ->
                out.append("\nLog of the last adaptive run:\n\n```\n")
                    .append(
                        l.lines()
                            .filter(x -> x.contains(" INFO ") || x.contains(" WARN "))
                            .map(LoadThroughputBench::logLine)
                            .collect(Collectors.joining("\n")))
                    .append("\n```\n"));
    return out.toString();
  }
}
