package io.tensorcast.dataplane.load;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.Backoff;
import io.tensorcast.dataplane.source.ConcurrencyLimiter;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceFile;
import io.tensorcast.dataplane.store.StoreWriteException;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;

/**
 * The data path from a source into memory: cuts files into ranges and reads them with ranged
 * requests, at most {@link ReadOptions#concurrency()} in flight, into the buffers a {@link
 * RangeSink} hands out.
 *
 * <p>How many of those are in flight is decided by a {@link ConcurrencyLimiter} per read: with
 * {@link ReadOptions#adaptiveConcurrency()} it starts at 4 and follows what the origin delivers
 * (grows while more requests bring more bytes, drops by one per {@code Throttled} refusal),
 * otherwise it is the fixed {@code concurrency}.
 *
 * <ul>
 *   <li>Ranges are {@link ReadOptions#rangeSize()} bytes (the last one of a file shorter), taken in
 *       file order then offset order by a fixed pool of {@code min(concurrency, ranges)} workers;
 *       each worker has at most one request open. Zero-length files need no request and are not
 *       shown to the sink.
 *   <li>A read that may merge ranges ({@link #readRanges(ArtifactSource, List, RangeSink,
 *       ReadProgressListener, ThrottleGate, boolean)}: the loader's, whose sink takes any range)
 *       asks for the ranges after the one a worker takes in the same request while they follow it
 *       in the same file, the request stays within {@link ReadOptions#maxRangeSize()} and within
 *       what one connection delivered in {@link #MERGED_REQUEST_NANOS} at the rate its requests
 *       have shown so far, and at least as many planned ranges as workers are left after it. Each
 *       request costs the client and the origin some CPU of its own: against a fast origin fewer,
 *       larger requests; against one whose connections are slow the ranges stay as planned, and so
 *       does the last wave of every read, so the last requests end within about half a second of
 *       one another. A merged request that fails after a planned range's bytes starts the rest with
 *       a fresh count of {@link ReadOptions#maxAttempts()}, as that range's successor would.
 *   <li>Bytes pass from the response stream through the worker's staging buffer ({@link
 *       ReadOptions#stagingBufferSize()}) into the sink's buffer, or into the sink's {@link
 *       RangeSink.Writer} when it has one (the data plane's store: positional writes to the file);
 *       a sink that cannot take bytes fails the read at once, without a retry. The staging heap of
 *       one read is {@code concurrency × stagingBufferSize}, checked against {@link
 *       ReadOptions#stagingBudget()} when the reader is constructed.
 *   <li>An I/O error, a body that ends early or a retryable {@link SourceException} is retried
 *       after the data plane's {@link Backoff} (exponential with jitter, never shorter than a
 *       server's {@code Retry-After}; a range whose server asks to wait longer than the cap is
 *       failed at once, as {@code Throttled} or {@code SourceUnavailable}, for the load to wait).
 *       The retry <em>resumes</em>: it asks only for the bytes from the first one not yet received,
 *       and bytes already in the sink are neither requested nor reported again.
 *   <li>A refusal as {@code Throttled} (HTTP 429, {@code 503 SlowDown}) is paced for the whole
 *       read, not per range: it does not use up one of the range's attempts nor grow its back-off;
 *       it closes the read's {@link ThrottleGate} (the load's, shared with its metadata requests
 *       and every other read of the load, when one is passed), and no worker sends a new request
 *       before the server's {@code Retry-After} instant (without one, before a jittered back-off
 *       that doubles only while refusals follow one another and starts again at the base after an
 *       admitted request). The adaptive limiter drops by one on the refusal as well, and does not
 *       judge the windows its permits spend waiting at the gate. Once the read has been held back
 *       by throttling for longer than {@link ReadOptions#throttleBudget()} in total it fails as
 *       {@code Throttled}, saying so.
 *   <li>A non-retryable error, a range that used up {@link ReadOptions#maxAttempts()}, or a sink or
 *       listener failure fails the whole read: no new range starts, open requests are closed,
 *       back-offs end at once, and {@link #read} throws a {@link RangeReadException} naming the
 *       file, range, attempts and last cause. Complete ranges are reported to the sink, and so is
 *       the received part of a range that stopped early (as a shorter range at the same offset), so
 *       that a later read can resume after it.
 * </ul>
 *
 * <p>A reader holds only its options; each {@link #read} call has its own workers and state, so one
 * reader may serve concurrent reads.
 */
public final class ParallelRangeReader {
  /**
   * The longest a merged request should take at the rate one connection has shown: a request is
   * merged from planned ranges only up to what that rate delivers in this time.
   */
  static final long MERGED_REQUEST_NANOS = 500_000_000L;

  /** Only requests of at least this many bytes (or a planned range) measure a connection's rate. */
  private static final long RATE_SAMPLE_MIN_BYTES = 1 << 20;

  /** How long a finished or cancelled read waits for its workers to stop. */
  private static final long WORKER_STOP_TIMEOUT_SECONDS = 10;

  private final ReadOptions options;
  private final Backoff backoff;

  /**
   * @throws IllegalArgumentException when the staging buffers exceed the budget, with the numbers
   */
  public ParallelRangeReader(ReadOptions options) {
    this.options = Objects.requireNonNull(options, "options");
    this.backoff = new Backoff(options.backoffBase(), options.backoffCap());
    options.requireStagingWithinBudget();
  }

  public ReadOptions options() {
    return options;
  }

  /**
   * Reads every byte of {@code files} from {@code source} into {@code sink}; returns when all
   * ranges are complete or the read has failed and every worker has stopped.
   *
   * @param files files as the source listed them (each path once)
   * @throws RangeReadException when a range cannot be read (see class comment)
   * @throws InterruptedException when the calling thread is interrupted; the read is cancelled
   *     first
   */
  public ReadResult read(
      ArtifactSource source, List<SourceFile> files, RangeSink sink, ReadProgressListener listener)
      throws RangeReadException, InterruptedException {
    Objects.requireNonNull(source, "source");
    Objects.requireNonNull(sink, "sink");
    Objects.requireNonNull(listener, "listener");
    return read(source, files, sink, listener, null);
  }

  /**
   * {@link #read(ArtifactSource, List, RangeSink, ReadProgressListener)} paced by the load's
   * throttling {@code gate} (shared with its other requests), or by one of its own when null.
   */
  public ReadResult read(
      ArtifactSource source,
      List<SourceFile> files,
      RangeSink sink,
      ReadProgressListener listener,
      ThrottleGate gate)
      throws RangeReadException, InterruptedException {
    Objects.requireNonNull(source, "source");
    Objects.requireNonNull(sink, "sink");
    Objects.requireNonNull(listener, "listener");
    return new Run(source, plan(files), sink, listener, gate, false).execute();
  }

  /**
   * One explicit range for {@link #readRanges}.
   *
   * @param file the source file
   * @param offset first byte, {@code >= 0}
   * @param length bytes, {@code 1 <= length}, within the file
   */
  public record FileRange(SourceFile file, long offset, int length) {
    public FileRange {
      Objects.requireNonNull(file, "file");
      if (offset < 0 || length < 1 || offset + length > file.size()) {
        throw new IllegalArgumentException(
            "range ["
                + offset
                + ", "
                + (offset + length)
                + ") is not inside "
                + file.path()
                + " ("
                + file.size()
                + " bytes)");
      }
    }
  }

  /**
   * Reads exactly the given ranges (any length, not cut at {@link ReadOptions#rangeSize()}), in the
   * given order, with the same workers, retries and resumption as {@link #read}; the sink gets one
   * buffer per range.
   *
   * @throws RangeReadException when a range cannot be read
   * @throws InterruptedException when the calling thread is interrupted
   */
  public ReadResult readRanges(
      ArtifactSource source, List<FileRange> ranges, RangeSink sink, ReadProgressListener listener)
      throws RangeReadException, InterruptedException {
    return readRanges(source, ranges, sink, listener, null);
  }

  /**
   * {@link #readRanges(ArtifactSource, List, RangeSink, ReadProgressListener)} paced by the load's
   * throttling {@code gate} (shared with its other requests), or by one of its own when null.
   */
  public ReadResult readRanges(
      ArtifactSource source,
      List<FileRange> ranges,
      RangeSink sink,
      ReadProgressListener listener,
      ThrottleGate gate)
      throws RangeReadException, InterruptedException {
    return readRanges(source, ranges, sink, listener, gate, false);
  }

  /**
   * {@link #readRanges(ArtifactSource, List, RangeSink, ReadProgressListener, ThrottleGate)} that,
   * with {@code mergeAdjacent}, may ask for adjacent ranges of a file in one request (see the class
   * comment): the sink then gets one writer or buffer, and one completion, per request rather than
   * per planned range. Only for a sink that takes any range of a file, not just the planned ones.
   */
  public ReadResult readRanges(
      ArtifactSource source,
      List<FileRange> ranges,
      RangeSink sink,
      ReadProgressListener listener,
      ThrottleGate gate,
      boolean mergeAdjacent)
      throws RangeReadException, InterruptedException {
    Objects.requireNonNull(source, "source");
    Objects.requireNonNull(sink, "sink");
    Objects.requireNonNull(listener, "listener");
    java.util.Map<String, Long> counts = new java.util.HashMap<>();
    ranges.forEach(r -> counts.merge(r.file().path(), 1L, Long::sum));
    java.util.Map<String, Long> seen = new java.util.HashMap<>();
    List<Range> planned = new ArrayList<>(ranges.size());
    for (FileRange r : ranges) {
      long i = seen.merge(r.file().path(), 1L, Long::sum) - 1;
      planned.add(new Range(r.file(), r.offset(), r.length(), i, counts.get(r.file().path())));
    }
    return new Run(source, planned, sink, listener, gate, mergeAdjacent).execute();
  }

  /** Where a worker puts a range's bytes: the sink's buffer or its writer. */
  private interface Output {
    void write(byte[] b, int off, int len);
  }

  /** One range to read: the file's planned range {@code index} and the {@code merged} after it. */
  private record Range(
      SourceFile file, long offset, int length, long index, long count, long merged) {
    Range(SourceFile file, long offset, int length, long index, long count) {
      this(file, offset, length, index, count, 0);
    }

    String describe() {
      return "bytes ["
          + offset
          + ", "
          + (offset + length)
          + ") of "
          + file.path()
          + " ("
          + file.size()
          + " bytes; range "
          + (index + 1)
          + (merged > 0 ? " to " + (index + 1 + merged) : "")
          + " of "
          + count
          + ")";
    }
  }

  private List<Range> plan(List<SourceFile> files) {
    Set<String> seen = new HashSet<>();
    List<Range> ranges = new ArrayList<>();
    long rangeSize = options.rangeSize();
    for (SourceFile file : files) {
      if (!seen.add(file.path())) {
        throw new IllegalArgumentException("file " + file.path() + " is listed twice");
      }
      long count = (file.size() + rangeSize - 1) / rangeSize;
      for (long i = 0; i < count; i++) {
        long offset = i * rangeSize;
        int length = (int) Math.min(rangeSize, file.size() - offset);
        ranges.add(new Range(file, offset, length, i, count));
      }
    }
    return ranges;
  }

  /** The state of one read. */
  private final class Run {
    private final ArtifactSource source;
    private final List<Range> ranges;
    private final RangeSink sink;
    private final ReadProgressListener listener;
    private final boolean mergeAdjacent;
    private int next; // the next planned range to take; guarded by this
    private volatile double connectionRate; // bytes/s of one connection's requests, 0 before one
    private final AtomicReference<RangeReadException> failure = new AtomicReference<>();
    private final CountDownLatch cancelled = new CountDownLatch(1);
    private final List<Worker> workers = new ArrayList<>();
    private final LongAdder bytes = new LongAdder();
    private final LongAdder requests = new LongAdder();
    private final LongAdder retries = new LongAdder();
    private ConcurrencyLimiter limiter = ConcurrencyLimiter.fixed(1);
    private final ThrottleGate gate;

    Run(
        ArtifactSource source,
        List<Range> ranges,
        RangeSink sink,
        ReadProgressListener listener,
        ThrottleGate gate,
        boolean mergeAdjacent) {
      this.mergeAdjacent = mergeAdjacent;
      this.gate = gate != null ? gate : new ThrottleGate(backoff, options.throttleBudget());
      this.source = source;
      this.ranges = ranges;
      this.sink = sink;
      this.listener = listener;
    }

    ReadResult execute() throws RangeReadException, InterruptedException {
      long started = System.nanoTime();
      int threads = Math.min(options.concurrency(), ranges.size());
      if (threads > 0) {
        limiter = ConcurrencyLimiter.of(options.adaptiveConcurrency(), threads);
        int staging = Math.min(options.stagingBufferSize(), options.rangeSize());
        for (int i = 0; i < threads; i++) {
          workers.add(new Worker(new byte[staging]));
        }
        String name = "tensorcast-range-" + Integer.toHexString(System.identityHashCode(this));
        AtomicInteger threadNumber = new AtomicInteger();
        ExecutorService pool =
            Executors.newFixedThreadPool(
                threads,
                r -> {
                  Thread t = new Thread(r, name + "-" + threadNumber.incrementAndGet());
                  t.setDaemon(true);
                  return t;
                });
        try {
          List<Future<?>> futures = new ArrayList<>();
          for (Worker worker : workers) {
            futures.add(pool.submit(worker::run));
          }
          for (Future<?> future : futures) {
            future.get();
          }
        } catch (InterruptedException e) {
          cancel();
          throw e;
        } catch (ExecutionException e) {
          // Workers catch everything; this is a bug in the reader itself.
          cancel();
          throw new IllegalStateException("range worker failed unexpectedly", e.getCause());
        } finally {
          pool.shutdownNow();
          awaitWorkers(pool);
        }
      }
      RangeReadException failed = failure.get();
      if (failed != null) {
        throw failed;
      }
      long fileCount = ranges.stream().map(Range::file).distinct().count();
      return new ReadResult(
          (int) fileCount,
          ranges.size(),
          bytes.sum(),
          requests.sum(),
          retries.sum(),
          Duration.ofNanos(System.nanoTime() - started));
    }

    boolean isCancelled() {
      return cancelled.getCount() == 0;
    }

    /**
     * The next planned range, merged with the ones after it where the class comment allows; null
     * when every range was taken.
     */
    synchronized Range take() {
      int i = next;
      if (i >= ranges.size()) {
        return null;
      }
      Range first = ranges.get(i);
      int j = i;
      long length = first.length();
      if (mergeAdjacent) {
        long limit =
            Math.min(options.maxRangeSize(), (long) (connectionRate * MERGED_REQUEST_NANOS / 1e9));
        while (j + 1 < ranges.size() - workers.size()) {
          Range n = ranges.get(j + 1);
          if (!n.file().path().equals(first.file().path())
              || n.offset() != first.offset() + length
              || length + n.length() > limit) {
            break;
          }
          j++;
          length += n.length();
        }
      }
      next = j + 1;
      return j == i
          ? first
          : new Range(
              first.file(), first.offset(), (int) length, first.index(), first.count(), j - i);
    }

    /** One request delivered {@code bytes} in {@code nanos}: the connections' rate follows it. */
    void measured(long bytes, long nanos) {
      if (bytes < Math.min(RATE_SAMPLE_MIN_BYTES, options.rangeSize()) || nanos <= 0) {
        return;
      }
      double rate = bytes * 1e9 / nanos;
      double before = connectionRate;
      connectionRate = before == 0 ? rate : (before + rate) / 2; // racy: an estimate
    }

    /** Records the first failure and stops everything else. */
    void fail(RangeReadException e) {
      if (failure.compareAndSet(null, e)) {
        cancel();
      }
    }

    void cancel() {
      cancelled.countDown();
      limiter.close();
      for (Worker worker : workers) {
        worker.abort();
      }
    }

    private final class Worker {
      private final byte[] staging;
      private final Object lock = new Object();
      private InputStream current;

      Worker(byte[] staging) {
        this.staging = staging;
      }

      void run() {
        try {
          while (!isCancelled()) {
            Range range = take();
            if (range == null) {
              return;
            }
            try {
              read(range);
            } catch (RuntimeException | Error e) {
              if (isCancelled()) {
                return;
              }
              throw failure(range, Reason.InternalError, "unexpected " + e, 0, -1, false, e);
            }
          }
        } catch (RangeReadException e) {
          fail(e);
        }
      }

      /** Closes the open request, if any, so a blocked read returns at once. */
      void abort() {
        InputStream in;
        synchronized (lock) {
          in = current;
          current = null;
        }
        closeQuietly(in);
      }

      private boolean open(InputStream in) {
        synchronized (lock) {
          if (isCancelled()) {
            return false;
          }
          current = in;
          return true;
        }
      }

      private void clearCurrent() {
        synchronized (lock) {
          current = null;
        }
      }

      private void read(Range r) throws RangeReadException {
        RangeSink.Writer writer;
        try {
          writer = sink.writer(r.file(), r.offset(), r.length());
        } catch (StoreWriteException e) {
          throw failure(r, e.reason(), "the store could not take the range", 0, 0, false, e);
        } catch (RuntimeException e) {
          throw failure(r, Reason.SinkFailed, "the sink failed to give a writer", 0, 0, false, e);
        }
        if (writer != null) {
          try (writer) {
            read(r, writer::write);
          } catch (StoreWriteException e) {
            // from close: the bytes written could not be mapped into the store (out of memory)
            throw failure(r, e.reason(), "the store could not take the range", 0, 0, false, e);
          }
          return;
        }
        ByteBuffer target;
        try {
          target = sink.target(r.file(), r.offset(), r.length());
        } catch (StoreWriteException e) {
          throw failure(r, e.reason(), "the store could not take the range", 0, 0, false, e);
        } catch (RuntimeException e) {
          throw failure(r, Reason.SinkFailed, "the sink failed to give a buffer", 0, 0, false, e);
        }
        if (target == null || target.isReadOnly() || target.remaining() != r.length()) {
          throw failure(
              r,
              Reason.SinkFailed,
              "the sink gave "
                  + (target == null
                      ? "no buffer"
                      : (target.isReadOnly() ? "a read-only buffer" : "a buffer")
                          + " with "
                          + target.remaining()
                          + " bytes remaining")
                  + " instead of a writable one with exactly "
                  + r.length(),
              0,
              0,
              false,
              null);
        }
        read(r, (b, off, len) -> target.put(b, off, len));
      }

      private void read(Range r, Output out) throws RangeReadException {
        long[] got = {0};
        boolean whole = false;
        try {
          whole = readInto(r, out, got);
        } finally {
          if (!whole) {
            keepPrefix(r, got[0]);
          }
        }
        if (whole) {
          sink.rangeCompleted(r.file(), r.offset(), r.length());
          listener.rangeCompleted(r.file(), r.offset(), r.length());
        }
      }

      /**
       * A range that stops early (failed, or the read was cancelled) leaves its first {@code
       * received} bytes in the sink's buffer: they are reported to the sink as a range of their
       * own, so a later read of the same file need not ask for them again.
       */
      private void keepPrefix(Range r, long received) {
        if (received <= 0) {
          return;
        }
        try {
          sink.rangeCompleted(r.file(), r.offset(), (int) received);
        } catch (RuntimeException ignored) {
          // Only an offer to a later read; the failure that stopped this one is what counts.
        }
      }

      /**
       * Reads the range with retries, keeping the count of bytes received in {@code got[0]}; true
       * when all of them were, false when the read was cancelled first.
       */
      private boolean readInto(Range r, Output out, long[] got) throws RangeReadException {
        long received = 0;
        int attempt = 0; // every request of this range, throttled ones included
        int failures = 0; // the requests that failed other than by throttling
        while (true) {
          if (isCancelled()) {
            return false;
          }
          attempt++;
          if (!limiter.acquireUnlessInterrupted()) {
            return false;
          }
          Throwable cause;
          InputStream in = null;
          boolean throttled = false;
          long receivedBefore = received;
          try {
            // Holding the permit: no request of this read goes out while throttling pauses it.
            if (!gate.await(cancelled, limiter)) {
              return false;
            }
            requests.increment();
            long requested = System.nanoTime();
            in = source.openRange(r.file(), r.offset() + received, r.length() - received);
            gate.admitted();
            if (!open(in)) {
              closeQuietly(in);
              return false;
            }
            while (received < r.length()) {
              int want = (int) Math.min(staging.length, r.length() - received);
              int n = in.read(staging, 0, want);
              if (n < 0) {
                break;
              }
              if (n == 0) {
                continue;
              }
              try {
                out.write(staging, 0, n);
              } catch (StoreWriteException e) {
                throw failure(
                    r,
                    e.reason(),
                    "the store could not take the bytes",
                    attempt,
                    received,
                    false,
                    e);
              } catch (RuntimeException e) {
                throw failure(
                    r,
                    Reason.SinkFailed,
                    "the sink failed to take the bytes",
                    attempt,
                    received,
                    false,
                    e);
              }
              long at = r.offset() + received;
              received += n;
              got[0] = received;
              bytes.add(n);
              limiter.delivered(n);
              listener.bytesDelivered(r.file(), at, n);
            }
            if (received == r.length()) {
              measured(received - receivedBefore, System.nanoTime() - requested);
              break;
            }
            cause =
                new EOFException(
                    "the response body ended after "
                        + (received)
                        + " of the range's "
                        + r.length()
                        + " bytes");
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
          } catch (SourceException e) {
            if (!e.retryable()) {
              throw failure(r, e.reason(), null, attempt, received, false, e);
            }
            throttled = e.reason() == Reason.Throttled;
            cause = e;
          } catch (IOException e) {
            if (isCancelled()) {
              return false;
            }
            cause = e;
          } finally {
            clearCurrent();
            closeQuietly(in);
            limiter.release(throttled);
          }
          Duration retryAfter = retryAfter(cause);
          Duration delay;
          if (throttled && backoff.honours(retryAfter)) {
            // Paced for the whole read by the gate; this range's attempts and back-off stay.
            delay = gate.refused(retryAfter);
            if (delay == null) {
              throw failure(r, Reason.Throttled, gate.exhausted(), attempt, received, false, cause);
            }
          } else {
            if (r.merged() > 0 && received - receivedBefore >= options.rangeSize()) {
              // A merged request that brought a planned range's bytes before it failed: that range
              // would have completed on its own, so the rest starts with its own attempts.
              failures = 0;
            }
            failures++;
            if (failures >= options.maxAttempts() || !backoff.honours(retryAfter)) {
              Reason reason =
                  cause instanceof SourceException se ? se.reason() : Reason.SourceUnavailable;
              boolean exhausted = failures >= options.maxAttempts();
              throw failure(
                  r,
                  reason,
                  exhausted
                      ? null
                      : "the source asked to wait "
                          + retryAfter
                          + " (Retry-After), longer than the back-off cap of "
                          + options.backoffCap(),
                  exhausted ? failures : attempt,
                  received,
                  exhausted,
                  cause);
            }
            delay = backoff.delay(failures, retryAfter);
          }
          retries.increment();
          listener.retrying(
              new ReadProgressListener.RetryEvent(
                  r.file(), r.offset(), r.length(), attempt, r.offset() + received, delay, cause));
          if (throttled) {
            continue; // the gate holds the next request back
          }
          try {
            if (cancelled.await(delay.toNanos(), TimeUnit.NANOSECONDS)) {
              return false;
            }
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
          }
        }
        return true;
      }

      private RangeReadException failure(
          Range r,
          Reason reason,
          String what,
          int attempts,
          long received,
          boolean exhausted,
          Throwable cause) {
        StringBuilder m = new StringBuilder("reading ").append(r.describe());
        m.append(" from ").append(source.describe()).append(" failed");
        if (attempts > 0) {
          m.append(exhausted ? " after all " : " at attempt ").append(attempts);
          if (exhausted) {
            m.append(" attempts");
          }
        }
        if (received >= 0) {
          m.append(" (").append(received).append(" of ").append(r.length());
          m.append(" bytes received)");
        }
        if (what != null) {
          m.append(": ").append(what);
        }
        if (cause != null) {
          m.append("; last cause: ");
          if (cause instanceof SourceException se) {
            m.append(se.reason()).append(": ");
          } else {
            m.append(cause.getClass().getSimpleName()).append(": ");
          }
          m.append(cause.getMessage());
        }
        return new RangeReadException(
            reason,
            m.toString(),
            r.file(),
            r.offset(),
            r.length(),
            attempts,
            received,
            exhausted,
            cause);
      }
    }
  }

  /**
   * Waits up to {@link #WORKER_STOP_TIMEOUT_SECONDS} for the workers to stop, through further
   * interrupts (a caller cancelling a read may interrupt repeatedly): a worker still running may
   * still be writing into the sink's buffers, which the caller frees once {@link #read} returns.
   * The thread's interrupt status is restored afterwards.
   */
  private static void awaitWorkers(ExecutorService pool) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WORKER_STOP_TIMEOUT_SECONDS);
    boolean interrupted = false;
    while (true) {
      long left = deadline - System.nanoTime();
      try {
        if (left <= 0 || pool.awaitTermination(left, TimeUnit.NANOSECONDS)) {
          break;
        }
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  private static Duration retryAfter(Throwable cause) {
    return cause instanceof SourceException se ? se.retryAfter().orElse(null) : null;
  }

  private static void closeQuietly(InputStream in) {
    if (in != null) {
      try {
        in.close();
      } catch (IOException | RuntimeException ignored) {
        // The request is being abandoned; its close failure changes nothing.
      }
    }
  }
}
