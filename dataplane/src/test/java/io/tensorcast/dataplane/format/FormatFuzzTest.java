package io.tensorcast.dataplane.format;

import static org.assertj.core.api.Assertions.assertThat;

import io.tensorcast.dataplane.format.FormatFuzzer.Input;
import io.tensorcast.dataplane.format.FormatFuzzer.Kind;
import io.tensorcast.dataplane.format.FormatFuzzer.Seed;
import io.tensorcast.dataplane.format.torch.HostileCheckpoints;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Fuzzes the safetensors, torch and index readers with {@link FormatFuzzer} for a bounded time:
 * {@code -Dtensorcast.fuzz.seconds} (default 20, what CI runs), {@code -Dtensorcast.fuzz.seed}
 * (default: the clock, printed). Seeds are the corpus's real files (read in place) plus files
 * written here. A crash (any exception but the reader's refusal, an Error such as
 * StackOverflowError or OutOfMemoryError, or an input taking longer than {@code
 * -Dtensorcast.fuzz.inputTimeoutSeconds}, default 10) fails the test and leaves the input under
 * {@code target/fuzz-crashes/}, named in the failure with the seed, so it can become a regression
 * test. {@code bench/fuzz-formats.sh} runs it for hours.
 */
class FormatFuzzTest {
  private static final long MAX_SEED_BYTES = 2 << 20;

  @Test
  @Timeout(value = 2, unit = TimeUnit.DAYS)
  void readersRefuseOrAcceptMutatedFilesAndNeverCrash() throws Exception {
    long seconds = Long.getLong("tensorcast.fuzz.seconds", 20);
    long seed = Long.getLong("tensorcast.fuzz.seed", System.currentTimeMillis());
    long inputTimeout = Long.getLong("tensorcast.fuzz.inputTimeoutSeconds", 10);
    List<Seed> seeds = seeds();
    FormatFuzzer fuzzer = new FormatFuzzer(seeds, seed, FormatLimits.DEFAULT);
    System.out.printf(
        Locale.ROOT,
        "format fuzz: seed %d, %d seed files, %d s (-Dtensorcast.fuzz.seed=%d to repeat)%n",
        seed,
        seeds.size(),
        seconds,
        seed);

    ExecutorService worker =
        Executors.newSingleThreadExecutor(
            r -> {
              Thread t = new Thread(r, "format-fuzz");
              t.setDaemon(true);
              return t;
            });
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    long inputs = 0;
    long accepted = 0;
    try {
      while (System.nanoTime() < deadline) {
        Input input = fuzzer.next();
        Future<Exception> f = worker.submit(() -> fuzzer.read(input));
        Exception refusal;
        try {
          refusal = f.get(inputTimeout, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
          throw crash(seed, inputs, input, "took longer than " + inputTimeout + " s", null);
        } catch (ExecutionException e) {
          throw crash(seed, inputs, input, "crashed", e.getCause());
        }
        inputs++;
        if (refusal == null) {
          accepted++;
        } else {
          assertThat(refusal.getMessage()).as("refusal text").startsWith(input.seed().name());
        }
      }
    } finally {
      worker.shutdownNow();
    }
    System.out.printf(
        Locale.ROOT, "format fuzz: %d inputs, %d accepted, no crash%n", inputs, accepted);
    assertThat(inputs).isPositive();
  }

  private static AssertionError crash(
      long seed, long index, Input input, String what, Throwable cause) {
    String file;
    try {
      Path dir = Files.createDirectories(Path.of("target", "fuzz-crashes"));
      String sha =
          HexFormat.of()
              .formatHex(MessageDigest.getInstance("SHA-256").digest(input.bytes()))
              .substring(0, 16);
      Path p = dir.resolve(input.seed().kind().name().toLowerCase(Locale.ROOT) + "-" + sha);
      Files.write(p, input.bytes());
      file = p.toAbsolutePath().toString();
    } catch (Exception e) {
      file = "(not saved: " + e + ")";
    }
    StringWriter trace = new StringWriter();
    if (cause != null) {
      cause.printStackTrace(new PrintWriter(trace));
    }
    return new AssertionError(
        String.format(
            Locale.ROOT,
            "%s reader %s on input %d (seed %d, from %s by %s, %d bytes), saved as %s%n%s",
            input.seed().kind(),
            what,
            index,
            seed,
            input.seed().name(),
            input.mutation(),
            input.bytes().length,
            file,
            trace.toString().lines().limit(40).reduce("", (a, b) -> a + b + "\n")),
        cause);
  }

  /** Corpus files (when the corpus is there) and files written here. */
  static List<Seed> seeds() throws Exception {
    List<Seed> seeds = new ArrayList<>();
    Path corpus = corpus();
    if (corpus != null) {
      try (Stream<Path> s = Files.walk(corpus)) {
        for (Path p : s.filter(Files::isRegularFile).sorted().toList()) {
          String name = corpus.relativize(p).toString();
          Kind kind = kindOf(name);
          if (kind != null && Files.size(p) <= MAX_SEED_BYTES) {
            seeds.add(new Seed(name, kind, Files.readAllBytes(p)));
          }
        }
      }
    } else {
      System.out.println("format fuzz: corpus not found; seeds are the generated files only");
    }
    seeds.add(new Seed("generated.pt", Kind.TORCH, HostileCheckpoints.stateDict("w", 8)));
    seeds.add(new Seed("tied.pt", Kind.TORCH, HostileCheckpoints.doublingLists(2)));
    byte[] header =
        ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                + "\"__metadata__\":{\"format\":\"pt\"}}")
            .getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    seeds.add(
        new Seed("generated.safetensors", Kind.SAFETENSORS, withPrefix(header, new byte[16])));
    seeds.add(
        new Seed(
            "model.safetensors.index.json",
            Kind.INDEX,
            ("{\"metadata\": {\"total_size\": 24}, \"weight_map\": {\"a\": \"m-1.safetensors\","
                    + " \"b\": \"m-2.safetensors\"}}")
                .getBytes(java.nio.charset.StandardCharsets.US_ASCII)));
    return seeds;
  }

  private static byte[] withPrefix(byte[] json, byte[] data) {
    java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(8 + json.length + data.length);
    b.order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(json.length).put(json).put(data);
    return b.array();
  }

  private static Kind kindOf(String name) {
    if (name.endsWith(".safetensors")) {
      return Kind.SAFETENSORS;
    }
    if (name.endsWith(".pt") || name.endsWith(".pth") || name.endsWith(".bin")) {
      return Kind.TORCH;
    }
    if (name.endsWith(".index.json")) {
      return Kind.INDEX;
    }
    return null;
  }

  private static Path corpus() {
    return io.tensorcast.testing.Corpus.find().orElse(null);
  }
}
