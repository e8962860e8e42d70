package io.tensorcast.dataplane.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.S3MockServer;
import io.tensorcast.testing.TestFiles;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * {@code dataplane load} and {@code dataplane inspect} run in-process through {@link
 * DataplaneCli#commandLine()}, with their stdout and stderr captured, against a real S3-compatible
 * server (S3Mock) and the corpus directory.
 */
class LoadAndInspectIT {
  private static final String BUCKET = "cli-it";
  private static final String PREFIX = "tiny/";
  private static final String BROKEN_FILE =
      "safetensors-cpp__safetensors_abuse_attempt_1.safetensors";

  private static final String TORCH_FILE = "burn__pytorch-tests_complex_nested.pt";

  private static S3MockServer s3;
  private static Path corpus;
  private static final Map<String, Path> files = new TreeMap<>();
  private static long totalBytes;
  private static long tensors;
  private static final Map<String, String> saved = new TreeMap<>();

  private Path root;

  /** What one run printed. */
  record Run(int exitCode, String out, String err) {}

  @BeforeAll
  static void seed() throws Exception {
    corpus = Corpus.dir();
    try (Stream<Path> shards = Files.list(corpus.resolve("index/safetensorsjl-tiny-sharded"))) {
      shards.forEach(p -> files.put(p.getFileName().toString(), p));
    }
    files.put("config.json", corpus.resolve("index/falcon-180b-chat/config.json"));
    s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    for (Map.Entry<String, Path> e : files.entrySet()) {
      s3.putFile(BUCKET, PREFIX + e.getKey(), e.getValue());
      totalBytes += Files.size(e.getValue());
      if (e.getKey().endsWith(".safetensors")) {
        tensors += SafetensorsHeader.read(e.getValue()).tensors().size();
      }
    }
    s3.putFile(BUCKET, "torch/" + TORCH_FILE, corpus.resolve("torch/" + TORCH_FILE));
    // The CLI takes credentials from the SDK's default chain, which starts with these properties.
    for (String key : List.of("aws.accessKeyId", "aws.secretAccessKey")) {
      saved.put(key, System.getProperty(key));
    }
    System.setProperty("aws.accessKeyId", S3MockServer.ACCESS_KEY);
    System.setProperty("aws.secretAccessKey", S3MockServer.SECRET_KEY);
  }

  @AfterAll
  static void restoreProperties() {
    saved.forEach(
        (k, v) -> {
          if (v == null) {
            System.clearProperty(k);
          } else {
            System.setProperty(k, v);
          }
        });
  }

  @BeforeEach
  void setUp() throws Exception {
    Path shm = Path.of("/dev/shm");
    assumeTrue(Files.isDirectory(shm), "/dev/shm is needed for the page-locked store");
    root = Files.createTempDirectory(shm, "tensorcast-cli-it-");
  }

  @AfterEach
  void tearDown() throws Exception {
    TestFiles.deleteTree(root);
  }

  private static Run run(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    CommandLine cli = DataplaneCli.commandLine();
    cli.setOut(new PrintWriter(out, true));
    cli.setErr(new PrintWriter(err, true));
    int code = cli.execute(args);
    return new Run(code, out.toString(), err.toString());
  }

  private String[] loadArgs(String... more) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "load",
                "s3://" + BUCKET + "/" + PREFIX,
                "--allow-insecure-endpoint",
                "--endpoint",
                s3.endpoint().toString(),
                "--path-style",
                "--region",
                S3MockServer.REGION,
                "--store-root",
                root.toString(),
                "--budget",
                "64Mi",
                "--artifact-id",
                "tiny"));
    args.addAll(List.of(more));
    return args.toArray(String[]::new);
  }

  @Test
  void loadPrintsTheSummaryAndProgressAndLeavesTheFilesInTheStore() throws Exception {
    Run r = run(loadArgs());

    assertThat(r.exitCode()).as(r.err()).isZero();
    Path dir = root.resolve("tiny");
    assertThat(r.out())
        .startsWith("loaded s3://" + BUCKET + "/" + PREFIX + "\n")
        .contains("  revision   listing-sha256:")
        .contains(
            "  files      "
                + files.size()
                + " ("
                + files.size()
                + " verified), "
                + tensors
                + " tensors\n")
        .contains("(" + totalBytes + ") in ")
        .contains("  directory  " + dir + "\n");
    // each file is a single-part object: its ETag's MD5 verified it and is what the store recorded
    for (Map.Entry<String, Path> e : files.entrySet()) {
      assertThat(r.out())
          .containsPattern(
              "(?m)^    "
                  + java.util.regex.Pattern.quote(e.getKey())
                  + " +.* md5:"
                  + ServeIT.md5(e.getValue())
                  + "$");
      assertThat(Files.mismatch(dir.resolve(e.getKey()), e.getValue())).isEqualTo(-1L);
    }
    // the last progress line: phase, bytes of total, percentage, rate and ETA
    assertThat(r.err()).contains("Ready").contains("100.0%").contains("/s").contains("ETA");

    // A second run finds the copy kept by the first (adopted by the store) and unloads it.
    Run again = run(loadArgs("--unload"));
    assertThat(again.exitCode()).as(again.err()).isZero();
    assertThat(again.out()).contains("(" + totalBytes + ") in ").endsWith("unloaded tiny\n");
    assertThat(dir).doesNotExist();
  }

  @Test
  void loadOfAMissingBucketExits1WithTheReason() {
    Run r =
        run(
            "load",
            "s3://no-such-bucket-cli-it/x/",
            "--allow-insecure-endpoint",
            "--endpoint",
            s3.endpoint().toString(),
            "--path-style",
            "--region",
            S3MockServer.REGION,
            "--store-root",
            root.toString(),
            "--budget",
            "64Mi");
    assertThat(r.exitCode()).isEqualTo(1);
    assertThat(r.err())
        .contains("load failed: BucketNotFound: s3://no-such-bucket-cli-it/x/")
        .contains("the bucket does not exist");
    assertThat(r.out()).isEmpty();
  }

  @Test
  void inspectListsFilesAndTensorsFromTheHeaders() {
    Run r =
        run(
            "inspect",
            "s3://" + BUCKET + "/" + PREFIX,
            "--allow-insecure-endpoint",
            "--endpoint",
            s3.endpoint().toString(),
            "--path-style",
            "--region",
            S3MockServer.REGION);
    assertThat(r.exitCode()).as(r.err()).isZero();
    assertThat(r.out())
        .startsWith("s3://" + BUCKET + "/" + PREFIX + "\n")
        .contains("model-00001-of-00006.safetensors")
        .contains("19 tensors")
        .endsWith(
            files.size()
                + " files, "
                + tensors
                + " tensors, "
                + Quantities.human(totalBytes)
                + " ("
                + totalBytes
                + " bytes)\n");
  }

  @Test
  void inspectListsTheTensorsOfATorchCheckpoint() throws Exception {
    Run r =
        run(
            "inspect",
            "s3://" + BUCKET + "/torch/",
            "--tensors",
            "--allow-insecure-endpoint",
            "--endpoint",
            s3.endpoint().toString(),
            "--path-style",
            "--region",
            S3MockServer.REGION);
    assertThat(r.exitCode()).as(r.err()).isZero();
    var c =
        io.tensorcast.dataplane.format.torch.TorchCheckpointReader.read(
            corpus.resolve("torch/" + TORCH_FILE));
    assertThat(r.out()).contains(TORCH_FILE).contains(c.tensors().size() + " tensors");
    for (var t : c.tensors()) {
      assertThat(r.out())
          .containsPattern(
              "\\n +"
                  + java.util.regex.Pattern.quote(t.name())
                  + " +"
                  + t.safetensorsDtype().orElseThrow()
                  + " +"
                  + java.util.regex.Pattern.quote(java.util.Arrays.toString(t.shape())));
    }
    assertThat(r.out())
        .endsWith(
            "1 files, "
                + c.tensors().size()
                + " tensors, "
                + Quantities.human(Files.size(corpus.resolve("torch/" + TORCH_FILE)))
                + " ("
                + Files.size(corpus.resolve("torch/" + TORCH_FILE))
                + " bytes)\n");
  }

  @Test
  void inspectOfTheBrokenCorpusDirectoryExits1NamingTheFileAndTheRule() {
    Run r = run("inspect", corpus.resolve("broken").toUri().toString());

    assertThat(r.exitCode()).isEqualTo(1);
    assertThat(r.err())
        .startsWith("inspect failed: InvalidSafetensors: " + BROKEN_FILE + ": ")
        .contains("1000")
        .contains("[rule header-length-exceeds-file]");
  }
}
