package io.tensorcast.dataplane.write;

/**
 * A put, reservation, seal or save was refused or failed. {@link #reason()} is CamelCase (for
 * statuses and conditions), {@link #status()} the HTTP status the write endpoint answers with; the
 * message names the version, the tensor or file, the rule broken and the numbers. Whatever a
 * refused request would have changed is left as it was.
 *
 * <p>Reasons: {@code BadRequest}, {@code InvalidName}, {@code InvalidTensor} (dtype, shape, name),
 * {@code SizeMismatch} (bytes received differ from dtype × shape), {@code MixedBatch} (parallelisms
 * and writer partitions, or with and without, in one batch), {@code InvalidParallelism} (a shard
 * that does not fit its declared parallelism), {@code LayoutConflict} (the version's layout, tp
 * size, scope axes or a tensor's manifest entry differ), {@code DuplicateTensor}, {@code
 * TensorExists} (a put of a name that is written; use upsert), {@code VersionExists}, {@code
 * NoSuchVersion}, {@code NoSuchReservation}, {@code Sealed} (immutable), {@code WritesInFlight},
 * {@code IncompleteRank}, {@code EmptyArtifact}, {@code DigestMismatch}, {@code TooManyVersions},
 * the store's reasons ({@code InsufficientMemory}, ...), and the save reasons of {@code
 * ArtifactSaver}.
 */
public class WriteException extends Exception {
  private static final long serialVersionUID = 1L;

  private final String reason;
  private final int status;

  public WriteException(int status, String reason, String message) {
    this(status, reason, message, null);
  }

  public WriteException(int status, String reason, String message, Throwable cause) {
    super(message, cause);
    this.status = status;
    this.reason = reason;
  }

  /** CamelCase reason. */
  public String reason() {
    return reason;
  }

  /** HTTP status: 400 malformed, 404 unknown, 409 conflicting with what is stored, 5xx failures. */
  public int status() {
    return status;
  }

  static WriteException bad(String reason, String message) {
    return new WriteException(400, reason, message);
  }

  static WriteException conflict(String reason, String message) {
    return new WriteException(409, reason, message);
  }
}
