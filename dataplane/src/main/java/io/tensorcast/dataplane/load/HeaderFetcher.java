package io.tensorcast.dataplane.load;

import io.tensorcast.api.Reason;
import io.tensorcast.dataplane.format.safetensors.SafetensorsFormatException;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.format.safetensors.SafetensorsLimits;
import io.tensorcast.dataplane.format.torch.ByteSource;
import io.tensorcast.dataplane.format.torch.TorchCheckpoint;
import io.tensorcast.dataplane.format.torch.TorchCheckpointReader;
import io.tensorcast.dataplane.format.torch.TorchFormatException;
import io.tensorcast.dataplane.format.torch.TorchLimits;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.Backoff;
import io.tensorcast.dataplane.source.SourceFile;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

/**
 * Reads a safetensors file's header from a source without reading its data: one ranged read of the
 * 8-byte length prefix, one of the JSON header. Used to validate an artifact before any of it is
 * loaded, and by {@code dataplane inspect}.
 */
public final class HeaderFetcher {
  private HeaderFetcher() {}

  /**
   * @param limits bounds of the header parser (header bytes, tensors, rank)
   * @param maxAttempts attempts per ranged read (retryable source errors and short bodies); a read
   *     refused as {@code Throttled} is paced by a throttling gate of its own and waited out for up
   *     to {@link ThrottleWait#BUDGET}
   * @param onRetry called before each retry
   * @throws LoadFailure {@code InvalidSafetensors} naming the file and the rule it breaks, or the
   *     source's reason
   */
  public static SafetensorsHeader fetch(
      ArtifactSource source,
      SourceFile f,
      SafetensorsLimits limits,
      int maxAttempts,
      Runnable onRetry)
      throws LoadFailure {
    return fetch(source, f, limits, maxAttempts, onRetry, ownGate());
  }

  /**
   * {@link #fetch(ArtifactSource, SourceFile, SafetensorsLimits, int, Runnable)} paced by the
   * load's throttling {@code gate}, shared with its other requests.
   */
  public static SafetensorsHeader fetch(
      ArtifactSource source,
      SourceFile f,
      SafetensorsLimits limits,
      int maxAttempts,
      Runnable onRetry,
      ThrottleGate gate)
      throws LoadFailure {
    try {
      if (f.size() < 8) {
        // The parser names the rule for a file too short to hold the length prefix.
        return SafetensorsHeader.parse(
            f.path(),
            f.size(),
            read(source, f, 0, (int) f.size(), maxAttempts, onRetry, gate),
            limits);
      }
      long headerLen =
          SafetensorsHeader.readHeaderLength(
              f.path(), read(source, f, 0, 8, maxAttempts, onRetry, gate), f.size(), limits);
      byte[] json = read(source, f, 8, Math.toIntExact(headerLen), maxAttempts, onRetry, gate);
      return SafetensorsHeader.parse(f.path(), f.size(), json, limits);
    } catch (SafetensorsFormatException e) {
      throw new LoadFailure(Reason.InvalidSafetensors, e.getMessage(), e);
    }
  }

  /**
   * Whether {@code path} names a file validated as a torch checkpoint: {@code .pt} and {@code .pth}
   * always, {@code .bin} when its first bytes are a torch container's (a {@code .bin} may be any
   * binary, e.g. a tokenizer or GGML file, which is loaded unvalidated like other files).
   */
  public static boolean isTorchPath(String path) {
    String p = path.toLowerCase(Locale.ROOT);
    return p.endsWith(".pt") || p.endsWith(".pth") || p.endsWith(".bin");
  }

  /**
   * Reads and validates a torch checkpoint's structure (zip directory, local headers, pickle) from
   * a source with ranged reads, without reading its storages; refuses pickles that need code (see
   * {@link TorchCheckpointReader}).
   *
   * @return the checkpoint, or empty for a {@code .bin} that is not a torch container
   * @throws LoadFailure {@code InvalidTorchCheckpoint} naming the file, the rule and the refused
   *     global, or the source's reason
   */
  public static Optional<TorchCheckpoint> fetchTorch(
      ArtifactSource source, SourceFile f, TorchLimits limits, int maxAttempts, Runnable onRetry)
      throws LoadFailure {
    return fetchTorch(source, f, limits, maxAttempts, onRetry, ownGate());
  }

  /**
   * {@link #fetchTorch(ArtifactSource, SourceFile, TorchLimits, int, Runnable)} paced by the load's
   * throttling {@code gate}, shared with its other requests.
   */
  public static Optional<TorchCheckpoint> fetchTorch(
      ArtifactSource source,
      SourceFile f,
      TorchLimits limits,
      int maxAttempts,
      Runnable onRetry,
      ThrottleGate gate)
      throws LoadFailure {
    return readTorch(
        f,
        limits,
        new ByteSource() {
          @Override
          public long size() {
            return f.size();
          }

          @Override
          public void read(long offset, ByteBuffer dst) throws IOException {
            try {
              dst.put(
                  HeaderFetcher.read(
                      source, f, offset, dst.remaining(), maxAttempts, onRetry, gate));
            } catch (LoadFailure e) {
              throw new SourceReadFailed(e);
            }
          }
        });
  }

  /**
   * Reads a torch checkpoint's structure from {@code bytes} (e.g. the file's copy in the store).
   *
   * @see #fetchTorch
   */
  public static Optional<TorchCheckpoint> readTorch(
      SourceFile f, TorchLimits limits, ByteSource bytes) throws LoadFailure {
    try {
      if (f.path().toLowerCase(Locale.ROOT).endsWith(".bin")
          && !TorchCheckpointReader.looksLikeCheckpoint(
              bytes.read(0, (int) Math.min(16, f.size())))) {
        return Optional.empty();
      }
      return Optional.of(TorchCheckpointReader.read(f.path(), bytes, limits));
    } catch (TorchFormatException e) {
      for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
        if (c instanceof SourceReadFailed s) {
          throw s.failure; // the source failed under the zip library, not the format
        }
      }
      String hint =
          e.global().isEmpty()
              ? ""
              : "; only pickles torch.load(weights_only=True) accepts are loaded — if consumers do"
                  + " not need this file, leave it out with spec.source.exclude (CLI --exclude) '"
                  + f.path()
                  + "'";
      throw new LoadFailure(Reason.InvalidTorchCheckpoint, e.getMessage() + hint, e);
    } catch (SourceReadFailed e) {
      throw e.failure;
    } catch (IOException e) {
      throw new LoadFailure(Reason.SourceUnavailable, f.path() + ": " + e, e);
    }
  }

  /**
   * Reads a whole (small) file, e.g. an index, with one ranged read.
   *
   * @throws LoadFailure the source's reason after the attempts
   */
  public static byte[] fetchBytes(
      ArtifactSource source, SourceFile f, int maxAttempts, Runnable onRetry) throws LoadFailure {
    return fetchBytes(source, f, maxAttempts, onRetry, ownGate());
  }

  /**
   * {@link #fetchBytes(ArtifactSource, SourceFile, int, Runnable)} paced by the load's throttling
   * {@code gate}, shared with its other requests.
   */
  public static byte[] fetchBytes(
      ArtifactSource source, SourceFile f, int maxAttempts, Runnable onRetry, ThrottleGate gate)
      throws LoadFailure {
    if (f.size() == 0) {
      return new byte[0];
    }
    return read(source, f, 0, Math.toIntExact(f.size()), maxAttempts, onRetry, gate);
  }

  /** A gate for a request made outside a load, with the default back-off. */
  private static ThrottleGate ownGate() {
    return new ThrottleGate(
        new Backoff(ReadOptions.DEFAULTS.backoffBase(), ReadOptions.DEFAULTS.backoffCap()),
        ThrottleWait.BUDGET);
  }

  /** Carries a {@link LoadFailure} through the {@link ByteSource} interface. */
  private static final class SourceReadFailed extends IOException {
    private static final long serialVersionUID = 1L;
    private final transient LoadFailure failure;

    SourceReadFailed(LoadFailure failure) {
      super(failure.getMessage(), failure);
      this.failure = failure;
    }
  }

  /**
   * Reads exactly {@code length} bytes at {@code offset} with the one resumable range read of the
   * data plane ({@link ParallelRangeReader}): retried with its back-off, which honours the server's
   * {@code Retry-After}, and resumed after the last byte received; a refusal as throttled closes
   * {@code gate} (no request of the load goes out until it opens) and uses up no attempt, and a
   * read failed as throttled (a {@code Retry-After} above the back-off cap) is asked again once the
   * gate opens, until the gate's budget is spent.
   */
  private static byte[] read(
      ArtifactSource source,
      SourceFile f,
      long offset,
      int length,
      int maxAttempts,
      Runnable onRetry,
      ThrottleGate gate)
      throws LoadFailure {
    byte[] out = new byte[length];
    if (length == 0) {
      return out;
    }
    ReadOptions options =
        ReadOptions.DEFAULTS.withConcurrency(1).withMaxAttempts(maxAttempts).withRangeSize(length);
    RangeSink sink =
        new RangeSink() {
          @Override
          public ByteBuffer target(SourceFile file, long at, int n) {
            return ByteBuffer.wrap(out);
          }

          @Override
          public void rangeCompleted(SourceFile file, long at, int n) {}
        };
    ReadProgressListener listener =
        new ReadProgressListener() {
          @Override
          public void retrying(RetryEvent event) {
            onRetry.run();
          }
        };
    return ThrottleWait.call(
        gate,
        () -> {
          try {
            new ParallelRangeReader(options)
                .readRanges(
                    source,
                    List.of(new ParallelRangeReader.FileRange(f, offset, length)),
                    sink,
                    listener,
                    gate);
            return out;
          } catch (RangeReadException e) {
            throw new LoadFailure(e.reason(), f.path() + ": " + e.getMessage(), e);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new LoadFailure(Reason.Interrupted, "interrupted while reading a header", e);
          }
        },
        onRetry);
  }
}
