package io.tensorcast.dataplane.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.FileSource;
import io.tensorcast.dataplane.source.ForwardingArtifactSource;
import io.tensorcast.dataplane.source.PathFilter;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.testing.HeapRangeSink;
import io.tensorcast.dataplane.testing.RecordingProgressListener;
import io.tensorcast.testing.Corpus;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The reader against real files (FileSource over the corpus), with faults wrapped around it. */
class ParallelRangeReaderTest {
  private static final ReadOptions FAST =
      ReadOptions.DEFAULTS.withBackoff(Duration.ofMillis(1), Duration.ofMillis(5));

  @TempDir Path tmp;

  @ParameterizedTest(name = "rangeSize {0}")
  @ValueSource(ints = {1000, 65536, 8 * 1024 * 1024})
  void readsEveryCorpusSafetensorsFileByteForByte(int rangeSize) throws Exception {
    Path corpus = Corpus.dir();
    try (FileSource source =
        FileSource.open(corpus, PathFilter.of(List.of("*.safetensors"), List.of()))) {
      List<SourceFile> files = source.list();
      assertThat(files).hasSizeGreaterThan(30);
      HeapRangeSink sink = new HeapRangeSink();
      RecordingProgressListener progress = new RecordingProgressListener();
      ReadResult result =
          new ParallelRangeReader(FAST.withRangeSize(rangeSize).withConcurrency(4))
              .read(source, files, sink, progress);

      long total = files.stream().mapToLong(SourceFile::size).sum();
      long expectedRanges =
          files.stream().mapToLong(f -> (f.size() + rangeSize - 1) / rangeSize).sum();
      for (SourceFile f : files) {
        assertThat(sink.bytes(f.path()))
            .as(f.path())
            .isEqualTo(Files.readAllBytes(corpus.resolve(f.path())));
      }
      assertThat(result.bytes()).isEqualTo(total);
      assertThat(result.ranges()).isEqualTo(expectedRanges);
      assertThat(result.requests()).isEqualTo(expectedRanges);
      assertThat(result.retries()).isZero();
      assertThat(sink.completed()).hasSize((int) expectedRanges);
      assertThat(sink.completedBytes()).isEqualTo(total);
      assertThat(progress.bytes()).isEqualTo(total);
      assertThat(progress.overlaps()).isEmpty();
    }
  }

  @Test
  void aFastSourceGetsAdjacentRangesInOneRequestUpToTheLargestButTheLastWaveAsPlanned()
      throws Exception {
    byte[] content = new byte[8 << 20];
    new java.util.Random(7).nextBytes(content);
    Files.write(tmp.resolve("w.bin"), content);
    ReadOptions options =
        FAST.withRangeSize(256 << 10).withMaxRangeSize(1 << 20).withConcurrency(2);
    try (Scripted source = new Scripted(FileSource.open(tmp, PathFilter.all()))) {
      SourceFile file = source.list().get(0);
      List<ParallelRangeReader.FileRange> planned = planned(file, 256 << 10);
      assertThat(planned).hasSize(32);

      HeapRangeSink sink = new HeapRangeSink();
      ReadResult merged =
          new ParallelRangeReader(options)
              .readRanges(source, planned, sink, ReadProgressListener.NONE, null, true);

      assertThat(sink.bytes("w.bin")).isEqualTo(content);
      assertThat(merged.ranges()).isEqualTo(32);
      assertThat(merged.requests()).isLessThan(32).isEqualTo(source.opened.size());
      assertThat(source.opened)
          .allSatisfy(o -> assertThat(length(o)).isBetween(256L << 10, 1L << 20))
          .anySatisfy(o -> assertThat(length(o)).isEqualTo(1L << 20));
      // the last wave (one range per worker) is asked for as planned
      assertThat(source.opened)
          .contains("w.bin@" + (31L << 18) + "+" + (256 << 10))
          .contains("w.bin@" + (30L << 18) + "+" + (256 << 10));
      assertThat(sink.completedBytes()).isEqualTo(content.length);

      source.opened.clear();
      HeapRangeSink exact = new HeapRangeSink();
      ReadResult asPlanned =
          new ParallelRangeReader(options)
              .readRanges(source, planned, exact, ReadProgressListener.NONE, null);
      assertThat(exact.bytes("w.bin")).isEqualTo(content);
      assertThat(asPlanned.requests()).isEqualTo(32);
      assertThat(exact.completed()).hasSize(32);
    }
  }

  @Test
  void aSourceWhoseConnectionsAreSlowGetsTheRangesAsPlanned() throws Exception {
    byte[] content = new byte[2 << 20];
    new java.util.Random(8).nextBytes(content);
    Files.write(tmp.resolve("s.bin"), content);
    ReadOptions options =
        FAST.withRangeSize(256 << 10).withMaxRangeSize(1 << 20).withConcurrency(2);
    // Each request waits 400 ms before its first byte: one connection delivers ~0.6 MB/s, so half
    // a second of it is less than two ranges.
    try (ArtifactSource slow =
            new ForwardingArtifactSource(FileSource.open(tmp, PathFilter.all())) {
              @Override
              public InputStream openRange(SourceFile file, long offset, long length)
                  throws SourceException {
                try {
                  Thread.sleep(400);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
                return delegate().openRange(file, offset, length);
              }
            };
        Scripted source = new Scripted(slow)) {
      SourceFile file = source.list().get(0);
      HeapRangeSink sink = new HeapRangeSink();
      ReadResult r =
          new ParallelRangeReader(options)
              .readRanges(
                  source, planned(file, 256 << 10), sink, ReadProgressListener.NONE, null, true);
      assertThat(sink.bytes("s.bin")).isEqualTo(content);
      assertThat(r.requests()).isEqualTo(8);
      assertThat(source.opened).allSatisfy(o -> assertThat(length(o)).isEqualTo(256L << 10));
    }
  }

  @Test
  void aMergedRequestCutAfterEachRangesWorthGoesOnWithTheAttemptsEachRangeWouldHave()
      throws Exception {
    byte[] content = new byte[8 << 20];
    new java.util.Random(9).nextBytes(content);
    Files.write(tmp.resolve("c.bin"), content);
    // Two attempts per range; every response ends after 300 KiB: a planned 256 KiB range still
    // completes in one, and a merged one brings more than a range's bytes with each attempt.
    ReadOptions options =
        FAST.withRangeSize(256 << 10)
            .withMaxRangeSize(1 << 20)
            .withConcurrency(2)
            .withMaxAttempts(2);
    try (Scripted source = new Scripted(FileSource.open(tmp, PathFilter.all()))) {
      SourceFile file = source.list().get(0);
      source.cutFirstStreamsAfter(Integer.MAX_VALUE, 300 << 10);
      HeapRangeSink sink = new HeapRangeSink();
      ReadResult r =
          new ParallelRangeReader(options)
              .readRanges(
                  source, planned(file, 256 << 10), sink, ReadProgressListener.NONE, null, true);

      assertThat(sink.bytes("c.bin")).isEqualTo(content);
      assertThat(source.opened).anySatisfy(o -> assertThat(length(o)).isGreaterThan(300L << 10));
      assertThat(r.retries()).isPositive();
    }
  }

  @Test
  void mergingStopsAtTheEndOfAFileAndAtARangeNotPlanned() throws Exception {
    byte[] a = new byte[4 << 20];
    byte[] b = new byte[4 << 20];
    new java.util.Random(10).nextBytes(a);
    new java.util.Random(11).nextBytes(b);
    Files.write(tmp.resolve("a.bin"), a);
    Files.write(tmp.resolve("b.bin"), b);
    int range = 256 << 10;
    long gap = 5L * range; // a's sixth range is not asked for (an earlier load kept it)
    try (Scripted source = new Scripted(FileSource.open(tmp, PathFilter.all()))) {
      List<SourceFile> files = source.list();
      List<ParallelRangeReader.FileRange> ranges = new java.util.ArrayList<>();
      for (SourceFile f : files) {
        planned(f, range).stream()
            .filter(x -> !(f.path().equals("a.bin") && x.offset() == gap))
            .forEach(ranges::add);
      }
      HeapRangeSink sink = new HeapRangeSink();
      ReadResult r =
          new ParallelRangeReader(
                  FAST.withRangeSize(range).withMaxRangeSize(4 * range).withConcurrency(2))
              .readRanges(source, ranges, sink, ReadProgressListener.NONE, null, true);

      assertThat(r.requests()).isLessThan(ranges.size());
      for (String o : source.opened) {
        String path = o.substring(0, o.indexOf('@'));
        long offset = Long.parseLong(o.substring(o.indexOf('@') + 1, o.indexOf('+')));
        long end = offset + length(o);
        assertThat(end).as(o).isLessThanOrEqualTo(4L << 20);
        if (path.equals("a.bin")) {
          assertThat(offset >= gap + range || end <= gap).as(o).isTrue();
        }
      }
      assertThat(sink.completedBytes()).isEqualTo(8L * (1 << 20) - range);
    }
  }

  private static List<ParallelRangeReader.FileRange> planned(SourceFile file, int size) {
    List<ParallelRangeReader.FileRange> out = new java.util.ArrayList<>();
    for (long at = 0; at < file.size(); at += size) {
      out.add(new ParallelRangeReader.FileRange(file, at, (int) Math.min(size, file.size() - at)));
    }
    return out;
  }

  /** The length of a request recorded by {@link Scripted} as {@code path@offset+length}. */
  private static long length(String opened) {
    return Long.parseLong(opened.substring(opened.indexOf('+') + 1));
  }

  @Test
  void zeroLengthFilesProduceNoRequests() throws Exception {
    Files.write(tmp.resolve("empty.safetensors"), new byte[0]);
    Files.write(tmp.resolve("one.bin"), new byte[] {42});
    try (Scripted source = new Scripted(FileSource.open(tmp, PathFilter.all()))) {
      List<SourceFile> files = source.list();
      assertThat(files).extracting(SourceFile::size).containsExactly(0L, 1L);
      HeapRangeSink sink = new HeapRangeSink();
      ReadResult result =
          new ParallelRangeReader(FAST).read(source, files, sink, ReadProgressListener.NONE);
      assertThat(source.opened).containsExactly("one.bin@0+1");
      assertThat(result.files()).isEqualTo(1);
      assertThat(sink.bytes("one.bin")).containsExactly(42);
      assertThat(sink.completed()).containsExactly(new HeapRangeSink.Completed("one.bin", 0, 1));
    }
  }

  @Test
  void noFilesNoWork() throws Exception {
    try (FileSource source = FileSource.open(tmp, PathFilter.all())) {
      ReadResult result =
          new ParallelRangeReader(FAST)
              .read(source, List.of(), new HeapRangeSink(), ReadProgressListener.NONE);
      assertThat(result.ranges()).isZero();
      assertThat(result.requests()).isZero();
    }
  }

  @Test
  void aBodyCutShortIsResumedAtTheFirstMissingByte() throws Exception {
    Path corpus = Corpus.dir().resolve("safetensors");
    String name = "connect4-ai__candle_varmap.safetensors"; // 57316 bytes
    try (Scripted source =
        new Scripted(FileSource.open(corpus, PathFilter.of(List.of(name), List.of())))) {
      SourceFile file = source.list().get(0);
      source.cutFirstStreamsAfter(2, 5000);
      HeapRangeSink sink = new HeapRangeSink();
      RecordingProgressListener progress = new RecordingProgressListener();
      ReadResult result =
          new ParallelRangeReader(FAST.withRangeSize(20000).withConcurrency(1))
              .read(source, List.of(file), sink, progress);

      assertThat(sink.bytes(name)).isEqualTo(Files.readAllBytes(corpus.resolve(name)));
      // range [0,20000) was cut at 5000, resumed at 5000, cut again at 10000, resumed at 10000
      assertThat(source.opened)
          .containsExactly(
              name + "@0+20000",
              name + "@5000+15000",
              name + "@10000+10000",
              name + "@20000+20000",
              name + "@40000+17316");
      assertThat(result.retries()).isEqualTo(2);
      assertThat(progress.retries())
          .extracting(ReadProgressListener.RetryEvent::resumeAt)
          .containsExactly(5000L, 10000L);
      assertThat(progress.retries().get(0).cause()).hasMessageContaining("ended after 5000");
      assertThat(progress.bytes()).isEqualTo(file.size());
      assertThat(progress.overlaps()).isEmpty();
    }
  }

  @Test
  void retryableSourceErrorsAreRetriedNonRetryableFailAtOnce() throws Exception {
    Files.write(tmp.resolve("a.bin"), new byte[] {1, 2, 3});
    try (Scripted source = new Scripted(FileSource.open(tmp, PathFilter.all()))) {
      List<SourceFile> files = source.list();
      source.failNextOpens(2, new SourceException(Reason.Throttled, "slow down", true));
      HeapRangeSink sink = new HeapRangeSink();
      ReadResult ok =
          new ParallelRangeReader(FAST).read(source, files, sink, ReadProgressListener.NONE);
      assertThat(ok.requests()).isEqualTo(3);
      assertThat(sink.bytes("a.bin")).containsExactly(1, 2, 3);

      source.failNextOpens(1, new SourceException(Reason.ObjectChanged, "etag differs", false));
      assertThatThrownBy(
              () ->
                  new ParallelRangeReader(FAST)
                      .read(source, files, new HeapRangeSink(), ReadProgressListener.NONE))
          .isInstanceOfSatisfying(
              RangeReadException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.ObjectChanged);
                assertThat(e.attempts()).isEqualTo(1);
                assertThat(e.attemptsExhausted()).isFalse();
              })
          .hasMessageContaining("bytes [0, 3) of a.bin")
          .hasMessageContaining("last cause: ObjectChanged: etag differs");
    }
  }

  /**
   * Refusals as {@code Throttled} do not count against the attempts: a range refused ten times in a
   * row, then failing twice with HTTP 500, is read on its 13th request with 3 attempts allowed; the
   * third 500 would have failed it.
   */
  @Test
  void throttledRefusalsUseUpNoAttemptOtherFailuresDo() throws Exception {
    Files.write(tmp.resolve("a.bin"), new byte[] {1, 2, 3});
    try (Scripted source = new Scripted(FileSource.open(tmp, PathFilter.all()))) {
      List<SourceFile> files = source.list();
      SourceException throttled =
          new SourceException(Reason.Throttled, "HTTP 429 SlowDown", true, null, null);
      SourceException down = new SourceException(Reason.SourceUnavailable, "HTTP 500", true);
      for (int i = 0; i < 10; i++) {
        source.script.add(throttled);
      }
      source.script.add(down);
      source.script.add(down);
      HeapRangeSink sink = new HeapRangeSink();
      ReadOptions three = FAST.withMaxAttempts(3).withConcurrency(1);
      ReadResult ok =
          new ParallelRangeReader(three).read(source, files, sink, ReadProgressListener.NONE);
      assertThat(ok.requests()).isEqualTo(13);
      assertThat(ok.retries()).isEqualTo(12);
      assertThat(sink.bytes("a.bin")).containsExactly(1, 2, 3);

      source.script.add(throttled);
      source.script.add(down);
      source.script.add(throttled);
      source.script.add(down);
      source.script.add(down);
      assertThatThrownBy(
              () ->
                  new ParallelRangeReader(three)
                      .read(source, files, new HeapRangeSink(), ReadProgressListener.NONE))
          .isInstanceOfSatisfying(
              RangeReadException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.SourceUnavailable);
                assertThat(e.attempts()).isEqualTo(3);
                assertThat(e.attemptsExhausted()).isTrue();
              })
          .hasMessageContaining("failed after all 3 attempts")
          .hasMessageContaining("last cause: SourceUnavailable: HTTP 500");
    }
  }

  @Test
  void exhaustedAttemptsFailNamingFileRangeAttemptsAndCause() throws Exception {
    Files.write(tmp.resolve("w.bin"), new byte[300]);
    try (Scripted source = new Scripted(FileSource.open(tmp, PathFilter.all()))) {
      List<SourceFile> files = source.list();
      source.failNextOpens(1000, new SourceException(Reason.SourceUnavailable, "HTTP 500", true));
      HeapRangeSink sink = new HeapRangeSink();
      assertThatThrownBy(
              () ->
                  new ParallelRangeReader(
                          FAST.withMaxAttempts(3).withRangeSize(100).withConcurrency(1))
                      .read(source, files, sink, ReadProgressListener.NONE))
          .isInstanceOfSatisfying(
              RangeReadException.class,
              e -> {
                assertThat(e.reason()).isEqualTo(Reason.SourceUnavailable);
                assertThat(e.attempts()).isEqualTo(3);
                assertThat(e.attemptsExhausted()).isTrue();
                assertThat(e.file().path()).isEqualTo("w.bin");
                assertThat(e.offset()).isZero();
              })
          .hasMessage(
              "reading bytes [0, 100) of w.bin (300 bytes; range 1 of 3) from "
                  + source.describe()
                  + " failed after all 3 attempts (0 of 100 bytes received); last cause:"
                  + " SourceUnavailable: HTTP 500");
      assertThat(source.opened).hasSize(3); // the failure stopped the other ranges
      assertThat(sink.completed()).isEmpty();
    }
  }

  @Test
  void aFatalErrorCancelsRequestsInFlightPromptly() throws Exception {
    Files.write(tmp.resolve("a-slow.bin"), new byte[10]);
    Files.write(tmp.resolve("b-bad.bin"), new byte[10]);
    try (Scripted source = new Scripted(FileSource.open(tmp, PathFilter.all()))) {
      List<SourceFile> files = source.list();
      CountDownLatch slowOpened = new CountDownLatch(1);
      CountDownLatch slowClosed = new CountDownLatch(1);
      source.hang("a-slow.bin", slowOpened, slowClosed);
      source.failPath(
          "b-bad.bin", slowOpened, new SourceException(Reason.AccessDenied, "403", false));
      RangeReadException e =
          assertTimeoutPreemptively(
              Duration.ofSeconds(20),
              () -> {
                try {
                  new ParallelRangeReader(FAST.withConcurrency(2))
                      .read(source, files, new HeapRangeSink(), ReadProgressListener.NONE);
                  throw new AssertionError("read should fail");
                } catch (RangeReadException expected) {
                  return expected;
                }
              });
      assertThat(e.reason()).isEqualTo(Reason.AccessDenied);
      assertThat(e.file().path()).isEqualTo("b-bad.bin");
      assertThat(slowClosed.await(0, TimeUnit.SECONDS)).as("hung request was closed").isTrue();
    }
  }

  @Test
  void stagingBeyondTheBudgetIsRefusedWithTheNumbers() {
    ReadOptions tooBig =
        ReadOptions.DEFAULTS.withConcurrency(64).withStagingBufferSize(2 * ReadOptions.MIB);
    assertThatThrownBy(() -> new ParallelRangeReader(tooBig))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "staging buffers need concurrency 64 × stagingBufferSize 2097152 B = 134217728 B,"
                + " over the stagingBudget of 67108864 B; lower concurrency or stagingBufferSize,"
                + " or raise stagingBudget");
    assertThatThrownBy(() -> ReadOptions.DEFAULTS.withConcurrency(0))
        .hasMessageContaining("concurrency must be between 1 and 1024, got 0");
  }

  @Test
  void aSinkBufferOfTheWrongSizeFailsTheRead() throws Exception {
    Files.write(tmp.resolve("a.bin"), new byte[] {1, 2, 3});
    try (FileSource source = FileSource.open(tmp, PathFilter.all())) {
      RangeSink wrong =
          new RangeSink() {
            @Override
            public ByteBuffer target(SourceFile file, long offset, int length) {
              return ByteBuffer.allocate(length + 1);
            }

            @Override
            public void rangeCompleted(SourceFile file, long offset, int length) {
              throw new AssertionError("must not complete");
            }
          };
      assertThatThrownBy(
              () ->
                  new ParallelRangeReader(FAST)
                      .read(source, source.list(), wrong, ReadProgressListener.NONE))
          .isInstanceOfSatisfying(
              RangeReadException.class, e -> assertThat(e.reason()).isEqualTo(Reason.SinkFailed))
          .hasMessageContaining(
              "a buffer with 4 bytes remaining instead of a writable one with exactly 3");
    }
  }

  @Test
  void aSinkWriterTakesEveryByteInOrderAndAStoreThatCannotTakeThemFailsTheReadAtOnce()
      throws Exception {
    byte[] data = new byte[100_000];
    new java.util.Random(5).nextBytes(data);
    Files.write(tmp.resolve("a.bin"), data);
    ReadOptions opts = FAST.withRangeSize(30_000).withStagingBufferSize(8192);
    try (FileSource source = FileSource.open(tmp, PathFilter.all())) {
      byte[] got = new byte[data.length];
      List<String> closed = new CopyOnWriteArrayList<>();
      RangeSink writing =
          new RangeSink() {
            @Override
            public ByteBuffer target(SourceFile file, long offset, int length) {
              throw new AssertionError("a sink with a writer is not asked for a buffer");
            }

            @Override
            public RangeSink.Writer writer(SourceFile file, long offset, int length) {
              return new RangeSink.Writer() {
                int at = (int) offset;

                @Override
                public void write(byte[] b, int off, int len) {
                  System.arraycopy(b, off, got, at, len);
                  at += len;
                }

                @Override
                public void close() {
                  closed.add(offset + "+" + (at - offset));
                }
              };
            }

            @Override
            public void rangeCompleted(SourceFile file, long offset, int length) {}
          };
      new ParallelRangeReader(opts).read(source, source.list(), writing, ReadProgressListener.NONE);
      assertThat(got).isEqualTo(data);
      assertThat(closed)
          .containsExactlyInAnyOrder("0+30000", "30000+30000", "60000+30000", "90000+10000");

      AtomicInteger writes = new AtomicInteger();
      RangeSink full =
          new RangeSink() {
            @Override
            public ByteBuffer target(SourceFile file, long offset, int length) {
              throw new AssertionError("a sink with a writer is not asked for a buffer");
            }

            @Override
            public RangeSink.Writer writer(SourceFile file, long offset, int length) {
              return new RangeSink.Writer() {
                @Override
                public void write(byte[] b, int off, int len) {
                  writes.incrementAndGet();
                  throw new io.tensorcast.dataplane.store.StoreWriteException(
                      Reason.FilesystemFull, "the store's file system is full");
                }

                @Override
                public void close() {}
              };
            }

            @Override
            public void rangeCompleted(SourceFile file, long offset, int length) {
              throw new AssertionError("must not complete");
            }
          };
      assertThatThrownBy(
              () ->
                  new ParallelRangeReader(opts.withConcurrency(1))
                      .read(source, source.list(), full, ReadProgressListener.NONE))
          .isInstanceOfSatisfying(
              RangeReadException.class,
              e -> assertThat(e.reason()).isEqualTo(Reason.FilesystemFull))
          .hasMessageContaining("the store could not take the bytes")
          .hasMessageContaining("the store's file system is full");
      assertThat(writes.get()).as("not retried: the store, not the source, failed").isEqualTo(1);
    }
  }

  /** A real source with faults and a log of every range opened ("path@offset+length"). */
  private static final class Scripted extends ForwardingArtifactSource {
    final List<String> opened = new CopyOnWriteArrayList<>();
    final AtomicInteger cutsLeft = new AtomicInteger();
    volatile long cutAfter;
    final AtomicInteger failuresLeft = new AtomicInteger();
    volatile SourceException failure;
    volatile String hangPath;
    volatile CountDownLatch hangOpened;
    volatile CountDownLatch hangClosed;
    volatile String failPath;
    volatile CountDownLatch failAfter;
    volatile SourceException failPathWith;
    final java.util.Queue<SourceException> script =
        new java.util.concurrent.ConcurrentLinkedQueue<>();

    Scripted(ArtifactSource delegate) {
      super(delegate);
    }

    void cutFirstStreamsAfter(int streams, long bytes) {
      cutAfter = bytes;
      cutsLeft.set(streams);
    }

    void failNextOpens(int count, SourceException e) {
      failure = e;
      failuresLeft.set(count);
    }

    void hang(String path, CountDownLatch opened, CountDownLatch closed) {
      hangPath = path;
      hangOpened = opened;
      hangClosed = closed;
    }

    void failPath(String path, CountDownLatch after, SourceException e) {
      failPath = path;
      failAfter = after;
      failPathWith = e;
    }

    @Override
    public InputStream openRange(SourceFile file, long offset, long length) throws SourceException {
      opened.add(file.path() + "@" + offset + "+" + length);
      SourceException scripted = script.poll();
      if (scripted != null) {
        throw scripted;
      }
      if (failuresLeft.getAndDecrement() > 0) {
        throw failure;
      }
      if (file.path().equals(failPath)) {
        try {
          failAfter.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        throw failPathWith;
      }
      InputStream in = delegate().openRange(file, offset, length);
      if (file.path().equals(hangPath)) {
        hangOpened.countDown();
        return new InputStream() {
          @Override
          public int read() throws IOException {
            try {
              hangClosed.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            throw new IOException("stream closed");
          }

          @Override
          public void close() throws IOException {
            hangClosed.countDown();
            in.close();
          }
        };
      }
      if (cutsLeft.getAndDecrement() > 0) {
        long limit = cutAfter;
        return new FilterInputStream(in) {
          long left = limit;

          @Override
          public int read(byte[] b, int off, int len) throws IOException {
            if (left <= 0) {
              return -1;
            }
            int n = super.read(b, off, (int) Math.min(len, left));
            if (n > 0) {
              left -= n;
            }
            return n;
          }
        };
      }
      return in;
    }
  }
}
