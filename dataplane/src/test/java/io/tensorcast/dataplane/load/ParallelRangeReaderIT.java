package io.tensorcast.dataplane.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.source.SourceOptions;
import io.tensorcast.dataplane.source.Sources;
import io.tensorcast.dataplane.testing.HeapRangeSink;
import io.tensorcast.dataplane.testing.RecordingProgressListener;
import io.tensorcast.dataplane.testing.S3Options;
import io.tensorcast.testing.Corpus;
import io.tensorcast.testing.FaultInjectingProxy;
import io.tensorcast.testing.S3MockServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The data path end to end: S3Source over a real S3-compatible server (S3Mock) behind a real
 * fault-injecting proxy, ParallelRangeReader into a heap sink, real corpus files.
 */
class ParallelRangeReaderIT {
  private static final String BUCKET = "reader-it";
  private static final String MNIST =
      "safetensors/burn__examples_import-model-weights_mnist.safetensors";
  private static final ReadOptions FAST =
      ReadOptions.DEFAULTS.withBackoff(Duration.ofMillis(2), Duration.ofMillis(20));

  private static S3MockServer s3;
  private static Path corpus;
  private static List<Path> safetensors;

  private FaultInjectingProxy proxy;
  private ArtifactSource source;

  @BeforeAll
  static void seed() {
    corpus = Corpus.dir();
    safetensors = Corpus.safetensorsFiles();
    s3 = S3MockServer.shared();
    s3.createBucket(BUCKET);
    for (Path f : safetensors) {
      s3.putFile(BUCKET, "st/" + corpus.relativize(f), f);
    }
  }

  @BeforeEach
  void startProxy() throws Exception {
    proxy = new FaultInjectingProxy(s3.endpoint());
    source = Sources.open("s3://" + BUCKET + "/st/", options().build());
  }

  private SourceOptions.Builder options() {
    return S3Options.via(proxy.endpoint()).readTimeout(Duration.ofSeconds(10));
  }

  @AfterEach
  void stopProxy() {
    source.close();
    proxy.close();
  }

  private SourceFile listed(String path) throws Exception {
    return source.list().stream().filter(f -> f.path().equals(path)).findFirst().orElseThrow();
  }

  private static byte[] local(String path) throws Exception {
    return Files.readAllBytes(corpus.resolve(path));
  }

  @Test
  void readsEveryCorpusSafetensorsFileByteEqual() throws Exception {
    List<SourceFile> files = source.list();
    assertThat(files).hasSize(safetensors.size());
    HeapRangeSink sink = new HeapRangeSink();
    RecordingProgressListener progress = new RecordingProgressListener();
    ReadResult result =
        new ParallelRangeReader(FAST.withRangeSize(256 * 1024).withConcurrency(4))
            .read(source, files, sink, progress);
    long total = 0;
    for (SourceFile f : files) {
      assertThat(sink.bytes(f.path())).as(f.path()).isEqualTo(local(f.path()));
      total += f.size();
    }
    assertThat(result.bytes()).isEqualTo(total);
    assertThat(progress.bytes()).isEqualTo(total);
    assertThat(progress.overlaps()).isEmpty();
    assertThat(result.retries()).isZero();
    // every GET was ranged, with If-Match the listed ETag
    assertThat(
            proxy.requests().stream()
                .filter(r -> r.method().equals("GET") && r.range().isPresent()))
        .hasSize((int) result.requests())
        .allSatisfy(r -> assertThat(r.ifMatch()).isPresent());
  }

  @Test
  void aBodyCutMidwayIsResumedExactlyAtTheCut() throws Exception {
    SourceFile file = listed(MNIST);
    proxy.cutBodyAfter(123_457, 1);
    HeapRangeSink sink = new HeapRangeSink();
    RecordingProgressListener progress = new RecordingProgressListener();
    ReadResult result =
        new ParallelRangeReader(FAST.withRangeSize(500_000).withConcurrency(1))
            .read(source, List.of(file), sink, progress);

    assertThat(sink.bytes(MNIST)).isEqualTo(local(MNIST));
    assertThat(proxy.gets("/" + BUCKET + "/st/" + MNIST))
        .extracting(r -> r.range().orElseThrow())
        .containsExactly(
            "bytes=0-499999",
            "bytes=123457-499999",
            "bytes=500000-999999",
            "bytes=1000000-1499999",
            "bytes=1500000-1509295");
    assertThat(result.retries()).isEqualTo(1);
    assertThat(progress.retries())
        .singleElement()
        .satisfies(r -> assertThat(r.resumeAt()).isEqualTo(123_457));
    assertThat(progress.bytes()).isEqualTo(file.size());
    assertThat(progress.overlaps()).isEmpty();
  }

  @Test
  void twoServiceUnavailableAnswersAreRetriedAndTheReadSucceeds() throws Exception {
    SourceFile file = listed(MNIST);
    proxy.failRequests(503, 2, Duration.ofSeconds(1));
    HeapRangeSink sink = new HeapRangeSink();
    ReadResult result =
        new ParallelRangeReader(
                FAST.withRangeSize(400_000)
                    .withConcurrency(2)
                    .withBackoff(Duration.ofMillis(5), Duration.ofSeconds(2)))
            .read(source, List.of(file), sink, ReadProgressListener.NONE);
    assertThat(sink.bytes(MNIST)).isEqualTo(local(MNIST));
    assertThat(result.retries()).isEqualTo(2);
    assertThat(result.requests()).isEqualTo(4 + 2);
    // Each refused range is asked for again only after the server's Retry-After: 1.
    List<FaultInjectingProxy.RecordedRequest> gets =
        proxy.requests().stream().filter(r -> r.range().isPresent()).toList();
    for (int i = 0; i < 2; i++) {
      FaultInjectingProxy.RecordedRequest refused = gets.get(i);
      FaultInjectingProxy.RecordedRequest again =
          gets.stream()
              .filter(r -> r.receivedNanos() > refused.receivedNanos() && r.sameAs(refused))
              .findFirst()
              .orElseThrow();
      assertThat(Duration.ofNanos(again.receivedNanos() - refused.receivedNanos()))
          .isGreaterThanOrEqualTo(Duration.ofSeconds(1));
    }
  }

  @Test
  void aRetryAfterLongerThanTheBackOffCapFailsTheRangeAtOnceForTheLoadToWait() throws Exception {
    SourceFile file = listed(MNIST);
    proxy.failRequests(503, 1, Duration.ofSeconds(30));
    HeapRangeSink sink = new HeapRangeSink();
    assertThatThrownBy(
            () ->
                new ParallelRangeReader(FAST.withRangeSize(2_000_000).withConcurrency(1))
                    .read(source, List.of(file), sink, ReadProgressListener.NONE))
        .isInstanceOfSatisfying(
            RangeReadException.class,
            e -> {
              assertThat(e.reason()).isEqualTo(Reason.Throttled);
              assertThat(e.attempts()).isEqualTo(1);
              assertThat(e.reason().isTransient()).isTrue();
            })
        .hasMessageContaining("the source asked to wait PT30S (Retry-After)");
  }

  @Test
  void aServerThatIgnoresRangeIsRefusedAndNoByteIsAccepted() throws Exception {
    SourceFile file = listed(MNIST);
    proxy.ignoreRange(true);
    HeapRangeSink sink = new HeapRangeSink();
    RecordingProgressListener progress = new RecordingProgressListener();
    assertThatThrownBy(
            () ->
                new ParallelRangeReader(FAST.withRangeSize(300_000).withConcurrency(2))
                    .read(source, List.of(file), sink, progress))
        .isInstanceOfSatisfying(
            RangeReadException.class,
            e -> {
              assertThat(e.reason()).isEqualTo(Reason.RangeNotHonored);
              assertThat(e.attempts()).isEqualTo(1);
            })
        .hasMessageContaining(MNIST)
        .hasMessageContaining("answered 200 with the whole object (Content-Length 1509296)")
        .hasMessageContaining("ignores Range headers");
    assertThat(progress.bytes()).isZero();
    assertThat(sink.completed()).isEmpty();
    assertThat(sink.bytes(MNIST)).containsOnly(0);
  }

  @Test
  void aMissingBucketFailsWithBucketNotFound() throws Exception {
    try (ArtifactSource missing =
        Sources.open("s3://no-such-bucket-reader/st/", options().build())) {
      SourceFile ghost = new SourceFile("model.safetensors", 1000, "", Optional.empty());
      assertThatThrownBy(
              () ->
                  new ParallelRangeReader(FAST)
                      .read(
                          missing, List.of(ghost), new HeapRangeSink(), ReadProgressListener.NONE))
          .isInstanceOfSatisfying(
              RangeReadException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.BucketNotFound);
                assertThat(e.attempts()).isEqualTo(1);
              })
          .hasMessageContaining("model.safetensors");
      assertThatThrownBy(missing::list)
          .isInstanceOfSatisfying(
              io.tensorcast.dataplane.source.SourceException.class,
              e -> assertThat(e.reason()).isEqualTo(Reason.BucketNotFound));
    }
  }

  @Test
  void anObjectReplacedBetweenListAndReadIsObjectChanged() throws Exception {
    Path before = corpus.resolve("safetensors/candle__whisper_mel_filters.safetensors");
    Path after = corpus.resolve("safetensors/connect4-ai__candle_varmap.safetensors");
    s3.putFile(BUCKET, "replaced/model.safetensors", before);
    try (ArtifactSource replaced =
        Sources.open("s3://" + BUCKET + "/replaced/", options().build())) {
      List<SourceFile> files = replaced.list();
      s3.putFile(BUCKET, "replaced/model.safetensors", after);
      HeapRangeSink sink = new HeapRangeSink();
      assertThatThrownBy(
              () ->
                  new ParallelRangeReader(FAST.withRangeSize(16 * 1024))
                      .read(replaced, files, sink, ReadProgressListener.NONE))
          .isInstanceOfSatisfying(
              RangeReadException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.ObjectChanged);
                assertThat(e.attemptsExhausted()).isFalse();
              })
          .hasMessageContaining("model.safetensors");
      assertThat(sink.completed()).isEmpty();
      assertThat(proxy.gets("/" + BUCKET + "/replaced/model.safetensors"))
          .isNotEmpty()
          .allSatisfy(r -> assertThat(r.ifMatch()).contains('"' + files.get(0).etag() + '"'));
    }
  }

  @Test
  void noMoreThanConcurrencyRequestsAreInFlight() throws Exception {
    SourceFile file = listed(MNIST);
    proxy.delay(Duration.ofMillis(25));
    HeapRangeSink sink = new HeapRangeSink();
    ReadResult result =
        new ParallelRangeReader(FAST.withRangeSize(32 * 1024).withConcurrency(3))
            .read(source, List.of(file), sink, ReadProgressListener.NONE);
    assertThat(sink.bytes(MNIST)).isEqualTo(local(MNIST));
    assertThat(result.ranges()).isEqualTo(47);
    assertThat(proxy.maxInFlightGets()).isBetween(2, 3);
  }

  @Test
  void anAdaptiveReadBacksOffFromAnOriginThatAnswersSlowDownAboveTwoInFlight() throws Exception {
    SourceFile file = listed(MNIST);
    ReadOptions read =
        FAST.withRangeSize(32 * 1024).withConcurrency(16).withMaxAttempts(100); // 47 ranges
    proxy.delay(Duration.ofMillis(25)).slowDownAbove(2);

    HeapRangeSink fixedSink = new HeapRangeSink();
    new ParallelRangeReader(read.withAdaptiveConcurrency(false))
        .read(source, List.of(file), fixedSink, ReadProgressListener.NONE);
    int fixedSlowDowns = proxy.slowDowns();

    proxy.reset().delay(Duration.ofMillis(25)).slowDownAbove(2);
    HeapRangeSink adaptiveSink = new HeapRangeSink();
    ReadResult adaptive =
        new ParallelRangeReader(read)
            .read(source, List.of(file), adaptiveSink, ReadProgressListener.NONE);

    assertThat(fixedSink.bytes(MNIST)).isEqualTo(local(MNIST));
    assertThat(adaptiveSink.bytes(MNIST)).isEqualTo(local(MNIST));
    // 16 at once: 14 refused in the first wave alone, and again at every retry wave. Adaptive: 4
    // at once at first, halved at the first SlowDown, then at most 2 in flight.
    assertThat(fixedSlowDowns).isGreaterThanOrEqualTo(14);
    assertThat(proxy.slowDowns()).isLessThan(fixedSlowDowns / 2);
    assertThat(adaptive.retries()).isEqualTo(proxy.slowDowns());
  }

  /**
   * Throttling is paced, not counted as failed attempts: a range refused with {@code 503 SlowDown}
   * more often than its attempts allow is still read whole, every byte once.
   */
  @Test
  void aRangeThrottledMoreOftenThanItsAttemptsAllowIsStillRead() throws Exception {
    String path = "safetensors/mlverse-safetensors__hello.safetensors"; // 736 bytes
    SourceFile file = listed(path);
    proxy.failRequests(503, 7, null);
    HeapRangeSink sink = new HeapRangeSink();
    ReadResult result =
        new ParallelRangeReader(FAST.withMaxAttempts(3).withConcurrency(1))
            .read(source, List.of(file), sink, ReadProgressListener.NONE);

    assertThat(result.requests()).isEqualTo(8);
    assertThat(result.retries()).isEqualTo(7);
    assertThat(sink.bytes(path)).isEqualTo(local(path));
    assertThat(proxy.gets("/" + BUCKET + "/st/" + path)).hasSize(8);
  }

  /**
   * A {@code Retry-After} holds back the whole read, not only the refused range: after the first
   * range is refused with {@code Retry-After: 1}, the other worker finishes the range it had asked
   * for (in about 0.4 s), and no further request of the read reaches the source before that second
   * has passed.
   */
  @Test
  void aRetryAfterHoldsBackEveryRequestOfTheReadUntilItsInstant() throws Exception {
    SourceFile file = listed(MNIST);
    // Bodies at 1 MB/s: the other worker's range takes ~0.4 s, long after the refusal is known.
    proxy.failRequests(503, 1, Duration.ofSeconds(1)).throttleBodies(1_000_000);
    HeapRangeSink sink = new HeapRangeSink();
    ReadResult result =
        new ParallelRangeReader(
                FAST.withRangeSize(400_000)
                    .withConcurrency(2)
                    .withAdaptiveConcurrency(false)
                    .withBackoff(Duration.ofMillis(5), Duration.ofSeconds(2)))
            .read(source, List.of(file), sink, ReadProgressListener.NONE);
    assertThat(sink.bytes(MNIST)).isEqualTo(local(MNIST));
    assertThat(result.requests()).isEqualTo(4 + 1);

    List<FaultInjectingProxy.RecordedRequest> gets =
        proxy.requests().stream().filter(r -> r.range().isPresent()).toList();
    FaultInjectingProxy.RecordedRequest refused = gets.get(0);
    // The two workers' first requests (ranges 0 and 1) were sent before the refusal was known.
    FaultInjectingProxy.RecordedRequest otherFirst =
        gets.stream().filter(r -> !r.sameAs(refused)).findFirst().orElseThrow();
    List<FaultInjectingProxy.RecordedRequest> later =
        gets.stream().filter(r -> r != refused && r != otherFirst).toList();
    assertThat(later).hasSize(3); // ranges 2 and 3, and the refused range again
    // Retry-After is in whole seconds; 10 ms of tolerance for the two clocks' readings.
    assertThat(later)
        .allSatisfy(
            r ->
                assertThat(Duration.ofNanos(r.receivedNanos() - refused.receivedNanos()))
                    .as("%s after the refusal", r.range().orElseThrow())
                    .isGreaterThanOrEqualTo(Duration.ofMillis(990)));
  }

  /**
   * A source that keeps refusing fails the read once the read's throttling budget is spent, as
   * {@code Throttled} and saying so, not after the range's attempts.
   */
  @Test
  void aReadThrottledForLongerThanItsBudgetFailsSayingSo() throws Exception {
    String path = "safetensors/mlverse-safetensors__hello.safetensors"; // 736 bytes
    SourceFile file = listed(path);
    proxy.failRequests(503, 100_000, null);
    assertThatThrownBy(
            () ->
                new ParallelRangeReader(
                        FAST.withMaxAttempts(3)
                            .withConcurrency(1)
                            .withThrottleBudget(Duration.ofMillis(300)))
                    .read(source, List.of(file), new HeapRangeSink(), ReadProgressListener.NONE))
        .isInstanceOfSatisfying(
            RangeReadException.class,
            e -> {
              assertThat(e.reason()).isEqualTo(Reason.Throttled);
              assertThat(e.reason().isTransient()).isTrue();
              assertThat(e.attemptsExhausted()).isFalse();
              assertThat(e.attempts()).isGreaterThan(3);
            })
        .hasMessageContaining(path)
        .hasMessageContaining(
            "the source throttled this load (HTTP 429 or 503 SlowDown) for longer than its"
                + " throttling budget of 0.3 s in total (")
        .hasMessageContaining("HTTP 503 SlowDown");
    assertThat(proxy.gets("/" + BUCKET + "/st/" + path)).hasSizeGreaterThan(3);
  }

  @Test
  void exhaustedAttemptsFailNamingTheFileAndRange() throws Exception {
    String path = "safetensors/mlverse-safetensors__hello.safetensors"; // 736 bytes
    SourceFile file = listed(path);
    proxy.failRequests(500, 1000, null);
    assertThatThrownBy(
            () ->
                new ParallelRangeReader(FAST.withMaxAttempts(3).withConcurrency(1))
                    .read(source, List.of(file), new HeapRangeSink(), ReadProgressListener.NONE))
        .isInstanceOfSatisfying(
            RangeReadException.class,
            e -> {
              assertThat(e.reason()).isEqualTo(Reason.SourceUnavailable);
              assertThat(e.attempts()).isEqualTo(3);
              assertThat(e.attemptsExhausted()).isTrue();
            })
        .hasMessageStartingWith(
            "reading bytes [0, 736) of "
                + path
                + " (736 bytes; range 1 of 1) from s3://"
                + BUCKET
                + "/st/ failed after all 3 attempts (0 of 736 bytes received); last cause:"
                + " SourceUnavailable:")
        .hasMessageContaining("500");
    assertThat(proxy.gets("/" + BUCKET + "/st/" + path)).hasSize(3);
  }
}
