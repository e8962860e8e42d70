package io.tensorcast.dataplane.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.S3MockServer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The launcher ({@code src/main/launcher/dataplane}, the image's entry point) starts the built jar
 * with {@code load.jvm-options} for {@code load} (C1 only) and with the JVM's defaults for every
 * other command ({@code serve} keeps both compilers), read from the real JVM's final flags; and the
 * first load that succeeds writes a class-data archive that later commands map, read from the real
 * JVM's class-loading log.
 */
class LauncherIT {

  private static final Path LAUNCHER = Path.of("src", "main", "launcher", "dataplane");
  private static final Pattern TIERED =
      Pattern.compile("(?m)^\\s*intx TieredStopAtLevel\\s+= (\\d+)\\s+\\{product\\} \\{([^}]*)\\}");

  @Test
  @Timeout(120)
  void loadRunsOnC1OnlyAndServeKeepsBothCompilers() throws Exception {
    assertThat(Files.readAllLines(LAUNCHER.resolveSibling("load.jvm-options")))
        .containsExactly("-XX:TieredStopAtLevel=1");
    assertThat(tieredStopAtLevel("load", "--help")).isEqualTo("1 command line");
    assertThat(tieredStopAtLevel("serve", "--help")).isEqualTo("4 default");
    assertThat(tieredStopAtLevel("inspect", "--help")).isEqualTo("4 default");
  }

  @Test
  @Timeout(300)
  void theFirstLoadThatSucceedsWritesAClassDataArchiveThatLaterLoadsMap(@TempDir Path tmp)
      throws Exception {
    Path model = model(tmp);
    Path cds = tmp.resolve("cds");
    Map<String, String> env = Map.of("TENSORCAST_CDS_DIR", cds.toString());

    // A load that fails writes nothing: its classes are not those of a load.
    Run failed = launch(env, "load", "file://" + tmp.resolve("absent"), "--store-root", store(tmp));
    assertThat(failed.exit()).as(failed.out()).isNotZero();
    assertThat(files(cds)).as("a failed load keeps no archive").isEmpty();

    Run first = launch(env, "load", "file://" + model, "--store-root", store(tmp));
    assertThat(first.exit()).as(first.out()).isZero();
    assertThat(first.out()).as("class-data sharing prints nothing").doesNotContain("[warning]");
    List<Path> archives = files(cds);
    assertThat(archives)
        .as("one archive for loads from local paths, the temporary file renamed")
        .singleElement()
        .satisfies(LauncherIT::isAWholeFileArchive);
    Path archive = archives.get(0);
    FileTime written = Files.getLastModifiedTime(archive);

    Path classes = tmp.resolve("classes.log");
    Map<String, String> logged = new HashMap<>(env);
    logged.put("JAVA_TOOL_OPTIONS", "-Xlog:class+load=info:file=" + classes);
    Run second = launch(logged, "load", "file://" + model, "--store-root", store(tmp));
    assertThat(second.exit()).as(second.out()).isZero();
    assertThat(Files.readString(classes))
        .as("the second load maps the loader's classes from the archive")
        .containsPattern(
            "io\\.tensorcast\\.dataplane\\.load\\.ArtifactLoader source: shared objects file"
                + " \\(top\\)");
    assertThat(files(cds)).containsExactly(archive);
    assertThat(Files.getLastModifiedTime(archive)).as("not written again").isEqualTo(written);

    // An archive shorter than its name says (a crash or power loss under the rename) would crash
    // the JVM that maps it: it is deleted and the load runs without it, then writes a new one.
    assertThat(archive.toFile().setWritable(true)).isTrue();
    try (java.nio.channels.FileChannel ch =
        java.nio.channels.FileChannel.open(archive, java.nio.file.StandardOpenOption.WRITE)) {
      ch.truncate(Files.size(archive) - 4096);
    }
    Run afterDamage = launch(env, "load", "file://" + model, "--store-root", store(tmp));
    assertThat(afterDamage.exit()).as(afterDamage.out()).isZero();
    assertThat(afterDamage.out()).doesNotContain("SIGBUS").doesNotContain("fatal error");
    assertThat(files(cds))
        .as("the short archive deleted, a whole one written again")
        .singleElement()
        .satisfies(LauncherIT::isAWholeFileArchive);

    // Without a directory (TENSORCAST_CDS_DIR empty) the load runs as before and maps nothing.
    Files.delete(classes);
    logged.put("TENSORCAST_CDS_DIR", "");
    Run off = launch(logged, "load", "file://" + model, "--store-root", store(tmp));
    assertThat(off.exit()).as(off.out()).isZero();
    assertThat(Files.readString(classes)).doesNotContain("shared objects file (top)");
  }

  @Test
  @Timeout(120)
  void aDirectoryOthersMayWriteToHoldsNoArchive(@TempDir Path tmp) throws Exception {
    Path model = model(tmp);
    Path shared = Files.createDirectories(tmp.resolve("shared"));
    Files.setPosixFilePermissions(shared, PosixFilePermissions.fromString("rwxrwxrwx"));
    Run r =
        launch(
            Map.of("TENSORCAST_CDS_DIR", shared.toString()),
            "load",
            "file://" + model,
            "--store-root",
            store(tmp));
    assertThat(r.exit()).as(r.out()).isZero();
    assertThat(files(shared))
        .as("an archive another user could replace would be mapped as trusted class data")
        .isEmpty();
  }

  @Test
  @Timeout(120)
  void aFirstLoadWithItsStandardInputClosedLoadsAndACommandWithoutASourceWritesNoArchive(
      @TempDir Path tmp) throws Exception {
    Path model = model(tmp);
    Path cds = tmp.resolve("cds");
    Map<String, String> env = Map.of("TENSORCAST_CDS_DIR", cds.toString());

    Run help = launch(env, "load", "--help");
    assertThat(help.exit()).as(help.out()).isZero();
    assertThat(files(cds)).as("a command without a source URI writes no archive").isEmpty();
    for (String flag : List.of("--help", "-V")) {
      Run asks = launch(env, "load", flag, "file://" + model);
      assertThat(asks.exit()).as(asks.out()).isZero();
      assertThat(files(cds))
          .as("a load asking for " + flag + " uses none of a load's classes: it writes no archive")
          .isEmpty();
    }

    // `sh` with its standard input closed: the first load hands the child what it has.
    List<String> cmd =
        List.of(
            "/bin/sh",
            "-c",
            "exec /bin/sh \"$0\" \"$@\" <&-",
            LAUNCHER.toString(),
            "load",
            "file://" + model,
            "--store-root",
            store(tmp));
    Run closed = run(cmd, env);
    assertThat(closed.exit()).as(closed.out()).isZero();
    assertThat(closed.out()).doesNotContain("Bad file descriptor");
    assertThat(files(cds)).hasSize(1);
  }

  /**
   * The image's archive: the training run its build makes ({@code train-class-data}, two {@code
   * serve} members loading from a real S3Mock peer to peer) writes an archive beside the jar, and
   * the launcher installed as the image installs it maps that archive for a load from S3 (the S3
   * client's classes and the loader's come from it) and writes none of its own.
   */
  @Test
  @Timeout(420)
  void anArchiveTrainedAsTheImageBuildDoesIsMappedFromBesideTheJar(@TempDir Path tmp)
      throws Exception {
    // The image's layout: /opt/tensorcast/{tensorcast-dataplane.jar,bin/dataplane}.
    Path opt = Files.createDirectories(tmp.resolve("opt"));
    Path bin = Files.createDirectories(opt.resolve("bin"));
    Path jar = opt.resolve("tensorcast-dataplane.jar");
    Files.copy(ServeIT.dataplaneJar(), jar, StandardCopyOption.COPY_ATTRIBUTES);
    Files.copy(LAUNCHER, bin.resolve("dataplane"));
    Files.copy(LAUNCHER.resolveSibling("load.jvm-options"), bin.resolve("load.jvm-options"));
    Path archive = opt.resolve("tensorcast-dataplane.jsa");
    String s3mockJar = System.getProperty("tensorcast.s3mock.jar");
    assertThat(s3mockJar)
        .as("system property tensorcast.s3mock.jar (set by the build)")
        .isNotNull();

    Run train =
        run(
            List.of(
                "/bin/sh",
                LAUNCHER.resolveSibling("train-class-data").toString(),
                jar.toString(),
                s3mockJar,
                archive.toString()),
            Map.of(),
            360);
    assertThat(train.exit()).as(train.out()).isZero();
    assertThat(archive).isNotEmptyFile();
    try (Stream<Path> left = Files.list(opt)) {
      assertThat(left.map(p -> p.getFileName().toString()))
          .as("nothing but the archive left beside the jar")
          .containsExactlyInAnyOrder("bin", "tensorcast-dataplane.jar", "tensorcast-dataplane.jsa");
    }

    S3MockServer s3 = S3MockServer.shared();
    String bucket = "launcher-cds";
    s3.createBucket(bucket);
    s3.putFile(
        bucket,
        "model/model.safetensors",
        Corpus.file("safetensors/lerobot__pusht_frame_0.safetensors"));
    Path cds = tmp.resolve("cds");
    Path classes = tmp.resolve("classes.log");
    Map<String, String> env = new HashMap<>();
    env.put("TENSORCAST_DATAPLANE_JAR", jar.toString());
    env.put("TENSORCAST_CDS_DIR", cds.toString());
    env.put("JAVA_TOOL_OPTIONS", "-Xlog:class+load=info:file=" + classes);
    env.put("AWS_ACCESS_KEY_ID", S3MockServer.ACCESS_KEY);
    env.put("AWS_SECRET_ACCESS_KEY", S3MockServer.SECRET_KEY);
    Run load = run(s3Load(bin, s3, bucket, tmp), env, 120);
    assertThat(load.exit()).as(load.out()).isZero();
    assertThat(load.out()).as("class-data sharing prints nothing").doesNotContain("[warning]");
    assertThat(Files.readString(classes))
        .as("the S3 client's and the loader's classes come from the image's archive")
        .containsPattern(
            "software\\.amazon\\.awssdk\\.services\\.s3\\.DefaultS3Client source: shared"
                + " objects file \\(top\\)")
        .containsPattern(
            "io\\.tensorcast\\.dataplane\\.load\\.ArtifactLoader source: shared objects file"
                + " \\(top\\)");
    assertThat(files(cds)).as("with the image's archive the first load writes none").isEmpty();

    // Every command maps it, one without a source too.
    Files.delete(classes);
    Run help =
        run(List.of("/bin/sh", bin.resolve("dataplane").toString(), "inspect", "--help"), env, 120);
    assertThat(help.exit()).as(help.out()).isZero();
    assertThat(Files.readString(classes)).contains("shared objects file (top)");

    // An archive others may write to, or another user's, is not the jar's: not mapped (another
    // user could plant one beside a jar in a shared directory such as /tmp).
    Files.setPosixFilePermissions(archive, PosixFilePermissions.fromString("rw-rw-r--"));
    Files.delete(classes);
    Run groupWritable =
        run(List.of("/bin/sh", bin.resolve("dataplane").toString(), "inspect", "--help"), env, 120);
    assertThat(groupWritable.exit()).as(groupWritable.out()).isZero();
    assertThat(Files.readString(classes))
        .as("an archive the group may write to is not mapped")
        .doesNotContain("shared objects file (top)");
    Files.setPosixFilePermissions(archive, PosixFilePermissions.fromString("r--r--r--"));
    if ("root".equals(System.getProperty("user.name"))) {
      Files.setAttribute(archive, "unix:uid", 65534);
      Files.delete(classes);
      Run foreign =
          run(
              List.of("/bin/sh", bin.resolve("dataplane").toString(), "inspect", "--help"),
              env,
              120);
      assertThat(foreign.exit()).as(foreign.out()).isZero();
      assertThat(Files.readString(classes))
          .as("another user's archive beside the jar is not mapped")
          .doesNotContain("shared objects file (top)");
      Files.setAttribute(archive, "unix:uid", 0);
    }

    // TENSORCAST_CDS_DIR empty turns class-data sharing off, the image's archive included.
    Files.delete(classes);
    env.put("TENSORCAST_CDS_DIR", "");
    Run off =
        run(List.of("/bin/sh", bin.resolve("dataplane").toString(), "inspect", "--help"), env, 120);
    assertThat(off.exit()).as(off.out()).isZero();
    assertThat(Files.readString(classes)).doesNotContain("shared objects file (top)");
  }

  /**
   * The native libraries beside the jar (unpacked by the build into {@code
   * tensorcast-dataplane.natives/}, shipped so by the image) are what the JVM loads: the Common
   * Runtime's for a file verified by its CRC-64/NVME, JNA's for the store; neither is inflated from
   * the jar into a temporary file. A tree others may write to is not the jar's: ignored, and the
   * libraries come from the jar as before.
   */
  @Test
  @Timeout(240)
  void nativeLibrariesBesideTheJarAreLoadedFromThereUnlessOthersMayWriteThem(@TempDir Path tmp)
      throws Exception {
    String arch = System.getProperty("os.arch");
    boolean x86 = arch.equals("amd64") || arch.equals("x86_64");
    org.junit.jupiter.api.Assumptions.assumeTrue(
        x86 || arch.equals("aarch64"), "the jar ships natives for x86_64 and aarch64 only");
    Path opt = Files.createDirectories(tmp.resolve("opt"));
    Path bin = Files.createDirectories(opt.resolve("bin"));
    Path built = ServeIT.dataplaneJar();
    Path jar = opt.resolve("tensorcast-dataplane.jar");
    Files.copy(built, jar, StandardCopyOption.COPY_ATTRIBUTES);
    Files.copy(LAUNCHER, bin.resolve("dataplane"));
    Files.copy(LAUNCHER.resolveSibling("load.jvm-options"), bin.resolve("load.jvm-options"));
    Path natives = opt.resolve("tensorcast-dataplane.natives");
    Path builtNatives = built.resolveSibling("tensorcast-dataplane.natives");
    assertThat(builtNatives).as("unpacked by the build beside the jar").isDirectory();
    try (Stream<Path> tree = Files.walk(builtNatives)) {
      for (Path p : tree.toList()) {
        Path to = natives.resolve(builtNatives.relativize(p).toString());
        Files.copy(p, to);
        // as the image has them, whatever the umask of this run
        Files.setPosixFilePermissions(
            to, PosixFilePermissions.fromString(Files.isDirectory(to) ? "rwxr-xr-x" : "rw-r--r--"));
      }
    }
    Path crt = natives.resolve("linux/" + (x86 ? "x86_64" : "armv8") + "/glibc/libaws-crt-jni.so");
    Path jna =
        natives.resolve("com/sun/jna/linux-" + (x86 ? "x86-64" : "aarch64") + "/libjnidispatch.so");
    assertThat(crt).isRegularFile();
    assertThat(jna).isRegularFile();

    S3MockServer s3 = S3MockServer.shared();
    String bucket = "launcher-natives";
    s3.createBucket(bucket);
    s3.client()
        .putObject(
            b ->
                b.bucket(bucket)
                    .key("model/model.safetensors")
                    .checksumAlgorithm(
                        software.amazon.awssdk.services.s3.model.ChecksumAlgorithm.CRC64_NVME),
            Corpus.file("safetensors/lerobot__pusht_frame_0.safetensors"));
    Path libraries = tmp.resolve("libraries.log");
    Map<String, String> env = new HashMap<>();
    env.put("TENSORCAST_DATAPLANE_JAR", jar.toString());
    env.put("TENSORCAST_CDS_DIR", "");
    env.put("JAVA_TOOL_OPTIONS", "-Xlog:library=info:file=" + libraries);
    env.put("AWS_ACCESS_KEY_ID", S3MockServer.ACCESS_KEY);
    env.put("AWS_SECRET_ACCESS_KEY", S3MockServer.SECRET_KEY);
    List<String> load = s3Load(bin, s3, bucket, tmp);

    Run trusted = run(load, env, 120);
    assertThat(trusted.exit()).as(trusted.out()).isZero();
    assertThat(trusted.out()).as("verified by its CRC-64/NVME").contains("crc64nvme:");
    assertThat(Files.readString(libraries))
        .contains("Loaded library " + crt + ",")
        .contains("Loaded library " + jna + ",");

    // Not this jar's (a tree left beside a newer jar): JNA's is dropped for the jar's copy, the
    // Runtime's (already on java.library.path) is refused and the CRC computed by the table; the
    // load is verified all the same and says which directory to rebuild or remove.
    Files.write(crt, new byte[] {0}, java.nio.file.StandardOpenOption.APPEND);
    Files.write(jna, new byte[] {0}, java.nio.file.StandardOpenOption.APPEND);
    Files.delete(libraries);
    Run stale = run(load, env, 120);
    assertThat(stale.exit()).as(stale.out()).isZero();
    assertThat(stale.out())
        .contains("crc64nvme:")
        .contains("the native libraries beside the jar are not its own")
        .contains("CRC-64/NVME: the AWS Common Runtime's native CRC is not usable here");
    assertThat(Files.readString(libraries))
        .containsPattern("Loaded library \\S*(jnidispatch|/jna)\\S*,")
        .doesNotContain("Loaded library " + natives);

    // Group-writable: someone else could swap the code the JVM runs; the jar's copies are used.
    Files.copy(
        builtNatives.resolve(natives.relativize(crt).toString()),
        crt,
        StandardCopyOption.REPLACE_EXISTING);
    Files.copy(
        builtNatives.resolve(natives.relativize(jna).toString()),
        jna,
        StandardCopyOption.REPLACE_EXISTING);
    Files.setPosixFilePermissions(crt.getParent(), PosixFilePermissions.fromString("rwxrwxr-x"));
    Files.delete(libraries);
    Run ignored = run(load, env, 120);
    assertThat(ignored.exit()).as(ignored.out()).isZero();
    assertThat(ignored.out()).contains("crc64nvme:").doesNotContain("not its own");
    assertThat(Files.readString(libraries))
        .containsPattern("Loaded library \\S*libaws-crt-jni\\.so")
        .containsPattern("Loaded library \\S*(jnidispatch|/jna)\\S*,")
        .doesNotContain("Loaded library " + natives);
  }

  /** {@code dataplane load} of {@code s3://bucket/model} from the S3Mock, as installed in bin. */
  private static List<String> s3Load(Path bin, S3MockServer s3, String bucket, Path tmp) {
    return List.of(
        "/bin/sh",
        bin.resolve("dataplane").toString(),
        "load",
        "s3://" + bucket + "/model",
        "--endpoint",
        s3.endpoint().toString(),
        "--path-style",
        "--region",
        S3MockServer.REGION,
        "--allow-insecure-endpoint",
        "--store-root",
        store(tmp));
  }

  private static int stores;

  /** An archive of loads from local paths whose name carries its size. */
  private static void isAWholeFileArchive(Path archive) throws Exception {
    assertThat(archive.getFileName().toString())
        .matches("dataplane-\\d+-file-\\d+-" + Files.size(archive) + "\\.jsa");
  }

  /** A directory holding one real safetensors file of the corpus. */
  private static Path model(Path tmp) throws Exception {
    Path model = Files.createDirectories(tmp.resolve("model"));
    Files.copy(
        Corpus.file("safetensors/lerobot__pusht_frame_0.safetensors"),
        model.resolve("model.safetensors"));
    return model;
  }

  private static String store(Path tmp) {
    return tmp.resolve("store-" + (++stores)).toString();
  }

  private static List<Path> files(Path dir) throws Exception {
    if (!Files.isDirectory(dir)) {
      return List.of();
    }
    try (Stream<Path> s = Files.list(dir)) {
      return s.sorted().toList();
    }
  }

  /** TieredStopAtLevel and where it came from, as the JVM the launcher started reports it. */
  private static String tieredStopAtLevel(String... args) throws Exception {
    // Without class-data sharing: the flags of an archive's JVM are not what this test reads.
    Run r =
        launch(Map.of("JAVA_TOOL_OPTIONS", "-XX:+PrintFlagsFinal", "TENSORCAST_CDS_DIR", ""), args);
    assertThat(r.exit()).as(r.out()).isZero();
    Matcher m = TIERED.matcher(r.out());
    assertThat(m.find()).as(r.out()).isTrue();
    return m.group(1) + " " + m.group(2);
  }

  private record Run(int exit, String out) {}

  private static Run launch(Map<String, String> extraEnv, String... args) throws Exception {
    List<String> cmd = new java.util.ArrayList<>(List.of("/bin/sh", LAUNCHER.toString()));
    cmd.addAll(List.of(args));
    return run(cmd, extraEnv);
  }

  private static Run run(List<String> cmd, Map<String, String> extraEnv) throws Exception {
    return run(cmd, extraEnv, 120);
  }

  private static Run run(List<String> cmd, Map<String, String> extraEnv, int timeoutSeconds)
      throws Exception {
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    Map<String, String> env = pb.environment();
    env.put("TENSORCAST_DATAPLANE_JAR", ServeIT.dataplaneJar().toString());
    env.put("JAVA", Path.of(System.getProperty("java.home"), "bin", "java").toString());
    env.putAll(extraEnv);
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(timeoutSeconds, TimeUnit.SECONDS)).isTrue();
    return new Run(p.exitValue(), out);
  }
}
