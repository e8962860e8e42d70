package io.tensorcast.dataplane.load;

import io.tensorcast.dataplane.format.safetensors.SafetensorsFormatException;
import io.tensorcast.dataplane.format.safetensors.SafetensorsHeader;
import io.tensorcast.dataplane.source.ArtifactSource;
import io.tensorcast.dataplane.source.SourceException;
import io.tensorcast.dataplane.source.SourceFile;
import java.io.IOException;
import java.io.InputStream;

/**
 * Reads a safetensors file's header from a source without reading its data: one ranged read of the
 * 8-byte length prefix, one of the JSON header. Used to validate an artifact before any of it is
 * loaded, and by {@code dataplane inspect}.
 */
public final class HeaderFetcher {
  private HeaderFetcher() {}

  /**
   * @param maxAttempts attempts per ranged read (retryable source errors and short bodies)
   * @param onRetry called before each retry
   * @throws LoadFailure {@code InvalidSafetensors} naming the file and the rule it breaks, or the
   *     source's reason
   */
  public static SafetensorsHeader fetch(
      ArtifactSource source, SourceFile f, int maxAttempts, Runnable onRetry) throws LoadFailure {
    try {
      if (f.size() < 8) {
        // The parser names the rule for a file too short to hold the length prefix.
        return SafetensorsHeader.parse(
            f.path(), f.size(), read(source, f, 0, (int) f.size(), maxAttempts, onRetry));
      }
      long headerLen =
          SafetensorsHeader.readHeaderLength(
              f.path(), read(source, f, 0, 8, maxAttempts, onRetry), f.size());
      byte[] json = read(source, f, 8, Math.toIntExact(headerLen), maxAttempts, onRetry);
      return SafetensorsHeader.parse(f.path(), f.size(), json);
    } catch (SafetensorsFormatException e) {
      throw new LoadFailure("InvalidSafetensors", e.getMessage(), e);
    }
  }

  private static byte[] read(
      ArtifactSource source,
      SourceFile f,
      long offset,
      int length,
      int maxAttempts,
      Runnable onRetry)
      throws LoadFailure {
    SourceException last = null;
    for (int attempt = 1; attempt <= maxAttempts; attempt++) {
      if (attempt > 1) {
        onRetry.run();
        backoff(attempt);
      }
      try (InputStream in = source.openRange(f, offset, length)) {
        byte[] b = in.readNBytes(length);
        if (b.length == length) {
          return b;
        }
        last =
            new SourceException(
                "TruncatedResponse",
                "got " + b.length + " of " + length + " bytes at offset " + offset,
                true);
      } catch (SourceException e) {
        if (!e.retryable()) {
          throw new LoadFailure(e.reason(), f.path() + ": " + e.getMessage(), e);
        }
        last = e;
      } catch (IOException e) {
        last = new SourceException("SourceUnavailable", e.toString(), true, e);
      }
    }
    throw new LoadFailure(
        last.reason(),
        f.path()
            + ": reading "
            + length
            + " bytes at offset "
            + offset
            + " failed after "
            + maxAttempts
            + " attempts: "
            + last.getMessage(),
        last);
  }

  private static void backoff(int attempt) throws LoadFailure {
    try {
      Thread.sleep(Math.min(5_000L, 100L << Math.min(attempt, 6)));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LoadFailure("Interrupted", "interrupted while reading a header", e);
    }
  }
}
