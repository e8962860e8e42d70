package io.tensorcast.dataplane.store;

/**
 * What {@link PinnedStore} did on start with one entry it found under its root.
 *
 * @param name the artifact id, or the entry's file name when it is not an artifact
 * @param action what was done
 * @param reason CamelCase reason: {@code Complete} (adopted); {@code NoStateFile}, {@code
 *     IncompleteFiles}, {@code UnreadableStateFile}, {@code FilesChanged}, {@code
 *     NoArtifactDirectory}, {@code StrayStateFile}, {@code OverBudget}, {@code ChecksumMismatch} or
 *     a {@link LockStatus} reason (removed); {@code NotAnArtifact} (ignored)
 * @param message details with the numbers
 */
public record RecoveryAction(String name, Action action, String reason, String message) {

  /** What happened to the entry. */
  public enum Action {
    /**
     * A complete artifact: re-mapped, its recorded digests verified, locked per policy, held again.
     */
    ADOPTED,
    /** Deleted from the store's root. */
    REMOVED,
    /** Not the store's (not a directory named like an artifact id): left alone. */
    IGNORED
  }
}
